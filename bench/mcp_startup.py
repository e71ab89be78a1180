"""How long `filemem mcp` takes to answer `initialize`, and its first tool call.

An agent starts its MCP servers when a session begins and waits for each `initialize`
answer, so this is time a person waits. The server opens the store only after answering,
so the answer must not grow with the store: each run is measured on an empty store and on
one of ``--entries`` entries (default 2,000).

Each sample starts a fresh process (what a client does), writes the handshake-era
`initialize` request to its stdin and times the answer line on stdout; then sends
`notifications/initialized` and a `memory_query` call and times that answer too (which does
include opening and reading the store). Every stdout line must be a JSON-RPC message.

    python bench/mcp_startup.py               # 5 samples per store
    python bench/mcp_startup.py --runs 10 --entries 5000
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

BIG = {"user": {"userGlobal": 10**9, "workspace": 10**9},
       "agent": {"userGlobal": 10**9, "workspace": 10**9}}


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


def sample(store: str) -> tuple[float, float]:
    """(seconds to the initialize answer, seconds from then to the first query answer)."""
    cmd = [sys.executable, "-m", "filemem.cli", "mcp", "--store", store]
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
        assert init["result"]["serverInfo"]["name"] == "filemem", init
        _send(proc.stdin, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        _send(proc.stdin, {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                           "params": {"name": "memory_query", "arguments": {"limit": 1}}})
        result = _answer(proc.stdout, 2)
        queried = time.perf_counter()
        assert not result["result"].get("isError"), result
        return initialized - start, queried - initialized
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--entries", type=int, default=2000)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="filemem-mcp-bench-")
    try:
        print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, {args.runs} runs each")
        for entries in (0, args.entries):
            store = os.path.join(root, f"store-{entries}")
            make_store(store, entries)
            sample(store)  # once untimed: warms the OS file cache and filemem's parse cache
            runs = [sample(store) for _ in range(args.runs)]
            init = [r[0] * 1000 for r in runs]
            first = [r[1] * 1000 for r in runs]
            print(f"{entries:>6} entries: initialize answered in median "
                  f"{statistics.median(init):.0f} ms (min {min(init):.0f}, max {max(init):.0f}); "
                  f"first memory_query {statistics.median(first):.0f} ms after that")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
