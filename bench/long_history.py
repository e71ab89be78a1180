"""filemem with a long history: 100,000 commits (issue 14, point 6).

Builds two stores of the same 1,000 entries (large budgets, auto policy), one with ~100
commits of history and one with ``--commits`` (default 100,000), the history written by
``git fast-import`` in exactly the form filemem's own ``replace`` writes
(:mod:`history_builder`), then prints, each beside its target:

- the cost of a write (add, replace; in process, medians, the two stores interleaved)
  with 100 commits and with the long history (target: within noise);
- ``filemem verify --json`` on the long history (target: <= 30 s; it must say ok);
- ``filemem log --entry ID --json`` for one entry (target: <= 1 s);
- ``filemem sync`` fetching 10,000 new commits that a second clone pushed to a bare
  remote (target: <= 10 s);
- the size of the store's ``.git`` and its number of packs.

    python bench/long_history.py                       # the full run (several minutes)
    python bench/long_history.py --commits 2000 --sync-commits 200 --writes 20   # a quick one
    python bench/long_history.py --dir /dev/shm        # on tmpfs: CPU cost without the disk
    python bench/long_history.py --dir /fmlh1          # a new top-level folder (see below)

Both stores go side by side in a folder that ext4 puts in a block group of its own
(``chattr +T``, as bench/versus_reference.py does): in a folder among inodes that other
work freed minutes before (``/tmp`` after a test run), the two stores' files sat in
different groups, and the long history's writes took 1.08-1.16x the short one's on
2026-12-05 where side by side in their own group they took 0.95-1.01x (and 0.96-0.99x on
tmpfs). The header line says which file system it ran on and whether the flag took.

Needs the git CLI (fast-import builds the history). Times are wall-clock on a shared,
loaded machine: compare the figures of one run with each other.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import history_builder

import filemem
from bench import BIG, ctx, entry, file_system, spread

TARGETS = {"verify": 30.0, "log --entry": 1.0, "sync": 10.0}


def _cli() -> list[str]:
    exe = shutil.which("filemem")
    return [exe] if exe else [sys.executable, "-m", "filemem"]


CPU: dict[str, float] = {}  # figure -> CPU seconds of the command (user + system)


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(*args: str, cwd: str | None = None, cpu: str | None = None) -> tuple[float, str]:
    """Run a filemem command; its wall time in seconds and its stdout. ``cpu``: also
    record its CPU time under that name (on a loaded machine, wall time waits for a core;
    CPU time is what the command itself costs)."""
    t, c = time.perf_counter(), _children_cpu()
    done = subprocess.run([*_cli(), *args], capture_output=True, text=True, cwd=cwd,
                          stdin=subprocess.DEVNULL)
    took = time.perf_counter() - t
    if cpu is not None:
        CPU[cpu] = _children_cpu() - c  # the last run's
    if done.returncode != 0:
        raise SystemExit(f"filemem {' '.join(args)} failed ({done.returncode}):\n"
                         f"{done.stdout}\n{done.stderr}")
    return took, done.stdout


def build(root: str, n_entries: int, n_commits: int) -> None:
    """A store of ``n_entries`` (one seed per 1,000) and one real replace, then
    replace commits by fast-import up to ``n_commits`` commits in all."""
    p = filemem.open_store(root, create=True, write_policy="auto", budgets=BIG)
    for start in range(0, n_entries, 1000):
        p.seed([entry(j) for j in range(start, min(start + 1000, n_entries))], ctx(start))
    e = entry(0)
    p.replace({"track": e["track"], "scope": e["scope"], "match": "(note 0)",
               "text": e["text"] + " [real]"}, ctx(0))
    p.close()
    # commits so far: init + seeds + the replace
    made = 1 + -(-n_entries // 1000) + 1
    if n_commits > made:
        history_builder.extend(root, n_commits - made)
    # the budgets the writes were made with, in the store (so verify/sync see them too)
    with open(os.path.join(root, "filemem.yaml"), encoding="utf-8") as f:
        assert "budgets" in f.read()


def write_costs(roots: dict[str, str], n: int) -> dict[str, dict[str, float]]:
    """Median add and replace (ms) in each store, interleaved so load hits both alike."""
    providers = {k: filemem.open_store(r, write_policy="auto", budgets=BIG)
                 for k, r in roots.items()}
    samples: dict[str, dict[str, list[float]]] = {k: {"add": [], "replace": []} for k in roots}
    try:
        for p in providers.values():
            p.query({"text": "warm"})
        for i in range(n):
            for k, p in providers.items():
                j = 10**6 + i
                t = time.perf_counter()
                p.add(entry(j, tag="new"), ctx(j))
                samples[k]["add"].append((time.perf_counter() - t) * 1000)
                e = entry(j, tag="new")
                t = time.perf_counter()
                p.replace({"track": e["track"], "scope": e["scope"], "match": f"new {j:06d}:",
                           "text": e["text"].replace("new", "changed")}, ctx(j))
                samples[k]["replace"].append((time.perf_counter() - t) * 1000)
    finally:
        for p in providers.values():
            p.close()
    return {k: {op: statistics.median(v) for op, v in ops.items()}
            for k, ops in samples.items()}


def git_size(root: str) -> tuple[float, int, int]:
    """``.git``'s size in MB, its number of packs and of loose objects."""
    git_dir = os.path.join(root, ".git")
    size = sum(os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(git_dir) for f in fs)
    pack = os.path.join(git_dir, "objects", "pack")
    packs = len([n for n in os.listdir(pack) if n.endswith(".pack")])
    objects = os.path.join(git_dir, "objects")
    loose = sum(len(os.listdir(os.path.join(objects, d))) for d in os.listdir(objects)
                if len(d) == 2)
    return size / 2**20, packs, loose


def note(what: str, value: Any) -> None:
    """A figure on stderr as soon as it is measured (the full run takes minutes)."""
    print(f"  {what}: {value}", file=sys.stderr, flush=True)


def verdict(took: float, target: float) -> str:
    return f"<= {target:g} s " + ("ok" if took <= target else f"MISSED ({took / target:.1f}x)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commits", type=int, default=100_000, help="the long history")
    ap.add_argument("--short", type=int, default=100, help="the short history")
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--sync-commits", type=int, default=10_000)
    ap.add_argument("--writes", type=int, default=100, help="writes timed in each store")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR"),
                    help="where the stores go (default: BENCH_DIR, else the temp folder)")
    args = ap.parse_args()
    if shutil.which("git") is None:
        raise SystemExit("this benchmark needs the git CLI on PATH (git fast-import)")
    tmp = tempfile.mkdtemp(prefix="filemem-long-", dir=args.dir)
    own_group = spread(tmp)  # both stores side by side, in a block group of their own
    out: dict[str, Any] = {"entries": args.entries, "commits": args.commits,
                           "file_system": file_system(tmp), "own_group": own_group}
    try:
        short, long = os.path.join(tmp, "short"), os.path.join(tmp, "long")
        t = time.perf_counter()
        build(short, args.entries, args.short)
        build(long, args.entries, args.commits)
        out["build_s"] = round(time.perf_counter() - t, 1)
        print(f"built {args.entries} entries with {args.short} and {args.commits} commits "
              f"in {out['build_s']} s ({tmp})", file=sys.stderr)

        took, report = run("verify", "--json", "--store", long, cpu="verify")
        rep = json.loads(report)
        out["verify_s"], out["verify_ok"] = took, rep["ok"]
        if not rep["ok"]:
            raise SystemExit(f"verify found problems in the built history: {rep['problems'][:3]}")
        took, _ = run("verify", "--json", "--store", long, cpu="verify (checkpoint)")
        out["verify_again_s"] = took
        took, _ = run("verify", "--full", "--json", "--store", long, cpu="verify --full")
        out["verify_full_s"] = took
        note("verify first / again / --full (s)",
             (out["verify_s"], out["verify_again_s"], out["verify_full_s"]))

        # log --entry of the same entry in both stores, runs interleaved: the short
        # store's time is the command's cost without a long history (start-up included)
        times: dict[str, list[float]] = {"short": [], "long": []}
        rows = {}
        for _ in range(5):
            for key, root in (("short", short), ("long", long)):
                _, listed = run("list", "--json", "--store", root)
                some = json.loads(listed)[len(json.loads(listed)) // 2]["id"]
                took, items = run("log", "--entry", some, "--json", "--store", root,
                                  cpu=f"log --entry ({key})")
                times[key].append(took)
                rows[key] = len(json.loads(items))
        out["log_entry_s"] = statistics.median(times["long"])
        out["log_entry_short_s"] = statistics.median(times["short"])
        out["log_entry_rows"] = rows["long"]
        note("log --entry, short / long history (s)",
             (out["log_entry_short_s"], out["log_entry_s"]))

        costs = write_costs({"short": short, "long": long}, args.writes)
        out["writes_ms"] = costs
        note("writes (ms)", costs)

        # sync: a bare remote and a second clone, both made by git (a first push of the
        # whole history through dulwich is not what is measured here); the second makes
        # sync_commits commits and pushes them with `filemem sync`; the long store's
        # `filemem sync` then fetches them (fast-forward)
        bare, second = os.path.join(tmp, "remote.git"), os.path.join(tmp, "second")
        subprocess.run(["git", "clone", "-q", "--bare", long, bare], check=True)
        run("remote", "add", "origin", bare, "--store", long)
        run("sync", "--json", "--store", long)  # nothing to move: sets up tracking
        subprocess.run(["git", "clone", "-q", bare, second], check=True)
        history_builder.extend(second, args.sync_commits, tag="second")
        took, _ = run("sync", "--json", "--store", second)
        out["sync_push_s"] = took
        took, synced = run("sync", "--json", "--store", long, cpu="sync")
        out["sync_s"] = took
        note("sync (s)", took)
        out["sync_steps"] = [{k: v for k, v in step.items() if k in ("kind", "commits")}
                             for step in json.loads(synced).get("steps", [])]
        mb, packs, loose = git_size(long)
        out["git_mb"], out["packs"], out["loose"] = round(mb, 1), packs, loose
        took, report = run("verify", "--json", "--store", long, cpu="verify after the sync")
        out["verify_after_sync_s"], out["verify_after_sync_ok"] = took, json.loads(report)["ok"]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out["cpu_s"] = dict(CPU)

    w = out["writes_ms"]
    print(f"\n## {args.entries} entries; {args.short} vs {args.commits} commits "
          f"(history built in {out['build_s']} s); stores in {args.dir or tempfile.gettempdir()}"
          f" ({out['file_system']}{', in a block group of their own' if own_group else ''})")
    for op in ("add", "replace"):
        s, lg = w["short"][op], w["long"][op]
        print(f"{op:<28} {s:8.2f} ms with {args.short} commits, {lg:8.2f} ms with "
              f"{args.commits} ({lg / s:.2f}x; target: within noise)")
    print(f"{'verify (first run)':<28} {out['verify_s']:8.2f} s  {verdict(out['verify_s'], 30)}")
    print(f"{'verify (checkpoint)':<28} {out['verify_again_s']:8.2f} s  "
          f"{verdict(out['verify_again_s'], 30)}")
    print(f"{'verify --full':<28} {out['verify_full_s']:8.2f} s  "
          f"{verdict(out['verify_full_s'], 30)}")
    print(f"{'log --entry':<28} {out['log_entry_s']:8.2f} s  "
          f"{verdict(out['log_entry_s'], 1)} ({out['log_entry_rows']} rows; "
          f"{out['log_entry_short_s']:.2f} s with {args.short} commits)")
    print(f"{'sync of ' + str(args.sync_commits) + ' commits':<28} {out['sync_s']:8.2f} s  "
          f"{verdict(out['sync_s'], 10)} {out['sync_steps']} (the second store's "
          f"sync pushing them: {out['sync_push_s']:.2f} s)")
    print(f"{'verify after the sync':<28} {out['verify_after_sync_s']:8.2f} s  "
          f"{verdict(out['verify_after_sync_s'], 30)}")
    print(f"{'.git':<28} {out['git_mb']:8.1f} MB in {out['packs']} packs, "
          f"{out['loose']} loose objects")
    print("CPU time of each command (user + system, the last run), s: " + ", ".join(
        f"{k} {v:.2f}" for k, v in CPU.items()))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(out, f, indent=2)


if __name__ == "__main__":
    main()
