"""Each write's file operations made bare, beside the write itself and the fsync floor.

How much of target 1 (a write in at most 5x the fsync floor) the files alone take: every
filemem write of the workload (bench/versus_reference.py's, at ``--entries`` and
``--commits``) is followed by a floor sample, then by the same write's file operations
made by a few lines of Python with nothing between them, then by another floor sample.
They are the operations a write cannot do without, in the order it makes them, with the
sizes it just wrote:

- the write-ahead log's record appended and fdatasynced (on the helper thread, while the
  pack's two files are created, written and renamed into ``objects/pack``);
- git's ``index.lock`` created, the branch's lock file created, written and renamed over
  the ref (the old file closed after the write, as ``filemem/files/retire.py`` does);
- the entry file created (add), written to a temp file renamed over it (replace) or
  deleted (remove);
- git's index (as the write left it) written, hashed on the helper thread, with the two
  reflog lines appended meanwhile, and renamed over the old one;
- the log's mark that the write is settled appended.

The bare writes go to a copy of the store beside it (the same folders, index and packs),
so both meet the disk in the same moments and the same block group. What the bare
writes leave out is the write's logic: reading HEAD and the ref, the checks, the locks,
the policy, the trees and the pack built, the audit rows, the next view.

    python bench/bare_writes.py                  # 1,000 entries, 10,000 commits, n=200
    python bench/bare_writes.py --commits 2000 -n 100
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import secrets
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import versus_reference as vr

import filemem
from bench import BIG, file_system, spread
from filemem.files import helper

KINDS = (("add", "adds"), ("replace", "replaces"), ("remove", "removes"))
SETTLE_MARK = 23  # bytes of the log's settled mark, appended after each record


class Sizes:
    """What one filemem write just wrote, read from its store: the log record's bytes, its
    pack's two files, the entry file (by its path), git's index."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.git = os.path.join(root, ".git")

    def before(self) -> tuple[int, set[str]]:
        return self._wal_size(), set(os.listdir(os.path.join(self.git, "objects", "pack")))

    def after(self, before: tuple[int, set[str]]) -> tuple[int, list[int], bool]:
        """(the record's bytes, the new pack's .pack and .idx sizes, whether the write
        merged the small packs)."""
        wal_before, packs_before = before
        folder = os.path.join(self.git, "objects", "pack")
        now = set(os.listdir(folder))
        record = self._wal_size() - wal_before - SETTLE_MARK
        new = sorted(n for n in now - packs_before if n.endswith((".pack", ".idx")))
        sizes = [os.stat(os.path.join(folder, n)).st_size for n in new]
        merged = bool(packs_before - now)
        if merged or len(sizes) != 2:  # a merge's pack is the write's too: keep the last
            sizes = []
        return max(record, 0), sizes, merged

    def _wal_size(self) -> int:
        try:
            return os.stat(os.path.join(self.root, ".filemem", "wal")).st_size
        except FileNotFoundError:
            return SETTLE_MARK


class Bare:
    """The file operations of a write, on a copy of the store at ``root``."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.git = os.path.join(root, ".git")
        self.packs = os.path.join(self.git, "objects", "pack")
        self.mine: list[str] = []  # the packs made here, deleted when the real store merges
        self.kept: list[int] = []  # replaced files, closed before the next floor sample

    def close_kept(self) -> None:
        while self.kept:
            os.close(self.kept.pop())

    def _keep(self, path: str) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.kept.append(os.open(path, os.O_RDONLY | os.O_NOFOLLOW))

    def merge(self) -> None:
        """What a merge of the small packs does to the folder: one pack, the rest gone."""
        for path in self.mine:
            os.unlink(path)
        self.mine.clear()
        name = os.path.join(self.packs, f"pack-{secrets.token_hex(20)}")
        for ext in (".pack", ".idx"):
            with open(name + ext, "wb") as f:
                f.write(b"\0" * (64 << 10))

    def write(self, kind: str, path: str, entry: bytes, record: int, pack: list[int],
              index: bytes) -> None:
        wal = os.open(os.path.join(self.root, ".filemem", "wal"), os.O_RDWR | os.O_NOFOLLOW)
        os.fstat(wal)
        os.lseek(wal, 0, os.SEEK_END)
        os.write(wal, b"r" * record)
        flush = helper.beside(lambda: os.fdatasync(wal))
        name = os.path.join(self.packs, f"pack-{secrets.token_hex(20)}")
        temps = []
        for ext, size in zip((".pack", ".idx"), pack or [2000, 1200], strict=True):
            tmp = os.path.join(self.packs, f"tmp_{os.path.basename(name)}{ext}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o400)
            os.write(fd, b"p" * size)
            temps.append((fd, tmp, name + ext))
        for fd, _tmp, _final in temps:
            os.close(fd)
        for _fd, tmp, final in temps:
            os.rename(tmp, final)
            self.mine.append(final)
        flush.result()
        os.close(wal)
        index_path = os.path.join(self.git, "index")
        lock = os.open(index_path + ".lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        ref = os.path.join(self.git, "refs", "heads", "main")
        fd = os.open(ref + ".lock", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        os.write(fd, secrets.token_hex(20).encode() + b"\n")
        os.close(fd)
        self._keep(ref)
        os.rename(ref + ".lock", ref)
        full = os.path.join(self.root, *path.split("/"))
        if kind == "add":
            try:
                fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileNotFoundError:  # the folder's first entry: the write made it too
                os.makedirs(os.path.dirname(full), mode=0o700)
                fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, entry)
            os.fstat(fd)
            os.close(fd)
        elif kind == "replace":
            tmp = os.path.join(os.path.dirname(full), f".{os.path.basename(full)}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.write(fd, entry)
            os.fstat(fd)
            os.close(fd)
            os.rename(tmp, full)
        else:
            os.unlink(full)
        digest = helper.beside(lambda: hashlib.sha1(index).digest())
        os.write(lock, index)
        for log in (("logs", "refs", "heads", "main"), ("logs", "HEAD")):
            fd = os.open(os.path.join(self.git, *log), os.O_WRONLY | os.O_CREAT | os.O_APPEND,
                         0o666)
            os.write(fd, b"l" * 270)
            os.close(fd)
        os.write(lock, digest.result())
        os.close(lock)
        self._keep(index_path)
        os.rename(index_path + ".lock", index_path)
        fd = os.open(os.path.join(self.root, ".filemem", "wal"),
                     os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
        os.write(fd, b"s" * SETTLE_MARK)
        os.fstat(fd)
        os.close(fd)


def main() -> None:
    args = vr.writes_parser(__doc__).parse_args()
    tmp = tempfile.mkdtemp(prefix="filemem-bare-", dir=args.dir)
    own_group = spread(tmp)
    stores = os.path.join(tmp, "stores")
    os.mkdir(stores)
    try:
        work = vr.workload(args.entries, args.n, 0)
        root = os.path.join(stores, "store")
        vr.build_filemem(root, work, args.commits, True).close()
        shutil.copytree(root, os.path.join(stores, "bare"), symlinks=True)
        bare = Bare(os.path.join(stores, "bare"))
        vr.SETTLE.append(bare.close_kept)
        os.sync()
        vr.fsync_floor(stores, args.n)
        sizes = Sizes(root)
        ms: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        with filemem.open_store(root, write_policy="auto", budgets=BIG) as p:
            p.query({"text": "warm"})
            for kind, key in KINDS:
                for w in work[key]:
                    paths = dict(p.store.state().paths)  # where a removed entry was
                    seen = sizes.before()
                    t = time.perf_counter()
                    out: Any = getattr(p, kind)(w["input"], w["write"])
                    ms[kind]["filemem"].append((time.perf_counter() - t) * 1000)
                    record, pack, merged = sizes.after(seen)
                    entry_id = out["entry"]["id"]
                    path = paths[entry_id] if kind == "remove" else \
                        p.store.state().paths[entry_id]
                    entry = b"" if kind == "remove" else \
                        Path(root, *path.split("/")).read_bytes()
                    index = Path(root, ".git", "index").read_bytes()
                    vr.floor_sample()
                    if merged:  # as the write did, before the bare write is timed
                        bare.merge()
                    t = time.perf_counter()
                    bare.write(kind, path, entry, record, pack, index)
                    ms[kind]["bare"].append((time.perf_counter() - t) * 1000)
                    vr.floor_sample()
        floor = statistics.median(vr.FLOOR[args.n:])
        same = entry_files(root) == entry_files(bare.root)
        report(ms, floor, args, file_system(tmp) + (vr.GROUP if own_group else "")
               + "; the bare copy's entry files after the run: "
               + ("the store's" if same else "DIFFERENT from the store's"))
    finally:
        vr.SETTLE[:] = vr.SETTLE[:1]
        shutil.rmtree(tmp, ignore_errors=True)


def entry_files(root: str) -> dict[str, int]:
    """Each entry file's path and size: the bare writes made the same files as the store's."""
    out = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in files:
            if name.endswith(".md"):
                full = os.path.join(folder, name)
                out[os.path.relpath(full, root)] = os.path.getsize(full)
    return out


def report(ms: dict[str, dict[str, list[float]]], floor: float, args: argparse.Namespace,
           where: str) -> None:
    print(f"# {args.entries} entries, {args.commits} commits; median ms of {args.n} writes "
          f"each, every write followed by a floor sample, its bare file operations, a floor "
          f"sample; fsync floor {floor:.3f} ms; {where}")
    kinds = [kind for kind, _key in KINDS]
    print(f"{'':<24}" + "".join(f"{k:>10}" for k in kinds))
    rest = {k: statistics.median(a - b for a, b in zip(ms[k]["filemem"], ms[k]["bare"],
                                                       strict=True)) for k in kinds}
    lines = [("filemem's write", {k: statistics.median(ms[k]["filemem"]) for k in kinds}),
             ("its files, bare", {k: statistics.median(ms[k]["bare"]) for k in kinds}),
             ("the rest (logic)", rest)]
    for label, values in lines:
        print(f"{label:<24}" + "".join(f"{values[k]:>10.3f}" for k in kinds)
              + "   " + " / ".join(f"{values[k] / floor:.2f}" for k in kinds) + "x the floor")
    print(f"{'target: 5x the floor':<24}" + f"{5 * floor:>10.3f}" * 3)


if __name__ == "__main__":
    main()
