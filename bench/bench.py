"""filemem benchmark: per-operation latency on stores of 100, 1,000 and 10,000 entries.

Each store is built with the auto write policy and large budgets, then given a history of
``--commits`` commits (default 10,000) before anything is measured, so figures include the
cost of a long history. Operations run in-process through the Python API, except the cold
CLI query, which starts a fresh ``filemem query`` process each time (what a shell sees).

    python bench/bench.py                 # the full run (takes a few minutes)
    python bench/bench.py --quick         # 100 and 1,000 entries, 2,000 commits
    python bench/bench.py --json out.json # also write the figures as JSON

Entries are spread over four layers, 8 workspaces and 3 agents plus the shared layer: 40
leaf folders (8 user-global ones with 1/8 of the entries each, 32 workspace ones with 1/64).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from typing import Any

import filemem

BIG = {"user": {"userGlobal": 10**9, "workspace": 10**9},
       "agent": {"userGlobal": 10**9, "workspace": 10**9}}
LAYERS = [("user", "user-global"), ("user", "workspace"), ("agent", "user-global"),
          ("agent", "workspace")]
WORKSPACES = [f"/home/dev/code/project-{i}" for i in range(8)]
AGENTS = [None, "coder", "reviewer", "planner"]
TARGETS_MS = {  # issue #2, at 1,000 entries (auditList: with 10,000 commits)
    "add": 10.0, "query": 0.4, "seed 1000": 100.0, "auditList(100)": 2.0, "cold CLI query": 300.0,
}


def _workspace(i: int) -> str:
    return WORKSPACES[(i // 16) % len(WORKSPACES)]


def _agent(i: int) -> str | None:
    return AGENTS[(i // 4) % len(AGENTS)]


def ctx(i: int) -> dict[str, Any]:
    """The session that sees entry i (its workspace and agent)."""
    return filemem.write_context(session_id=f"bench-{i % 7}", cwd=_workspace(i),
                                 agent=_agent(i))


def entry(i: int, tag: str = "fact") -> dict[str, Any]:
    """Entry i, in the layer, workspace and agent folder that session ``ctx(i)`` sees."""
    track, scope = LAYERS[i % 4]
    return {"track": track, "scope": scope, "workspaceKey": _workspace(i),
            "agentKey": _agent(i) or "",
            "text": f"{tag} {i:06d}: the build uses make; tests run with pytest -q; "
                    f"deploys go through the staging cluster first (note {i})"}


def file_system(path: str) -> str:
    """The file system holding ``path``, as the benches print it: its type, and for ext4
    whether it keeps a journal. Without one (as on the machine the README's figures come
    from) the kernel gives a new file no inode freed in the last 5-10 minutes, and skips
    over each of those first: a file created soon after many were deleted nearby (a test
    run, a benchmark's own set-up) costs up to ~1 ms instead of ~20 µs."""
    real = os.path.realpath(path)
    best = ("", "", "")
    try:
        with open("/proc/mounts", encoding="utf-8") as f:
            for line in f:
                dev, mount, kind = line.split()[:3]
                if (real == mount or real.startswith(mount.rstrip("/") + "/")) \
                        and len(mount) >= len(best[1]):
                    best = (dev, mount, kind)
    except OSError:
        return "unknown"
    dev, _mount, kind = best
    if kind != "ext4":
        return kind or "unknown"
    name = os.path.basename(dev)
    journaled = any(n.startswith(name + "-") for n in _listdir("/proc/fs/jbd2"))
    return "ext4" if journaled else "ext4 without a journal"


_FS_IOC_GETFLAGS, _FS_IOC_SETFLAGS = 0x80086601, 0x40086602  # Linux, 64-bit
_FS_TOPDIR_FL = 0x00020000  # chattr +T


def spread(folder: str) -> bool:
    """Ask ext4 to put each folder made in ``folder`` in a block group of its own (the
    TOPDIR flag, ``chattr +T``, as it does for the root's own folders): then each store of a
    bench sees only its own deleted inodes, not those an earlier run beside it freed (on
    ext4 without a journal a new file skips every inode freed in the last 5-10 minutes in
    its group, see :func:`file_system`). True if set; False where the file system or the
    platform has no such flag (nothing changes there)."""
    try:
        import array
        import fcntl
    except ImportError:  # not POSIX
        return False
    fd = os.open(folder, os.O_RDONLY)
    try:
        flags = array.array("l", [0])
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        flags[0] |= _FS_TOPDIR_FL
        fcntl.ioctl(fd, _FS_IOC_SETFLAGS, flags, True)
        fcntl.ioctl(fd, _FS_IOC_GETFLAGS, flags, True)
        return bool(flags[0] & _FS_TOPDIR_FL)
    except OSError:
        return False
    finally:
        os.close(fd)


def instructions(cmd: list[str], env: dict[str, str] | None = None) -> int | None:
    """The instructions ``cmd`` executes, counted by valgrind's callgrind (None without
    valgrind). A count does not move with the machine's load or speed, so it compares
    code across runs and hours where times cannot; a run takes ~50x the command's time."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run([valgrind, "--tool=callgrind",
                              f"--callgrind-out-file={os.path.join(folder, 'callgrind.out')}",
                              *cmd], capture_output=True, text=True, env=env, check=False)
    found = re.search(r"Collected : (\d+)", out.stderr)
    if out.returncode != 0 or found is None:
        raise RuntimeError(f"valgrind {' '.join(cmd)} failed: {out.stderr[-500:]}")
    return int(found[1])


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []


def timed(fn: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def summary(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"median": statistics.median(s), "p95": s[max(0, int(len(s) * 0.95) - 1)],
            "n": len(s)}


def build(root: str, n_entries: int, n_commits: int, progress: bool) -> filemem.Provider:
    p = filemem.open_store(root, create=True, write_policy="auto", budgets=BIG)
    made = 0
    while made < n_entries:
        batch = min(1000, n_entries - made)
        p.seed([entry(made + j) for j in range(batch)], ctx(made))
        made += batch
    commits = -(-n_entries // 1000)
    i = 0
    start = time.time()
    while commits < n_commits:
        # history: replace a rotating entry (keeps the entry count fixed)
        k = i % n_entries
        e = entry(k, tag=f"fact r{i}")
        p.replace({"track": e["track"], "scope": e["scope"], "match": f"(note {k})",
                   "text": e["text"]}, ctx(k))
        commits += 1
        i += 1
        if progress and i % 500 == 0:
            rate = i / (time.time() - start)
            print(f"    history {commits}/{n_commits} commits ({rate:.0f}/s)", file=sys.stderr)
    return p


def measure(n_entries: int, n_commits: int, progress: bool) -> dict[str, Any]:
    tmp = tempfile.mkdtemp(prefix="filemem-bench-", dir=os.environ.get("BENCH_DIR"))
    root = os.path.join(tmp, "store")
    try:
        t0 = time.time()
        p = build(root, n_entries, n_commits, progress)
        build_s = time.time() - t0
        results: dict[str, Any] = {"entries": n_entries, "commits": n_commits,
                                   "build_seconds": round(build_s, 1)}
        seq = iter(range(10**6, 10**7))

        def add() -> None:
            i = next(seq)
            p.add(entry(i, tag="new"), ctx(i))

        p.query({"text": "warm"})  # warm the view
        results["add"] = summary(timed(add, 200))
        added = list(range(10**6, 10**6 + 200))
        it = iter(added)

        def replace() -> None:
            i = next(it)
            e = entry(i, tag="new")
            p.replace({"track": e["track"], "scope": e["scope"], "match": f"new {i:06d}:",
                       "text": e["text"].replace("new", "changed")}, ctx(i))

        results["replace"] = summary(timed(replace, 200))
        it = iter(added)

        def remove() -> None:
            i = next(it)
            e = entry(i)
            p.remove({"track": e["track"], "scope": e["scope"], "match": f"changed {i:06d}:"},
                     ctx(i))

        results["remove"] = summary(timed(remove, 200))
        results["query"] = summary(timed(lambda: p.query({"text": "note 4"}), 1000))
        results["query (session view)"] = summary(timed(
            lambda: p.query({"text": "pytest"}, {"session": {
                "id": "q", "header": {"cwd": WORKSPACES[0], "agentPreset": "coder"}}}), 1000))
        results["auditList(100)"] = summary(timed(lambda: p.audit_list(100), 200))
        seeds = iter(range(5))

        def seed() -> None:
            k = next(seeds)
            p.seed([entry(2 * 10**6 + k * 1000 + j, tag=f"seed{k}") for j in range(1000)],
                   ctx(k))

        results["seed 1000"] = summary(timed(seed, 5))
        # cost of a write does not grow with history: compare with a fresh store
        fresh_root = os.path.join(tmp, "fresh")
        fresh = filemem.open_store(fresh_root, create=True, write_policy="auto", budgets=BIG)
        for start in range(0, n_entries, 1000):  # a seed adds at most 1000 entries
            fresh.seed([entry(j) for j in range(start, min(start + 1000, n_entries))], ctx(0))
        fi = iter(range(3 * 10**6, 4 * 10**6))
        results["add (fresh store, same entries, no history)"] = summary(
            timed(lambda: fresh.add(entry(next(fi), tag="new"), ctx(1)), 200))
        fresh.close()
        p.close()
        exe = [sys.executable, "-m", "filemem", "query", "note 4", "--store", root, "--json"]
        cli = shutil.which("filemem")
        if cli:
            exe = [cli, "query", "note 4", "--store", root, "--json"]
        subprocess.run(exe, capture_output=True, check=True)  # page cache warm, like a shell

        def cold() -> None:
            subprocess.run(exe, capture_output=True, check=True)

        results["cold CLI query"] = summary(timed(cold, 20))
        results["git_dir_mb"] = round(sum(
            os.path.getsize(os.path.join(d, f)) for d, _, fs in os.walk(
                os.path.join(root, ".git")) for f in fs) / 2**20, 1)
        return results
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="100,1000,10000")
    ap.add_argument("--commits", type=int, default=10_000)
    ap.add_argument("--quick", action="store_true", help="sizes 100,1000 and 2,000 commits")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    commits = args.commits
    if args.quick:
        sizes, commits = [100, 1000], 2000
    everything = []
    ops = ["add", "replace", "remove", "query", "query (session view)", "seed 1000",
           "auditList(100)", "cold CLI query", "add (fresh store, same entries, no history)"]
    for n in sizes:
        if not args.quiet:
            print(f"store of {n} entries, {max(commits, -(-n // 1000))} commits ...",
                  file=sys.stderr)
        r = measure(n, max(commits, -(-n // 1000)), not args.quiet)
        everything.append(r)
        print(f"\n## {n} entries, {r['commits']} commits of history "
              f"(built in {r['build_seconds']} s; .git {r['git_dir_mb']} MB)")
        print(f"{'operation':<46} {'median ms':>10} {'p95 ms':>10} {'n':>6}  target")
        for op in ops:
            s = r[op]
            target = TARGETS_MS.get(op) if n == 1000 or op == "auditList(100)" else None
            mark = ""
            if target is not None:
                mark = f"<= {target:g} ms " + ("ok" if s["median"] <= target else
                                               f"MISSED by {s['median'] - target:.2f} ms")
            print(f"{op:<46} {s['median']:>10.3f} {s['p95']:>10.3f} {s['n']:>6}  {mark}")
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(everything, f, indent=2)


if __name__ == "__main__":
    main()
