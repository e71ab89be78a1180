"""filemem beside basic-memory: the reference workload, side by side, in one run, on one disk.

basic-memory (PyPI ``basic-memory``) is a plain-files Markdown memory store with an MCP
server; it keeps the files as the truth and indexes them into SQLite (full-text search).
Both are driven the way agents use them: their MCP servers over stdio, through the official
MCP Python client (the same client, the same handshake, one session per server), with the
reference workload of issue 14 where basic-memory has a like-for-like operation:

    operation         filemem (MCP tool)          basic-memory (MCP tool)
    add               memory_add                  write_note (a new note)
    query             memory_query text, limit 10 search_notes query, page_size 10 (FTS)
    replace           memory_replace (match)      edit_note find_replace (exact title)
    remove            memory_remove (match)       delete_note (exact title)
    recent 100        - (owner side: auditList)   recent_activity page_size 100
    bulk load 1,000   seed, in process (1 commit) files written + index (`reindex`), in process
    start-up          spawn, initialize, tools/list (fresh process, empty and 1,000 entries)
    memory            VmRSS / VmHWM of the server process after the workload

The same add, query, replace and remove are then made in process, with no process boundary:
filemem through its Python API, basic-memory through FastMCP's in-memory client on its own
server object (its tools call its FastAPI app in process; bench/basic_memory_inproc.py).

filemem's approval gate, budgets and audit rows have no counterpart in basic-memory: the
filemem store runs with ``writePolicy: auto`` (the owner's configured policy) and budgets large
enough for the workload; each filemem write is one durable git commit (fsynced), each
basic-memory write a file plus SQLite rows (WAL, synchronous=NORMAL: not fsynced per write).

basic-memory is installed pinned (``BASIC_MEMORY_VERSION``) in its own venv (default
bench/.basic-memory-venv, gitignored, made on first use with a Python >= 3.12, which it needs;
never a filemem dependency). Its vector search needs an embedding model fetched at run time,
which a local-first run does not do: sqlite-vec is left out of that venv, so basic-memory runs
in its documented keyword-only mode (SQLite FTS5), the like-for-like of filemem's text query.
Both servers run with no network at all (``unshare -n``, when it is there) and basic-memory's
auto-update off; nothing leaves the machine.

    python bench/versus_basic_memory.py                 # the full run (a few minutes)
    python bench/versus_basic_memory.py --quick         # small sizes (the test runs this)
    python bench/versus_basic_memory.py --json out.json # also write the figures as JSON
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

import filemem

BASIC_MEMORY_VERSION = "0.24.1"
HERE = Path(__file__).resolve().parent
DEFAULT_VENV = HERE / ".basic-memory-venv"
BIG = 10**9
TEXT = ("{tag} {i:06d}: the build uses make; tests run with pytest -q; "
        "deploys go through the staging cluster first (note {i})")


# ---------------------------------------------------------------- basic-memory's venv


def _python_312() -> str | None:
    """A Python >= 3.12 on this machine that really runs (basic-memory's floor; a pyenv shim
    for a version that is not selected is on PATH but fails)."""
    found = [shutil.which(name) for name in ("python3.13", "python3.12", "python3.14")]
    pyenv = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.1[2-9]*/bin/python3")))
    for candidate in [*(f for f in found if f), *reversed(pyenv)]:
        probe = subprocess.run([candidate, "-c", "import sys, venv; "
                                "print(sys.version_info >= (3, 12))"],
                               capture_output=True, text=True)
        if probe.returncode == 0 and probe.stdout.strip() == "True":
            return candidate
    return None


def ensure_venv(venv: Path, python: str | None) -> Path:
    """basic-memory's venv (made and installed on first use); returns its bin folder."""
    binary = venv / "bin" / "basic-memory"
    if binary.exists():
        return binary.parent
    python = python or _python_312()
    if python is None:
        sys.exit("basic-memory needs Python 3.12 or newer and none was found (python3.12, "
                 "python3.13 on PATH, ~/.pyenv/versions): pass --python PATH")
    print(f"making {venv} with {python} and installing basic-memory=={BASIC_MEMORY_VERSION} "
          "(once; a few minutes)", file=sys.stderr)
    subprocess.run([python, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "-q"]
    subprocess.run([*pip, "install", f"basic-memory=={BASIC_MEMORY_VERSION}"], check=True)
    # keyword-only search (see the module docstring): no embedding model is ever fetched
    subprocess.run([*pip, "uninstall", "-y", "sqlite-vec"], check=True)
    return binary.parent


def offline() -> list[str]:
    """The prefix that runs a server with no network (a new, empty network namespace)."""
    if shutil.which("unshare") and subprocess.run(
            ["unshare", "-n", "true"], capture_output=True).returncode == 0:
        return ["unshare", "-n"]
    return []


def bm_env(root: Path) -> dict[str, str]:
    """basic-memory's configuration, all under ``root`` (nothing in the user's home)."""
    return {"HOME": str(root / "home"), "BASIC_MEMORY_CONFIG_DIR": str(root / "config"),
            "BASIC_MEMORY_HOME": str(root / "notes"), "BASIC_MEMORY_AUTO_UPDATE": "false",
            "BASIC_MEMORY_LOGFIRE_ENABLED": "false", "LOGFIRE_IGNORE_NO_CONFIG": "1",
            "BASIC_MEMORY_CLOUD_PROMO_OPT_OUT": "true", "HF_HUB_OFFLINE": "1",
            "DO_NOT_TRACK": "1"}


# ---------------------------------------------------------------- the two stores


def fm_store(path: Path) -> None:
    """A filemem store whose owner chose ``writePolicy: auto`` and large budgets."""
    filemem.open_store(path, create=True).close()
    config = path / "filemem.yaml"
    text = config.read_text(encoding="utf-8")
    for old in ("userGlobal: 2000", "workspace: 2000", "userGlobal: 4000", "workspace: 4000"):
        text = text.replace(old, f"{old.split(':')[0]}: {BIG}")
    config.write_text(text.replace("writePolicy: ask", "writePolicy: auto"), encoding="utf-8")
    subprocess.run(["git", "-C", str(path), "-c", "user.name=bench", "-c",
                    "user.email=bench@localhost", "commit", "-qm",
                    "bench: auto policy, big budgets", "filemem.yaml"], check=True)


def fm_seed(path: Path, n: int, rnd: int) -> float:
    """Seconds for one seed of ``n`` entries (one commit), in process."""
    w = filemem.write_context(session_id="bench", cwd=str(path.parent / "proj"))
    entries = [{"track": "agent", "scope": "workspace", "text": TEXT.format(tag=f"seed{rnd}", i=i)}
               for i in range(n)]
    with filemem.open_store(path) as p:
        start = time.perf_counter()
        p.seed(entries, w)
        took = time.perf_counter() - start
        assert len(p.query({"text": f"seed{rnd} ", "limit": 1000})["entries"]) == min(n, 1000)
    return took


def fm_inprocess(path: Path, ops: int, queries: int) -> dict[str, list[float]]:
    """The MCP workload's calls through filemem's Python API (no process boundary)."""
    proj = str(path.parent / "proj")
    w = filemem.write_context(session_id="inproc", cwd=proj)
    view = {"session": {"id": "inproc", "header": {"cwd": proj}}}
    where = {"track": "agent", "scope": "workspace"}
    with filemem.open_store(path) as p:
        p.query({"text": "warm"}, view)
        seq = itertools.count()
        out = {"add": timed_sync(lambda: p.add({**where, "text": TEXT.format(
            tag="inproc", i=next(seq) % ops)}, w), ops)}
        out["query"] = timed_sync(lambda: p.query({"text": f"{next(seq) % ops:06d}",
                                                   "limit": 10}, view), queries)
        seq = iter(range(ops))
        out["replace"] = timed_sync(lambda: p.replace({**where, "match": (
            f"inproc {(i := next(seq)):06d}:"), "text": TEXT.format(tag="edited", i=i)}, w), ops)
        seq = iter(range(ops))
        out["remove"] = timed_sync(lambda: p.remove({**where, "match": (
            f"edited {next(seq):06d}:")}, w), ops)
        assert not p.query({"text": "edited "}, view)["entries"]
    return out


def bm_inprocess(bin_dir: Path, root: Path, ops: int, queries: int) -> dict[str, list[float]]:
    out = subprocess.run([*offline(), str(bin_dir / "python"),
                          str(HERE / "basic_memory_inproc.py"), str(ops), str(queries)],
                         env={**os.environ, **bm_env(root), "BASIC_MEMORY_MCP_PROJECT": "main"},
                         capture_output=True, text=True, check=True, cwd=root)
    result: dict[str, list[float]] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def fm_audit(path: Path, n: int) -> list[float]:
    with filemem.open_store(path) as p:
        return timed_sync(lambda: p.audit_list(100), n)


def bm_seed(bin_dir: Path, root: Path, n: int, rnd: int) -> dict[str, Any]:
    out = subprocess.run([*offline(), str(bin_dir / "python"), str(HERE / "basic_memory_load.py"),
                          str(n), str(rnd)], env={**os.environ, **bm_env(root)},
                         capture_output=True, text=True, check=True, cwd=root)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["notes"] == n and result["found"] == n, result
    return result


# ---------------------------------------------------------------- the MCP side


class Server:
    """How to start one server and speak its tools."""

    name: str

    def params(self) -> StdioServerParameters:
        raise NotImplementedError

    def add(self, i: int) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def query(self, i: int) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def replace(self, i: int) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def remove(self, i: int) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError

    def recent(self) -> tuple[str, dict[str, Any]] | None:
        return None

    def count(self, text: str) -> tuple[str, dict[str, Any]]:
        raise NotImplementedError


class Filemem(Server):
    name = "filemem"

    def __init__(self, store: Path) -> None:
        self.store = store

    def params(self) -> StdioServerParameters:
        return StdioServerParameters(
            command=offline()[0] if offline() else sys.executable,
            args=[*offline()[1:], *([sys.executable] if offline() else []),
                  "-m", "filemem.cli", "mcp", "--store", str(self.store)],
            cwd=str(self.store.parent / "proj"))

    def _where(self) -> dict[str, Any]:
        return {"track": "agent", "scope": "workspace"}

    def add(self, i: int) -> tuple[str, dict[str, Any]]:
        return "memory_add", {**self._where(), "text": TEXT.format(tag="new", i=i)}

    def query(self, i: int) -> tuple[str, dict[str, Any]]:
        return "memory_query", {"text": f"{i:06d}", "limit": 10}

    def replace(self, i: int) -> tuple[str, dict[str, Any]]:
        return "memory_replace", {**self._where(), "match": f"new {i:06d}:",
                                  "text": TEXT.format(tag="changed", i=i)}

    def remove(self, i: int) -> tuple[str, dict[str, Any]]:
        return "memory_remove", {**self._where(), "match": f"changed {i:06d}:"}

    def count(self, text: str) -> tuple[str, dict[str, Any]]:
        return "memory_query", {"text": text, "limit": 1000}


class BasicMemory(Server):
    name = "basic-memory"

    def __init__(self, bin_dir: Path, root: Path) -> None:
        self.bin_dir, self.root = bin_dir, root

    def params(self) -> StdioServerParameters:
        cmd = [*offline(), str(self.bin_dir / "basic-memory"), "mcp", "--project", "main"]
        return StdioServerParameters(command=cmd[0], args=cmd[1:], env=bm_env(self.root),
                                     cwd=str(self.root))

    def add(self, i: int) -> tuple[str, dict[str, Any]]:
        return "write_note", {"title": f"new {i:06d}", "directory": "bench",
                              "content": TEXT.format(tag="new", i=i)}

    def query(self, i: int) -> tuple[str, dict[str, Any]]:
        return "search_notes", {"query": f"{i:06d}", "page_size": 10, "search_type": "text"}

    def replace(self, i: int) -> tuple[str, dict[str, Any]]:
        return "edit_note", {"identifier": f"new {i:06d}", "operation": "find_replace",
                             "find_text": f"new {i:06d}:", "content": f"changed {i:06d}:"}

    def remove(self, i: int) -> tuple[str, dict[str, Any]]:
        return "delete_note", {"identifier": f"new {i:06d}"}

    def recent(self) -> tuple[str, dict[str, Any]] | None:
        return "recent_activity", {"page_size": 100, "timeframe": "1d"}

    def count(self, text: str) -> tuple[str, dict[str, Any]]:
        return "search_notes", {"query": text, "search_type": "text", "output_format": "json"}


def _server_pid() -> int:
    """The newest child of this process: the server the client just started (``unshare -n``
    execs the server in its own process, so the pid is the server's)."""
    me = str(os.getpid())
    kids = []
    for stat in glob.glob("/proc/[0-9]*/stat"):
        try:
            fields = Path(stat).read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            kids.append((int(fields[19]), int(stat.split("/")[2])))
    return max(kids)[1]


def memory_mb(pid: int) -> tuple[float, float]:
    """(VmRSS, VmHWM) of ``pid`` in MB."""
    status = dict(line.split(":", 1) for line in
                  Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
    return (int(status["VmRSS"].split()[0]) / 1024, int(status["VmHWM"].split()[0]) / 1024)


def check(result: Any, what: str) -> None:
    """Every call must have done its work (basic-memory answers a delete of nothing ``false``)."""
    text = " ".join(getattr(c, "text", "") for c in result.content)
    if result.is_error or text.strip() == "false":
        raise RuntimeError(f"{what} failed: {text[:400]}")


@contextlib.asynccontextmanager
async def client(server: Server) -> AsyncIterator[Client]:
    """The official client over stdio; the server's stderr goes to a log beside its store."""
    params = server.params()
    with open(Path(str(params.cwd)) / f"{server.name}-stderr.log", "a") as log:
        async with Client(stdio_client(params, errlog=log), mode="legacy",
                          read_timeout_seconds=300) as c:
            yield c


async def count(c: Client, server: Server, text: str) -> int:
    """How many entries the server finds for ``text`` (untimed; checks the workload's work)."""
    name, args = server.count(text)
    result = await c.call_tool(name, args)
    check(result, f"{server.name} count")
    found: Any = result.structured_content
    return len(found["entries"]) if name == "memory_query" else int(found["result"]["total"])


async def expect(c: Client, server: Server, text: str, n: int) -> None:
    got = await count(c, server, text)
    if got != n:
        raise RuntimeError(f"{server.name}: {got} entries contain {text!r}, expected {n}")


async def startup(server: Server) -> tuple[float, float]:
    """(seconds from spawn to tools listed, VmRSS MB just after)."""
    start = time.perf_counter()
    async with client(server) as c:
        tools = (await c.list_tools()).tools
        took = time.perf_counter() - start
        assert tools, server.name
        rss = memory_mb(_server_pid())[0]
    return took, rss


async def timed(call: Callable[[], Awaitable[None]], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        await call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def timed_sync(call: Callable[[], Any], n: int) -> list[float]:
    out = []
    for _ in range(n):
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


async def workload(server: Server, n: int, queries: int, recents: int) -> dict[str, Any]:
    """The MCP workload in one session: n adds, queries, n replaces, n removes, recent(100)."""
    out: dict[str, Any] = {}
    async with client(server) as c:
        await c.list_tools()
        pid = _server_pid()

        def op(make: Callable[[int], tuple[str, dict[str, Any]]], what: str
               ) -> Callable[[], Awaitable[None]]:
            seq = iter(range(10**6))

            async def call() -> None:
                name, args = make(next(seq))
                check(await c.call_tool(name, args), f"{server.name} {what}")
            return call

        for _ in range(3):  # warm: the first read opens the store or the index
            name, args = server.query(1)
            check(await c.call_tool(name, args), f"{server.name} warm-up query")
        out["add"] = await timed(op(server.add, "add"), n)
        await expect(c, server, "new", n)
        out["query"] = await timed(op(lambda i: server.query(i % n), "query"), queries)
        out["replace"] = await timed(op(server.replace, "replace"), n)
        await expect(c, server, "changed", n)
        out["remove"] = await timed(op(server.remove, "remove"), n)
        await expect(c, server, "changed", 0)
        recent = server.recent()
        if recent is not None:
            async def call() -> None:
                check(await c.call_tool(*recent), f"{server.name} recent")
            out["recent 100"] = await timed(call, recents)
        out["rss"], out["hwm"] = memory_mb(pid)
    return out


# ---------------------------------------------------------------- the run and the table


def med(samples: list[float]) -> float:
    return statistics.median(samples)


def fmt(ms: float | None) -> str:
    if ms is None:
        return "-"
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.1f}" if ms >= 10 else f"{ms:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    parser.add_argument("--ops", type=int, help="adds, replaces and removes (default 200)")
    parser.add_argument("--seed", type=int, help="entries in the bulk load (default 1,000)")
    parser.add_argument("--runs", type=int, help="start-up samples per server and store (5)")
    parser.add_argument("--venv", type=Path, default=DEFAULT_VENV,
                        help="basic-memory's venv (made on first use)")
    parser.add_argument("--python", help="a Python >= 3.12 to make that venv with")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args()
    ops = args.ops or (5 if args.quick else 200)
    seed = args.seed or (20 if args.quick else 1000)
    runs = args.runs or (1 if args.quick else 5)
    queries, recents = 5 * ops, ops

    bin_dir = ensure_venv(args.venv, args.python)
    root = Path(tempfile.mkdtemp(prefix="versus-bm-", dir=os.environ.get("BENCH_DIR")))
    try:
        fm, bm = root / "fm" / "store", root / "bm"
        (root / "fm" / "proj").mkdir(parents=True)
        bm.mkdir()
        fm_store(fm)
        empty_fm, empty_bm = root / "fm0" / "store", root / "bm0"
        (root / "fm0" / "proj").mkdir(parents=True)
        empty_bm.mkdir()
        fm_store(empty_fm)
        print(f"filemem {filemem.__version__} on Python {sys.version.split()[0]}, "
              f"basic-memory {BASIC_MEMORY_VERSION} on "
              f"{subprocess.run([str(bin_dir / 'python'), '-V'], capture_output=True, text=True).stdout.split()[1]}; "  # noqa: E501
              f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; stores in {root} "
              f"({'no network: unshare -n' if offline() else 'network namespace unavailable'})",
              flush=True)
        figures: dict[str, dict[str, Any]] = {"filemem": {}, "basic-memory": {}}
        fm_s, bm_s = fm_seed(fm, seed, 0), bm_seed(bin_dir, bm, seed, 0)
        figures["filemem"]["bulk load"] = fm_s * 1000
        figures["basic-memory"]["bulk load"] = bm_s["seconds"] * 1000
        figures["basic-memory"]["bulk load parts"] = bm_s
        print(f"bulk load of {seed}: filemem {fm_s * 1000:.0f} ms, basic-memory "
              f"{bm_s['seconds'] * 1000:.0f} ms ({bm_s['write_files'] * 1000:.0f} ms writing "
              f"the files, {bm_s['index'] * 1000:.0f} ms indexing)", flush=True)
        servers = {"filemem": (Filemem(empty_fm), Filemem(fm)),
                   "basic-memory": (BasicMemory(bin_dir, empty_bm), BasicMemory(bin_dir, bm))}
        for label, index in (("start-up, empty", 0), (f"start-up, {seed} entries", 1)):
            for pair in servers.values():
                anyio.run(startup, pair[index])  # once untimed: the OS file cache
            samples: dict[str, list[tuple[float, float]]] = {n: [] for n in servers}
            for _ in range(runs):  # alternate, so that both see the same load
                for name, pair in servers.items():
                    samples[name].append(anyio.run(startup, pair[index]))
            for name in servers:
                figures[name][label] = med([s[0] * 1000 for s in samples[name]])
                figures[name][f"rss after {label}"] = med([s[1] for s in samples[name]])
        print("start-up measured", flush=True)
        for name, pair in servers.items():
            got = anyio.run(workload, pair[1], ops, queries, recents)
            for key, value in got.items():
                figures[name][key] = med(value) if isinstance(value, list) else value
            print(f"{name} workload measured", flush=True)
        figures["filemem"]["auditList(100), in process"] = med(fm_audit(fm, recents))
        for name, got in (("filemem", fm_inprocess(fm, ops, queries)),
                          ("basic-memory", bm_inprocess(bin_dir, bm, ops, queries))):
            for key, value in got.items():
                figures[name][f"{key}, in process"] = med(value)
        print("in-process calls measured", flush=True)
        report(figures, seed, ops, queries, recents, runs)
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2), encoding="utf-8")
    finally:
        shutil.rmtree(root, ignore_errors=True)


def report(figures: dict[str, dict[str, Any]], seed: int, ops: int, queries: int,
           recents: int, runs: int) -> None:
    f, b = figures["filemem"], figures["basic-memory"]
    rows = [(f"add (x{ops})", "add"), (f"query (x{queries})", "query"),
            (f"replace (x{ops})", "replace"), (f"remove (x{ops})", "remove"),
            (f"recent activity, 100 (x{recents})", "recent 100"),
            (f"bulk load of {seed}, in process (x1)", "bulk load"),
            (f"start-up, empty store (x{runs})", "start-up, empty"),
            (f"start-up, {seed} entries (x{runs})", f"start-up, {seed} entries"),
            (f"add, in process (x{ops})", "add, in process"),
            (f"query, in process (x{queries})", "query, in process"),
            (f"replace, in process (x{ops})", "replace, in process"),
            (f"remove, in process (x{ops})", "remove, in process")]
    print(f"\n{'operation (median ms)':<38} {'filemem':>10} {'basic-memory':>13} {'ratio':>7}")
    for label, key in rows:
        fv, bv = f.get(key), b.get(key)
        ratio = f"{bv / fv:.1f}x" if fv and bv else "-"
        print(f"{label:<38} {fmt(fv):>10} {fmt(bv):>13} {ratio:>7}")
    print(f"{'auditList(100), in process':<38} {fmt(f['auditList(100), in process']):>10} "
          f"{'-':>13} {'-':>7}")
    for label, key in ((f"RSS after start-up, {seed} entries (MB)",
                        f"rss after start-up, {seed} entries"),
                       ("RSS after the workload (MB)", "rss"),
                       ("peak RSS, VmHWM (MB)", "hwm")):
        ratio = f"{b[key] / f[key]:.1f}x" if f.get(key) else "-"
        print(f"{label:<38} {f[key]:>10.0f} {b[key]:>13.0f} {ratio:>7}")
    print("ratio = basic-memory / filemem (above 1: filemem is faster or smaller)")


if __name__ == "__main__":
    main()
