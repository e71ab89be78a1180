"""filemem sync: a bare remote and two machines' stores on disk, real git, real processes."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.files.gitrepo import PendingObjects
from filemem.files.layout import entry_path
from filemem.owner import leftovers
from filemem.owner import merge as fmerge
from filemem.owner import remotes as fremotes
from filemem.owner import sync as fsync
from tests import orphans
from tests.conftest import Machines, assert_clean_repo, bare_remote, ctx, git, run_cli

UG = {"track": "user", "scope": "user-global"}


def add(p: filemem.Provider, text: str, **layer: str) -> str:
    return str(p.add({**(layer or UG), "text": text}, ctx())["entry"]["id"])


def texts(p: filemem.Provider) -> list[str]:
    return sorted(e["text"] for e in p.list_entries())


def by_id(p: filemem.Provider) -> dict[str, dict[str, Any]]:
    return {e["id"]: e for e in p.list_entries()}


def head(path: Path, ref: str = "HEAD") -> str:
    return git(path, "rev-parse", ref).strip()


def converged(m: Machines) -> None:
    """Both machines and the remote are at one commit, and everything is valid."""
    assert head(m.a_path) == head(m.b_path) == head(m.remote, "main")
    assert texts(m.a) == texts(m.b)
    for path in (m.a_path, m.b_path):
        assert_clean_repo(path)
    git(m.remote, "fsck", "--strict")


def sync_all(m: Machines) -> list[fsync.SyncResult]:
    """A, then B, then A again: what two people syncing in turn do."""
    return [fsync.sync(m.a.store), fsync.sync(m.b.store), fsync.sync(m.a.store)]


def rows(p: filemem.Provider, action: str) -> list[dict[str, Any]]:
    return [r for r in p.audit_list(500) if r["action"] == action]


# ---------------------------------------------------------------- merging


def test_publish_then_clone_is_the_same_store(machines: Machines) -> None:
    m = machines
    assert head(m.a_path) == head(m.b_path) == head(m.remote, "main")
    assert (m.remote / "HEAD").read_text() == "ref: refs/heads/main\n"  # `git clone` works
    assert git(m.b_path, "remote", "-v").split()[:2] == ["origin", str(m.remote)]
    result = fsync.sync(m.b.store)
    assert result.up_to_date and result.attempts == 1
    converged(m)


def test_one_side_changed_fast_forwards_without_a_merge(machines: Machines) -> None:
    m = machines
    add(m.a, "only on A")
    first = fsync.sync(m.a.store)
    assert [s["kind"] for s in first.steps] == ["push"]
    second = fsync.sync(m.b.store)
    assert [s["kind"] for s in second.steps] == ["fast-forward"]
    assert second.steps[0]["entries"] == {"added": 1, "replaced": 0, "removed": 0}
    assert texts(m.b) == ["only on A"]
    assert git(m.b_path, "log", "--merges", "--oneline") == ""
    converged(m)


def test_concurrent_adds_merge_into_one_commit(machines: Machines) -> None:
    m = machines
    add(m.a, "A one")
    add(m.a, "A two", track="agent", scope="workspace")
    add(m.b, "B one")
    results = sync_all(m)
    merge = next(s for s in results[1].steps if s["kind"] == "merge")
    assert merge["entries"] == {"added": 2, "replaced": 0, "removed": 0}
    assert merge["commits"] == 2 and merge["localCommits"] == 1 and merge["conflicts"] == []
    assert [s["kind"] for s in results[2].steps] == ["fast-forward"]
    assert texts(m.a) == ["A one", "A two", "B one"]
    parents = git(m.a_path, "log", "-1", "--format=%P", head(m.b_path)).split()
    assert len(parents) == 2
    message = git(m.a_path, "log", "-1", "--format=%B")
    assert message.startswith("sync-merge origin/main: 2 commits; entries: 2 added")
    assert f"({m.remote!s})" in message or str(m.remote) in message
    (merge_row,) = rows(m.a, "sync-merge")
    assert "merged origin/main" in merge_row["outcome"] and merge_row["source"] == "filemem"
    converged(m)


def test_same_entry_replaced_on_both_sides_keeps_both(machines: Machines) -> None:
    m = machines
    x = add(m.a, "Prefers tabs")
    y = add(m.a, "Prefers dark themes")
    sync_all(m)
    m.b.replace({**UG, "match": "tabs", "text": "Prefers tabs (B)"}, ctx())
    m.a.replace({**UG, "match": "dark", "text": "Prefers dark themes (A)"}, ctx())
    time.sleep(0.01)  # the second replace of each entry is the later one
    m.a.replace({**UG, "match": "tabs", "text": "Prefers tabs (A)"}, ctx())
    m.b.replace({**UG, "match": "dark", "text": "Prefers dark themes (B)"}, ctx())
    results = sync_all(m)  # B merges: X's remote version is newer, Y's local one
    (merge,) = [s for s in results[1].steps if s["kind"] == "merge"]
    conflicts = {c["entryId"]: c for c in merge["conflicts"]}
    assert set(conflicts) == {x, y}
    assert {c["kind"] for c in conflicts.values()} == {"both-changed"}
    assert merge["entries"] == {"added": 2, "replaced": 1, "removed": 0}
    fork_x, fork_y = conflicts[x]["newEntryId"], conflicts[y]["newEntryId"]
    for p in (m.a, m.b):
        entries = by_id(p)
        assert entries[x]["text"] == "Prefers tabs (A)"  # updated later: keeps the id
        assert entries[fork_x]["text"] == "Prefers tabs (B)"  # nothing lost
        assert entries[y]["text"] == "Prefers dark themes (B)"
        assert entries[fork_y]["text"] == "Prefers dark themes (A)"
        assert entries[fork_x]["version"] == 1 and entries[fork_x]["track"] == "user"
        found = {r["entryId"]: r for r in rows(p, "sync-conflict")}
        assert "kept origin's version" in found[x]["outcome"] and fork_x in found[x]["outcome"]
        assert "kept the local version" in found[y]["outcome"] and fork_y in found[y]["outcome"]
        assert found[x]["text"] == "Prefers tabs (A)"
    converged(m)
    # the merge depends only on its parents: a checker can recompute its tree
    git_repo = m.a.store.git
    merge_commit = git_repo.commit(merge["commit"])
    ours, theirs = merge_commit.parents
    changes = fmerge.merge_changes(git_repo, ours, theirs)
    tree, _ = git_repo.splice(git_repo.commit(ours).tree, changes, PendingObjects())
    assert tree == merge_commit.tree


def test_remove_on_one_side_and_replace_on_the_other_keeps_the_replaced(
        machines: Machines) -> None:
    m = machines
    x = add(m.a, "entry X")
    y = add(m.a, "entry Y")
    sync_all(m)
    m.a.remove({**UG, "match": "entry X"}, ctx())
    m.a.replace({**UG, "match": "entry Y", "text": "entry Y, changed on A"}, ctx())
    m.b.replace({**UG, "match": "entry X", "text": "entry X, changed on B"}, ctx())
    m.b.remove({**UG, "match": "entry Y"}, ctx())
    results = sync_all(m)
    (merge,) = [s for s in results[1].steps if s["kind"] == "merge"]
    kinds = {c["entryId"]: (c["kind"], c["kept"]) for c in merge["conflicts"]}
    assert kinds == {x: ("removed-vs-changed", "local"), y: ("removed-vs-changed", "remote")}
    assert merge["entries"] == {"added": 1, "replaced": 0, "removed": 0}  # Y is back on B
    for p in (m.a, m.b):
        entries = by_id(p)
        assert entries[x]["text"] == "entry X, changed on B"
        assert entries[y]["text"] == "entry Y, changed on A"
        assert len(rows(p, "sync-conflict")) == 2
    converged(m)


def test_over_budget_after_a_merge_is_reported_and_nothing_is_cut(
        machines: Machines) -> None:
    m = machines
    add(m.a, "a" * 1500)  # each fits the 2000-char user/user-global budget alone
    add(m.b, "b" * 1500)
    fsync.sync(m.a.store)
    merged = fsync.sync(m.b.store)
    assert merged.over_budget == [{"track": "user", "scope": "user-global", "used": 3000,
                                   "limit": 2000}]
    out = run_cli("sync", store=m.a_path)  # the fast-forward side hears it too
    assert out.returncode == 0, out.stderr
    assert "Fast-forwarded to origin/main" in out.stdout
    assert "Over budget now (nothing was cut" in out.stdout
    assert "user/user-global: 3000/2000 chars used" in out.stdout
    assert texts(m.a) == texts(m.b) == ["a" * 1500, "b" * 1500]
    converged(m)


def test_config_changes_merge_by_key_or_wait_for_the_owner(machines: Machines) -> None:
    m = machines

    def edit(path: Path, old: str, new: str) -> None:
        cfg = path / "filemem.yaml"
        cfg.write_text(cfg.read_text().replace(old, new))
        git(path, "commit", "-qam", f"config: {new}")

    edit(m.a_path, "userGlobal: 2000", "userGlobal: 2500")  # lines far apart: merged
    edit(m.b_path, "language: en", "language: zh")
    results = sync_all(m)
    (merge,) = [s for s in results[1].steps if s["kind"] == "merge"]
    assert merge["conflicts"] == []
    assert merge["files"] == ["filemem.yaml"]
    config = (m.a_path / "filemem.yaml").read_text()
    assert "userGlobal: 2500" in config and "language: zh" in config
    converged(m)

    edit(m.a_path, "maxEntriesPerQuery: 20", "maxEntriesPerQuery: 50")  # the same key
    edit(m.b_path, "maxEntriesPerQuery: 20", "maxEntriesPerQuery: 60")
    fsync.sync(m.a.store)
    before = head(m.b_path)
    with pytest.raises(fsync.SyncError) as err:  # never decided silently for one side
        fsync.sync(m.b.store)
    assert err.value.code == "CONFIG_CONFLICT"
    assert "maxEntriesPerQuery: 60 here, 50 on origin" in err.value.message
    assert head(m.b_path) == before
    result = fsync.sync(m.b.store, keep_config="local")  # the owner's choice
    (merge,) = [s for s in result.steps if s["kind"] == "merge"]
    (conflict,) = merge["conflicts"]
    assert conflict["kind"] == "config-key" and conflict["kept"] == "local"
    assert conflict["key"] == "maxEntriesPerQuery"
    fsync.sync(m.a.store)
    assert "maxEntriesPerQuery: 60" in (m.a_path / "filemem.yaml").read_text()
    assert [r["text"] for r in rows(m.a, "sync-conflict")] == ["filemem.yaml: maxEntriesPerQuery"]
    converged(m)


def test_two_stores_made_apart_join(tmp_path: Path, machines: Machines) -> None:
    m = machines
    add(m.a, "from A")
    fsync.sync(m.a.store)
    with filemem.open_store(tmp_path / "C", create=True, write_policy="auto") as c:
        add(c, "from C, a store made with its own `filemem init`")
        fremotes.add_remote(c.store, "origin", str(m.remote))
        result = fsync.sync(c.store)
        (merge,) = [s for s in result.steps if s["kind"] == "merge"]
        assert merge["base"] is None and merge["conflicts"] == []
        assert texts(c) == ["from A", "from C, a store made with its own `filemem init`"]
        assert_clean_repo(tmp_path / "C")
    fsync.sync(m.b.store)
    assert len(texts(m.b)) == 2


@pytest.mark.parametrize("mine,other,merged", [
    (b"a\nB\nc\nd\ne\n", b"a\nb\nc\nd\nE\n", b"a\nB\nc\nd\nE\n"),  # apart: merged
    (b"a\nB\nc\nd\ne\n", b"a\nX\nc\nd\ne\n", None),  # the same line: overlap
    (b"a\nb\nc\nd\ne\n\0", b"a\nb\nc\nd\nE\n", None),  # not text
])
def test_three_way_merge_of_other_files(mine: bytes, other: bytes,
                                        merged: bytes | None) -> None:
    assert fmerge.three_way(b"a\nb\nc\nd\ne\n", mine, other) == merged


# ---------------------------------------------------------------- refusals


def test_hand_edits_block_a_sync_that_would_change_them(machines: Machines) -> None:
    m = machines
    eid = add(m.a, "edited on two machines")
    sync_all(m)
    m.a.replace({**UG, "match": "edited", "text": "replaced on A"}, ctx())
    fsync.sync(m.a.store)
    file = m.b_path / entry_path(m.b.store.state().entries[eid])
    file.write_bytes(file.read_bytes() + b" and by hand on B")
    hand = file.read_bytes()
    before = head(m.b_path)
    with pytest.raises(filemem.ProtocolError) as err:
        fsync.sync(m.b.store)
    assert err.value.code == "WRITE_DENIED"
    assert err.value.details["outcome"] == "hand-edit-pending"
    assert head(m.b_path) == before and file.read_bytes() == hand
    out = run_cli("sync", store=m.b_path)
    assert out.returncode == 3 and "filemem status" in out.stderr
    git(m.b_path, "checkout", "--", str(file))  # the owner discards the edit
    fsync.sync(m.b.store)
    assert by_id(m.b)[eid]["text"] == "replaced on A"
    converged(m)


def test_a_file_in_the_way_of_an_incoming_entry_blocks(machines: Machines) -> None:
    m = machines
    eid = add(m.a, "coming to B")
    fsync.sync(m.a.store)
    path = m.b_path / entry_path(m.a.store.state().entries[eid])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("a person's own file, not yet adopted")
    with pytest.raises(filemem.ProtocolError) as err:
        fsync.sync(m.b.store)
    assert err.value.details["outcome"] == "hand-edit-pending"
    assert path.read_text() == "a person's own file, not yet adopted"
    path.unlink()
    fsync.sync(m.b.store)
    converged(m)


def test_a_hand_edit_elsewhere_does_not_block(machines: Machines) -> None:
    m = machines
    eid = add(m.b, "left alone")
    sync_all(m)
    add(m.a, "new on A")
    fsync.sync(m.a.store)
    file = m.b_path / entry_path(m.b.store.state().entries[eid])
    file.write_bytes(file.read_bytes() + b"!")
    fsync.sync(m.b.store)
    assert texts(m.b) == ["left alone", "new on A"]
    assert git(m.b_path, "status", "--porcelain").strip().endswith(f"{eid}.md")


def test_sync_without_a_remote_says_how_to_add_one(tmp_path: Path) -> None:
    store = tmp_path / "solo"
    assert run_cli("init", str(store)).returncode == 0
    out = run_cli("sync", store=store)
    assert out.returncode == 1
    assert "NO_REMOTE" in out.stderr and "filemem remote add origin URL" in out.stderr
    out = run_cli("sync", "--json", store=store)
    assert json.loads(out.stdout)["error"]["code"] == "NO_REMOTE"


def test_unusable_remotes_are_refused_clearly(tmp_path: Path, machines: Machines) -> None:
    m = machines
    store = m.a.store
    fremotes.add_remote(store, "nowhere", str(tmp_path / "missing.git"))
    with pytest.raises(fsync.SyncError) as err:
        fsync.sync(store, "nowhere")
    assert err.value.code == "REMOTE_UNREACHABLE" and "git init --bare" in err.value.message
    other = bare_remote(tmp_path / "other.git")
    git(tmp_path, "clone", "-q", str(other), str(tmp_path / "work"))
    (tmp_path / "work" / "notes.txt").write_text("not a store")
    git(tmp_path / "work", "add", "notes.txt")
    git(tmp_path / "work", "commit", "-qm", "notes")
    git(tmp_path / "work", "push", "-q", "origin", "HEAD:main")
    fremotes.add_remote(store, "other", str(other))
    with pytest.raises(fsync.SyncError) as err:
        fsync.sync(store, "other")
    assert err.value.code == "REMOTE_NOT_A_STORE"
    add(m.a, "ahead")
    with pytest.raises(fsync.SyncError) as err:  # a store with main checked out
        fremotes.add_remote(store, "working", str(m.b_path))
    assert err.value.code == "BAD_REMOTE" and "bare" in err.value.message
    git(m.a_path, "remote", "add", "working", str(m.b_path))  # added by git itself
    before = head(m.a_path)
    with pytest.raises(fsync.SyncError) as err:
        fsync.sync(store, "working")
    assert err.value.code == "BAD_REMOTE" and "bare" in err.value.message
    assert head(m.a_path) == before
    assert fremotes.pick_remote(store.git, None).name == "origin"  # several: origin is the default


def test_push_is_a_compare_and_swap(machines: Machines) -> None:
    m = machines
    stale = head(m.remote, "main")
    add(m.b, "B pushed first")
    fsync.sync(m.b.store)
    moved = head(m.remote, "main")
    add(m.a, "A is behind")
    remote = fremotes.pick_remote(m.a.store.git, None)
    assert fremotes.push(m.a.store.git, remote, stale, head(m.a_path)) is False
    assert head(m.remote, "main") == moved
    result = fsync.sync(m.a.store)  # fetches, merges, pushes
    assert [s["kind"] for s in result.steps] == ["merge", "push"]
    sync_all(m)
    converged(m)


# ---------------------------------------------------------------- the command line


def test_remote_commands_and_a_two_machine_walkthrough(tmp_path: Path) -> None:
    remote = bare_remote(tmp_path / "memory.git")
    a, b = tmp_path / "laptop", tmp_path / "desktop"

    def cli(*args: str, store: Path, code: int = 0) -> str:
        out = run_cli(*args, store=store)
        assert out.returncode == code, (args, out.stdout, out.stderr)
        return out.stdout + out.stderr

    cli("init", str(a), store=a)
    cli("remote", "add", "origin", os.path.relpath(remote), store=a)
    listed = json.loads(cli("remote", "list", "--json", store=a))
    assert listed == [{"name": "origin", "url": str(remote)}]  # stored absolute
    assert f"origin\t{remote} (fetch)" in git(a, "remote", "-v")
    assert "REMOTE_EXISTS" in cli("remote", "add", "origin", "elsewhere", store=a, code=1)
    assert "Pushed 1 commit to origin (new branch main at " in cli("sync", store=a)
    assert "Cloned" in cli("clone", str(remote), str(b), store=b)
    cli("add", "--yes", "--scope", "user-global", "Uses", "fish", "shell", store=a)
    cli("add", "--yes", "--scope", "user-global", "Likes", "short", "answers", store=b)
    cli("sync", store=a)
    merged = json.loads(cli("sync", "--json", store=b))
    assert [s["kind"] for s in merged["steps"]] == ["merge", "push"]
    assert "Fast-forwarded" in cli("sync", store=a)
    assert "Already up to date" in cli("sync", store=a)
    found = json.loads(cli("query", "--json", "--scope", "user-global", store=a))
    assert sorted(e["text"] for e in found["entries"]) == ["Likes short answers",
                                                           "Uses fish shell"]
    assert "Removed remote origin" in cli("remote", "remove", "origin", store=b)
    assert json.loads(cli("remote", "list", "--json", store=b)) == []
    assert git(b, "branch", "-r") == ""
    assert "NO_REMOTE" in cli("remote", "remove", "origin", store=b, code=1)


def test_sync_over_the_ssh_transport(tmp_path: Path, machines: Machines,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """dulwich's ssh client against git's own upload-pack/receive-pack; the "ssh" here
    runs the remote command locally instead of logging in somewhere."""
    m = machines
    shim = tmp_path / "fake-ssh"
    shim.write_text('#!/bin/sh\nfor last; do :; done\nexec sh -c "$last"\n')
    shim.chmod(0o755)
    monkeypatch.setenv("GIT_SSH_COMMAND", str(shim))
    fremotes.add_remote(m.b.store, "server", f"ssh://localhost{m.remote}")
    add(m.a, "pushed by A over a path")
    add(m.b, "pushed by B over ssh")
    fsync.sync(m.a.store)
    result = fsync.sync(m.b.store, "server")
    assert [s["kind"] for s in result.steps] == ["merge", "push"]
    fsync.sync(m.a.store)
    converged(m)


# ---------------------------------------------------------------- crashes


def test_a_killed_sync_leaves_both_sides_valid_and_the_next_one_finishes(
        machines: Machines) -> None:
    m = machines
    rng = random.Random(20261130)
    expected = []
    for i in range(10):
        for p, who in ((m.a, "A"), (m.b, "B")):
            add(p, f"{who} {i}")
            expected.append(f"{who} {i}")
        target = m.a_path if i % 2 else m.b_path
        child = orphans.start([sys.executable, "-m", "filemem.cli", "sync", "--store",
                               str(target)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
        time.sleep(rng.uniform(0.15, 0.75))  # a sync takes ~0.3-0.7 s here
        orphans.kill(child)  # and wait for a `git fetch` it left running: fsck would race it
        for path in (m.a_path, m.b_path):
            filemem.open_store(path).close()  # the next open repairs the working tree
            assert_clean_repo(path)
        git(m.remote, "fsck", "--strict")
    sync_all(m)
    fsync.sync(m.b.store)
    assert texts(m.a) == sorted(expected)
    converged(m)


# A child that dies (exit 9, no clean-up) at one chosen point of a sync.
TARGETED = """
import os, sys
import dulwich.refs
import filemem, filemem.store.transaction, filemem.owner.sync as S, filemem.files.worktree
store, point, remote = sys.argv[1], sys.argv[2], os.fsencode(sys.argv[3])

def die(*args, **kwargs):
    os._exit(9)

if point == "after-fetch":
    S._integrate = die
elif point == "after-the-commit":  # the branch moved; the working tree not yet
    filemem.store.transaction.Transaction._mirror = die
elif point == "mid-working-tree":
    real_write, calls = filemem.files.worktree.write, []
    def write(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            os._exit(9)
        return real_write(*args, **kwargs)
    filemem.files.worktree.write = write
elif point == "before-push":
    S.push = die
elif point == "mid-push":  # objects are in the remote, its branch has not moved (dulwich)
    from filemem.owner import gitpush
    gitpush.push_local = lambda *args, **kwargs: None
    real_set = dulwich.refs.DiskRefsContainer.set_if_equals
    def set_if_equals(self, *args, **kwargs):
        if self.path.startswith(remote):
            os._exit(9)
        return real_set(self, *args, **kwargs)
    dulwich.refs.DiskRefsContainer.set_if_equals = set_if_equals
S.sync(filemem.open_store(store).store)
"""


@pytest.mark.parametrize("point,who", [
    ("after-fetch", "B"), ("after-the-commit", "B"), ("mid-working-tree", "B"),
    ("before-push", "B"), ("mid-push", "B"), ("mid-working-tree", "A"),
    ("after-the-commit", "A"),
])
def test_a_sync_dying_at_a_chosen_point_is_finished_by_the_next(
        machines: Machines, point: str, who: str) -> None:
    m = machines
    for i in range(2):
        add(m.a, f"A {i}")
        add(m.b, f"B {i}")
    fsync.sync(m.a.store)
    if who == "A":  # A's sync will be a fast-forward to B's merge
        fsync.sync(m.b.store)
    target = m.a_path if who == "A" else m.b_path
    child = subprocess.run([sys.executable, "-c", TARGETED, str(target), point,
                            str(m.remote)], capture_output=True, text=True)
    assert child.returncode == 9, child.stderr
    with filemem.open_store(target) as reopened:  # repairs what the dead sync left
        assert len(reopened.list_entries()) in (2, 4)
    assert_clean_repo(target)
    git(m.remote, "fsck", "--strict")
    sync_all(m)
    assert texts(m.a) == ["A 0", "A 1", "B 0", "B 1"]
    converged(m)


def test_a_ref_lock_left_on_a_local_remote_by_a_dead_push_is_cleared(
        machines: Machines) -> None:
    m = machines
    lock = m.remote / "refs" / "heads" / "main.lock"
    lock.write_text(head(m.remote, "main") + "\n")
    old = time.time() - 60
    os.utime(lock, (old, old))
    add(m.a, "pushed past a stale lock")
    result = fsync.sync(m.a.store)
    assert [s["kind"] for s in result.steps] == ["push"] and not lock.exists()
    fsync.sync(m.b.store)
    converged(m)


def test_a_quarantine_a_killed_git_push_left_in_a_local_remote_is_cleared_once_stale(
        machines: Machines) -> None:
    """git's receive-pack holds a push's objects in ``objects/tmp_objdir-incoming-*``
    until the hooks accept them; killed meanwhile, it leaves that folder. A young one may be
    another machine's push at work and is left alone; an old one goes with the next sync."""
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    m = machines
    hook = m.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\nkill -9 $PPID\n")  # receive-pack dies, its quarantine stays
    hook.chmod(0o755)
    add(m.a, "pushed once receive-pack lives")
    with pytest.raises(fsync.SyncError):
        fsync.sync(m.a.store)
    hook.unlink()
    objects = m.remote / "objects"
    left = sorted(objects.glob("tmp_objdir-incoming-*"))
    assert left and all(q.is_dir() for q in left)
    assert git(m.remote, "rev-parse", "main").strip() != head(m.a_path)
    fsync.sync(m.a.store)  # pushed beside them: young, they are left alone
    assert sorted(objects.glob("tmp_objdir-incoming-*")) == left
    old = time.time() - 2 * leftovers.STALE_TEMP_PACK
    for q in left:
        for path in [q, *q.rglob("*")]:
            os.utime(path, (old, old))
    add(m.a, "and again")
    fsync.sync(m.a.store)
    assert list(objects.glob("tmp_objdir-incoming-*")) == []
    assert git(m.remote, "rev-parse", "main").strip() == head(m.a_path)
    git(m.remote, "fsck", "--strict")
    fsync.sync(m.b.store)
    converged(m)


def test_merge_base_does_not_depend_on_commit_times(tmp_path: Path) -> None:
    """Commits made in one second (filemem's usual pace) still fast-forward: the base is
    found from the graph, not from commit times (a time-ordered walk can pass a commit
    before its descendant of the same second and answer an older base too). Which commit
    it passes first depends on the hashes, so the shape is built many times over, also
    with the merge made on a machine whose clock is behind."""
    from filemem.files.gitrepo import GitRepo, PendingObjects
    from filemem.owner.merge import merge_base

    filemem.init_store(tmp_path / "s").close()
    git_repo = GitRepo(str(tmp_path / "s"))
    start = git_repo.head()
    assert start is not None
    tree = git_repo.commit(start).tree

    def commit(parents: list[str], name: str, when: int = 1_800_000_000) -> str:
        pending = PendingObjects()
        sha = git_repo.make_commit(tree, parents, name, "t <t@t>", when, pending)
        git_repo.write(pending)
        return sha

    for i in range(100):
        behind = 1_800_000_000 - 60 * (i % 2)  # every other round: B's clock is behind
        root = commit([start], f"root {i}")
        a1 = commit([root], f"a1 {i}")
        a2 = commit([a1], f"a2 {i}")
        b1 = commit([root], f"b1 {i}", behind)
        merged = commit([b1, a2], f"merge {i}", behind)
        assert merge_base(git_repo, a2, merged) == a2  # a fast-forward
        assert merge_base(git_repo, merged, a2) == a2  # nothing to take in
        assert merge_base(git_repo, a2, b1) == root
        later = commit([merged], f"later {i}", behind)
        assert merge_base(git_repo, later, a2) == a2
    git_repo.close()


def test_a_local_remote_s_own_push_rules_are_kept(machines: Machines) -> None:
    """A bare remote on this machine with a hook git runs on a push (pre-receive) refuses
    filemem's push as it refuses `git push`: PUSH_REJECTED, the remote as it was. Without
    the hook the same sync pushes."""
    m = machines
    hook = m.remote / "hooks" / "pre-receive"
    hook.write_text("#!/bin/sh\necho 'denied by policy' >&2\nexit 1\n")
    hook.chmod(0o755)
    before = head(m.remote)
    m.a.add({**UG, "text": "refused by the remote's hook"}, ctx())
    with pytest.raises(filemem.errors.SyncError) as info:
        fsync.sync(m.a.store)
    assert info.value.code == "PUSH_REJECTED" and "hook declined" in info.value.message
    assert head(m.remote) == before
    hook.unlink()
    fsync.sync(m.a.store)
    assert head(m.remote) == head(m.a_path)


def test_with_several_remotes_and_no_origin_sync_uses_the_one_main_tracks(
        tmp_path: Path) -> None:
    """Remotes usb and usb2, none called origin: with no argument `filemem sync` uses the
    one `main` tracks (set when usb was added first), as `git pull` does."""
    usb, usb2 = bare_remote(tmp_path / "usb.git"), bare_remote(tmp_path / "usb2.git")
    with filemem.open_store(tmp_path / "A", create=True, write_policy="auto") as p:
        fremotes.add_remote(p.store, "usb", str(usb))
        fremotes.add_remote(p.store, "usb2", str(usb2))
        assert fremotes.upstream(p.store.git) == "usb"
        p.add({**UG, "text": "synced to the tracked remote"}, ctx())
        fsync.sync(p.store)
        assert head(usb, "refs/heads/main") == head(tmp_path / "A")
