"""git's index file (``.git/index``), kept in step with HEAD so ``git status`` stays clean.

dulwich rewrites the whole index from objects on every update (+20 ms at 1,000 entries,
+300 ms at 10,000). Here each entry's serialized bytes are kept, only changed paths are
re-serialized, and the file is the sorted entries plus a SHA-1 trailer, written under git's
own ``index.lock`` protocol so a concurrent ``git add`` is never clobbered. Extensions are
dropped on write (git rebuilds its caches). Versions 2-4 are read; filemem writes version 2
(3 when an entry needs extended flags), which git reads as well. An index with a required
extension (split index, sparse index) is rebuilt from HEAD and the working tree: files a
person had staged stay on disk but become unstaged (a warning says so).
"""

from __future__ import annotations

import bisect
import hashlib
import os
import struct
import time
from collections.abc import Callable, Iterable
from typing import Final

from filemem.files import atomic, helper

_HEADER = struct.Struct(">4sLL")
_STAT = struct.Struct(">LLLLLLLLLL")
_FIXED = struct.Struct(">LLLLLLLLLL20sH")  # the stat, the blob's sha, the flags
_FLAGS = struct.Struct(">H")
_EXTENDED = 0x4000
_NAME_MASK = 0xFFF
_SYMLINK_MODE = 0o120000
_NO_HASH = bytes(20)  # the checksum of an index written under index.skipHash


class IndexUnsupported(Exception):
    """An index this module does not rewrite in place; rebuild it instead."""


def hash_blob(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0%s" % (len(data), data)).hexdigest()


def _entry_bytes(path: bytes, sha: str, st: os.stat_result | None, mode: int) -> bytes:
    # the name's length, no stage, no extended flags: a new entry is never extended
    flags = len(path) if len(path) < _NAME_MASK else _NAME_MASK
    if st is None:  # unknown stat: git re-checks the file and reports it if it differs
        return _FIXED.pack(0, 0, 0, 0, 0, 0, mode, 0, 0, 0, bytes.fromhex(sha), flags) + path
    # seconds and nanoseconds from the one integer, as git takes tv_sec and tv_nsec (the
    # float st_mtime can round up to the next second)
    c_s, c_ns = divmod(st.st_ctime_ns, 1_000_000_000)
    m_s, m_ns = divmod(st.st_mtime_ns, 1_000_000_000)
    return _FIXED.pack(c_s & 0xFFFFFFFF, c_ns, m_s & 0xFFFFFFFF, m_ns, st.st_dev & 0xFFFFFFFF,
                       st.st_ino & 0xFFFFFFFF, mode, st.st_uid & 0xFFFFFFFF,
                       st.st_gid & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF, bytes.fromhex(sha),
                       flags) + path


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """git's offset varint (index v4 path compression): (value, next position)."""
    byte = data[pos]
    pos += 1
    value = byte & 0x7F
    while byte & 0x80:
        byte = data[pos]
        pos += 1
        value = ((value + 1) << 7) | (byte & 0x7F)
    return value, pos


def _padded(raw: bytes) -> bytes:
    """An entry as stored: 1 to 8 NUL bytes up to a multiple of 8 (versions 2 and 3)."""
    return raw + b"\0" * (8 - len(raw) % 8)


def _is_extended(raw: bytes) -> bool:
    return bool(struct.unpack_from(">H", raw, 60)[0] & _EXTENDED)


_BULK: Final = 64  # entries set at once from which set_many sorts once
_HASH_BESIDE: Final = 32 << 10  # bytes of index from which the helper thread hashes it


class GitIndex:
    """The entries of ``.git/index`` keyed by (path, stage), as serialized (padded) bytes,
    with the keys kept sorted, so writing is one join and one SHA-1 (3 ms at 10,000
    entries) rather than re-serializing and sorting every entry."""

    def __init__(self, git_dir: str) -> None:
        self.git_dir = git_dir
        self.path = os.path.join(git_dir, "index")
        self.entries: dict[tuple[bytes, int], bytes] = {}
        self._keys: list[tuple[bytes, int]] = []  # sorted
        self._values: list[bytes] = []  # the entries in the order of _keys
        self._extended = 0  # entries with extended flags (they need index version 3)
        self._staged = 0  # entries at stages 1-3 (a conflict git left)

    def _put(self, key: tuple[bytes, int], raw: bytes) -> None:
        padded = _padded(raw)
        old = self.entries.get(key)
        at = bisect.bisect_left(self._keys, key)
        if old is None:
            self._keys.insert(at, key)
            self._values.insert(at, padded)
        else:
            self._values[at] = padded
            if _is_extended(old):
                self._extended -= 1
        self.entries[key] = padded
        if _is_extended(raw):
            self._extended += 1
        if key[1] and old is None:
            self._staged += 1

    def _drop(self, key: tuple[bytes, int]) -> None:
        old = self.entries.pop(key, None)
        if old is None:
            return
        at = bisect.bisect_left(self._keys, key)
        del self._keys[at]
        del self._values[at]
        if _is_extended(old):
            self._extended -= 1
        if key[1]:
            self._staged -= 1

    @classmethod
    def load(cls, git_dir: str) -> GitIndex:
        """Parse the index; raises IndexUnsupported for one to rebuild (or a missing one)."""
        index = cls(git_dir)
        try:
            with open(index.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            raise IndexUnsupported("no index") from None
        if len(data) < 32:
            raise IndexUnsupported("index too short")
        sig, version, count = _HEADER.unpack_from(data)
        if sig != b"DIRC" or version not in (2, 3, 4):
            raise IndexUnsupported(f"index version {version}")
        # an all-zero checksum is what git writes under index.skipHash (which
        # feature.manyFiles turns on); git's own readers accept it
        if data[-20:] != _NO_HASH and hashlib.sha1(data[:-20]).digest() != data[-20:]:
            raise IndexUnsupported("index checksum mismatch")
        taken = None if version == 4 else index._take_in_order(data, count)
        pos = 12 if taken is None else taken
        previous = b""
        for _ in range(count if taken is None else 0):
            flags = struct.unpack_from(">H", data, pos + 60)[0]
            name_start = pos + 62 + (2 if flags & _EXTENDED else 0)
            fixed = data[pos:name_start]
            if version == 4:  # the name is the previous one minus N bytes, plus a suffix
                strip, suffix_start = _varint(data, name_start)
                end = data.index(b"\0", suffix_start)
                name = previous[:len(previous) - strip] + data[suffix_start:end]
                pos = end + 1
            else:
                name_len = flags & _NAME_MASK
                if name_len == _NAME_MASK:
                    name_len = data.index(b"\0", name_start) - name_start
                end = name_start + name_len
                name = data[name_start:end]
                pos += (end - pos + 8) & ~7
            previous = name
            stage = (flags >> 12) & 3
            index._put((name, stage), fixed + name)
        while pos < len(data) - 20:
            sig = data[pos:pos + 4]
            size = struct.unpack_from(">L", data, pos + 4)[0]
            if not sig[:1].isupper():  # a required extension (split index, sparse): keep out
                raise IndexUnsupported(f"index extension {sig!r}")
            pos += 8 + size
        return index

    def _take_in_order(self, data: bytes, count: int) -> int | None:
        """Versions 2 and 3 as git writes them (sorted, padded with NULs): each entry's
        bytes are taken as they are stored, in file order, without a sorted insertion
        each; the position after them. None (nothing taken) for anything else, which the
        general reader then reads (and reports)."""
        keys: list[tuple[bytes, int]] = []
        values: list[bytes] = []
        flags_at = _FLAGS.unpack_from
        pos, end_of_entries, extended, staged = 12, len(data) - 20, 0, 0
        try:
            for _ in range(count):
                flags = flags_at(data, pos + 60)[0]
                name_start = pos + 62
                if flags & _EXTENDED:
                    name_start += 2
                    extended += 1
                name_len = flags & _NAME_MASK
                if name_len == _NAME_MASK:
                    name_len = data.index(b"\0", name_start) - name_start
                end = name_start + name_len
                after = pos + ((end - pos + 8) & ~7)
                key = (data[name_start:end], (flags >> 12) & 3)
                if after > end_of_entries or data.count(b"\0", end, after) != after - end \
                        or (keys and key <= keys[-1]):
                    return None
                staged += key[1] != 0
                keys.append(key)
                values.append(data[pos:after])
                pos = after
        except (struct.error, ValueError):
            return None
        self._keys, self._values = keys, values
        self.entries = dict(zip(keys, values, strict=True))
        self._extended, self._staged = extended, staged
        return pos

    def sha(self, path: str) -> str | None:
        raw = self.entries.get((path.encode("utf-8", "surrogateescape"), 0))
        return raw[40:60].hex() if raw else None

    def stat_matches(self, path: str, st: os.stat_result) -> bool:
        """Whether the recorded stat says the file is unchanged (git's own fast check)."""
        raw = self.entries.get((path.encode("utf-8", "surrogateescape"), 0))
        if raw is None:
            return False
        _c_s, _c_ns, m_s, m_ns, _dev, ino, _mode, _uid, _gid, size = _STAT.unpack_from(raw)
        mtime_s, mtime_ns = divmod(st.st_mtime_ns, 1_000_000_000)
        return (m_s, m_ns, size, ino) == (
            mtime_s & 0xFFFFFFFF, mtime_ns, st.st_size & 0xFFFFFFFF, st.st_ino & 0xFFFFFFFF)

    def set(self, path: str, sha: str, st: os.stat_result | None, mode: int = 0o100644) -> None:
        name = path.encode("utf-8", "surrogateescape")
        for stage in (1, 2, 3):
            self._drop((name, stage))
        self._put((name, 0), _entry_bytes(name, sha, st, mode))

    def set_many(self, files: Iterable[tuple[str, str, os.stat_result | None]],
                 mode: int = 0o100644) -> None:
        """:meth:`set` for each ``(path, sha, stat)``: the same entries; for many (a seed's
        1,000), the sorted keys are extended and sorted once instead of one insertion each
        (which costs a pass over every entry: not for a few)."""
        files = list(files)
        if len(files) < _BULK:
            for path, sha, st in files:
                self.set(path, sha, st, mode)
            return
        entries, new_keys = self.entries, []
        for path, sha, st in files:
            name = path.encode("utf-8", "surrogateescape")
            if self._staged:
                for stage in (1, 2, 3):
                    self._drop((name, stage))
            key = (name, 0)
            old = entries.get(key)
            if old is None:
                new_keys.append(key)
            elif _is_extended(old):
                self._extended -= 1
            entries[key] = _padded(_entry_bytes(name, sha, st, mode))  # never extended
        self._keys.extend(new_keys)
        self._keys.sort()  # sorted runs: a merge
        self._values = [entries[k] for k in self._keys]

    def remove(self, path: str) -> None:
        name = path.encode("utf-8", "surrogateescape")
        for stage in (0, 1, 2, 3):
            self._drop((name, stage))

    def paths(self) -> Iterable[str]:
        return (name.decode("utf-8", "surrogateescape") for name, stage in self.entries
                if stage == 0)

    def unmerged(self) -> list[str]:
        """Paths git left in conflict (entries at stages 1-3: a merge, rebase, ... stopped
        on them), sorted."""
        return sorted({name.decode("utf-8", "surrogateescape") for name, stage in self.entries
                       if stage})

    def lock(self, timeout: float = 5.0) -> atomic.LockFile:
        """Take ``index.lock``, git's mutex for the index, waiting up to ``timeout`` s for a
        git command holding it (TimeoutError naming the file after that)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return atomic.LockFile(self.path, durable=False)
            except atomic.Locked as exc:
                if time.monotonic() > deadline:
                    raise TimeoutError(
                        f"{exc.filename} exists: another git command is using this store's "
                        "index; if none is running, delete the file and retry"
                    ) from None
                time.sleep(0.01)

    def write(self, timeout: float = 5.0, lock: atomic.LockFile | None = None,
              meanwhile: Callable[[], object] | None = None) -> None:
        """Write through ``index.lock`` (``lock`` if the caller already holds it) and rename
        into place. Not fsynced (git does not fsync it either): it is rebuilt from HEAD if
        lost. ``meanwhile``: the caller's work, done while a large index is hashed."""
        # one buffer, its digest written after it: `header + entries` and `+= digest` were
        # two more copies of the whole index (~150 KB at 1,000 entries: ~60 µs a write)
        data = b"".join([_HEADER.pack(b"DIRC", 3 if self._extended else 2, len(self._keys)),
                         *self._values])
        # a large index is hashed on the helper thread, without Python's lock, while this
        # one writes it and does ``meanwhile`` (the SHA-1 of 150 KB is ~100 µs)
        digest = helper.beside(lambda: hashlib.sha1(data).digest()) \
            if len(data) >= _HASH_BESIDE else None
        with lock or self.lock(timeout) as held:
            held.write(data)
            if meanwhile is not None:
                meanwhile()
            held.write(hashlib.sha1(data).digest() if digest is None else digest.result())
            held.commit()


def rebuild(git_dir: str, root: str, files: Iterable[tuple[str, int, str]]) -> GitIndex:
    """A fresh index for HEAD's ``files`` (path, mode, blob sha): a file whose content matches
    its blob gets its real stat; any other gets an empty stat, so git shows it as modified."""
    index = GitIndex(git_dir)
    for path, mode, sha in files:
        full = os.path.join(root, *path.split("/"))
        st = None
        try:
            if mode == _SYMLINK_MODE:  # a link's blob is its target
                content = os.fsencode(os.readlink(full))
            else:
                with open(full, "rb") as f:
                    content = f.read()
            if hash_blob(content) == sha:
                st = os.lstat(full)
        except OSError:
            pass
        index.set(path, sha, st, mode)
    return index
