"""The adapters filemem ships: pure converters between other tools' memory files and
protocol entries (no file or network access, no model calls).

Installed with the package as ``filemem._adapters``; :mod:`filemem.owner.adapters` (the registry)
loads them from there, or from this folder in a source checkout. Third-party adapters do
not go here: they register through the ``filemem.owner.adapters`` entry-point group.
"""

from __future__ import annotations

from typing import Any

from .claude_code import ClaudeCodeMemoryMd
from .hermes import HermesMemoryMd
from .mem0 import Mem0


def shipped() -> list[Any]:
    """Fresh instances of the shipped adapters, in the reference's order."""
    return [Mem0(), HermesMemoryMd(), ClaudeCodeMemoryMd()]


__all__ = ["ClaudeCodeMemoryMd", "HermesMemoryMd", "Mem0", "shipped"]
