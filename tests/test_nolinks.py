"""filemem.files.nolinks: a folder path checked for symbolic links in one openat2 call, and
the write path's walk (one lstat per folder) where that cannot answer."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

import filemem
from filemem.files import nolinks, worktree
from tests.conftest import BIG, ctx

linux_openat2 = pytest.mark.skipif(
    not sys.platform.startswith("linux") or nolinks._bind() is None,
    reason="openat2 is Linux 5.6+ (and may be refused in a sandbox)")


@pytest.fixture(autouse=True)
def bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in a process that has written for a while: openat2 is bound on first use."""
    monkeypatch.setattr(nolinks, "_walked", nolinks.WALK_FIRST)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    (root / "a" / "b" / "c").mkdir(parents=True)
    (root / "elsewhere" / "c").mkdir(parents=True)
    (root / "a" / "file").write_text("not a folder")
    return root


@linux_openat2
def test_a_path_of_real_folders_is_told_in_one_call(tree: Path) -> None:
    assert nolinks.real_folders(str(tree), "a/b/c")
    assert nolinks.real_folders(str(tree), "a")


@linux_openat2
@pytest.mark.parametrize("where", ["a", "a/b", "a/b/c"])
def test_a_link_anywhere_on_the_way_is_not_a_real_folder(tree: Path, where: str) -> None:
    link = tree / where
    target = tree / "elsewhere" / where.replace("/", "-")
    os.rename(link, target)
    os.symlink(target, link)
    assert not nolinks.real_folders(str(tree), "a/b/c")
    assert worktree.linked_folder(str(tree), "a/b/c/x.md", set()) == str(link)


@linux_openat2
def test_what_is_not_a_folder_is_left_to_the_walk(tree: Path) -> None:
    assert not nolinks.real_folders(str(tree), "a/missing/c")
    assert not nolinks.real_folders(str(tree), "a/file")
    assert not nolinks.real_folders(str(tree / "gone"), "a")
    checked: set[str] = set()
    assert worktree.linked_folder(str(tree), "a/missing/c/x.md", checked) is None
    assert checked == {"a"}  # as the walk found them: "a" is a folder, the rest is not there


@linux_openat2
def test_a_writes_folders_are_checked_without_a_walk(store_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    with filemem.open_store(store_path, create=True, budgets=BIG,
                            write_policy="auto") as p:
        p.add({"track": "user", "scope": "workspace", "text": "first"}, ctx())
        walked: list[str] = []
        real_lstat = os.lstat

        def lstat(path: str, *args: object, **kwargs: object) -> os.stat_result:
            if str(path).startswith(str(store_path / "user")):
                walked.append(str(path))
            return real_lstat(path, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "lstat", lstat)
        p.add({"track": "user", "scope": "workspace", "text": "second"}, ctx())
        monkeypatch.undo()
        assert walked == []
        assert sorted(e["text"] for e in p.list_entries()) == ["first", "second"]


def test_without_openat2_the_walk_finds_the_link(tree: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nolinks, "_tried", True)
    monkeypatch.setattr(nolinks, "_call", None)
    os.rename(tree / "a" / "b", tree / "elsewhere" / "b")
    os.symlink(tree / "elsewhere" / "b", tree / "a" / "b")
    assert not nolinks.real_folders(str(tree), "a/b/c")
    assert worktree.linked_folder(str(tree), "a/b/c/x.md", set()) == str(tree / "a" / "b")


def test_a_call_refused_by_the_system_is_not_tried_again(tree: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []

    def refused(root: str, folder: str) -> bool:
        calls.append(folder)
        raise NotImplementedError

    monkeypatch.setattr(nolinks, "_tried", True)
    monkeypatch.setattr(nolinks, "_call", refused)
    assert not nolinks.real_folders(str(tree), "a/b/c")
    assert not nolinks.real_folders(str(tree), "a/b")
    assert calls == ["a/b/c"]
    checked: set[str] = set()
    assert worktree.linked_folder(str(tree), "a/b/c/x.md", checked) is None
    assert checked == {"a", "a/b", "a/b/c"}


def test_a_process_walks_its_first_checks_and_binds_openat2_after_them(
        tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ctypes costs a cold process more than the walks of a few writes."""
    binds: list[bool] = []
    monkeypatch.setattr(nolinks, "_walked", 0)
    monkeypatch.setattr(nolinks, "_tried", False)
    monkeypatch.setattr(nolinks, "_call", None)
    monkeypatch.setattr(nolinks, "_bind", lambda: binds.append(True) or (lambda r, f: True))
    for _ in range(nolinks.WALK_FIRST):
        assert not nolinks.real_folders(str(tree), "a/b/c")
    assert binds == []
    assert nolinks.real_folders(str(tree), "a/b/c") and binds == [True]
    assert nolinks.real_folders(str(tree), "a/b/c") and binds == [True]
