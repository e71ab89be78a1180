"""The names of the MCP server's write tools, without the MCP SDK: the tools are listed by
these names (``filemem.mcp.tools``), and the snapshot's first line tells the model to change
memory with them (the server's snapshot resource and prompt, and ``filemem snapshot``, which
shows a person what an MCP session gets)."""

from __future__ import annotations

from typing import Final

WRITE_METHODS: Final = ("add", "replace", "remove", "consolidate")


def tool_name(method: str) -> str:
    """The MCP tool that calls the Provider's ``method``."""
    return f"memory_{method}"


WRITE_TOOL_NAMES: Final = tuple(tool_name(m) for m in WRITE_METHODS)
