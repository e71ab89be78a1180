"""Where the time of a seed of 1,000 entries goes, part by part, beside the reference's seed.

Builds a store of ``--entries`` entries (the workload of bench/versus_reference.py, without
the history: a seed's cost does not depend on it), then runs ``--seeds`` seeds of 1,000 new
entries in-process with a timer wrapped around each part, and prints each part's median in
ms; with ``--reference PATH`` the reference implementation's seeds of the same entries,
measured in the same run, are printed beside the total:

- ``prepare``: the inputs checked, the budget, the batch's summary;
- ``checks``: the injection, secret and invisible-character checks on the 1,000 texts;
- ``encode``: the 1,000 entry files' bytes (front matter and text);
- ``message``: the commit message (the summary and 1,001 audit rows as trailers);
- ``trees``: the blobs and the trees up to the root hashed;
- ``objects``: the new objects compressed and written as one pack;
- ``wal``: the write-ahead log record appended and fdatasynced (the one disk flush);
- ``ref``: the branch's compare-and-swap;
- ``files``: the 1,000 working-tree files created (see filemem/files/manyfiles.py), beside
  its floor measured in the same run: 1,000 files of the same sizes created, written,
  stat'ed and closed by one Python loop in a new folder on the same disk;
- ``index``: git's index updated and written, the log record settled;
- ``after``: the view of HEAD moved on, the view cache and the pack check;
- ``other``: the rest (the approval policy, the audit numbering, the entries returned).

    python bench/seed_parts.py --reference PATH            # 1,000 entries, 5 seeds
    python bench/seed_parts.py --seeds 9 --dir /dev/shm    # filemem's CPU, without the disk
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import versus_reference as vr
from write_parts import spent, timing

from filemem.files import codec, gitrepo, retire, wal
from filemem.ops import OPERATIONS
from filemem.rules import findings
from filemem.store import core, transaction

PARTS = ["prepare", "checks", "encode", "message", "trees", "objects", "wal", "ref", "files",
         "index", "after"]


def instrument() -> None:
    op = OPERATIONS["seed"]
    OPERATIONS["seed"] = op._replace(prepare=timing("prepare", op.prepare))
    findings.scan_all = timing("checks", findings.scan_all)  # type: ignore[assignment]
    codec.encode = timing("encode", codec.encode)  # type: ignore[assignment]
    transaction.commit_message = timing("message", transaction.commit_message)  # type: ignore[assignment]
    gitrepo.GitRepo.splice = timing("trees", gitrepo.GitRepo.splice)  # type: ignore[method-assign]
    gitrepo.GitRepo.write = timing("objects", gitrepo.GitRepo.write)  # type: ignore[method-assign]
    wal.Wal.append = timing("wal", wal.Wal.append)  # type: ignore[method-assign]
    transaction.Transaction._swap = timing("ref", transaction.Transaction._swap)  # type: ignore[method-assign]
    transaction.write_files = timing("files", transaction.write_files)  # type: ignore[assignment]
    # the mirror holds the files; what else it does (the index, settling the log) is "index"
    transaction.Transaction._mirror = timing("mirror", transaction.Transaction._mirror)  # type: ignore[method-assign]
    core.Store.committed = timing("after", core.Store.committed)  # type: ignore[method-assign]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", default=os.environ.get("FILEMEM_REFERENCE"),
                    help="a checkout of dsh-memento 0.4.4, to print its seed beside")
    ap.add_argument("--entries", type=int, default=1000, help="entries before the seeds")
    ap.add_argument("--seeds", type=int, default=5, help="seeds of 1,000 (medians)")
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR"),
                    help="where the store goes (as for bench/versus_reference.py --dir)")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="filemem-seed-parts-", dir=args.dir)
    try:
        work = vr.workload(args.entries, 1, args.seeds)
        reference = None
        if args.reference:
            workfile = os.path.join(tmp, "workload.json")
            with open(workfile, "w", encoding="utf-8") as f:
                json.dump(work, f)
            reference = statistics.median(vr.run_reference(args.reference, workfile,
                                                           tmp)[1]["seed"])
        p = vr.build_filemem(os.path.join(tmp, "store"), work, 0, False)
        os.sync()  # the set-up's files written back before anything is timed
        p.query({"text": "warm"})
        instrument()
        samples: dict[str, list[float]] = defaultdict(list)
        # the floor's files: as many as a seed makes, of the sizes of the entry files so far
        known = [len(codec.encode(e)) for e in p.store.state().entries.values()]
        sizes = [known[i % len(known)] for i in range(len(work["seeds"][0]["inputs"]))]
        for batch in work["seeds"]:
            retire.drain()  # the last seed's replaced ref and index freed before the floor
            samples["floor"].append(vr.file_floor(tmp, sizes))
            spent.clear()
            t = time.perf_counter()
            p.seed(batch["inputs"], batch["write"])
            total = (time.perf_counter() - t) * 1000
            spent["index"] = spent.pop("mirror", 0.0)  # its "files" already taken out
            for part in PARTS:
                samples[part].append(spent.get(part, 0.0))
            samples["other"].append(total - sum(spent.values()))
            samples["total"].append(total)
        print(f"# a seed of 1,000 into {args.entries} entries; median ms of {args.seeds} "
              f"seeds; stores in {args.dir or tempfile.gettempdir()} "
              f"({vr.file_system(tmp)}); Python {sys.version.split()[0]}")
        for part in [*PARTS, "other"]:
            line = f"{part:<10}{statistics.median(samples[part]):>10.2f}"
            if part == "files":
                line += (f"  floor {statistics.median(samples['floor']):.2f}: {len(sizes)} "
                         "files created by one Python loop")
            print(line)
        total = statistics.median(samples["total"])
        line = f"{'total':<10}{total:>10.2f}"
        if reference is not None:
            line += (f"  reference {reference:.2f}: "
                     f"{vr.verdict(total, reference)} (target: <= the reference)")
        print(line)
        p.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
