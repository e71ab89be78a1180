"""The write-ahead log: one fdatasync per write, and nothing lost across a restart.

A power cut is simulated the way it can hurt: the files written without fsync (each
write's pack, the branch's ref, the journal) lose their content or their last change, the
machine's boot id changes, and the store is opened again. Everything a write that
returned made must be there, `git fsck` and `git status` clean. A kill during the replay
and a torn tail of the log are covered too, and so is a system without a boot id (every
file fsynced, no log).
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.files import wal
from tests.conftest import BIG, assert_clean_repo, ctx, git, write_in_flight

UG = {"track": "user", "scope": "user-global"}
WS = {"track": "agent", "scope": "workspace"}


@pytest.fixture(autouse=True)
def boot(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Any]:
    """Set this "machine's" boot id (a file standing in for /proc's); the returned
    function restarts it."""
    cached = wal.boot_id
    monkeypatch.setattr(wal, "BOOT_ID_FILE", str(tmp_path / "boot_id"))

    def set_boot(value: str) -> None:
        (tmp_path / "boot_id").write_text(value + "\n")
        cached.cache_clear()

    set_boot("a" * 36)
    yield set_boot
    cached.cache_clear()


def open_store(path: Path) -> filemem.Provider:
    return filemem.open_store(path, create=True, write_policy="auto", budgets=BIG)


def writes(p: filemem.Provider) -> list[str]:
    """An add, a replace, a remove, a seed: the texts that must survive."""
    c = ctx()
    p.add({**UG, "text": "kept one"}, c)
    p.add({**UG, "text": "replaced soon"}, c)
    p.add({**WS, "text": "removed soon"}, c)
    p.replace({**UG, "match": "replaced soon", "text": "replaced now"}, c)
    p.remove({**WS, "match": "removed soon"}, c)
    p.seed([{**WS, "text": f"seeded {i}"} for i in range(3)], c)
    return ["kept one", "replaced now", "seeded 0", "seeded 1", "seeded 2"]


def texts(p: filemem.Provider) -> list[str]:
    return sorted(e["text"] for e in p.list_entries())


def ref_path(store: Path) -> Path:
    return store / ".git" / "refs" / "heads" / "main"


def logged_objects(store: Path) -> list[Path]:
    """The files holding the logged writes' objects: each write's pack and its index."""
    records = wal.Wal.at(str(store / ".filemem")).records()
    assert all(r.packs for r in records)
    return [store / ".git" / "objects" / "pack" / f"{name}{ext}"
            for r in records for name in r.packs for ext in (".pack", ".idx")]


def test_a_write_fsyncs_one_file_once(store_path: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:
    p = open_store(store_path)
    p.add({**UG, "text": "first"}, ctx())  # the log's header is made on the first write
    calls: list[str] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    monkeypatch.setattr(os, "fdatasync",
                        lambda fd: (calls.append("fdatasync"), real_fdatasync(fd))[1])
    p.add({**UG, "text": "second"}, ctx())
    p.replace({**UG, "match": "second", "text": "third"}, ctx())
    p.remove({**UG, "match": "third"}, ctx())
    assert calls == ["fdatasync"] * 3
    p.close()
    assert_clean_repo(store_path)


def test_without_a_boot_id_every_file_is_fsynced_and_nothing_is_logged(
        store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(wal, "boot_id", lambda: None)
    p = open_store(store_path)
    calls: list[int] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append(fd), real_fsync(fd))[1])
    p.add({**UG, "text": "durable the old way"}, ctx())
    assert len(calls) >= 4  # objects, the journal and its folder, the ref and its folder
    assert not (store_path / ".filemem" / "wal").exists()
    p.close()


@pytest.mark.parametrize("cut", ["objects-emptied", "objects-gone", "ref-reverted",
                                 "ref-torn", "everything"])
def test_a_power_cut_loses_nothing_a_write_returned(store_path: Path, boot: Any,
                                                    cut: str) -> None:
    p = open_store(store_path)
    before = git(store_path, "rev-parse", "HEAD").strip()
    want = writes(p)
    after = git(store_path, "rev-parse", "HEAD").strip()
    p.close()
    objects = logged_objects(store_path)
    assert objects
    if cut in ("objects-emptied", "everything"):
        for path in objects:
            if path.exists():
                os.chmod(path, 0o600)
                path.write_bytes(b"")
    if cut == "objects-gone":
        for path in objects:
            path.unlink(missing_ok=True)
    if cut in ("ref-reverted", "everything"):
        ref_path(store_path).write_text(before + "\n")
    if cut == "ref-torn":
        ref_path(store_path).write_bytes(b"")
    if cut == "everything":  # the journal of the last write, half there
        (store_path / ".filemem" / "journal.json").write_bytes(b'{"old": "')
    boot("b" * 36)
    p = open_store(store_path)
    assert texts(p) == want
    assert git(store_path, "rev-parse", "HEAD").strip() == after
    assert not write_in_flight(store_path)
    assert wal.Wal.at(str(store_path / ".filemem")).records() == []
    p.add({**UG, "text": "after the restart"}, ctx())
    p.close()
    assert_clean_repo(store_path)


def test_a_restart_with_the_working_tree_behind_is_repaired(store_path: Path,
                                                             boot: Any) -> None:
    """The files of the last write never reached the disk: they come back from HEAD."""
    p = open_store(store_path)
    p.add({**UG, "text": "old text"}, ctx())
    entry = p.list_entries()[0]
    path = next(store_path.rglob(f"{entry['id']}.md"))
    old = path.read_bytes()
    p.replace({**UG, "match": "old text", "text": "new text"}, ctx())
    p.close()
    path.write_bytes(old)  # the rename of the new version was lost
    boot("b" * 36)
    p = open_store(store_path)
    assert texts(p) == ["new text"]
    p.close()
    assert_clean_repo(store_path)


def test_a_log_from_another_boot_is_unfinished(store_path: Path, boot: Any) -> None:
    p = open_store(store_path)
    p.add({**UG, "text": "one"}, ctx())
    p.close()
    log = wal.Wal.at(str(store_path / ".filemem"))
    assert not log.unfinished() and not log.stale()
    boot("c" * 36)
    assert log.unfinished() and log.stale()


def test_the_same_boot_never_replays(store_path: Path) -> None:
    p = open_store(store_path)
    writes(p)
    p.close()
    log = wal.Wal.at(str(store_path / ".filemem"))
    size = log.size()
    assert size > wal.HEADER_SIZE and not log.stale()
    with open_store(store_path) as p:
        p.query({"text": "kept"})
    assert log.size() == size


def test_a_torn_tail_of_the_log_is_dropped(store_path: Path, boot: Any) -> None:
    p = open_store(store_path)
    want = writes(p)
    p.close()
    with open(store_path / ".filemem" / "wal", "ab") as f:
        f.write(b"\x00\x00\x10\x00garbage")  # an append cut short by the power cut
    boot("b" * 36)
    with open_store(store_path) as p:
        assert texts(p) == want
    assert_clean_repo(store_path)


REPLAY_KILLED = """
import os, sys
import filemem, filemem.files.atomic, filemem.files.wal
filemem.files.wal.BOOT_ID_FILE = sys.argv[2]
real_commit = filemem.files.atomic.LockFile.commit
def die(self):
    if self.path.endswith(os.path.join("refs", "heads", "main")):
        os._exit(9)  # objects rewritten, the branch not yet moved on
    return real_commit(self)
filemem.files.atomic.LockFile.commit = die
filemem.open_store(sys.argv[1], write_policy="auto")
"""


def test_a_replay_killed_midway_is_done_again(store_path: Path, boot: Any) -> None:
    p = open_store(store_path)
    before = git(store_path, "rev-parse", "HEAD").strip()
    want = writes(p)
    p.close()
    for path in logged_objects(store_path):
        os.chmod(path, 0o600)
        path.write_bytes(b"")
    ref_path(store_path).write_text(before + "\n")
    boot("b" * 36)
    out = subprocess.run([sys.executable, "-c", REPLAY_KILLED, str(store_path),
                          wal.BOOT_ID_FILE], capture_output=True, text=True)
    assert out.returncode == 9, out.stderr
    assert wal.Wal.at(str(store_path / ".filemem")).stale()  # still to do
    with open_store(store_path) as p:
        assert texts(p) == want
    assert_clean_repo(store_path)


def test_a_big_log_is_checkpointed(store_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   boot: Any) -> None:
    monkeypatch.setattr("filemem.store.transaction.CHECKPOINT_BYTES", 1)
    p = open_store(store_path)
    p.add({**UG, "text": "checkpointed"}, ctx())
    log = wal.Wal.at(str(store_path / ".filemem"))
    assert log.size() == wal.HEADER_SIZE  # emptied once its objects and ref were fsynced
    p.close()
    boot("b" * 36)
    with open_store(store_path) as p:
        assert texts(p) == ["checkpointed"]


# a torn record whose last bytes (raw object bytes can be anything) read as an END mark,
# closing a frame of the right length: only the frame's crc tells it is not whole
FAKE_END = wal._RECORD.pack(32, 12345) + wal.RAW_OBJECTS + b"x" * 31 + wal._END.pack(48, wal.END)


@pytest.mark.parametrize("tail", [b"\x00\x00\x10\x00{\"old\": \"ab", b"\x00\x00", FAKE_END],
                         ids=["json", "short", "fake-end-mark"])
def test_a_write_after_a_killed_append_is_replayed(store_path: Path, boot: Any,
                                                   tail: bytes) -> None:
    """A process killed mid-append leaves a torn record in the same boot: the next write's
    record goes after the whole ones, so a restart still replays it."""
    p = open_store(store_path)
    before = git(store_path, "rev-parse", "HEAD").strip()
    p.add({**UG, "text": "before the kill"}, ctx())
    p.close()
    with open(store_path / ".filemem" / "wal", "ab") as f:
        f.write(tail)
    with open_store(store_path) as p:
        p.add({**UG, "text": "after the kill"}, ctx())
    assert len(wal.Wal.at(str(store_path / ".filemem")).records()) == 2
    ref_path(store_path).write_text(before + "\n")  # both ref moves lost
    boot("b" * 36)
    with open_store(store_path) as p:
        assert texts(p) == ["after the kill", "before the kill"]
    assert_clean_repo(store_path)


def test_a_failed_append_leaves_no_torn_record(store_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    p = open_store(store_path)
    p.add({**UG, "text": "one"}, ctx())
    log = wal.Wal.at(str(store_path / ".filemem"))
    size = log.size()

    def disk_full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    real = os.fdatasync
    monkeypatch.setattr(os, "fdatasync", disk_full)
    with pytest.raises(filemem.FilememError):
        p.add({**UG, "text": "two"}, ctx())
    monkeypatch.setattr(os, "fdatasync", real)
    assert log.size() == size
    assert texts(p) == ["one"]
    p.close()


def test_a_pack_that_fails_while_the_record_flushes_leaves_no_record(
        store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The pack is written while the log's record is flushed: if it fails (a full disk),
    the record is cut off again once the flush is over and nothing moved."""
    from filemem.files import packwrite

    p = open_store(store_path)
    p.add({**UG, "text": "one"}, ctx())
    log = wal.Wal.at(str(store_path / ".filemem"))
    size, head = log.size(), git(store_path, "rev-parse", "HEAD")

    def disk_full(*args: object, **kwargs: object) -> str:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(packwrite, "put", disk_full)
    with pytest.raises(filemem.FilememError):
        p.add({**UG, "text": "two"}, ctx())
    monkeypatch.undo()
    assert log.size() == size and log.unsettled() is None
    assert git(store_path, "rev-parse", "HEAD") == head
    assert texts(p) == ["one"]
    p.add({**UG, "text": "three"}, ctx())
    assert texts(p) == ["one", "three"]
    p.close()
    assert_clean_repo(store_path)


def test_the_log_record_is_the_journal_until_settled(store_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A logged write writes no journal file: its record stands for one. A write whose
    working tree could not be updated leaves the record unsettled and the next write
    repairs the tree from it; a write whose branch moved under it settles its record."""
    from filemem.files import worktree
    from filemem.store import transaction

    p = open_store(store_path)
    p.add({**UG, "text": "one"}, ctx())
    log = wal.Wal.at(str(store_path / ".filemem"))
    assert log.unsettled() is None and not write_in_flight(store_path)
    real_write = worktree.write

    def broken_disk(*args: Any, **kwargs: Any) -> os.stat_result:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(worktree, "write", broken_disk)
    p.add({**UG, "text": "two"}, ctx())  # the commit stands; the working tree is behind
    monkeypatch.setattr(worktree, "write", real_write)
    assert log.unsettled() is not None and write_in_flight(store_path) and log.unfinished()
    assert not (store_path / ".filemem" / "journal.json").exists()
    assert git(store_path, "status", "--porcelain") != ""
    p.add({**UG, "text": "three"}, ctx())
    assert log.unsettled() is None and not log.unfinished()
    assert texts(p) == ["one", "three", "two"]
    assert_clean_repo(store_path)

    monkeypatch.setattr(transaction.Transaction, "_swap", lambda self, *a, **k: False)
    with pytest.raises(filemem.FilememError):
        p.add({**UG, "text": "never"}, ctx())  # the branch "moved" at every attempt
    assert log.unsettled() is None and not write_in_flight(store_path)
    p.close()
    assert_clean_repo(store_path)


def test_a_batchs_pack_is_fsynced_and_its_record_holds_only_the_move(
        store_path: Path, boot: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A seed of many entries fsyncs its pack (and the folder) instead of logging every
    object; a power cut that loses the ref's move is still repaired from the record."""
    p = open_store(store_path)
    p.add({**UG, "text": "before"}, ctx())
    before = git(store_path, "rev-parse", "HEAD").strip()
    calls: list[str] = []
    real_fsync = os.fsync
    monkeypatch.setattr(os, "fsync", lambda fd: (calls.append("fsync"), real_fsync(fd))[1])
    p.seed([{**WS, "text": f"batch {i}"} for i in range(80)], ctx())
    monkeypatch.setattr(os, "fsync", real_fsync)
    assert len(calls) >= 3  # the .pack, the .idx, their folder
    last = wal.Wal.at(str(store_path / ".filemem")).records()[-1]
    assert last.objects == [] and last.packs == [] and last.old == before
    p.close()
    ref_path(store_path).write_text(before + "\n")  # the ref's move lost
    boot("b" * 36)
    with open_store(store_path) as p:
        assert len(texts(p)) == 81
    assert_clean_repo(store_path)


def test_a_full_disk_at_the_settle_mark_leaves_the_write_standing(
        store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The write happened before its mark: a disk that fills up just then is no error to
    the caller; the record stays unsettled until the next write settles it."""
    p = open_store(store_path)
    p.add({**UG, "text": "one"}, ctx())
    real = wal.Wal.settle

    def full(self: wal.Wal) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(wal.Wal, "settle", full)
    p.add({**UG, "text": "two"}, ctx())  # no error: the commit stands
    monkeypatch.setattr(wal.Wal, "settle", real)
    log = wal.Wal.at(str(store_path / ".filemem"))
    assert log.unsettled() is not None
    assert texts(p) == ["one", "two"]
    assert git(store_path, "status", "--porcelain") == ""
    p.add({**UG, "text": "three"}, ctx())
    assert log.unsettled() is None and texts(p) == ["one", "three", "two"]
    p.close()
    assert_clean_repo(store_path)


def test_a_record_carries_any_bytes_and_a_record_of_the_old_form_still_reads() -> None:
    objects = [("a" * 40, b"blob", b"text with WEND\x00\x00\x00\x10WEND and {braces}"),
               ("b" * 40, b"tree", bytes(range(256)) * 300), ("c" * 40, b"commit", b"")]
    record = wal.WalRecord("0" * 40, "1" * 40, objects, {"user/x.md": (None, "a" * 40)},
                           {"user/y.md": "d" * 40}, ["pack-" + "e" * 40])
    frame = record.encode()
    length, _crc = wal._RECORD.unpack_from(frame)
    payload = frame[wal._RECORD.size:wal._RECORD.size + length]
    assert payload[:1] == wal.RAW_OBJECTS
    assert wal.WalRecord.decode(payload) == record
    for cut in (1, 3, len(payload) // 2, len(payload) - 1):  # a damaged record is refused
        with pytest.raises((ValueError, KeyError, TypeError, IndexError)):
            wal.WalRecord.decode(payload[:cut])
    with pytest.raises(ValueError):
        wal.WalRecord.decode(payload + b"x")
    # a log left by a crash of a filemem from before this form: JSON, objects in base64
    old = json.dumps({"old": record.old, "new": record.new,
                      "objects": [[sha, kind.decode(), base64.b64encode(raw).decode()]
                                  for sha, kind, raw in objects],
                      "paths": {"user/x.md": [None, "a" * 40]},
                      "adopted": {"user/y.md": "d" * 40}, "packs": record.packs}).encode()
    assert wal.WalRecord.decode(old) == record


def test_the_log_as_this_process_left_it_is_checked_with_one_stat(
        store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before each write the log is asked whether a write is unfinished; as this process
    left it (settled), one stat answers, and the next append neither reads its header nor
    its last frame again."""
    p = open_store(store_path)
    p.add({**UG, "text": "one"}, ctx())
    log = p.store.wal

    def no_reading(*args: Any) -> Any:
        raise AssertionError("the log was read again")

    monkeypatch.setattr(wal.atomic, "open_nofollow", no_reading)
    assert not log.unfinished()
    monkeypatch.undo()
    monkeypatch.setattr(wal, "_ends_whole", no_reading)
    monkeypatch.setattr(wal, "_header", no_reading)
    p.add({**UG, "text": "two"}, ctx())
    assert texts(p) == ["one", "two"] and log.unsettled() is None
    p.close()
    assert_clean_repo(store_path)


def _record(n: int) -> wal.WalRecord:
    return wal.WalRecord(f"{n:040d}", f"{n + 1:040d}", [], {"user/x.md": (None, "a" * 40)},
                         {}, [])


def test_what_another_process_does_to_the_log_is_seen(store_path: Path) -> None:
    """An append, a settle mark, a torn tail and a reset by another process each change the
    log from what this one left: it is read again, and this one's next record goes after
    the whole ones."""
    p = open_store(store_path)
    p.add({**UG, "text": "one"}, ctx())
    mine, other = p.store.wal, wal.Wal(p.store.wal.path)
    assert not mine.unfinished()
    other.append(_record(1))  # another process's write, killed before its settle mark
    assert mine.unfinished() and mine.unsettled() == _record(1)
    other.settle()
    assert not mine.unfinished()
    with open(mine.path, "ab") as f:
        f.write(b"\x00\x00\x10\x00torn")  # a third process killed mid-append
    assert not mine.unfinished()
    mine.append(_record(2))
    mine.settle()
    assert [r.old for r in mine.records()][-2:] == [_record(1).old, _record(2).old]
    other.reset()  # a checkpoint: a new, empty log
    assert not mine.unfinished() and mine.records() == []
    mine.append(_record(3))
    assert mine.unfinished() and mine.records() == [_record(3)]
    mine.settle()
    p.close()


def test_a_torn_append_after_an_unsettled_record_is_cut_before_it_is_settled(
        store_path: Path, boot: Any) -> None:
    """A write killed after its record, then the next one killed mid-append: the repair
    settles the first record, and must not put its mark (and every later record) after
    the torn bytes, where a replay, which stops at them, would never read them."""
    p = open_store(store_path)
    p.add({**UG, "text": "one"}, ctx())
    p.close()
    log = wal.Wal.at(str(store_path / ".filemem"))
    log.append(_record(1))  # killed after its record: never settled
    with open(log.path, "ab") as f:
        f.write(b"\x00\x00\x10\x00torn")  # the next write killed mid-append
    with open_store(store_path) as p:
        p.add({**UG, "text": "after both kills"}, ctx())
    records = wal.Wal.at(str(store_path / ".filemem")).records()
    assert records[-2] == _record(1)
    assert any(b"after both kills" in raw for _sha, kind, raw in records[-1].objects
               if kind == b"blob")
    assert not wal.Wal.at(str(store_path / ".filemem")).unfinished()


def test_a_record_appended_while_the_log_is_read_is_not_taken_for_settled(
        store_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process may append while this one reads the log's tail without the store
    lock (on open): what is remembered as settled is the log as it was before the read,
    so the next look sees the new record, unsettled."""
    p = open_store(store_path)
    p.add({**UG, "text": "one"}, ctx())
    p.close()
    mine, other = wal.Wal.at(str(store_path / ".filemem")), wal.Wal.at(str(store_path / ".filemem"))
    real = wal._last_payload
    raced: list[bool] = []

    def racing(fd: int, size: int) -> bytes | None:
        payload = real(fd, size)
        if not raced:
            raced.append(True)
            other.append(_record(7))  # killed before its settle mark
        return payload

    monkeypatch.setattr(wal, "_last_payload", racing)
    assert not mine.unfinished()  # what it read ended settled
    monkeypatch.undo()
    assert raced == [True]
    assert mine.unfinished() and mine.unsettled() == _record(7)
