"""The write-ahead log: one ``fdatasync`` makes a write durable.

A write appends one record to ``.filemem/wal`` (its new objects, the branch move from old
to new commit, and the paths it changes) and fdatasyncs that one file, which already
exists: no folder fsync. The write's pack (while that flush runs), then the branch's ref,
the working tree and git's index are written without fsync, so a write costs about one
disk flush instead of ten.

Why that keeps the promise (a write that returned survives a crash): a killed process
loses nothing the kernel already has, so only a power cut or a kernel crash can lose
unsynced files, and either one restarts the machine. The log's header names the boot it
was started in (``/proc/sys/kernel/random/boot_id``); a log from another boot is replayed
before the store is read (see ``filemem.store.recovery.replay_wal``): its objects are
written again, durably (loose; the records' packs, which may be torn, are deleted), the
branch is moved on along its records, and the working tree is repaired from each record.
In the same boot the log is only ever checkpointed: the file system synced (or the
records' packs and the ref fsynced), then the log emptied, when it grows past
:data:`CHECKPOINT_BYTES` and before ``git repack`` runs.

Where no boot id can be read (not Linux), :func:`boot_id` is None and writes fsync every
file as before (``Wal.enabled`` is False).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import struct
import zlib
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Final, NamedTuple

from filemem.files import atomic, flushing

if TYPE_CHECKING:
    from filemem.files.gitrepo import GitRepo

WAL_NAME: Final = "wal"
MAGIC: Final = b"filemem-wal/1 boot "
HEADER_SIZE: Final = 64  # MAGIC, the boot id (36 characters), padding, "\n"
CHECKPOINT_BYTES: Final = 16 << 20  # ~1,500 writes at 1,000 entries
_RECORD: Final = struct.Struct(">II")  # payload length, crc32 of the payload
_END: Final = struct.Struct(">I4s")  # the record's whole length, END (a torn tail can end
END: Final = b"WEND"                 # in bytes that look like it: the frame's crc decides)
_HEAD_SIZE: Final = struct.Struct(">I")  # a record's JSON head, before its objects
RAW_OBJECTS: Final = b"\x01"  # a record's first byte: its objects follow its head as they are
SETTLED: Final = b"settled"  # the payload of the mark that the record before it is done
BOOT_ID_FILE: Final = "/proc/sys/kernel/random/boot_id"


@cache
def boot_id() -> str | None:
    """This boot's id, or None where the system does not say (then nothing is deferred)."""
    try:
        with open(BOOT_ID_FILE, encoding="ascii") as f:
            value = f.read().strip()
    except OSError:
        return None
    return value if len(value) == 36 else None


def _header(boot: str) -> bytes:
    head = MAGIC + boot.encode("ascii")
    return head + b" " * (HEADER_SIZE - 1 - len(head)) + b"\n"


class WalRecord(NamedTuple):
    """One write: its objects (sha, kind, raw content; none for a batch, whose pack was
    fsynced), the branch move, its paths."""

    old: str | None
    new: str
    objects: list[tuple[str, bytes, bytes]]
    paths: dict[str, tuple[str | None, str | None]]
    adopted: dict[str, str]
    packs: list[str]  # the pack(s) holding the objects

    def encode(self) -> bytes:
        """The record's frame: a JSON head (the move, the paths, each object's sha, kind and
        size), then the objects' bytes as they are. (Base64 inside the JSON cost a write
        0.5-1.5 ms for the ~80 KB tree of a folder of 1,000 entries.)"""
        head = json.dumps({"old": self.old, "new": self.new,
                           "objects": [[sha, kind.decode(), len(raw)]
                                       for sha, kind, raw in self.objects],
                           "paths": {p: list(v) for p, v in self.paths.items()},
                           "adopted": self.adopted, "packs": self.packs},
                          separators=(",", ":")).encode()
        return _frame(b"".join([RAW_OBJECTS, _HEAD_SIZE.pack(len(head)), head,
                                *(raw for _sha, _kind, raw in self.objects)]))

    @classmethod
    def decode(cls, payload: bytes) -> WalRecord:
        """A record :meth:`encode` made, or one of a filemem from before (one JSON document,
        the objects in base64: a log a crash left before an upgrade). ValueError (or
        KeyError, TypeError, IndexError) if it is neither."""
        if payload[:1] == RAW_OBJECTS:
            start = 1 + _HEAD_SIZE.size
            if len(payload) < start:
                raise ValueError("a log record cut short in its head")
            (size,) = _HEAD_SIZE.unpack_from(payload, 1)
            doc = json.loads(payload[start:start + size])
            at = start + size
            objects = []
            for sha, kind, length in doc["objects"]:
                raw = payload[at:at + length]
                if len(raw) != length or length < 0:
                    raise ValueError("a log record's objects are cut short")
                objects.append((sha, kind.encode(), raw))
                at += length
            if at != len(payload):
                raise ValueError("a log record has bytes after its objects")
        else:
            import base64  # only for a log written by a filemem from before

            doc = json.loads(payload)
            objects = [(sha, kind.encode(), base64.b64decode(raw))
                       for sha, kind, raw in doc["objects"]]
        return cls(doc["old"], doc["new"], objects,
                   {p: (v[0], v[1]) for p, v in doc["paths"].items()},
                   dict(doc.get("adopted") or {}),
                   [str(n) for n in doc.get("packs") or []])


class Wal:
    """``.filemem/wal``: appended under the store lock, replayed or checkpointed under it.

    The log as this process last found or left it settled (this boot's header, a whole
    settle mark at its end) is remembered by :func:`atomic.identity` (its file, size and
    times), so that before each write one ``stat`` says it is still so, where reading its
    header and last frame took six system calls: another process's append, a cut, a reset
    (a new file) each change it."""

    __slots__ = ("_known", "_ours", "path")

    def __init__(self, path: str) -> None:
        self.path = path
        self._known: tuple[str | None, tuple[int, int, int, int]] | None = None  # boot, file
        self._ours: tuple[str | None, int] | None = None  # a file whose header is this boot's

    def _remember(self, st: os.stat_result) -> None:
        self._known = (boot_id(), atomic.identity(st))

    def _as_left(self, st: os.stat_result) -> bool:
        return self._known == (boot_id(), atomic.identity(st)) and \
            stat.S_ISREG(st.st_mode)

    @classmethod
    def at(cls, meta_dir: str) -> Wal:
        return cls(os.path.join(meta_dir, WAL_NAME))

    @property
    def enabled(self) -> bool:
        return boot_id() is not None

    def _boot_of(self) -> tuple[str | None, int]:
        """(the boot named in the header, the file's size); (None, 0) if there is none."""
        try:
            fd = atomic.open_nofollow(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None, 0
        try:
            head = os.read(fd, HEADER_SIZE)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if len(head) < HEADER_SIZE or not head.startswith(MAGIC):
            return "", size  # torn or foreign: treated as another boot's
        return head[len(MAGIC):HEADER_SIZE].strip().decode("ascii", "replace"), size

    def unfinished(self) -> bool:
        """:meth:`stale` or :meth:`unsettled`, in one open of the log (asked before every
        write and at every open); one ``stat`` if the log is as this process left it."""
        if self._known is not None:
            try:
                if self._as_left(os.stat(self.path, follow_symlinks=False)):
                    return False
            except FileNotFoundError:
                return False
        try:
            fd = atomic.open_nofollow(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return False
        try:
            st = os.fstat(fd)
            size = st.st_size
            if size <= HEADER_SIZE:
                return False
            boot = boot_id()
            if boot is None or os.pread(fd, HEADER_SIZE, 0) != _header(boot):
                return True  # another boot's records (or a torn header): replay them
            if _last_payload(fd, size) == SETTLED:
                # as stat'ed before it was read: a record another process appends
                # meanwhile makes the log unlike this, so it is read again next time
                self._remember(st)
                return False
            return self._last_unsettled(fd, size) is not None
        finally:
            os.close(fd)

    def stale(self) -> bool:
        """Whether the log holds records from another boot (a crash may have lost files)."""
        boot, size = self._boot_of()
        return size > HEADER_SIZE and boot != boot_id()

    def size(self) -> int:
        return self._boot_of()[1]

    def append(self, record: WalRecord, meanwhile: Callable[[], object] | None = None) -> int:
        """Append ``record`` and fdatasync it: the write is durable once this returns.
        ``meanwhile`` runs while the disk flushes (in a helper thread, :mod:`.flushing`); if
        it or the flush fails, the record is cut off again and the error raised. Returns the
        log's size."""
        boot = boot_id()
        assert boot is not None, "the log is used only where the boot id is known"
        try:
            fd = atomic.open_nofollow(self.path, os.O_RDWR)
        except FileNotFoundError:
            self.reset()
            fd = atomic.open_nofollow(self.path, os.O_RDWR)
        st = os.fstat(fd)
        as_left = self._as_left(st)  # this boot's header, and it ends whole
        self._known = None  # from here until settled, the log ends in this record
        if not as_left and os.pread(fd, HEADER_SIZE, 0) != _header(boot):  # another
            os.close(fd)                                                  # boot's, or torn
            self.reset()
            fd = atomic.open_nofollow(self.path, os.O_RDWR)
            st = os.fstat(fd)
        self._ours = (boot, st.st_ino)
        try:
            end = st.st_size
            if not as_left and not _ends_whole(fd, end):  # a killed append's tail: records
                end = self._parse()[1]                     # go after whole ones
                os.ftruncate(fd, end)
            os.lseek(fd, end, os.SEEK_SET)
            data = record.encode()
            try:
                atomic.write_all(fd, data)
                flushing.flush_while(fd, meanwhile)
            except BaseException:
                with contextlib.suppress(OSError):  # a full disk: no torn record left
                    os.ftruncate(fd, end)
                raise
            return end + len(data)
        finally:
            os.close(fd)

    def cut_torn_tail(self) -> None:
        """Cut a killed append's torn tail off (hold the store lock): a mark or record
        appended after it would be lost to a replay, which stops at the first torn frame."""
        try:
            fd = atomic.open_nofollow(self.path, os.O_RDWR)
        except FileNotFoundError:
            return
        try:
            if not _ends_whole(fd, os.fstat(fd).st_size):
                os.ftruncate(fd, self._parse()[1])
        finally:
            os.close(fd)

    def settle(self) -> None:
        """Mark the last record done: its write's working tree and index are in step, or
        its branch never moved. Not fsynced: a restart replays every record anyway. The
        record is the write's journal until then (:meth:`unsettled`)."""
        fd = atomic.open_nofollow(self.path, os.O_WRONLY | os.O_APPEND)
        try:
            atomic.write_all(fd, _frame(SETTLED))
            st = os.fstat(fd)
            if (boot_id(), st.st_ino) == self._ours:  # this boot's header, as append found
                self._remember(st)
        finally:
            os.close(fd)

    def unsettled(self) -> WalRecord | None:
        """The last record if no :meth:`settle` mark follows it: a write killed (or whose
        working tree could not be updated) after it was logged, for recovery to finish or
        undo as from a journal. Reads only the log's tail."""
        try:
            fd = atomic.open_nofollow(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return None
        try:
            size = os.fstat(fd).st_size
            return self._last_unsettled(fd, size) if size > HEADER_SIZE else None
        finally:
            os.close(fd)

    def _last_unsettled(self, fd: int, size: int) -> WalRecord | None:
        payload = _last_payload(fd, size)
        if payload is None:  # a cut append: the write it began never moved
            records, _end, settled = self._parse()
            return records[-1] if records and not settled else None
        if payload == SETTLED:
            return None
        try:
            return WalRecord.decode(payload)
        except (ValueError, KeyError, TypeError, IndexError):
            return None

    def records(self) -> list[WalRecord]:
        """The whole records, in order; a torn or damaged tail (a cut append) is dropped."""
        return self._parse()[0]

    def _parse(self) -> tuple[list[WalRecord], int, bool]:
        """(the whole records, where the last one ends, whether a settle mark follows it)."""
        try:
            data = atomic.read_nofollow(self.path)
        except FileNotFoundError:
            return [], 0, True
        out, at, settled = [], HEADER_SIZE, True
        while at + _RECORD.size <= len(data):
            length, crc = _RECORD.unpack_from(data, at)
            start = at + _RECORD.size
            payload = data[start:start + length]
            if len(payload) != length or zlib.crc32(payload) != crc or \
                    data[start + length:start + length + _END.size] != _END.pack(
                        _RECORD.size + length + _END.size, END):
                break
            if payload == SETTLED:
                settled = True
            else:
                try:
                    out.append(WalRecord.decode(payload))
                except (ValueError, KeyError, TypeError, IndexError):
                    break
                settled = False
            at = start + length + _END.size
        return out, min(at, len(data)), settled

    def reset(self) -> None:
        """An empty log for this boot, durably (only once what it covered is durable)."""
        self._known = self._ours = None
        atomic.atomic_write(self.path, _header(boot_id() or "none"), durable=True)

    def checkpoint(self, git: GitRepo) -> None:
        """Make what the records cover durable, then empty the log: one ``syncfs`` of the
        file system holding ``.git`` (the kernel writes back every dirty file at once),
        else an fsync of each of their packs and of the ref (a pack merged meanwhile is
        skipped: merged packs are written fsynced)."""
        if self.size() <= HEADER_SIZE:
            return
        if not (syncfs(git.git_dir) and syncfs(os.path.dirname(self.path))):
            packs = os.path.join(git.git_dir, "objects", "pack")
            sync_files(os.path.join(packs, name + ext) for r in self.records()
                       for name in r.packs for ext in (".pack", ".idx"))
            atomic.fsync_dir(packs)
            ref_path = git.file_of(git.head_ref())
            sync_files([ref_path])
            atomic.fsync_dir(os.path.dirname(ref_path))
        self.reset()


def _last_payload(fd: int, size: int) -> bytes | None:
    """The payload of the log's last frame, None unless that frame is whole: its END mark,
    its length at both ends and its crc agree."""
    if size < HEADER_SIZE + _RECORD.size + _END.size:
        return None
    whole, mark = _END.unpack(os.pread(fd, _END.size, size - _END.size))
    if mark != END or whole < _RECORD.size + _END.size or size - whole < HEADER_SIZE:
        return None
    frame = os.pread(fd, whole, size - whole)
    length, crc = _RECORD.unpack_from(frame)
    payload = frame[_RECORD.size:_RECORD.size + length]
    if length != whole - _RECORD.size - _END.size or zlib.crc32(payload) != crc:
        return None
    return payload


def _frame(payload: bytes) -> bytes:
    whole = _RECORD.size + len(payload) + _END.size
    return _RECORD.pack(len(payload), zlib.crc32(payload)) + payload + _END.pack(whole, END)


def _ends_whole(fd: int, size: int) -> bool:
    """Whether the log ends with a whole record (or is just its header). A record's objects
    are raw bytes, so a torn one can end in what looks like an END mark: the crc of the
    frame it would close is checked too (the last frame is most often a settle mark)."""
    return size == HEADER_SIZE or _last_payload(fd, size) is not None


def syncfs(path: str) -> bool:
    """syncfs(2) on the file system holding ``path``; False where there is none."""
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).syncfs
    except (OSError, AttributeError):
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        return bool(call(fd) == 0)
    finally:
        os.close(fd)


def sync_files(paths: Iterable[str]) -> None:
    """fsync each file that exists (the renames that put them there are committed by the
    first fsync on a journaling file system, as for the loose objects of a durable write)."""
    for path in paths:
        try:
            fd = os.open(path, os.O_RDONLY | atomic.NOFOLLOW)
        except (FileNotFoundError, NotADirectoryError):
            continue
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


OBJ_TMP_PREFIX: Final = "tmp_obj_"  # what GitRepo.clear_stale_locks takes for ours


def rewrite_objects(git_dir: str, objects: Mapping[str, tuple[bytes, bytes]]) -> None:
    """Write loose objects again, durably, whatever is there now (a restart may have left
    a loose object empty or torn: the same name, none of its content)."""
    files = []
    for sha, (kind, raw) in sorted(objects.items()):
        folder = os.path.join(git_dir, "objects", sha[:2])
        os.makedirs(folder, mode=0o700, exist_ok=True)
        files.append((os.path.join(folder, sha[2:]),
                      zlib.compress(b"%s %d\0%s" % (kind, len(raw), raw), 1)))
    atomic.replace_many(files, durable=True, mode=0o400, prefix=OBJ_TMP_PREFIX)
