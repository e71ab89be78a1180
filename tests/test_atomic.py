"""filemem.files.atomic and every file it replaces: short writes are finished, a full disk never
leaves a torn file under the real name nor a temp file beside it, lock files are git's."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.files import atomic, worktree
from filemem.files.giterrors import RefLocked
from filemem.files.gitindex import GitIndex
from filemem.files.gitrepo import GitRepo, PendingObjects
from filemem.store.auditlog import Ledger
from filemem.store.pending import PendingStore
from filemem.store.recall import RecallCounters
from tests.conftest import ctx

REAL_WRITE = os.write
REAL_REPLACE = os.replace
UG = {"track": "user", "scope": "user-global"}


def one_byte(fd: int, data: Any) -> int:
    """os.write as a signal-interrupted pipe does it: one byte a call."""
    return REAL_WRITE(fd, bytes(memoryview(data)[:1]))


class Disk:
    """os.write on a disk that fills up: after ``free_calls`` untouched writes, ``budget``
    more bytes fit (the write that crosses it is short), then every write is ENOSPC."""

    def __init__(self, budget: int, free_calls: int = 0) -> None:
        self.budget = budget
        self.free_calls = free_calls
        self.full = False

    def write(self, fd: int, data: Any) -> int:
        if self.free_calls:
            self.free_calls -= 1
            return REAL_WRITE(fd, data)
        if self.budget <= 0:
            self.full = True
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        n = min(len(data), self.budget)
        self.budget -= n
        return REAL_WRITE(fd, bytes(memoryview(data)[:n]))


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[..., Disk]]:
    def fill(budget: int, free_calls: int = 0) -> Disk:
        disk = Disk(budget, free_calls)
        monkeypatch.setattr(os, "write", disk.write)
        return disk

    yield fill
    monkeypatch.setattr(os, "write", REAL_WRITE)


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` with its bytes."""
    return {str(p.relative_to(folder)): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


# ---------------------------------------------------------------- the primitives


def test_write_all_finishes_short_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = bytes(range(256)) * 20
    monkeypatch.setattr(os, "write", one_byte)
    fd = os.open(tmp_path / "f", os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        atomic.write_all(fd, data)
    finally:
        os.close(fd)
    assert (tmp_path / "f").read_bytes() == data


def test_write_all_raises_when_nothing_is_written(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")
    monkeypatch.setattr(os, "write", lambda fd, data: 0)
    with pytest.raises(OSError) as caught:
        atomic.atomic_write(str(target), b"new content", durable=False)
    assert caught.value.errno == errno.ENOSPC
    assert snapshot(tmp_path) == {"f": b"old"}


def test_atomic_write_replaces_with_short_writes(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old")
    monkeypatch.setattr(os, "write", one_byte)
    atomic.atomic_write(str(target), b"the new content", durable=True)
    assert snapshot(tmp_path) == {"f": b"the new content"}
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


@pytest.mark.parametrize("budget", [0, 3, 999])
def test_atomic_write_on_a_full_disk_leaves_the_target(tmp_path: Path, budget: int,
                                                       full_disk: Callable[..., Disk]) -> None:
    target = tmp_path / "f"
    target.write_bytes(b"old content")
    disk = full_disk(budget)
    with pytest.raises(OSError) as caught:
        atomic.atomic_write(str(target), b"x" * 1000, durable=True)
    assert caught.value.errno == errno.ENOSPC and disk.full
    assert snapshot(tmp_path) == {"f": b"old content"}


def test_atomic_write_failed_rename_removes_the_temp(tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "f").write_bytes(b"old")

    def fail(src: str, dst: str) -> None:
        raise OSError(errno.EIO, "rename failed")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(OSError):
        atomic.atomic_write(str(tmp_path / "f"), b"new", durable=False)
    assert snapshot(tmp_path) == {"f": b"old"}


def test_create_new_on_a_full_disk_leaves_nothing(tmp_path: Path,
                                                  full_disk: Callable[..., Disk]) -> None:
    full_disk(10)
    with pytest.raises(OSError):
        atomic.create_new(str(tmp_path / "new"), b"y" * 100, durable=False)
    assert snapshot(tmp_path) == {}
    (tmp_path / "there").write_bytes(b"mine")
    with pytest.raises(FileExistsError):
        atomic.create_new(str(tmp_path / "there"), b"other", durable=False)
    assert snapshot(tmp_path) == {"there": b"mine"}


@pytest.mark.parametrize("free_calls", [0, 1, 2])
def test_replace_many_on_a_full_disk_renames_nothing(tmp_path: Path, free_calls: int,
                                                     full_disk: Callable[..., Disk]) -> None:
    (tmp_path / "b").write_bytes(b"old b")
    full_disk(5, free_calls)
    files = [(str(tmp_path / n), n.encode() * 50) for n in ("a", "b", "c")]
    with pytest.raises(OSError):
        atomic.replace_many(files, durable=True)
    assert snapshot(tmp_path) == {"b": b"old b"}


def test_replace_many_undo_takes_back_new_files(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "c").write_bytes(b"c was here")

    def fail_last(src: str, dst: str) -> None:
        if dst.endswith("last"):
            raise OSError(errno.EIO, "rename failed")
        REAL_REPLACE(src, dst)

    monkeypatch.setattr(os, "replace", fail_last)
    files = [(str(tmp_path / "a"), b"A"), (str(tmp_path / "c"), b"C"),
             (str(tmp_path / "last"), b"L")]
    with pytest.raises(OSError):
        atomic.replace_many(files, durable=False, undo=True)
    # "a" was new: taken back; "c" existed (content-addressed callers: the same bytes)
    assert snapshot(tmp_path) == {"c": b"C"}


def test_fsync_follows_durable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append("dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    atomic.atomic_write(str(tmp_path / "f"), b"1", durable=False)
    assert synced == []
    atomic.atomic_write(str(tmp_path / "f"), b"2", durable=True)
    assert synced == ["file", "dir"]
    synced.clear()
    atomic.replace_many([(str(tmp_path / "g"), b"g"), (str(tmp_path / "h"), b"h")],
                        durable=True, sync_dirs=False)
    assert synced == ["file", "file"]
    synced.clear()
    with atomic.LockFile(str(tmp_path / "f"), durable=True) as lock:
        lock.write(b"3")
        lock.commit()
    assert synced == ["file", "dir"]


def test_remove_temps_removes_only_that_files_temps(tmp_path: Path) -> None:
    target = str(tmp_path / "journal.json")
    for _ in range(2):
        with open(atomic.temp_name(target), "wb"):
            pass
    (tmp_path / "journal.json").write_bytes(b"{}")
    (tmp_path / ".other.json.1.2.tmp").write_bytes(b"")
    assert len(atomic.remove_temps(target)) == 2
    assert sorted(snapshot(tmp_path)) == [".other.json.1.2.tmp", "journal.json"]


# ---------------------------------------------------------------- the lock file


def test_lock_refuses_when_the_lock_exists(tmp_path: Path) -> None:
    target = tmp_path / "ref"
    target.write_bytes(b"old\n")
    (tmp_path / "ref.lock").write_bytes(b"someone else's")
    with pytest.raises(atomic.Locked) as caught:
        atomic.LockFile(str(target), durable=True)
    assert isinstance(caught.value, FileExistsError)
    assert snapshot(tmp_path) == {"ref": b"old\n", "ref.lock": b"someone else's"}


def test_lock_commit_replaces_and_releases(tmp_path: Path) -> None:
    target = tmp_path / "ref"
    target.write_bytes(b"old\n")
    with atomic.LockFile(str(target), durable=False) as lock:
        lock.write(b"new")
        lock.write(b"\n")
        assert (tmp_path / "ref.lock").exists()
        lock.commit()
    assert snapshot(tmp_path) == {"ref": b"new\n"}
    with pytest.raises(ValueError):
        lock.write(b"more")


@pytest.mark.parametrize("how", ["abort", "leave", "raise"])
def test_lock_abort_cleans_up(tmp_path: Path, how: str) -> None:
    target = tmp_path / "ref"
    target.write_bytes(b"old\n")
    expect = pytest.raises(RuntimeError) if how == "raise" else contextlib.nullcontext()
    with expect, atomic.LockFile(str(target), durable=True) as lock:
        lock.write(b"half")
        if how == "abort":
            lock.abort()
        elif how == "raise":
            raise RuntimeError("the caller changed its mind")
        # "leave": an early exit without commit() must not put the lock in place
    assert snapshot(tmp_path) == {"ref": b"old\n"}
    atomic.LockFile(str(target), durable=False).abort()  # the lock is free again


def test_lock_on_a_full_disk_leaves_the_target(tmp_path: Path,
                                               full_disk: Callable[..., Disk]) -> None:
    target = tmp_path / "ref"
    target.write_bytes(b"old\n")
    full_disk(2)
    with pytest.raises(OSError), atomic.LockFile(str(target), durable=True) as lock:
        lock.write(b"0123456789abcdef\n")
        lock.commit()
    assert snapshot(tmp_path) == {"ref": b"old\n"}


# ---------------------------------------------------------------- the callers


def test_journal_short_writes_and_full_disk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            full_disk: Callable[..., Disk]) -> None:
    journal = worktree.Journal.at(str(tmp_path))
    paths: dict[str, tuple[str | None, str | None]] = {"user/a.md": (None, "b" * 40)}
    monkeypatch.setattr(os, "write", one_byte)
    journal.begin("a" * 40, "c" * 40, paths)
    monkeypatch.setattr(os, "write", REAL_WRITE)
    assert journal.read() == paths  # the single unchecked os.write wrote one byte of it
    before = snapshot(tmp_path)
    full_disk(7)
    with pytest.raises(OSError):
        journal.begin("c" * 40, "d" * 40, {"user/b.md": ("e" * 40, None)})
    assert snapshot(tmp_path) == before


def test_journal_is_durable_and_working_tree_files_are_not(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[bool] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    worktree.write(str(tmp_path), "user/a.md", b"text\n")
    worktree.write(str(tmp_path), "user/a.md", b"text 2\n")
    worktree.write(str(tmp_path), "user/b.md", b"text\n", new=True)
    assert synced == []  # the commit and the journal are the durable record
    worktree.Journal.at(str(tmp_path)).begin(None, "c" * 40, {})
    assert synced == [False, True]  # the journal file, then its folder
    synced.clear()
    PendingStore(str(tmp_path)).stage({"action": "add"})
    assert synced == [False, True]


def test_working_tree_write_on_a_full_disk(tmp_path: Path,
                                           full_disk: Callable[..., Disk]) -> None:
    worktree.write(str(tmp_path), "user/a.md", b"old text\n")
    before = snapshot(tmp_path)
    full_disk(4)
    with pytest.raises(OSError):
        worktree.write(str(tmp_path), "user/a.md", b"new text, longer\n")
    with pytest.raises(OSError):
        worktree.write(str(tmp_path), "user/b.md", b"a new file\n", new=True)
    assert snapshot(tmp_path) == before  # no torn file and no *.filemem-tmp left


def test_pending_record_short_writes_and_full_disk(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch,
                                                   full_disk: Callable[..., Disk]) -> None:
    pending = PendingStore(str(tmp_path))
    monkeypatch.setattr(os, "write", one_byte)
    pid = pending.stage({"action": "add", "text": "a staged write " * 10})
    monkeypatch.setattr(os, "write", REAL_WRITE)
    assert [r["id"] for r in pending.list()] == [pid]
    assert pending.list()[0]["text"] == "a staged write " * 10
    before = snapshot(tmp_path)
    full_disk(20)
    with pytest.raises(OSError):
        pending.stage({"action": "add", "text": "another staged write " * 10})
    assert snapshot(tmp_path) == before


def test_ledger_and_recall_appends_finish_short_writes(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = Ledger(str(tmp_path))
    recall = RecallCounters(str(tmp_path))
    monkeypatch.setattr(os, "write", one_byte)
    ledger.append([{"seq": 1, "action": "recalled", "text": "x" * 50}])
    ledger.append([{"seq": 2, "action": "snapshot", "text": "y" * 50}])
    recall.bump(["id-one", "id-two"], 1000)
    recall.bump(["id-one"], 2000)
    monkeypatch.setattr(os, "write", REAL_WRITE)
    assert [r["seq"] for r in ledger.tail(10)] == [2, 1]
    fresh = RecallCounters(str(tmp_path))
    fresh.refresh()
    assert fresh.get("id-one") == (2, 2000) and fresh.get("id-two") == (1, 1000)


@pytest.fixture
def repo(provider: filemem.Provider, store_path: Path) -> GitRepo:
    provider.add({**UG, "text": "an entry so that HEAD has a tree"}, ctx())
    return GitRepo(str(store_path))


def _blobs(count: int, tag: str) -> tuple[PendingObjects, list[str]]:
    pending = PendingObjects()
    shas = [pending.add(b"blob", f"{tag} object {i}\n".encode() * (i + 1))
            for i in range(count)]
    return pending, shas


def _leftovers(git_dir: str) -> list[str]:
    return [n for _d, _s, names in os.walk(os.path.join(git_dir, "objects"))
            for n in names if n.startswith("tmp_")]


def test_objects_with_short_writes(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    pending, shas = _blobs(3, "short")
    monkeypatch.setattr(os, "write", one_byte)
    repo.write(pending)
    monkeypatch.setattr(os, "write", REAL_WRITE)
    for i, sha in enumerate(shas):
        assert repo.read_raw(sha) == (b"blob", b"short object %d\n" % i * (i + 1))


@pytest.mark.parametrize(("count", "free_calls"), [(3, 0), (3, 1), (80, 0), (80, 1)])
def test_pack_on_a_full_disk(repo: GitRepo, count: int, free_calls: int,
                             full_disk: Callable[..., Disk]) -> None:
    """A write's objects (a few, or a seed's many) are one pack: mid-.pack or mid-.idx,
    a full disk leaves no .pack without its .idx and no temp file."""
    pack_dir = os.path.join(repo.git_dir, "objects", "pack")
    before = sorted(os.listdir(pack_dir)) if os.path.isdir(pack_dir) else []
    pending, _shas = _blobs(count, f"pack {free_calls}")
    full_disk(100, free_calls)
    with pytest.raises(OSError):
        repo.write(pending)
    assert sorted(os.listdir(pack_dir)) == before  # no .pack without .idx, no tmp_*
    assert _leftovers(repo.git_dir) == []


def test_pack_failed_idx_rename_takes_the_pack_back(repo: GitRepo,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    pack_dir = os.path.join(repo.git_dir, "objects", "pack")
    before = sorted(os.listdir(pack_dir)) if os.path.isdir(pack_dir) else []

    def fail_idx(src: str, dst: str) -> None:
        if dst.endswith(".idx"):
            raise OSError(errno.EIO, "rename failed")
        REAL_REPLACE(src, dst)

    monkeypatch.setattr(os, "replace", fail_idx)
    with pytest.raises(OSError):
        repo.write(_blobs(80, "idx rename")[0])
    assert sorted(os.listdir(pack_dir)) == before


def test_pack_with_short_writes(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    pending, shas = _blobs(70, "short pack")
    monkeypatch.setattr(os, "write", one_byte)
    repo.write(pending)
    monkeypatch.setattr(os, "write", REAL_WRITE)
    repo.close()
    assert repo.read_raw(shas[-1]) == (b"blob", b"short pack object 69\n" * 70)


def test_ref_on_a_full_disk_is_unchanged(repo: GitRepo, full_disk: Callable[..., Disk]) -> None:
    ref = os.path.join(repo.git_dir, "refs", "heads", "main")
    with open(ref, "rb") as f:
        before = f.read()
    old = repo.head()
    full_disk(8)
    with pytest.raises(OSError):
        repo.cas_head(old, "f" * 40, "a move that does not fit")
    with open(ref, "rb") as f:
        assert f.read() == before
    assert not os.path.exists(ref + ".lock")


def test_ref_refused_while_locked(repo: GitRepo) -> None:
    ref = os.path.join(repo.git_dir, "refs", "heads", "main")
    with open(ref + ".lock", "wb") as f:
        f.write(b"a git command's")
    old = repo.head()
    with pytest.raises(RefLocked):  # a git command holds the branch: refused, named
        repo.cas_head(old, "f" * 40, "blocked")
    assert repo.head() == old
    with open(ref + ".lock", "rb") as f:
        assert f.read() == b"a git command's"
    os.unlink(ref + ".lock")
    assert repo.cas_head("0" * 40, "f" * 40, "stale") is False  # the CAS itself
    assert repo.head() == old and not os.path.exists(ref + ".lock")


def test_ref_commit_never_deletes_the_next_writers_lock(repo: GitRepo,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the lock file is renamed into place the name is free: a git command may take it
    at once, and that lock is not ours to delete."""
    ref = os.path.join(repo.git_dir, "refs", "heads", "main")

    def replace_then_git_locks(src: str, dst: str) -> None:
        REAL_REPLACE(src, dst)
        if src == ref + ".lock":
            with open(src, "xb") as f:
                f.write(b"git's own")

    monkeypatch.setattr(os, "replace", replace_then_git_locks)
    new = repo.head()
    assert repo.cas_head(repo.head(), new, "same commit, new lock") is True
    with open(ref + ".lock", "rb") as f:
        assert f.read() == b"git's own"


def test_index_on_a_full_disk_is_unchanged(repo: GitRepo,
                                           full_disk: Callable[..., Disk]) -> None:
    path = os.path.join(repo.git_dir, "index")
    with open(path, "rb") as f:
        before = f.read()
    index = GitIndex.load(repo.git_dir)
    index.set("user/extra.md", "e" * 40, None)
    full_disk(30)
    with pytest.raises(OSError):
        index.write()
    with open(path, "rb") as f:
        assert f.read() == before
    assert not os.path.exists(path + ".lock")


def test_index_with_short_writes(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    index = GitIndex.load(repo.git_dir)
    index.set("user/extra.md", "e" * 40, None)
    monkeypatch.setattr(os, "write", one_byte)
    index.write()
    monkeypatch.setattr(os, "write", REAL_WRITE)
    assert GitIndex.load(repo.git_dir).sha("user/extra.md") == "e" * 40
