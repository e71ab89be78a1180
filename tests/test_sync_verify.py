"""`filemem verify` after every kind of sync: two machines, a bare remote, real git.

Each history is verified on both machines (and the CLI's exit status checked where a person
would run it): same entry changed on both sides (either side's version winning), removed
on one side and changed on the other, added on both, filemem.yaml merged key by key or by
the owner's choice, fast-forwards, a new store joining, two stores made apart, a `git pull`
merge. Then real inconsistencies, whose messages say what to do next.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.files.layout import key_dir
from filemem.owner import history
from filemem.owner import remotes as fremotes
from filemem.owner import sync as fsync
from tests.conftest import Machines, assert_clean_repo, ctx, file_of, git, rel, run_cli, set_text

UG = {"track": "user", "scope": "user-global"}


@pytest.fixture
def m(machines: Machines) -> Machines:
    return machines


def add(p: filemem.Provider, text: str) -> str:
    return str(p.add({**UG, "text": text}, ctx())["entry"]["id"])


def replace(p: filemem.Provider, match: str, text: str) -> None:
    p.replace({**UG, "match": match, "text": text}, ctx())


def problems(p: filemem.Provider) -> list[dict[str, str]]:
    return history.verify(p.store).problems


def sync_all(m: Machines) -> list[fsync.SyncResult]:
    return [fsync.sync(m.a.store), fsync.sync(m.b.store), fsync.sync(m.a.store)]


def both_verify(m: Machines) -> None:
    """Both machines at one commit, clean, and verify passes on each, also from the CLI."""
    assert git(m.a_path, "rev-parse", "HEAD") == git(m.b_path, "rev-parse", "HEAD")
    for p, path in ((m.a, m.a_path), (m.b, m.b_path)):
        assert problems(p) == []
        out = run_cli("verify", store=path)
        assert out.returncode == 0, out.stdout + out.stderr
        assert "OK: HEAD is exactly what the audited history produces." in out.stdout
        assert_clean_repo(path)


def merge_step(result: fsync.SyncResult) -> dict[str, Any]:
    (step,) = [s for s in result.steps if s["kind"] == "merge"]
    return step


# ---------------------------------------------------------------- every kind of sync


def test_the_readme_conflict_example_verifies(tmp_path: Path) -> None:
    """The README's 'Syncing two machines' session, command for command."""
    remote = tmp_path / "usb" / "memory.git"
    remote.parent.mkdir()
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    laptop, desktop = tmp_path / "laptop", tmp_path / "desktop"

    def on(store: Path, *args: str) -> str:
        out = run_cli(*args, env={"FILEMEM_STORE": str(store)})
        assert out.returncode == 0, (args, out.stdout, out.stderr)
        return out.stdout

    on(laptop, "init")
    on(laptop, "add", "--yes", "--scope", "user-global", "Prefers replies in English, code first")
    on(laptop, "remote", "add", "origin", str(remote))
    on(laptop, "sync")
    on(desktop, "clone", str(remote))
    on(desktop, "add", "--yes", "--scope", "user-global", "Uses fish as the shell")
    on(desktop, "sync")
    on(laptop, "add", "--yes", "--scope", "user-global", "Works on the api repo")
    on(laptop, "sync")
    on(desktop, "sync")
    on(laptop, "replace", "--yes", "--scope", "user-global", "English",
       "Prefers replies in English, tests first")
    time.sleep(0.005)  # the desktop's text is written later, as in the README
    on(desktop, "replace", "--yes", "--scope", "user-global", "English",
       "Prefers replies in English, short ones")
    on(laptop, "sync")
    out = on(desktop, "sync")
    assert "conflict: " in out and "kept the local version (updated later" in out
    on(laptop, "sync")
    for store in (laptop, desktop):
        out = on(store, "verify")
        assert "2 merges" in out and "OK: HEAD is exactly" in out
    texts = sorted(e["text"] for e in json.loads(on(desktop, "list", "--json")))
    assert texts == ["Prefers replies in English, short ones",
                     "Prefers replies in English, tests first", "Uses fish as the shell",
                     "Works on the api repo"]


@pytest.mark.parametrize("later", ["merging side", "remote side"])
def test_same_entry_changed_on_both_sides(m: Machines, later: str) -> None:
    add(m.a, "Prefers tabs")
    sync_all(m)
    first, second = (m.a, m.b) if later == "merging side" else (m.b, m.a)
    replace(first, "tabs", f"Prefers tabs ({'A' if first is m.a else 'B'})")
    time.sleep(0.005)
    replace(second, "tabs", f"Prefers tabs ({'A' if second is m.a else 'B'})")
    step = merge_step(sync_all(m)[1])  # B merges
    (conflict,) = step["conflicts"]
    assert conflict["kind"] == "both-changed"
    assert ("kept the local version" in conflict["message"]) is (later == "merging side")
    both_verify(m)
    # and history goes on: further writes to both versions verify too
    replace(m.a, "(A)", "Prefers tabs, width 4")
    sync_all(m)
    both_verify(m)


def test_removed_on_one_side_changed_on_the_other(m: Machines) -> None:
    add(m.a, "entry X")
    add(m.a, "entry Y")
    sync_all(m)
    m.a.remove({**UG, "match": "entry X"}, ctx())
    replace(m.a, "entry Y", "entry Y, changed on A")
    replace(m.b, "entry X", "entry X, changed on B")
    m.b.remove({**UG, "match": "entry Y"}, ctx())
    step = merge_step(sync_all(m)[1])
    assert {c["kind"] for c in step["conflicts"]} == {"removed-vs-changed"}
    both_verify(m)


def test_added_on_both_sides(m: Machines) -> None:
    add(m.a, "A one")
    add(m.b, "B one")
    add(m.b, "B two")
    step = merge_step(sync_all(m)[1])
    assert step["entries"]["added"] == 1 and step["conflicts"] == []
    both_verify(m)


def config(path: Path, old: str, new: str) -> None:
    cfg = path / "filemem.yaml"
    cfg.write_text(cfg.read_text().replace(old, new, 1))
    git(path, "commit", "-qm", f"config: {new}", "filemem.yaml")


@pytest.mark.parametrize("keep", [None, "local", "remote"])
def test_filemem_yaml_merges(m: Machines, keep: str | None) -> None:
    add(m.a, "A writes")
    add(m.b, "B writes")
    config(m.a_path, "userGlobal: 2000", "userGlobal: 2500")
    config(m.b_path, "  workspace: 2000", "  workspace: 2600")  # the next line: a key merge
    if keep is not None:  # the same key, differently: the owner decides
        config(m.a_path, "maxEntriesPerQuery: 20", "maxEntriesPerQuery: 30")
        config(m.b_path, "maxEntriesPerQuery: 20", "maxEntriesPerQuery: 40")
    fsync.sync(m.a.store)
    if keep is not None:
        with pytest.raises(fsync.SyncError):
            fsync.sync(m.b.store)
    result = fsync.sync(m.b.store, keep_config=keep)  # type: ignore[arg-type]
    step = merge_step(result)
    assert ("filemem.yaml" in step["files"]) and (len(step["conflicts"]) == (keep is not None))
    fsync.sync(m.a.store)
    both_verify(m)


def test_fast_forwards_and_remote_only_changes(m: Machines) -> None:
    add(m.a, "only on A")
    replace(m.a, "only on A", "only on A, replaced")
    config(m.a_path, "language: en", "language: zh")
    kinds = [[s["kind"] for s in r.steps] for r in sync_all(m)]
    assert kinds == [["push"], ["fast-forward"], []]
    both_verify(m)


def test_a_new_store_joining_and_two_stores_made_apart(m: Machines, tmp_path: Path) -> None:
    add(m.a, "from A")
    fsync.sync(m.a.store)
    with filemem.open_store(tmp_path / "new", create=True, write_policy="auto") as new:
        fremotes.add_remote(new.store, "origin", str(m.remote))
        assert [s["kind"] for s in fsync.sync(new.store).steps] == ["join"]
        assert problems(new) == []
    with filemem.open_store(tmp_path / "apart", create=True, write_policy="auto") as apart:
        add(apart, "from a store made apart")
        replace(apart, "made apart", "from a store made apart, replaced")
        fremotes.add_remote(apart.store, "origin", str(m.remote))
        step = merge_step(fsync.sync(apart.store))
        assert step["base"] is None
        assert problems(apart) == []
    sync_all(m)
    both_verify(m)


def test_a_git_pull_merge_that_takes_a_removal_is_not_a_problem(m: Machines) -> None:
    add(m.a, "to be removed on A")
    sync_all(m)
    m.a.remove({**UG, "match": "to be removed"}, ctx())
    fsync.sync(m.a.store)
    add(m.b, "B's own")
    git(m.b_path, "pull", "-q", "--no-rebase", "--no-edit", "origin", "main")
    assert git(m.b_path, "log", "-1", "--format=%P").count(" ") == 1  # a merge
    report = history.verify(m.b.store)
    assert report.problems == [] and len(report.external) == 1


def test_commits_made_with_git_on_one_side_of_a_sync_merge(m: Machines) -> None:
    """Each line of history keeps its own record of which file holds each id: on B an
    entry removed with git and brought back by the revert its problem suggests, and a
    second file with the same id made and taken away again; on A writes of its own. The
    sync merge joins them and both machines verify; a removal never brought back is
    reported once, at the commit that made it, on both."""
    eid = add(m.a, "likes tea")
    gone = add(m.a, "likes coffee")
    sync_all(m)
    path = rel(m.b_path, file_of(m.b_path, eid))
    git(m.b_path, "rm", "-q", path)
    git(m.b_path, "commit", "-qm", "tidy up")
    git(m.b_path, "revert", "--no-edit", "HEAD")
    folder = m.b_path / "user" / "user-global" / key_dir("bob")
    folder.mkdir()
    copy = folder / Path(path).name
    copy.write_text((m.b_path / path).read_text().replace('agentKey: ""', "agentKey: bob"))
    git(m.b_path, "add", rel(m.b_path, copy))
    git(m.b_path, "commit", "-qm", "a copy")
    git(m.b_path, "rm", "-q", rel(m.b_path, copy))
    git(m.b_path, "commit", "-qm", "no copy")
    add(m.a, "A's own")
    replace(m.a, "likes tea", "likes green tea")
    sync_all(m)
    both_verify(m)
    assert len(history.verify(m.a.store).external) == 4

    git(m.b_path, "rm", "-q", rel(m.b_path, file_of(m.b_path, gone)))
    git(m.b_path, "commit", "-qm", "drop coffee")
    removal = git(m.b_path, "rev-parse", "HEAD").strip()
    add(m.a, "A's second")
    sync_all(m)
    for p in (m.a, m.b):
        found = [x for x in problems(p) if "removes 1 audited entry" in x["problem"]]
        assert [x["commit"] for x in found] == [removal]
        assert f"`git revert {removal[:12]}` brings it back" in found[0]["problem"]
        assert len(problems(p)) == 1


def test_each_line_of_history_knows_which_file_holds_an_id(m: Machines) -> None:
    """A second file with an entry's id (later in path order, so not the entry) made with
    git, then two lines of history from there: on each, taking the copy away leaves the
    entry, which stays in the file before it; a git merge joins them and verify passes."""
    eid = add(m.a, "likes tea")
    path = rel(m.a_path, file_of(m.a_path, eid))
    folder = m.a_path / "user" / "user-global" / key_dir("bob")
    folder.mkdir()
    copy = rel(m.a_path, folder / Path(path).name)
    assert path < copy
    (m.a_path / copy).write_text(
        (m.a_path / path).read_text().replace('agentKey: ""', "agentKey: bob"))
    git(m.a_path, "add", copy)
    git(m.a_path, "commit", "-qm", "a copy")
    git(m.a_path, "checkout", "-qb", "other")
    git(m.a_path, "rm", "-q", copy)
    git(m.a_path, "commit", "-qm", "no copy, here")
    git(m.a_path, "checkout", "-q", "main")
    git(m.a_path, "rm", "-q", copy)
    (m.a_path / "NOTES.md").write_text("mine\n")
    git(m.a_path, "add", "NOTES.md")
    git(m.a_path, "commit", "-qm", "no copy, there")
    git(m.a_path, "merge", "-q", "--no-edit", "other")
    git(m.a_path, "branch", "-qD", "other")
    report = history.verify(m.a.store)
    assert report.problems == [] and report.merges == 1 and len(report.external) == 4


# ---------------------------------------------------------------- real inconsistencies


def test_a_sync_merge_with_another_tree_is_caught_and_says_what_to_do(m: Machines) -> None:
    eid = add(m.a, "kept")
    add(m.b, "B's")
    sync_all(m)
    merge = git(m.b_path, "rev-parse", "HEAD").strip()
    parents = git(m.b_path, "log", "-1", "--format=%P").split()
    message = git(m.b_path, "log", "-1", "--format=%B")
    path = file_of(m.b_path, eid)
    set_text(path, "changed inside the merge")
    git(m.b_path, "add", rel(m.b_path, path))
    tree = git(m.b_path, "write-tree").strip()
    msg_file = m.b_path.parent / "msg"
    msg_file.write_text(message)
    forged = git(m.b_path, "commit-tree", tree, "-p", parents[0], "-p", parents[1],
                 "-F", str(msg_file)).strip()
    git(m.b_path, "update-ref", "refs/heads/main", forged, merge)
    report = history.verify(m.b.store)
    (problem,) = [x["problem"] for x in report.problems if x["commit"] == forged]
    assert "is not what `filemem sync` makes from its two parents" in problem
    assert rel(m.b_path, path) in problem
    assert f"git revert -m 1 {forged[:12]}" in problem
    out = run_cli("verify", store=m.b_path)
    assert out.returncode == 1 and "git revert -m 1" in out.stdout


def test_a_head_that_replay_does_not_give_names_the_entry_and_the_way_out(
        m: Machines) -> None:
    eid = add(m.a, "likes tea")
    replace(m.a, "tea", "likes green tea")
    copied = git(m.a_path, "log", "-1", "--format=%B")
    path = file_of(m.a_path, eid)
    data = path.read_text().replace("version: 2", "version: 3")
    path.write_text(data.replace("likes green tea", "likes no tea"))
    msg_file = m.a_path.parent / "copied"
    msg_file.write_text(copied)
    git(m.a_path, "commit", "-q", "-F", str(msg_file), rel(m.a_path, path))
    found = [x["problem"] for x in problems(m.a)
             if x["problem"].startswith("replaying history does not give the entries at HEAD")]
    (problem,) = found
    assert f"{eid} has another text at HEAD than in the audited history" in problem
    assert f"`git log -p -- {rel(m.a_path, path)}`" in problem
    assert f"`filemem log --entry {eid[:8]}`" in problem
    assert "`git revert <that commit>`" in problem and "`filemem replace`" in problem
    assert os.path.exists(path)


@pytest.mark.parametrize("config", ["kept local", "something else"])
def test_a_merge_as_an_earlier_filemem_made_it_still_verifies(m: Machines, tmp_path: Path,
                                                              config: str) -> None:
    """Before filemem.yaml was merged key by key (and against the stores' common creation),
    joining two stores kept the local filemem.yaml whole, with a sync-conflict row saying
    so. Such merges stay valid history; a merge whose file is anything else is not."""
    from filemem.owner import merge as fmerge
    from filemem.store.auditlog import row

    cfg = m.a_path / "filemem.yaml"
    cfg.write_text(cfg.read_text().replace("userGlobal: 2000", "userGlobal: 5000"))
    git(m.a_path, "commit", "-qm", "budgets", "filemem.yaml")
    fsync.sync(m.a.store)
    with filemem.open_store(tmp_path / "C", create=True, write_policy="auto") as c:
        add(c, "from C")
        remote = fremotes.add_remote(c.store, "origin", str(m.remote))
        theirs = fremotes.fetch(c.store.git, remote, None)
        assert theirs is not None
        with c.store.transaction() as txn:
            plan = fmerge.plan_merge(c.store.git, txn.state.head, "origin", None, theirs,
                                     alike=False)
            changes = dict(plan.changes)
            if config == "something else":
                changes["filemem.yaml"] = (tmp_path / "C" / "filemem.yaml").read_bytes() \
                    .replace(b"language: en", b"language: zh")
            kept = fmerge.Conflict("file", "filemem.yaml", "local", "filemem.yaml changed on "
                                   "both sides and the changes overlap: kept the local version")
            merge = txn.commit_files(changes, rows=[
                row("sync-merge", source="filemem", outcome="merged origin/main"), kept.row()],
                subject="sync-merge origin/main: 2 commits", parents=[theirs])
        found = [x for x in problems(c) if x["commit"] == merge]
        assert (found == []) is (config == "kept local"), found
