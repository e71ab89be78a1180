"""The write operations, one module each, and their registry.

Adding an operation: a module here with its :class:`~filemem.ops.base.Operation` (``OP``),
one line in :data:`OPERATIONS`, and a Provider method calling ``self._write("<name>", ...)``.
The bridge method, ``plan``, pending approvals and ``verify`` then know it.
"""

from __future__ import annotations

from typing import Final

from filemem import errors
from filemem.ops import add, consolidate, remove, replace, seed
from filemem.ops.base import Core, Operation, Prepared, RowRule

OPERATIONS: Final[dict[str, Operation]] = {op.name: op for op in (
    add.OP, replace.OP, remove.OP, consolidate.OP, seed.SEED, seed.IMPORT)}

# every audit action a write's commit can carry -> how verify checks and replays it
ROW_RULES: Final[dict[str, RowRule]] = {
    action: rule for op in OPERATIONS.values() for action, rule in op.rows.items()}


def operation(name: str) -> Operation:
    op = OPERATIONS.get(name)
    if op is None:
        raise errors.invalid_input(f"unknown memory write {name!r}")
    return op


__all__ = ["OPERATIONS", "ROW_RULES", "Core", "Operation", "Prepared", "RowRule", "operation"]
