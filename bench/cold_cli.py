"""How long `filemem query`, `filemem list` and `filemem snapshot` take from a fresh shell
(and, for comparison, a cold `filemem add --yes`).

Each sample starts a new process, as a person typing the command does: the `filemem`
script beside this Python (or ``python -m filemem`` when there is none), without
``--store``, on the default store (in a temporary ``$XDG_DATA_HOME``) of ``--entries``
entries (default 1,000) whose view cache is fresh. Beside each command's
median are, measured in the same run and interleaved with it: ``python -c pass`` (the
interpreter's own start) and ``python -c "import filemem"`` (the package's import), and the
target, 150 ms. ``filemem add --yes`` (no target of its own) writes to a second store of as
many entries, named by ``$FILEMEM_STORE``, so the reads' store stays as it was; each of its
runs adds one entry. Wall time is what a person waits; CPU time (user + system of the child) is
printed too, as it varies less when other processes share the machine.

Python's bytecode cache is used as an installed package uses it (PYTHONDONTWRITEBYTECODE is
cleared for the children and one untimed run of each writes the cache first).

    python bench/cold_cli.py                  # 21 samples of each
    python bench/cold_cli.py --runs 41 --entries 2000
    python bench/cold_cli.py --instructions    # also each command's instruction count

``--instructions`` runs each command once more under valgrind's callgrind and prints the
instructions it executed: a figure the machine's load and speed do not move, to compare
code across hours (this project's machine runs 4-6 M instructions a CPU millisecond in a
quiet hour, and 2-3x fewer in a slow one).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import filemem
from bench import instructions

BIG = {"user": {"userGlobal": 10**9, "workspace": 10**9},
       "agent": {"userGlobal": 10**9, "workspace": 10**9}}
TARGET_MS = 150.0


def make_store(path: str, entries: int) -> None:
    with filemem.open_store(path, create=True, budgets=BIG, write_policy="auto") as p:
        w = filemem.write_context(session_id="bench", cwd="/home/dev/project", agent="coder")
        for start in range(0, entries, 1000):  # a seed adds at most 1,000 entries
            p.seed([{"track": "agent", "scope": "workspace",
                     "text": f"fact number {i} about the project"}
                    for i in range(start, min(start + 1000, entries))], w)


def filemem_command() -> list[str]:
    script = os.path.join(os.path.dirname(sys.executable), "filemem")
    return [script] if os.path.exists(script) else [sys.executable, "-m", "filemem"]


def run_once(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall ms, child CPU ms) of one run of ``cmd``, which must succeed."""
    with tempfile.TemporaryFile() as err:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env,
                                cwd=tempfile.gettempdir())
        _, status, usage = os.wait4(proc.pid, 0)
        wall = (time.perf_counter() - start) * 1000
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            err.seek(0)
            raise RuntimeError(f"{' '.join(cmd)} failed ({proc.returncode}): "
                               f"{err.read().decode(errors='replace')}")
    return wall, (usage.ru_utime + usage.ru_stime) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=21)
    parser.add_argument("--entries", type=int, default=1000)
    parser.add_argument("--instructions", action="store_true",
                        help="also count each command's instructions (valgrind)")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="filemem-cold-cli-")
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONDONTWRITEBYTECODE", "FILEMEM_STORE", "FILEMEM_HOME")}
    env["XDG_DATA_HOME"] = os.path.join(root, "data")  # as a person types it: no --store
    try:
        fm = filemem_command()
        # the default store there, as the command itself names it
        found = subprocess.run([*fm, "path"], env=env, capture_output=True, text=True,
                               check=True).stdout.strip()
        make_store(found, args.entries)
        writes = os.path.join(root, "writes")  # the add's own store: the reads' stays fresh
        make_store(writes, args.entries)
        add_env = {**env, "FILEMEM_STORE": writes}
        cases = {
            "python -c pass": [sys.executable, "-c", "pass"],
            'python -c "import filemem"': [sys.executable, "-c", "import filemem"],
            "filemem query fact": [*fm, "query", "fact"],
            "filemem list": [*fm, "list"],
            "filemem snapshot": [*fm, "snapshot"],
            "filemem add --yes": [*fm, "add", "--yes", "--track", "user", "--scope",
                                  "user-global", "a fact written cold"],
        }
        envs = {name: add_env if name.startswith("filemem add") else env for name in cases}
        added = 0

        def command(name: str) -> list[str]:
            nonlocal added
            cmd = cases[name]
            if name.startswith("filemem add"):  # a new text each time
                added += 1
                cmd = [*cmd[:-1], f"{cmd[-1]} {added}"]
            return cmd

        def run(name: str) -> tuple[float, float]:
            return run_once(command(name), envs[name])

        for name in cases:  # untimed: bytecode cache, OS file cache, view cache
            run(name)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cases}
        for _ in range(args.runs):
            for name in cases:
                samples[name].append(run(name))
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
              f"{load:.1f} at the end; {args.entries} entries; median of {args.runs} runs")
        counts = {name: instructions(command(name), envs[name]) for name in cases} \
            if args.instructions else {}
        if args.instructions and None in counts.values():
            print("# --instructions: valgrind is not on PATH; no counts")
        print(f"{'command':28} {'wall ms':>8} {'cpu ms':>8}"
              f"{'  M instr' if counts else ''}   against")
        for name, got in samples.items():
            wall = statistics.median(w for w, _ in got)
            cpu = statistics.median(c for _, c in got)
            verdict = ""
            if name.startswith("filemem add"):
                verdict = "no target: for comparison"
            elif name.startswith("filemem"):
                verdict = (f"target {TARGET_MS:.0f} ms: "
                           f"{'met' if wall <= TARGET_MS else 'MISSED'}")
            count = counts.get(name)
            shown = f"{count / 1e6:9.0f}" if count else ("        -" if counts else "")
            print(f"{name:28} {wall:8.0f} {cpu:8.0f}{shown}   {verdict}")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
