"""The files a write replaces in .git are freed after it (filemem.files.retire): the new
file is in place when replace returns, the old one stays open only until the block ends,
nothing stays open after that, and where a rename over an open file is refused the
rename is made as before."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import filemem
from filemem.files import retire
from tests.conftest import BIG, assert_clean_repo, ctx, git, open_files

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self/fd") or os.name != "posix",
                                reason="needs POSIX and /proc")


def deleted_open(under: Path) -> list[str]:
    """The files under ``under`` this process holds open that no longer have a name (not
    pytest's own unnamed temporary files)."""
    return [link for link in open_files().values()
            if link.endswith(" (deleted)") and link.startswith(f"{under}{os.sep}")]


def test_the_old_file_is_kept_open_until_the_block_ends(tmp_path: Path) -> None:
    dst, src = tmp_path / "main", tmp_path / "main.lock"
    dst.write_text("old\n")
    retire.drain()
    assert deleted_open(tmp_path) == []
    with retire.deferred():
        src.write_text("new\n")
        retire.replace(str(src), str(dst))
        assert dst.read_text() == "new\n" and not src.exists()
        assert deleted_open(tmp_path) == [f"{dst} (deleted)"]  # the old inode, not yet freed
        with retire.deferred():  # a nested block lets go with the outermost
            src.write_text("newer\n")
            retire.replace(str(src), str(dst))
        assert len(deleted_open(tmp_path)) == 2
    retire.drain()
    assert deleted_open(tmp_path) == []
    assert dst.read_text() == "newer\n"


def test_outside_a_block_nothing_is_kept(tmp_path: Path) -> None:
    dst, src = tmp_path / "index", tmp_path / "index.lock"
    dst.write_text("old\n")
    src.write_text("new\n")
    retire.replace(str(src), str(dst))
    assert dst.read_text() == "new\n" and deleted_open(tmp_path) == []


def test_nothing_is_kept_for_a_new_name_or_a_link(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").write_text("kept\n")
    (tmp_path / "link").symlink_to(tmp_path / "elsewhere")
    with retire.deferred():
        for name in ("fresh", "link"):
            (tmp_path / "src").write_text(name)
            retire.replace(str(tmp_path / "src"), str(tmp_path / name))
        assert deleted_open(tmp_path) == []
    assert (tmp_path / "elsewhere").read_text() == "kept\n"  # the link itself replaced
    assert (tmp_path / "link").read_text() == "link" and not (tmp_path / "link").is_symlink()


def test_a_rename_refused_while_the_old_file_is_open_is_made_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some SMB mounts refuse to rename over an open file: it is closed, and renamed."""
    dst, src = tmp_path / "main", tmp_path / "main.lock"
    dst.write_text("old\n")
    src.write_text("new\n")
    real, calls = os.replace, []

    def refusing(a: str, b: str) -> None:
        calls.append(a)
        if len(calls) == 1:
            raise PermissionError(13, "in use", b)
        real(a, b)

    monkeypatch.setattr(retire.os, "replace", refusing)
    with retire.deferred():
        retire.replace(str(src), str(dst))
        assert deleted_open(tmp_path) == []
    assert len(calls) == 2 and dst.read_text() == "new\n"


def test_a_write_leaves_nothing_open_once_let_go(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A store write replaces the branch's ref and git's index this way; afterwards no
    deleted file stays open and git sees a clean, consistent repository."""
    kept: list[str] = []
    real = retire._open_regular

    def noting(path: str) -> int | None:
        fd = real(path)
        if fd is not None:
            kept.append(os.path.relpath(path, tmp_path / "store"))
        return fd

    monkeypatch.setattr(retire, "_open_regular", noting)
    with filemem.open_store(tmp_path / "store", create=True, budgets=BIG,
                            write_policy="auto") as p:
        for i in range(3):
            p.add({"track": "user", "scope": "user-global", "text": f"fact {i}"}, ctx())
        retire.drain()
        assert deleted_open(tmp_path) == []
    assert {os.path.join(".git", "refs", "heads", "main"), os.path.join(".git", "index")} \
        <= set(kept)
    assert_clean_repo(tmp_path / "store")
    assert git(tmp_path / "store", "fsck", "--no-progress") == ""
