"""This checkout's writes against another commit's, write by write, in the same moments.

The machine these figures come from changes speed by 10-30% from one run to the next, more
than most changes to the write path are worth, so two runs of ``bench/write_parts.py`` one
after the other cannot tell them apart. Here one process per checkout builds the same
store (bench/versus_reference.py's workload and history, ``--commits`` of them) side by
side in one folder, and their writes are interleaved: add 1 on the base then here, add 2
here then on the base, and so on, each timed in its own process (the files a write lets go
of are closed before the clock starts, as in the other benches). Both meet the disk and the
CPU in the same seconds; the ratio of the medians is the change.

    git worktree add /tmp/base 2f67878              # the commit to compare with
    python bench/versus_commit.py --base /tmp/base  # 1,000 entries, 10,000 commits, n=200

The base checkout's ``filemem`` is used with this checkout's benchmark code, so any commit
with the same public API (``open_store``, ``seed``, ``add``, ``replace``, ``remove``) works.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
OPS = (("add", "adds"), ("replace", "replaces"), ("remove", "removes"))


def worker(folder: str, entries: int, n: int, commits: int) -> None:
    """Build the store, say ``ready``, then time each ``<op> <i>`` read from stdin."""
    sys.path.insert(0, str(HERE))
    import versus_reference as vr

    try:
        from filemem.files.retire import drain
    except ImportError:  # a commit from before files were let go of after a write
        def drain() -> None:
            return None

    work = vr.workload(entries, n, 0)
    p = vr.build_filemem(os.path.join(folder, "store"), work, commits, False)
    p.query({"text": "warm"})
    print("ready", flush=True)
    keys = dict(OPS)
    for line in sys.stdin:
        op, i = line.split()
        w = work[keys[op]][int(i)]
        drain()
        t = time.perf_counter()
        getattr(p, op)(w["input"], w["write"])
        print(json.dumps((time.perf_counter() - t) * 1000), flush=True)
    p.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", required=True,
                    help="a checkout of the commit to compare with (git worktree add)")
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--commits", type=int, default=10_000)
    ap.add_argument("-n", type=int, default=200, help="writes of each kind")
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR"),
                    help="where the stores go (on ext4 without a journal, a new top-level "
                         "folder for each run: see bench/versus_reference.py)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker, args.entries, args.n, args.commits)
        return
    base = Path(args.base).resolve()
    if not (base / "filemem" / "__init__.py").is_file():
        ap.error(f"{base} holds no filemem checkout (its filemem/__init__.py is missing)")
    top = tempfile.mkdtemp(prefix="filemem-versus-commit-", dir=args.dir)
    sides = {"base": base, "this": HERE.parent}
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        print(f"building two stores of {args.entries} entries and {args.commits} commits "
              "...", file=sys.stderr, flush=True)
        for name, repo in sides.items():
            folder = tempfile.mkdtemp(prefix=f"{name}-", dir=top)
            procs[name] = subprocess.Popen(
                [sys.executable, __file__, "--worker", folder, "--entries", str(args.entries),
                 "-n", str(args.n), "--commits", str(args.commits), "--base", str(base)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=repo,
                env={**os.environ, "PYTHONPATH": str(repo)})
        for name, proc in procs.items():
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != "ready":
                sys.exit(f"the {name} side did not start (its error is above)")
        times: dict[str, dict[str, list[float]]] = {name: {} for name in procs}
        for op, _key in OPS:
            for i in range(args.n):
                for name in ("base", "this") if i % 2 == 0 else ("this", "base"):
                    proc = procs[name]
                    assert proc.stdin is not None and proc.stdout is not None
                    proc.stdin.write(f"{op} {i}\n")
                    proc.stdin.flush()
                    times[name].setdefault(op, []).append(json.loads(proc.stdout.readline()))
        print(f"# {args.entries} entries, {args.commits} commits; median ms of {args.n} "
              f"writes each, interleaved; base {base}")
        print(f"{'write':<10}{'base':>10}{'this':>10}{'this/base':>11}")
        for op, _key in OPS:
            b = statistics.median(times["base"][op])
            t = statistics.median(times["this"][op])
            print(f"{op:<10}{b:>10.3f}{t:>10.3f}{t / b:>11.3f}")
    finally:
        for proc in procs.values():
            if proc.stdin is not None:
                proc.stdin.close()
            proc.wait()
        shutil.rmtree(top, ignore_errors=True)


if __name__ == "__main__":
    main()
