"""How long `filemem mcp` takes to be ready, beside a bare MCP SDK server, and its memory.

An agent starts its MCP servers when a session begins and waits for each to answer
`initialize` and list its tools, so this is time a person waits. Most of it is Python and
the MCP SDK importing, which no MCP server written with the SDK avoids; what filemem adds is
judged against a bare server of the same SDK (`MCPServer` with one trivial tool), started
the same way (``python -c``/``-m``) on the same Python, samples of the two interleaved so
that the machine's load falls on both alike. Target: filemem ready within 0.3 s of the
bare server.

Each sample starts a fresh process (what a client does), writes the handshake-era
`initialize` request to its stdin and times the answer line on stdout, then sends
`notifications/initialized` and `tools/list` and times that answer ("ready"). filemem's
sample then reads the snapshot resource (which opens and reads the store) and records the
server's resident memory (VmRSS, Linux) after it; target: <= 100 MB at 10,000 entries.
The CPU time each server used until ready (Linux) is printed too: it varies less than wall
time when other processes share the machine. Every stdout line must be a JSON-RPC message.

    python bench/mcp_startup.py                    # 7 samples of each, stores of 0 and 10,000
    python bench/mcp_startup.py --runs 15 --entries 2000
    python bench/mcp_startup.py --instructions      # also the instructions of each start

``--instructions`` also counts, with valgrind's callgrind, the instructions each server
executes to import and build itself (everything before it reads its first message): a
figure the machine's load and speed do not move, unlike the times above.
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
from typing import IO, Any

import filemem
from bench import instructions

BIG = {"user": {"userGlobal": 10**9, "workspace": 10**9},
       "agent": {"userGlobal": 10**9, "workspace": 10**9}}
READY_TARGET_S = 0.3  # filemem's ready time minus the bare server's
RSS_TARGET_MB = 100.0

BARE_SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("bare")


@server.tool()
def echo(text: str) -> str:
    \"\"\"Return the text.\"\"\"
    return text


server.run()
"""

# the two servers imported and built, not run: what each does before its first message
BARE_BUILD = BARE_SERVER.replace("server.run()", "")
FILEMEM_BUILD = """
from filemem.mcp.server import build_server
from filemem.mcp.sessions import MemoryService

build_server(MemoryService(workspace="/"))
"""


def make_store(path: str, entries: int) -> None:
    with filemem.open_store(path, create=True, budgets=BIG, write_policy="auto") as p:
        w = filemem.write_context(session_id="bench", cwd="/home/dev/project", agent="coder")
        for start in range(0, entries, 1000):  # a seed adds at most 1,000 entries
            p.seed([{"track": "agent", "scope": "workspace", "text": f"fact number {i}"}
                    for i in range(start, min(start + 1000, entries))], w)


def _send(stdin: IO[bytes], message: dict[str, Any]) -> None:
    stdin.write(json.dumps(message).encode() + b"\n")
    stdin.flush()


def _answer(stdout: IO[bytes], rid: int) -> dict[str, Any]:
    while True:
        line = stdout.readline()
        if not line:
            raise RuntimeError("the server closed stdout before answering")
        message: dict[str, Any] = json.loads(line)  # anything else on stdout is a bug
        assert message.get("jsonrpc") == "2.0", message
        if message.get("id") == rid:
            return message


def cpu_s(pid: int) -> float | None:
    """CPU seconds (user + system) the process has used so far (None without /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def rss_mb(pid: int) -> float | None:
    """The process's resident set size in MB (None where /proc is not there)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


class Sample:
    def __init__(self, init: float, ready: float, cpu: float | None, snapshot: float | None,
                 rss: float | None):
        self.init, self.ready, self.cpu, self.snapshot, self.rss = init, ready, cpu, snapshot, rss


def sample(cmd: list[str], *, snapshot: bool) -> Sample:
    """Start ``cmd``, time `initialize` and `tools/list`; with ``snapshot``, read the
    snapshot resource and take the RSS after it."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, cwd=tempfile.gettempdir())
    assert proc.stdin is not None and proc.stdout is not None
    try:
        _send(proc.stdin, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "mcp-startup-bench", "version": "1"}}})
        init = _answer(proc.stdout, 1)
        initialized = time.perf_counter()
        assert "serverInfo" in init["result"], init
        _send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        tools = _answer(proc.stdout, 2)
        ready = time.perf_counter()
        cpu = cpu_s(proc.pid)
        assert tools["result"]["tools"], tools
        snap_s = rss = None
        if snapshot:
            _send(proc.stdin, {"jsonrpc": "2.0", "id": 3, "method": "resources/read",
                               "params": {"uri": "filemem://snapshot"}})
            read = _answer(proc.stdout, 3)
            snap_s = time.perf_counter() - ready
            assert "contents" in read["result"], read
            rss = rss_mb(proc.pid)
        return Sample(initialized - start, ready - start, cpu, snap_s, rss)
    finally:
        proc.stdin.close()
        proc.wait(timeout=60)


def _ms(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"median {statistics.median(ms):4.0f} ms (min {min(ms):.0f}, max {max(ms):.0f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--entries", type=int, default=10_000)
    parser.add_argument("--instructions", action="store_true",
                        help="also count the instructions of each start (valgrind)")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="filemem-mcp-bench-")
    bare = [sys.executable, "-c", BARE_SERVER]
    try:
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
              f"{load:.1f}, {args.runs} runs each (bare and filemem interleaved)")
        for entries in (0, args.entries):
            store = os.path.join(root, f"store-{entries}")
            make_store(store, entries)
            ours = [sys.executable, "-m", "filemem.cli", "mcp", "--store", store]
            sample(bare, snapshot=False)  # once untimed each: warms the OS file cache
            sample(ours, snapshot=True)
            peers: list[Sample] = []
            runs: list[Sample] = []
            for _ in range(args.runs):
                peers.append(sample(bare, snapshot=False))
                runs.append(sample(ours, snapshot=True))
            peer_ready = statistics.median(s.ready for s in peers)
            ready = statistics.median(s.ready for s in runs)
            gap = ready - peer_ready
            print(f"{entries:>6} entries:")
            print(f"  bare MCP SDK server: initialize {_ms([s.init for s in peers])}, "
                  f"tools listed {_ms([s.ready for s in peers])}")
            print(f"  filemem mcp:         initialize {_ms([s.init for s in runs])}, "
                  f"tools listed {_ms([s.ready for s in runs])}")
            verdict = "met" if gap <= READY_TARGET_S else "MISSED"
            print(f"  filemem - bare (ready): {gap * 1000:+.0f} ms, target <= "
                  f"+{READY_TARGET_S * 1000:.0f} ms: {verdict}")
            peer_cpu = [s.cpu for s in peers if s.cpu is not None]
            cpu = [s.cpu for s in runs if s.cpu is not None]
            if peer_cpu and cpu:  # varies less than wall time when the machine is busy
                print(f"  CPU used until ready: bare {_ms(peer_cpu)}, filemem {_ms(cpu)}; "
                      f"difference of medians "
                      f"{(statistics.median(cpu) - statistics.median(peer_cpu)) * 1000:+.0f} ms")
            snaps = [s.snapshot for s in runs if s.snapshot is not None]
            rss = [s.rss for s in runs if s.rss is not None]
            line = f"  then the snapshot read: {_ms(snaps)}"
            if rss:
                verdict = "met" if max(rss) <= RSS_TARGET_MB else "MISSED"
                line += (f"; RSS after it median {statistics.median(rss):.0f} MB (max "
                         f"{max(rss):.0f}), target <= {RSS_TARGET_MB:.0f} MB: {verdict}")
            print(line)
        if args.instructions:
            peer_count = instructions([sys.executable, "-c", BARE_BUILD])
            count = instructions([sys.executable, "-c", FILEMEM_BUILD])
            if peer_count is None or count is None:
                print("instructions: valgrind is not on PATH; no counts")
            else:
                print(f"instructions to import and build the server: bare "
                      f"{peer_count / 1e6:,.0f} M, "
                      f"filemem {count / 1e6:,.0f} M ({(count - peer_count) / 1e6:+,.0f} M, "
                      f"{(count / peer_count - 1) * 100:+.0f}%)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
