"""The history walks a sync makes give the same answers by the git CLI
(filemem/owner/gitwalk.py) as by dulwich's walker, which they stand in for when git is on
PATH: commits counted, redaction records found, merge bases."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import filemem
from filemem.owner import gitwalk, merge, redactsync
from filemem.owner import sync as fsync
from tests.conftest import BIG, ctx, git

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
