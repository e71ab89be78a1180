"""The old import path of :mod:`filemem.mcp` (the MCP server now lives in that package).

Only what is still imported from here is kept: tests/test_errors.py imports ``_failure``.
"""

from __future__ import annotations

from .mcp.results import failure as _failure

__all__ = ["_failure"]
