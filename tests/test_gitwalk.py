"""The history walks a sync makes give the same answers by the git CLI
(filemem/owner/gitwalk.py) as by dulwich's walker, which they stand in for when git is on
PATH: commits counted, redaction records found, merge bases, and the files each commit
changed (verify)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

import filemem
from filemem.files import gitprune, packing
from filemem.files.giterrors import RepositoryDamaged
from filemem.owner import gitwalk, history, merge, redactsync
from filemem.owner import sync as fsync
from filemem.owner.history import commits_oldest_first
from tests.conftest import BIG, GIT, ctx, git

UG = {"track": "user", "scope": "user-global"}


def _diverged(tmp_path: Path) -> tuple[filemem.Provider, str, str, str]:
    """A store whose HEAD and a side commit share a base, with a redaction-like commit
    message on the side (the trailer as a whole line) and one that only mentions it."""
    store = tmp_path / "s"
    p = filemem.open_store(store, create=True, write_policy="auto", budgets=BIG)
    for i in range(5):
        p.add({**UG, "text": f"fact {i}"}, ctx())
    base = git(store, "rev-parse", "HEAD").strip()
    git(store, "commit", "--allow-empty", "-q", "-m",
        "redact\n\nAudit-Action: redact\nRedacted-Root: " + "a" * 40 + "\n")
    git(store, "commit", "--allow-empty", "-q", "-m", "mentions Audit-Action: redact inline")
    side = git(store, "rev-parse", "HEAD").strip()
    git(store, "reset", "-q", "--hard", base)
    for i in range(3):
        p.add({**UG, "text": f"later {i}"}, ctx())
    return p, git(store, "rev-parse", "HEAD").strip(), side, base


def test_the_git_cli_and_dulwich_agree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    p, head, side, base = _diverged(tmp_path)
    g = p.store.git

    def answers() -> tuple[object, ...]:
        recs = redactsync._records(g, side, head)
        return (fsync._count(g, side, head), fsync._count(g, head, side),
                fsync._count(g, head, None), [(r.sha, r.roots) for r in recs],
                merge.merge_base(g, head, side), merge.merge_base(g, side, base))

    by_git = answers()
    assert gitwalk.count(g, side, head) == 2 and gitwalk.merge_bases(g, head, side) == [base]
    assert by_git[3] and len(by_git[3]) == 1  # the whole-line trailer only
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    assert gitwalk.count(g, side, head) is None  # so the callers walk with dulwich
    assert answers() == by_git
    p.close()


def test_unrelated_histories_have_no_merge_base(tmp_path: Path) -> None:
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    a = filemem.open_store(tmp_path / "a", create=True, write_policy="auto")
    a.add({**UG, "text": "one"}, ctx())
    b = filemem.open_store(tmp_path / "b", create=True, write_policy="auto")
    b.add({**UG, "text": "two"}, ctx())
    other = git(tmp_path / "b", "rev-parse", "HEAD").strip()
    git(tmp_path / "a", "fetch", "-q", str(tmp_path / "b"), "main:refs/remotes/b/main")
    mine = git(tmp_path / "a", "rev-parse", "HEAD").strip()
    assert gitwalk.merge_bases(a.store.git, mine, other) == []
    assert merge.merge_base(a.store.git, mine, other) is None
    a.close()
    b.close()


def _odd_history(tmp_path: Path) -> tuple[filemem.Provider, Path]:
    """filemem's writes, then what people do with git: an empty commit, a mode change, a
    link, a file that becomes a folder (and the names beside it that sort between the two
    ways of ordering them), a name that is not UTF-8, a deletion, a merge of two lines."""
    store = tmp_path / "s"
    p = filemem.open_store(store, create=True, write_policy="auto", budgets=BIG)
    for i in range(3):
        p.add({**UG, "text": f"fact {i}"}, ctx())
    git(store, "commit", "--allow-empty", "-q", "-m", "nothing")
    (store / "notes").mkdir()
    for name in ("a", "a.md", "a-b", "b"):
        (store / "notes" / name).write_text(f"{name}\n")
    git(store, "add", "notes")
    git(store, "commit", "-q", "-m", "notes")
    git(store, "update-index", "--chmod=+x", "notes/b")
    git(store, "commit", "-q", "-m", "mode only")
    (store / "notes" / "link").symlink_to("a")
    (store / "notes" / "a").unlink()
    (store / "notes" / "a").mkdir()
    (store / "notes" / "a" / "inside").write_text("in\n")
    (store / "notes" / "caf\udce9").write_bytes(b"latin-1\n")  # the name's bytes: caf\xe9
    git(store, "add", "-A", "notes")
    git(store, "commit", "-q", "-m", "a folder now, a link, a latin-1 name")
    base = git(store, "rev-parse", "HEAD").strip()
    git(store, "rm", "-q", "notes/a-b")
    git(store, "commit", "-q", "-m", "one gone")
    git(store, "checkout", "-q", "-b", "side", base)
    (store / "notes" / "side").write_text("side\n")
    git(store, "add", "notes/side")
    git(store, "commit", "-q", "-m", "on the side")
    git(store, "checkout", "-q", "main")
    git(store, "merge", "-q", "--no-edit", "side")
    p.add({**UG, "text": "after the merge"}, ctx())
    return p, store


def test_git_and_python_give_each_commit_the_same_changes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    p, _store = _odd_history(tmp_path)
    g = p.store.git
    commits = commits_oldest_first(p.store)
    assert any(len(c.parents) > 1 for c in commits) and not commits[0].parents
    by_git = list(gitwalk.first_parent_diffs(g, commits))
    by_python = [list(g.diff(g.commit(c.parents[0]).tree if c.parents else None, c.tree))
                 for c in commits]
    assert by_git == by_python
    assert [] in by_git  # the empty commit and the mode change change no content
    changed = {path for changes in by_git for path, _old, _new in changes or ()}
    assert {"notes/a", "notes/a/inside", "notes/link", "notes/caf\udce9"} <= changed
    report = history.verify(p.store, full=True).to_json()
    assert report["externalCommits"]
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    assert list(gitwalk.first_parent_diffs(g, commits)) == [None] * len(commits)
    assert history.verify(p.store, full=True).to_json() == report  # the same, by Python
    p.close()


def test_a_damaged_tree_is_diffed_by_python_which_reports_it(tmp_path: Path) -> None:
    """git stops at an object it cannot read; the commits from there on are diffed in
    Python, and verify reports the damage as before."""
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    p, store = _odd_history(tmp_path)
    g = p.store.git
    commits = commits_oldest_first(p.store)
    victim = commits[-3].tree
    # every object loose (the packs moved out, then unpacked), then that tree's file deleted
    packs = tmp_path / "packs"
    packs.mkdir()
    for f in (store / ".git/objects/pack").iterdir():
        f.rename(packs / f.name)
    assert GIT is not None
    for pack in packs.glob("*.pack"):
        with open(pack, "rb") as data:
            subprocess.run([GIT, "-C", str(store), "unpack-objects", "-q"], stdin=data,
                           check=True)
    (store / ".git/objects" / victim[:2] / victim[2:]).unlink()
    g.forget()
    diffs = list(gitwalk.first_parent_diffs(g, commits))
    assert diffs[-1] is None and diffs[-3] is None and diffs[0] is not None
    with pytest.raises(RepositoryDamaged) as info:
        history.verify(p.store, full=True)
    assert victim in str(info.value) and "fsck" in str(info.value)
    p.close()


def test_git_variables_from_elsewhere_do_not_redirect_filemem(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A GIT_DIR, GIT_WORK_TREE and GIT_INDEX_FILE of another repository in filemem's
    environment (a git hook of another project runs filemem, say): every git command
    filemem runs still works on the store (filemem/files/gitcli.py), and the other
    repository is left exactly as it was."""
    if shutil.which("git") is None:
        pytest.skip("git CLI not installed")
    p, store = _odd_history(tmp_path)
    g = p.store.git
    commits = commits_oldest_first(p.store)
    expected = [list(g.diff(g.commit(c.parents[0]).tree if c.parents else None, c.tree))
                for c in commits]
    other = tmp_path / "project"
    git(tmp_path, "init", "-q", str(other))
    (other / "code.py").write_text("print(1)\n")
    git(other, "add", "code.py")
    git(other, "commit", "-q", "-m", "the project")
    (other / "loose.txt").write_text("unreachable soon\n")
    loose = git(other, "hash-object", "-w", "loose.txt").strip()
    before = (git(other, "log", "--all", "--format=%H %s"), git(other, "count-objects", "-v"))
    report = history.verify(p.store, full=True).to_json()
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    monkeypatch.setenv("GIT_WORK_TREE", str(other))
    monkeypatch.setenv("GIT_INDEX_FILE", str(other / ".git" / "index"))
    assert list(gitwalk.first_parent_diffs(g, commits)) == expected
    head = commits[-1].sha
    assert gitwalk.count(g, head, None) == len(commits)
    assert gitwalk.merge_bases(g, head, commits[0].sha) == [commits[0].sha]
    assert history.verify(p.store, full=True).to_json() == report
    packing.pack(g)  # git repack: of the store
    gitprune.forget_unreachable(str(store))  # reflogs expired, unreachable objects pruned
    for name in ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE"):
        monkeypatch.delenv(name)
    assert (git(other, "log", "--all", "--format=%H %s"),
            git(other, "count-objects", "-v")) == before
    assert git(other, "cat-file", "-t", loose).strip() == "blob"  # not pruned
    git(store, "fsck", "--strict")
    p.close()
