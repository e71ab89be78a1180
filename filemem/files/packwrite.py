"""Every write's new objects go into git's object store as one small pack.

A write makes about seven objects (the entry's blob, the trees up to the root, the
commit). As loose objects that is seven new files; creating a file is the dearest thing a
write does on most file systems (an inode allocated, a directory entry added), so they go
into one pack and its index instead: two files, whatever the number of objects. Git, dulwich
and :mod:`.objread` read such a pack like any other (version 2, undeltified, version 2
index).

Packs then pile up, one per write; :func:`merge_small` rolls the small ones into one now
and then (in-process: their entries copied as they are into one pack, fsynced, then the
small ones deleted), and ``git repack --geometric`` (:mod:`.packing`) keeps the larger
ones at O(log n).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import zlib
from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple

from filemem.files import atomic, modes, objread

Obj = tuple[str, bytes, bytes]  # sha, kind, raw content
TYPE_NUM: Final = {kind: num for num, kind in objread.KINDS.items()}  # pack entry types
SMALL_PACK: Final = 256 << 10  # a pack this small is one write's (or a few merged)
MERGE_AT: Final = 32  # small packs that make a merge due
BATCH: Final = 64  # more objects than this are a batch (stored; made durable by an fsync)
TMP_PREFIX: Final = "tmp_"  # GitRepo.clear_temp_packs removes these (not git's tmp_pack_*)


def chunk(kind: bytes, raw: bytes, stored: bool = False) -> bytes:
    """One whole object's entry in a pack: its type and size, then its deflated content.
    A tree is stored, not compressed: it is mostly shas, which deflate hardly shrinks
    (67 KB to 50 KB for 1,000 entries, at a millisecond a write; ~25% for a small one, at
    ~8 µs a KB); ``git repack`` deltifies trees later, which shrinks them far more.
    ``stored``: every object stored (a batch)."""
    size = len(raw)
    byte = (TYPE_NUM[kind] << 4) | (size & 0x0F)
    size >>= 4
    header = bytearray()
    while size:
        header.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    header.append(byte)
    if stored or kind == b"tree":
        return _stored(raw, header)
    return bytes(header) + zlib.compress(raw, 1)


_BLOCK: Final = 0xFFFF  # the most a stored deflate block holds
_ONE_BLOCK: Final = struct.Struct("<2sBHH")  # the zlib header, then the block's
_ADLER: Final = struct.Struct(">L")


def _stored(raw: bytes, header: bytes | bytearray = b"") -> bytes:
    """``header``, then ``raw`` as a zlib stream of stored (uncompressed) deflate blocks:
    what ``zlib.compress(raw, 0)`` makes, without setting up a compressor each time (that
    costs tens of µs per call where the allocator hands its ~256 KB back to the system).
    Made in one piece: a seed's commit is ~0.7 MB, and each copy of it is a fresh buffer the
    system maps page by page."""
    end = len(raw)
    if end <= _BLOCK:  # nearly always: one block
        return b"%s%s%s%s" % (header, _ONE_BLOCK.pack(b"\x78\x01", 1, end, end ^ 0xFFFF), raw,
                              _ADLER.pack(zlib.adler32(raw)))
    # zlib header: deflate, 32K window, no dictionary, level 0
    parts: list[bytes | bytearray | memoryview] = [header, b"\x78\x01"]
    view = memoryview(raw)
    for start in range(0, end, _BLOCK):
        block = view[start:start + _BLOCK]
        parts.append(struct.pack("<BHH", start + _BLOCK >= end, len(block),
                                 len(block) ^ 0xFFFF))
        parts.append(block)
    parts.append(_ADLER.pack(zlib.adler32(raw)))
    return b"".join(parts)


class Pack(NamedTuple):
    """A pack encoded, not yet written: ``pack-<sha>``, then both files' bytes."""

    name: str
    pack: bytes
    idx: bytes


def name_of(shas: Iterable[str]) -> str:
    """The name :func:`encode` gives the pack of these objects: ``pack-`` and the SHA-1 of
    their binary names, sorted (git's own first naming; git reads a pack by any name).
    Known before the pack is made, so a write's log record names its pack while the pack
    is being made, during the record's flush."""
    return _named(sorted(bytes.fromhex(s) for s in shas))


def _named(sorted_shas: Sequence[bytes]) -> str:
    return "pack-" + hashlib.sha1(b"".join(sorted_shas)).hexdigest()


def encode(items: Sequence[Obj]) -> Pack:
    """The pack of ``items``, named by :func:`name_of`. A batch
    (a seed, an import: over :data:`BATCH` objects) is stored, not deflated: deflating a
    seed's 1,000 small blobs was 12 of its ~75 ms, and stored they take ~1.5x the room
    (about 0.2 MB more for 1,000 entries; ``git repack -F`` deflates them if wanted)."""
    stored = len(items) > BATCH
    return assemble([(bytes.fromhex(sha), chunk(kind, raw, stored))
                     for sha, kind, raw in items], by_names=True)


def assemble(entries: Sequence[tuple[bytes, bytes]], by_names: bool = False) -> Pack:
    """The pack of whole-object entries (binary sha, :func:`chunk` bytes), named after its
    checksum (as git names the packs it writes), or ``by_names`` as :func:`name_of` does."""
    body = [struct.pack(">4sLL", b"PACK", 2, len(entries))]
    offset = 12
    index: list[tuple[bytes, int, int]] = []
    for binsha, data in entries:
        index.append((binsha, zlib.crc32(data), offset))
        body.append(data)
        offset += len(data)
    if offset >= 1 << 31:
        raise ValueError("a batch this large does not fit one pack; split it")
    digest = hashlib.sha1()
    for part in body:  # the pack's checksum, then the pack in one piece (see _stored)
        digest.update(part)
    pack_sha = digest.digest()
    body.append(pack_sha)
    pack = b"".join(body)
    index.sort()
    shas, crcs, offsets = zip(*index, strict=True) if index else ((), (), ())
    idx = b"".join([
        b"\377tOc", struct.pack(">L", 2), _fanout(shas),
        b"".join(shas), struct.pack(f">{len(crcs)}L", *crcs),
        struct.pack(f">{len(offsets)}L", *offsets), pack_sha,
    ])
    idx += hashlib.sha1(idx).digest()
    return Pack(_named(shas) if by_names else f"pack-{pack_sha.hex()}", pack, idx)


_WORD: Final = struct.Struct(">L")


def _fanout(shas: Sequence[bytes]) -> bytes:
    """The index's fan-out table for sorted binary shas: for each first byte, how many
    shas start at or below it, as 256 big-endian words. Made as runs of one word each
    (a write's pack has seven objects: 256 words packed one by one took ~17 µs)."""
    runs, below = [], 0  # below: the first byte the next run starts at
    for count, sha in enumerate(shas):
        if sha[0] > below:
            runs.append(_WORD.pack(count) * (sha[0] - below))
            below = sha[0]
    runs.append(_WORD.pack(len(shas)) * (256 - below))
    return b"".join(runs)


def put(git_dir: str, encoded: Pack, durable: bool) -> str:
    """Write an encoded pack (see :func:`write`); its name."""
    name, pack, idx = encoded
    folder = os.path.join(git_dir, "objects", "pack")
    base = os.path.join(folder, name)
    files = [(base + ".pack", pack), (base + ".idx", idx)]
    try:
        atomic.replace_many(files, durable=durable, mode=0o400, prefix=TMP_PREFIX, undo=True)
    except FileNotFoundError:
        if os.path.isdir(folder):
            raise
        # git makes the folder, but a repository may lack it: made only then (a makedirs
        # before every write costs two system calls more)
        os.makedirs(folder, mode=0o700, exist_ok=True)
        atomic.replace_many(files, durable=durable, mode=0o400, prefix=TMP_PREFIX, undo=True)
    return name


def write(git_dir: str, items: Sequence[Obj], durable: bool) -> str:
    """Write ``items`` as one pack; its name. Both files are written (fsynced if
    ``durable``, and then the folder too, after the renames; else the write-ahead log
    holds the objects) before either is renamed; the .pack first, as readers only use a
    pack once its .idx exists, and a failed .idx rename takes the new .pack away again."""
    return put(git_dir, encode(items), durable)


def small_packs(git_dir: str) -> list[str]:
    """The names (``pack-<sha>``) of the packs under :data:`SMALL_PACK` with an index."""
    folder = os.path.join(git_dir, "objects", "pack")
    names = modes.pack_names(git_dir)
    out = []
    for name in sorted(names):
        if not (name.startswith("pack-") and name.endswith(".pack")):
            continue
        base = name[:-5]
        if base + ".idx" not in names or base + ".keep" in names:
            continue
        with contextlib.suppress(FileNotFoundError):
            if os.stat(os.path.join(folder, name)).st_size < SMALL_PACK:
                out.append(base)
    return out


def merge_due(git_dir: str) -> bool:
    return len(small_packs(git_dir)) >= MERGE_AT


def merge_small(git_dir: str) -> int:
    """Roll the small packs into one (hold the store lock): their objects read back and
    written once, durably (fsynced, and the folder), before the small packs are deleted,
    so a cut at any instant leaves every object in at least one whole pack. Returns the
    number of packs merged (0 if fewer than two)."""
    names = small_packs(git_dir)
    if len(names) < 2:
        return 0
    folder = os.path.join(git_dir, "objects", "pack")
    entries: dict[bytes, bytes] = {}
    for name in names:  # whole objects copied as stored (no inflate, no deflate)
        for sha, stored, made in objread.pack_entries(os.path.join(folder, name)):
            entries[bytes.fromhex(sha)] = chunk(*made) if made is not None else stored or b""
    merged = put(git_dir, assemble(sorted(entries.items())), durable=True)
    remove(git_dir, [name for name in names if name != merged])
    return len(names)


def remove(git_dir: str, names: Iterable[str]) -> None:
    """Delete packs by name: what a merge has copied, or what a replay writes again loose
    (their files may be torn)."""
    folder = os.path.join(git_dir, "objects", "pack")
    for name in names:
        for ext in (".idx", ".pack", ".rev"):  # the index first: readers then skip it
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, name + ext))
