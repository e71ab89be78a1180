"""Git objects read without dulwich: loose object files, and objects in pack files.

A read (``filemem query``, ``list``, ``snapshot``, an MCP server's first call) needs the
commit, the trees and a few blobs of HEAD; once packed (a seed, ``git repack``, a clone)
they are in ``.git/objects/pack``. Importing dulwich and opening its repository costs more
than the rest of such a read, so the common cases are read here: loose objects, and from
packs (:class:`Packs`) pack index version 2 and
pack versions 2 and 3, whole objects and both kinds of delta (``OFS_DELTA``, and
``REF_DELTA`` whose base is in the same pack). Every object is checked against its sha.
Anything else (another index version, a base outside the pack, a damaged file, a sha that
does not match) answers None, and the caller reads the object through dulwich, which
reports the damage properly: this module is a fast path, never the judge.

The pack list is read on the first lookup and again when a sha is in none of the packs
known (a pack written or repacked since); packs are mapped read-only, and a mapping stays
valid after ``git repack`` deletes its file.
"""

from __future__ import annotations

import contextlib
import hashlib
import mmap
import os
import sys
import threading
import zlib
from array import array
from bisect import bisect_left
from collections.abc import Iterator
from typing import Final, Literal

KINDS: Final = {1: b"commit", 2: b"tree", 3: b"blob", 4: b"tag"}
_OFS_DELTA: Final = 6
_REF_DELTA: Final = 7
_IDX_MAGIC: Final = b"\xfftOc\x00\x00\x00\x02"  # index version 2
_FANOUT: Final = 8  # the fan-out table's offset in the index
_SHAS: Final = _FANOUT + 256 * 4
_U32: Final = "I" if array("I").itemsize == 4 else "L"
_BASES_MAX_BYTES: Final = 4 << 20  # delta bases kept per pack
_MAX_CHAIN: Final = 10_000  # deltas followed before giving up (git's own default depth is 50)


def loose(git_dir: str, sha: str) -> tuple[bytes, bytes] | str | None:
    """(kind, content) of the loose object ``sha``; a reason it is unreadable; or None when
    there is no loose file for it (it may be packed)."""
    name = f".git/objects/{sha[:2]}/{sha[2:]}"
    try:
        with open(os.path.join(git_dir, "objects", sha[:2], sha[2:]), "rb") as f:
            data = zlib.decompress(f.read())
    except (FileNotFoundError, NotADirectoryError):
        return None
    except (OSError, zlib.error) as exc:
        return f"its file {name} is not a git object ({exc})"
    header, sep, raw = data.partition(b"\0")
    found = header.split(b" ", 1)[0]
    if sep and found in KINDS.values():
        return found, raw
    return f"its file {name} is not a git object"


class _ShaTable:
    """The index's sorted sha column as a sequence."""

    def __init__(self, idx: mmap.mmap, count: int) -> None:
        self.idx, self.count = idx, count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int) -> bytes:
        start = _SHAS + 20 * i
        return self.idx[start:start + 20]


class _Pack:
    """One ``pack-*.pack`` and its ``.idx``, mapped read-only."""

    def __init__(self, base: str) -> None:
        with open(base + ".idx", "rb") as f:
            self.idx = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        try:
            with open(base + ".pack", "rb") as f:
                self.data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        except (OSError, ValueError):
            self.idx.close()
            raise
        if self.idx[:8] != _IDX_MAGIC or self.data[:4] != b"PACK" \
                or self.data[4:8] not in (b"\0\0\0\2", b"\0\0\0\3"):
            self.close()
            raise ValueError("not a pack this reader knows")
        self.count = int.from_bytes(self.idx[_SHAS - 4:_SHAS], "big")
        self.shas = _ShaTable(self.idx, self.count)
        self._prefix: array[int] | None = None  # made on the first look-up
        self._bases: dict[int, tuple[bytes, bytes]] = {}  # offset -> (kind, content)
        self._base_bytes = 0

    def close(self) -> None:
        self.idx.close()
        self.data.close()

    def _prefixes(self) -> array[int]:
        """The first 4 bytes of every sha, in the index's order, as integers: searched in C
        (``bisect``), where a search of the index's 20-byte column costs a slice per step
        (9 of a verify's 45 s at 100,000 commits). 4 bytes an object."""
        column = self.idx[_SHAS:_SHAS + 20 * self.count]
        gathered = bytearray(4 * self.count)
        for j in range(4):
            gathered[j::4] = column[j::20]
        prefixes = array(_U32)
        prefixes.frombytes(gathered)
        if sys.byteorder == "little":
            prefixes.byteswap()
        self._prefix = prefixes
        return prefixes

    def offset(self, binsha: bytes) -> int | None:
        prefixes = self._prefix if self._prefix is not None else self._prefixes()
        idx = self.idx
        i = bisect_left(prefixes, int.from_bytes(binsha[:4], "big"))
        while True:  # nearly always one step: shas sharing 4 bytes are rare
            start = _SHAS + 20 * i
            if i >= self.count:
                return None
            found = idx[start:start + 20]
            if found == binsha:
                break
            if found[:4] != binsha[:4]:
                return None
            i += 1
        at = _SHAS + 24 * self.count + 4 * i  # after the shas and the crc32 column
        off = int.from_bytes(self.idx[at:at + 4], "big")
        if off & 0x80000000:  # an index into the 8-byte offsets of packs over 2 GiB
            at = _SHAS + 28 * self.count + 8 * (off & 0x7FFFFFFF)
            off = int.from_bytes(self.idx[at:at + 8], "big")
        return off

    def read(self, off: int) -> tuple[bytes, bytes]:
        """(kind, content) of the object at ``off``; ValueError / KeyError if it cannot be
        read here. A delta chain stops at the first base already made."""
        deltas: list[tuple[int, bytes]] = []  # (offset of the delta, the delta)
        while True:
            hit = self._bases.get(off)
            if hit is not None:  # a base already made (objects of a history share bases)
                kind, raw = hit
                break
            code, size, pos = self._header(off)
            if code in KINDS:
                raw = self._inflate(pos, size)
                kind = KINDS[code]
                break
            if len(deltas) >= _MAX_CHAIN:
                raise ValueError("delta chain too long")
            if code == _OFS_DELTA:
                c = self.data[pos]
                pos += 1
                back = c & 0x7F
                while c & 0x80:
                    c = self.data[pos]
                    pos += 1
                    back = ((back + 1) << 7) | (c & 0x7F)
                deltas.append((off, self._inflate(pos, size)))
                off -= back
            elif code == _REF_DELTA:
                base = self.offset(self.data[pos:pos + 20])
                if base is None:
                    raise KeyError("the delta's base is not in this pack")
                deltas.append((off, self._inflate(pos + 20, size)))
                off = base
            else:
                raise ValueError(f"object type {code}")
        if deltas:
            self._remember(off, kind, raw)
        for at, delta in reversed(deltas):
            raw = _apply_delta(raw, delta)
            if at != deltas[0][0]:
                self._remember(at, kind, raw)
        return kind, raw

    def _remember(self, off: int, kind: bytes, raw: bytes) -> None:
        """Keep a delta base (whole or itself made from deltas), up to a few MB of them."""
        if self._base_bytes + len(raw) > _BASES_MAX_BYTES:
            self._bases.clear()
            self._base_bytes = 0
        if len(raw) <= _BASES_MAX_BYTES and off not in self._bases:
            self._bases[off] = (kind, raw)
            self._base_bytes += len(raw)

    def _header(self, off: int) -> tuple[int, int, int]:
        c = self.data[off]
        kind, size, shift, pos = (c >> 4) & 7, c & 0x0F, 4, off + 1
        while c & 0x80:
            c = self.data[pos]
            pos += 1
            size |= (c & 0x7F) << shift
            shift += 7
        return kind, size, pos

    def _inflate(self, pos: int, size: int) -> bytes:
        d = zlib.decompressobj()
        out = []
        step = size + 64  # zlib's overhead on a small object; more is read if needed
        while not d.eof:
            chunk = self.data[pos:pos + step]
            if not chunk:
                raise ValueError("the pack ends inside an object")
            pos += len(chunk)
            out.append(d.decompress(chunk))
            step = 65536
        raw = b"".join(out)
        if len(raw) != size:
            raise ValueError("an object's size is not what its header says")
        return raw


def _varint(delta: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        c = delta[pos]
        pos += 1
        value |= (c & 0x7F) << shift
        shift += 7
        if not c & 0x80:
            return value, pos


# for each copy opcode, the bytes that follow it: (a size byte?, its shift), in order (flag
# bits 0-3 give the offset's bytes, 4-6 the size's): only the bytes there are looked at
_COPY_BYTES: Final = tuple(tuple((bit >= 4, 8 * (bit % 4)) for bit in range(7) if cmd & 1 << bit)
                           for cmd in range(128))


def _apply_delta(base: bytes, delta: bytes) -> bytes:
    """git's delta format: the base's size, the result's size, then copy and insert ops."""
    src_size, pos = _varint(delta, 0)
    dst_size, pos = _varint(delta, pos)
    if src_size != len(base):
        raise ValueError("a delta for another base")
    out = bytearray()
    end = len(delta)
    while pos < end:
        cmd = delta[pos]
        pos += 1
        if cmd & 0x80:  # copy from the base: offset and size bytes as the flags say
            start = size = 0
            for is_size, shift in _COPY_BYTES[cmd & 0x7F]:
                if is_size:
                    size |= delta[pos] << shift
                else:
                    start |= delta[pos] << shift
                pos += 1
            size = size or 0x10000
            if start + size > len(base):
                raise ValueError("a delta copies past its base")
            out += base[start:start + size]
        elif cmd:  # insert the next cmd bytes
            out += delta[pos:pos + cmd]
            pos += cmd
        else:
            raise ValueError("a delta opcode 0")
    if len(out) != dst_size:
        raise ValueError("a delta's result is not the size it says")
    return bytes(out)


def pack_entries(base: str) -> Iterator[tuple[str, bytes | None, tuple[bytes, bytes] | None]]:
    """Every object of one pack (``base``: its path without ``.pack``/``.idx``): (sha, the
    entry's bytes as stored, checked against the index's CRC, None) for a whole object;
    (sha, None, its (kind, content), checked against its sha) for a delta. ValueError if
    an entry is damaged."""
    pack = _Pack(base)
    try:
        crcs = _SHAS + 20 * pack.count
        entries = sorted((pack.offset(pack.shas[i]) or 0, i) for i in range(pack.count))
        ends = [off for off, _i in entries[1:]] + [len(pack.data) - 20]
        for (off, i), end in zip(entries, ends, strict=True):
            binsha = pack.shas[i]
            if pack._header(off)[0] in KINDS:
                chunk = pack.data[off:end]
                want = int.from_bytes(pack.idx[crcs + 4 * i:crcs + 4 * i + 4], "big")
                if zlib.crc32(chunk) != want:
                    raise ValueError(f"object {binsha.hex()} in {base} is damaged")
                yield binsha.hex(), chunk, None
                continue
            kind, raw = pack.read(off)
            if hashlib.sha1(b"%s %d\0" % (kind, len(raw)) + raw).digest() != binsha:
                raise ValueError(f"object {binsha.hex()} in {base} is damaged")
            yield binsha.hex(), None, (kind, raw)
    finally:
        pack.close()


class Packs:
    """The repository's packs; :meth:`get` is a packed object, or None (ask dulwich)."""

    def __init__(self, git_dir: str) -> None:
        self.dir = os.path.join(git_dir, "objects", "pack")
        self._packs: dict[str, _Pack | None] = {}  # None: a pack this reader cannot read
        self._lock = threading.Lock()
        self._listed = False
        self._hot: _Pack | None = None

    def get(self, sha: str, rescan: bool = True) -> tuple[bytes, bytes] | None:
        """The packed object ``sha``; after a miss, the folder is scanned again for new
        packs unless ``rescan`` is False (a caller that looks at the loose file next)."""
        try:
            binsha = bytes.fromhex(sha)
        except ValueError:
            return None
        if len(binsha) != 20:
            return None
        for scan in (not self._listed, True) if rescan else (not self._listed,):
            if scan and not self._rescan():
                continue
            hot = self._hot  # the pack of the last hit first (a history walk reads one
            if hot is not None:  # pack after another), then the rest by age
                found = self._look(hot, binsha)
                if found is not False:
                    return found
            for pack in list(self._packs.values()):
                if pack is None or pack is hot:
                    continue
                found = self._look(pack, binsha)
                if found is not False:
                    if found is not None:
                        self._hot = pack
                    return found
        return None

    @staticmethod
    def _look(pack: _Pack, binsha: bytes) -> tuple[bytes, bytes] | Literal[False] | None:
        """The object from ``pack``; False if it is not there; None if it cannot be read
        (damaged, closed or not understood: dulwich decides)."""
        try:
            off = pack.offset(binsha)
            if off is None:
                return False
            kind, raw = pack.read(off)
        except (ValueError, KeyError, IndexError, OverflowError, zlib.error):
            return None
        if hashlib.sha1(b"%s %d\0" % (kind, len(raw)) + raw).digest() != binsha:
            return None
        return kind, raw

    def _rescan(self) -> bool:
        """Map packs that appeared since the last scan; False if there is none new."""
        with self._lock:
            self._listed = True
            try:
                names = {n[:-4] for n in os.listdir(self.dir) if n.endswith(".idx")}
            except OSError:
                return False
            for gone in [n for n in self._packs if n not in names]:
                pack = self._packs.pop(gone)  # merged or repacked away: its objects are
                if pack is self._hot:          # in a pack listed now (or in none needed)
                    self._hot = None
                if pack is not None:
                    with contextlib.suppress(BufferError):
                        pack.close()
            new = names - self._packs.keys()
            for name in new:
                try:
                    self._packs[name] = _Pack(os.path.join(self.dir, name))
                except (OSError, ValueError):
                    self._packs[name] = None  # e.g. an index being written: retried below
            for name in [n for n in new if self._packs[n] is None]:
                del self._packs[name]
            return bool(new)

    def close(self) -> None:
        with self._lock:
            for pack in self._packs.values():
                if pack is not None:
                    with contextlib.suppress(BufferError):
                        pack.close()
            self._packs.clear()
            self._listed = False
            self._hot = None
