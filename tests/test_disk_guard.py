"""A write the store cannot take whole is refused before its commit (STORE_FULL,
STORE_READ_ONLY: nothing written, `git status` clean), never committed and then half
mirrored; and a mirror that still fails after the commit leaves git's index agreeing with
HEAD, so that a plain `git commit` cannot delete what was just written. No root or mount
needed: a nearly full disk is a `statvfs` reporting little room, a read-only folder a real
`chmod` (run without root's override where the tests run as root)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import pytest

import filemem
from filemem import errors
from filemem.cli.common import EXIT_READ_ONLY
from filemem.files import gitindex, packwrite
from filemem.store import transaction
from tests.conftest import assert_clean_repo, ctx, git, no_root_powers, write_in_flight

UG = {"track": "agent", "scope": "user-global"}
REAL_STATVFS = os.statvfs


def _store(path: Path) -> Path:
    with filemem.open_store(path, create=True, write_policy="auto") as p:
        p.add({**UG, "text": "written before"}, ctx())
    return path


def _texts(store: Path) -> list[str]:
    with filemem.open_store(store) as p:
        return sorted(e["text"] for e in p.list_entries())


# ---------------------------------------------------------------- a nearly full disk


@pytest.mark.parametrize("free_blocks", [0, 4, 8])
def test_a_write_the_disk_has_no_room_for_is_store_full_before_its_commit(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, free_blocks: int) -> None:
    store = _store(tmp_path / "mem")
    head = git(store, "rev-parse", "HEAD")

    def nearly_full(path: str | os.PathLike[str]) -> os.statvfs_result:
        real = list(REAL_STATVFS(path))
        real[4] = free_blocks  # f_bavail: what room an unprivileged write has
        return os.statvfs_result(real)

    monkeypatch.setattr(os, "statvfs", nearly_full)
    with filemem.open_store(store, write_policy="auto") as p, \
            pytest.raises(errors.StoreFull, match="nothing was written") as caught:
        p.add({**UG, "text": "no room for this"}, ctx())
    assert "free some space" in str(caught.value)
    monkeypatch.setattr(os, "statvfs", REAL_STATVFS)
    assert git(store, "rev-parse", "HEAD") == head
    assert not write_in_flight(store)
    assert_clean_repo(store)
    assert _texts(store) == ["written before"]


# ---------------------------------------------------------------- read-only folders


def _unprivileged(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    """`filemem ARGS` as a user a folder's mode applies to: root runs it without its
    override of file modes (tests/conftest.py's no_root_powers), anyone else as they are."""
    return subprocess.run([sys.executable, "-m", "filemem.cli", *args, "--store", str(store)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          preexec_fn=no_root_powers())


def _chmod_tree(top: Path, writable: bool) -> None:
    for folder, _dirs, files in os.walk(top):
        for name in [folder, *(os.path.join(folder, f) for f in files)]:
            mode = os.stat(name).st_mode
            os.chmod(name, mode | 0o200 if writable else mode & ~0o222)


@pytest.mark.parametrize("part", ["agent/user-global/_shared", "agent", ".git",
                                  ".git/objects", ".git/refs/heads"])
def test_a_write_to_a_read_only_part_of_the_store_is_store_read_only(
        tmp_path: Path, part: str) -> None:
    store = _store(tmp_path / "mem")
    head = git(store, "rev-parse", "HEAD")
    _chmod_tree(store / part, writable=False)
    try:
        out = _unprivileged("add", "--yes", "--track", "agent", "--scope", "user-global",
                            "cannot be written", store=store)
    finally:
        _chmod_tree(store / part, writable=True)
    assert out.returncode == EXIT_READ_ONLY, out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("filemem: STORE_READ_ONLY: "), lines
    assert "nothing was written" in lines[0] and "chmod -R u+w" in lines[0]
    assert str(store) in lines[0]
    assert git(store, "rev-parse", "HEAD") == head
    assert not write_in_flight(store)
    assert_clean_repo(store)
    assert _texts(store) == ["written before"]


def _refused_pack(git_dir: str, *_: object) -> str:
    raise PermissionError(errno.EACCES, os.strerror(errno.EACCES),
                          os.path.join(git_dir, "objects", "pack", "tmp_pack-x.pack"))


def test_a_permission_error_writing_git_files_is_store_read_only_naming_the_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past the check (a folder made read-only meanwhile): one StoreReadOnly naming the file
    and its folder to make writable, not a PermissionError."""
    store = _store(tmp_path / "mem")
    head = git(store, "rev-parse", "HEAD")
    monkeypatch.setattr(packwrite, "put", _refused_pack)
    with filemem.open_store(store, write_policy="auto") as p, \
            pytest.raises(errors.StoreReadOnly) as caught:
        p.add({**UG, "text": "refused"}, ctx())
    message = str(caught.value)
    assert "tmp_pack-x.pack" in message and "nothing was written" in message
    assert f"chmod -R u+w {store}/.git/objects/pack" in message
    assert git(store, "rev-parse", "HEAD") == head
    monkeypatch.undo()
    assert _texts(store) == ["written before"]


# ---------------------------------------------------------------- a mirror failing anyway


def _no_space(*_: object, **__: object) -> None:
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("fails", ["entry file", "index"])
def test_a_mirror_that_fails_after_the_commit_leaves_the_index_at_head(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fails: str) -> None:
    store = _store(tmp_path / "mem")
    real_write = gitindex.GitIndex.write
    calls: list[int] = []

    def index_fails_once(self: gitindex.GitIndex, *args: object, **kw: object) -> None:
        calls.append(1)
        if len(calls) == 1:
            _no_space()
        real_write(self, *args, **kw)  # type: ignore[arg-type]

    if fails == "entry file":
        monkeypatch.setattr(transaction, "write_files", _no_space)
    else:
        monkeypatch.setattr(gitindex.GitIndex, "write", index_fails_once)
    with filemem.open_store(store, write_policy="auto") as p:
        p.add({**UG, "text": "committed, not mirrored"}, ctx())  # the commit stands
    monkeypatch.undo()
    # git's index is HEAD's: nothing staged, so a plain `git commit` deletes nothing
    assert git(store, "diff", "--cached", "--name-status") == ""
    head = git(store, "rev-parse", "HEAD")
    git(store, "commit", "-q", "-m", "a person's commit", check=False)
    assert git(store, "rev-parse", "HEAD") == head
    assert _texts(store) == ["committed, not mirrored", "written before"]
    with filemem.open_store(store, write_policy="auto") as p:  # the next write repairs
        p.add({**UG, "text": "and the next"}, ctx())
    assert_clean_repo(store)
    assert len(_texts(store)) == 3
