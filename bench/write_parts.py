"""Where the time of one durable write goes, part by part, beside the fsync floor.

Builds a store of ``--entries`` entries and ``--commits`` commits (the workload of
bench/versus_reference.py), then runs ``-n`` adds, replaces and removes in-process with a
timer wrapped around each part of the write path, and prints each part's median in ms:

- ``prepare``: checks the input, finds the entry (replace/remove), checks the budget;
- ``trees``: the changed entry file encoded, its blob and the trees up to the root hashed;
- ``objects``: the new objects compressed into one small pack (in memory), while the disk
  flushes the record;
- ``pack``: that pack's two files written (not fsynced), while the disk flushes the record;
- ``wal``: the write-ahead log record appended and fdatasynced (the one disk flush), less
  the ``objects`` and ``pack`` made meanwhile: what is left is the wait for the flush, if
  any;
- ``settle``: the log record marked done once the working tree is in step (the record
  is the write's journal until then; not fsynced);
- ``ref``: the branch's compare-and-swap (lock file, rename, reflog; not fsynced);
- ``mirror``: the working-tree file and git's index written;
- ``after``: the view of HEAD moved on, the view cache and the pack check;
- ``other``: the rest (the approval policy, the audit rows and commit message, the lock).

    python bench/write_parts.py                  # 1,000 entries, 10,000 commits, n=200
    python bench/write_parts.py --commits 2000 -n 100
"""

from __future__ import annotations

import functools
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import versus_reference as vr

from filemem.files import gitrepo, wal
from filemem.ops import OPERATIONS
from filemem.store import core, transaction

PARTS = ["prepare", "trees", "objects", "pack", "wal", "ref", "mirror", "settle", "after"]
spent: dict[str, float] = defaultdict(float)
inner: list[float] = [0.0]  # time of the timed parts inside the one running (the pack
                            # is written inside the log's append): not counted twice


def timing(part: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        inner.append(0.0)
        t = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            took = (time.perf_counter() - t) * 1000
            spent[part] += took - inner.pop()
            inner[-1] += took
    return timed


def instrument() -> None:
    for name in ("add", "replace", "remove"):
        op = OPERATIONS[name]
        OPERATIONS[name] = op._replace(prepare=timing("prepare", op.prepare))
    gitrepo.GitRepo.splice = timing("trees", gitrepo.GitRepo.splice)  # type: ignore[method-assign]
    gitrepo.GitRepo.encode = timing("objects", gitrepo.GitRepo.encode)  # type: ignore[method-assign]
    gitrepo.GitRepo.put = timing("pack", gitrepo.GitRepo.put)  # type: ignore[method-assign]
    wal.Wal.append = timing("wal", wal.Wal.append)  # type: ignore[method-assign]
    wal.Wal.settle = timing("settle", wal.Wal.settle)  # type: ignore[method-assign]
    transaction.Transaction._swap = timing("ref", transaction.Transaction._swap)  # type: ignore[method-assign]
    transaction.Transaction._mirror = timing("mirror", transaction.Transaction._mirror)  # type: ignore[method-assign]
    core.Store.committed = timing("after", core.Store.committed)  # type: ignore[method-assign]


def main() -> None:
    args = vr.writes_parser(__doc__).parse_args()
    tmp = tempfile.mkdtemp(prefix="filemem-parts-", dir=args.dir)
    try:
        work = vr.workload(args.entries, args.n, 0)
        p = vr.build_filemem(os.path.join(tmp, "store"), work, args.commits, True)
        p.query({"text": "warm"})
        instrument()
        vr.fsync_floor(tmp, args.n)
        rows: dict[str, dict[str, float]] = defaultdict(dict)
        for op, key in (("add", "adds"), ("replace", "replaces"), ("remove", "removes")):
            samples: dict[str, list[float]] = defaultdict(list)
            for w in work[key]:
                spent.clear()
                t = time.perf_counter()
                getattr(p, op)(w["input"], w["write"])
                total = (time.perf_counter() - t) * 1000
                for part in PARTS:
                    samples[part].append(spent.get(part, 0.0))
                samples["other"].append(total - sum(spent.values()))
                samples["total"].append(total)
                vr.floor_sample()  # beside each write: the disk's speed changes by the second
            for part, values in samples.items():
                rows[part][op] = statistics.median(values)
        print(f"# {args.entries} entries, {args.commits} commits; median ms of {args.n} "
              f"writes each; fsync floor {statistics.median(vr.FLOOR):.3f} ms (sampled "
              f"beside the writes; boot id known: {wal.boot_id() is not None}; "
              f"{vr.file_system(tmp)})")
        print(f"{'part':<10}" + "".join(f"{op:>10}" for op in ("add", "replace", "remove")))
        for part in [*PARTS, "other", "total"]:
            print(f"{part:<10}" + "".join(f"{rows[part][op]:>10.3f}"
                                          for op in ("add", "replace", "remove")))
        p.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
