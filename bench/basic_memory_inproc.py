"""basic-memory's tools in process: run by bench/versus_basic_memory.py with the Python of
basic-memory's own venv. The same calls as over stdio, through FastMCP's in-memory client
(``fastmcp.Client(server)``: the server's lifespan, its tools, and the FastAPI app they call
through an in-process ASGI transport, with no process boundary and no JSON-RPC framing on a
pipe), so the difference from the stdio figures is what the transport costs.

    python basic_memory_inproc.py OPS QUERIES   # prints one JSON line of samples in ms

The configuration comes from the environment the caller sets (see basic_memory_load.py).
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

TEXT = ("{tag} {i:06d}: the build uses make; tests run with pytest -q; "
        "deploys go through the staging cluster first (note {i})")


async def run(ops: int, queries: int) -> dict[str, list[float]]:
    import basic_memory.mcp.prompts
    import basic_memory.mcp.resources
    import basic_memory.mcp.tools  # noqa: F401  (registers the tools, as `basic-memory mcp` does)
    from basic_memory.mcp.server import mcp
    from fastmcp import Client

    out: dict[str, list[float]] = {}
    async with Client(mcp) as c:
        async def timed(what: str, n: int, make: Any) -> None:
            samples = []
            for i in range(n):
                name, args = make(i)
                start = time.perf_counter()
                result = await c.call_tool(name, args, raise_on_error=False)
                samples.append((time.perf_counter() - start) * 1000)
                if result.is_error or str(result.data).strip() == "False":
                    raise RuntimeError(f"basic-memory {what} failed: {result.content}")
            out[what] = samples

        for _ in range(3):
            await c.call_tool("search_notes", {"query": "000001", "search_type": "text"})
        await timed("add", ops, lambda i: ("write_note", {
            "title": f"inproc {i:06d}", "directory": "inproc",
            "content": TEXT.format(tag="inproc", i=i)}))
        await timed("query", queries, lambda i: ("search_notes", {
            "query": f"{i % ops:06d}", "page_size": 10, "search_type": "text"}))
        await timed("replace", ops, lambda i: ("edit_note", {
            "identifier": f"inproc {i:06d}", "operation": "find_replace",
            "find_text": f"inproc {i:06d}:", "content": f"edited {i:06d}:"}))
        await timed("remove", ops, lambda i: ("delete_note", {"identifier": f"inproc {i:06d}"}))
    return out


def main() -> None:
    print(json.dumps(asyncio.run(run(int(sys.argv[1]), int(sys.argv[2])))))


if __name__ == "__main__":
    main()
