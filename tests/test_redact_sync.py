"""A redaction on a synced store: the remote rewritten with a compare-and-swap on its old
value, the other machine taking the rewritten history without bringing the text back.

Real git CLI, a bare remote and two clones (tests/conftest.py's ``machines``); the big case
is a store of 1,000+ commits, built with the Python API (one commit per write), not 1,000
CLI calls.
"""

from __future__ import annotations

import json
import subprocess

import pytest

import filemem
from filemem.errors import SyncError
from filemem.owner import redact, sync
from tests.conftest import Machines, ctx, git, head, run_cli
from tests.test_redact import history_traces as remote_traces
from tests.test_redact import traces, verify_ok

UG = {"track": "user", "scope": "user-global"}
SECRET = "sk-ant-api03-R3dactThisKey0123456789"


def fill(p: filemem.Provider, n: int, start: int = 0) -> None:
    """``n`` commits on top of HEAD, fast: each an audit-only commit (a denied add, which
    changes no file), made with the git layer's primitives and moved to in one step."""
    from filemem.files.gitrepo import PendingObjects
    from filemem.store.auditlog import commit_message, row
    from filemem.store.names import IDENT

    store = p.store
    with store.locked():
        tip = base = store.git.head()
        assert tip is not None
        tree = store.git.commit(tip).tree
        rows = [row("add-denied", track="user", scope="user-global", text=f"note {i}",
                    outcome="denied (by the person at the prompt)", source="filemem")
                for i in range(start, start + n)]
        store.number(rows, tip)
        pending = PendingObjects()
        for r in rows:
            message = commit_message(f"add-denied user/user-global: {r['text']}", "", [r])
            tip = store.git.make_commit(tree, [tip], message, IDENT, int(r["ts"] or 0) // 1000,
                                        pending)
        store.git.write(pending)
        assert store.git.cas_head(base, tip, "test: padding commits")


def test_redaction_of_a_1000_commit_store_reaches_the_remote_and_the_other_clone(
        machines: Machines) -> None:
    m = machines
    fill(m.a, 300)
    m.a.add({**UG, "text": f"deploy key {SECRET}"}, ctx())
    fill(m.a, 700, 300)
    assert int(git(m.a_path, "rev-list", "--count", "HEAD")) > 1000
    sync.sync(m.a.store)
    sync.sync(m.b.store)  # B has the secret now, in history and at HEAD
    m.b.snapshot(ctx())  # and in B's own ledger
    assert head(m.a_path) == head(m.b_path)
    old_remote = head(m.remote)

    done = run_cli("redact", "--text", SECRET, "--yes", "--json", store=m.a_path)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["commitsRewritten"] >= 700 and result["remotesToPush"] == ["origin"]
    assert traces(m.a_path, SECRET) == []
    assert head(m.remote) == old_remote  # not pushed until sync

    out = sync.sync(m.a.store)
    assert [s["kind"] for s in out.steps] == ["push-redacted"]
    assert out.steps[0]["from"] == old_remote
    assert head(m.remote) == head(m.a_path)
    assert remote_traces(m.remote, SECRET) == []
    # the server's own clean-up of old objects (no bitmap: dulwich 1.2's local fetch then
    # looks for one beside every later pack, and fails)
    git(m.remote, "-c", "repack.writeBitmaps=false", "gc", "--prune=now", "-q")
    objects = subprocess.run(["git", "-C", str(m.remote), "cat-file", "--batch-all-objects",
                              "--batch"], capture_output=True, check=True).stdout
    assert SECRET.encode() not in objects
    assert traces(m.a_path, SECRET) == []

    out = sync.sync(m.b.store)  # B takes the rewritten history, merges nothing back
    assert [s["kind"] for s in out.steps] == ["take-redacted"]
    assert head(m.b_path) == head(m.a_path) == head(m.remote)
    left = traces(m.b_path, SECRET)
    assert left == [".filemem/audit.jsonl"]  # B's own ledger: B's to redact (README)
    assert sync.sync(m.a.store).up_to_date and sync.sync(m.b.store).up_to_date
    for store in (m.a_path, m.b_path):
        git(store, "fsck", "--strict")
        assert git(store, "status", "--porcelain") == ""
        verify_ok(store)
    m.b.add({**UG, "text": "after the redaction"}, ctx())  # both go on as usual
    sync.sync(m.b.store)
    sync.sync(m.a.store)
    assert head(m.a_path) == head(m.b_path)
    assert remote_traces(m.remote, SECRET) == []


def test_two_redactions_before_a_sync_push_over_the_remote_s_value(machines: Machines) -> None:
    """A second redaction before the sync rewrites the first one's rewritten history: the
    push still leases the remote's own value (not the first rewrite, which the remote never
    held), so the first sync pushes, with neither text left anywhere."""
    m = machines
    other = "ghp_S3condSecretT0kenAbcdefghijklmnop12"
    m.a.add({**UG, "text": f"deploy key {SECRET}"}, ctx())
    m.a.add({**UG, "text": f"token {other}"}, ctx())
    sync.sync(m.a.store)
    old_remote = head(m.remote)
    for text in (SECRET, other):
        done = run_cli("redact", "--text", text, "--yes", store=m.a_path)
        assert done.returncode == 0, done.stderr
    assert head(m.remote) == old_remote
    out = sync.sync(m.a.store)
    assert [s["kind"] for s in out.steps] == ["push-redacted"]
    assert out.steps[0]["from"] == old_remote and head(m.remote) == head(m.a_path)
    assert traces(m.a_path, SECRET) == [] and traces(m.a_path, other) == []
    assert remote_traces(m.remote, SECRET) == [] and remote_traces(m.remote, other) == []
    verify_ok(m.a_path)


def test_a_local_remote_that_denies_rewriting_its_history_keeps_it(machines: Machines) -> None:
    """receive.denyNonFastForwards on a bare remote on this machine: the redacted history's
    push is refused there as `git push --force` is (PUSH_REJECTED), and the remote keeps its
    history; the store keeps the push to make."""
    m = machines
    m.a.add({**UG, "text": f"deploy key {SECRET}"}, ctx())
    sync.sync(m.a.store)
    git(m.remote, "config", "receive.denyNonFastForwards", "true")
    before = head(m.remote)
    assert run_cli("redact", "--text", SECRET, "--yes", store=m.a_path).returncode == 0
    with pytest.raises(SyncError) as info:
        sync.sync(m.a.store)
    assert info.value.code == "PUSH_REJECTED"
    assert head(m.remote) == before


def test_push_never_clobbers_commits_the_remote_received_meanwhile(machines: Machines) -> None:
    m = machines
    m.a.add({**UG, "text": f"key {SECRET}"}, ctx())
    sync.sync(m.a.store)
    sync.sync(m.b.store)
    redact.apply(m.a.store, text=SECRET)
    m.b.add({**UG, "text": "made on B before it heard of the redaction"}, ctx())
    sync.sync(m.b.store)  # B pushes on the old history
    moved = head(m.remote)
    with pytest.raises(SyncError) as caught:
        sync.sync(m.a.store)
    assert caught.value.code == "REMOTE_MOVED"
    assert "Nothing was pushed" in caught.value.message and "fetch" in caught.value.message
    assert head(m.remote) == moved  # B's commit kept
    assert traces(m.a_path, SECRET) == []  # nothing fetched
    # what the message says: fetch, redact the same again, sync
    git(m.a_path, "fetch", "-q", "origin")
    redact.apply(m.a.store, text=SECRET)
    out = sync.sync(m.a.store)
    assert out.steps[-1]["kind"] == "push-redacted"
    assert remote_traces(m.remote, SECRET) == []
    assert traces(m.a_path, SECRET) == []
    texts = [e["text"] for e in m.a.query({})["entries"]]
    assert "made on B before it heard of the redaction" in texts
    out = sync.sync(m.b.store)
    assert out.steps[0]["kind"] == "take-redacted"
    assert head(m.b_path) == head(m.a_path)
    verify_ok(m.a_path)
    verify_ok(m.b_path)


def test_unpushed_commits_on_the_old_history_are_redacted_there_first(
        machines: Machines) -> None:
    m = machines
    m.a.add({**UG, "text": f"key {SECRET}"}, ctx())
    sync.sync(m.a.store)
    sync.sync(m.b.store)
    m.b.add({**UG, "text": f"B quotes it: {SECRET}"}, ctx())  # not pushed
    redact.apply(m.a.store, text=SECRET)
    sync.sync(m.a.store)
    b_before = head(m.b_path)
    with pytest.raises(SyncError) as caught:
        sync.sync(m.b.store)
    assert caught.value.code == "LOCAL_HOLDS_REDACTED"
    assert head(m.b_path) == b_before
    assert remote_traces(m.remote, SECRET) == []
    redact.apply(m.b.store, text=SECRET)  # the same redaction gives the same commits
    out = sync.sync(m.b.store)
    # B's refused sync had fetched the rewritten history: an ordinary merge and push now
    assert [s["kind"] for s in out.steps] == ["merge", "push"]
    assert remote_traces(m.remote, SECRET) == []
    assert traces(m.b_path, SECRET) == []
    sync.sync(m.a.store)
    assert head(m.a_path) == head(m.b_path)
    texts = [e["text"] for e in m.a.query({})["entries"]]
    assert "B quotes it: [redacted]" in texts
    verify_ok(m.a_path)
    verify_ok(m.b_path)


def test_a_sync_merge_in_the_history_is_rewritten_and_verifies(machines: Machines) -> None:
    m = machines
    m.a.add({**UG, "text": f"A holds {SECRET}"}, ctx())
    m.b.add({**UG, "text": "B's own note"}, ctx())
    sync.sync(m.a.store)
    out = sync.sync(m.b.store)  # diverged: one merge commit
    assert out.steps[0]["kind"] == "merge"
    m.b.replace({**UG, "match": "A holds", "text": f"B changed it, still {SECRET}"}, ctx())
    sync.sync(m.b.store)
    redact.apply(m.b.store, text=SECRET)
    assert traces(m.b_path, SECRET) == []
    report = verify_ok(m.b_path)
    assert report["merges"] == 1
    sync.sync(m.b.store)
    out = sync.sync(m.a.store)
    assert out.steps[0]["kind"] == "take-redacted"
    assert traces(m.a_path, SECRET) == []
    verify_ok(m.a_path)


def test_the_cli_says_what_a_sync_did_with_a_redacted_history(machines: Machines) -> None:
    m = machines
    m.a.add({**UG, "text": f"deploy key {SECRET}"}, ctx())
    sync.sync(m.a.store)
    sync.sync(m.b.store)
    done = run_cli("redact", "--text", SECRET, "--yes", store=m.a_path)
    assert done.returncode == 0, done.stderr
    pushed = run_cli("sync", store=m.a_path)
    assert pushed.returncode == 0, pushed.stderr
    assert "Pushed the redacted history to origin in place of its old one" in pushed.stdout
    took = run_cli("sync", store=m.b_path)
    assert took.returncode == 0, took.stderr
    assert "Took the redacted history of origin/main" in took.stdout
    assert "`filemem redact --text -` here" in took.stdout
    assert SECRET not in pushed.stdout + pushed.stderr + took.stdout + took.stderr
    assert head(m.b_path) == head(m.a_path) == head(m.remote)


def redacted_by_id_on_a_when_b_pushed_meanwhile(m: Machines) -> str:
    """The README's sync section's case: A redacts an entry by its id while B pushed a
    commit made on the old history; A's sync is refused (REMOTE_MOVED), and A does what
    the message says: fetch, the same `filemem redact ID` again, sync. Returns the id."""
    eid = m.a.add({**UG, "text": f"deploy key {SECRET}"}, ctx())["entry"]["id"]
    sync.sync(m.a.store)
    sync.sync(m.b.store)
    m.b.add({**UG, "text": "made on B before it heard of the redaction"}, ctx())
    sync.sync(m.b.store)
    assert run_cli("redact", "--yes", eid, store=m.a_path).returncode == 0
    moved = run_cli("sync", "--json", store=m.a_path)
    assert moved.returncode == 1
    assert json.loads(moved.stdout or moved.stderr)["error"]["code"] == "REMOTE_MOVED"
    git(m.a_path, "fetch", "-q", "origin")
    again = run_cli("redact", "--yes", eid, store=m.a_path)
    assert again.returncode == 0, again.stderr
    assert "(1 text)" in again.stdout  # what it found: the text of B's fetched commits
    assert "front matter" not in again.stderr
    pushed = run_cli("sync", store=m.a_path)
    assert pushed.returncode == 0, pushed.stderr
    assert "Pushed the redacted history to origin" in pushed.stdout
    return eid


def in_sync_and_gone(m: Machines) -> None:
    for store in (m.b_path, m.a_path):  # B's merge, if any, reaches A
        assert run_cli("sync", store=store).returncode == 0
    assert head(m.a_path) == head(m.b_path) == head(m.remote)
    for store in (m.a_path, m.b_path, m.remote):
        assert remote_traces(store, SECRET) == [], store
    for store in (m.a_path, m.b_path):
        verify_ok(store)
    texts = sorted(e["text"] for e in m.a.query({})["entries"])
    assert "made on B before it heard of the redaction" in texts and "[redacted]" in texts


def test_an_entry_redacted_by_id_again_after_remote_moved_takes_the_fetched_commits(
        machines: Machines) -> None:
    m = machines
    redacted_by_id_on_a_when_b_pushed_meanwhile(m)
    took = run_cli("sync", store=m.b_path)
    assert "Took the redacted history of origin/main" in took.stdout, took.stderr
    in_sync_and_gone(m)


def test_the_same_redaction_by_id_on_the_machine_that_took_it_says_nothing_is_left(
        machines: Machines) -> None:
    m = machines
    eid = redacted_by_id_on_a_when_b_pushed_meanwhile(m)
    took = run_cli("sync", store=m.b_path)
    assert took.returncode == 0, took.stderr
    assert "`filemem redact --text -` here" in took.stdout
    before = head(m.b_path)
    done = run_cli("redact", "--yes", eid, store=m.b_path)  # what B's owner may try
    assert done.returncode == 1
    assert "nothing to redact" in done.stderr and "was redacted already" in done.stderr
    assert "front matter" not in done.stderr and "filter-repo" not in done.stderr
    assert "--text -" in done.stderr  # what the ledger may still hold is named by its text
    assert head(m.b_path) == before
    in_sync_and_gone(m)


def test_unpushed_commits_redacted_by_id_after_local_holds_redacted(
        machines: Machines) -> None:
    m = machines
    eid = m.a.add({**UG, "text": f"key {SECRET}"}, ctx())["entry"]["id"]
    sync.sync(m.a.store)
    sync.sync(m.b.store)
    m.b.add({**UG, "text": "made on B before it heard of the redaction"}, ctx())  # unpushed
    assert run_cli("redact", "--yes", eid, store=m.a_path).returncode == 0
    assert run_cli("sync", store=m.a_path).returncode == 0
    refused = run_cli("sync", "--json", store=m.b_path)
    assert refused.returncode == 1
    assert json.loads(refused.stdout or refused.stderr)["error"]["code"] == \
        "LOCAL_HOLDS_REDACTED"
    # B's refused sync fetched the redacted history: its entry holds the marker there
    done = run_cli("redact", "--yes", eid, store=m.b_path)
    assert done.returncode == 0, done.stderr
    in_sync_and_gone(m)
