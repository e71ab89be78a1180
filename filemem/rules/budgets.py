"""Character budgets: one pool per track x scope across all workspaces and agents.

``used`` is the sum of the JavaScript lengths of the texts in the layer; a write fails with
BUDGET_EXCEEDED when ``used + addition > limit`` (equal is fine; the addition may be
negative). Nothing is ever cut or compacted to make room.
"""

from __future__ import annotations

from filemem import errors
from filemem.config import Config
from filemem.model import LAYERS
from filemem.types import Usage


def check(usage: dict[tuple[str, str], int], config: Config, track: str, scope: str,
          addition: int) -> None:
    used = usage[(track, scope)]
    limit = config.limit(track, scope)
    needed = used + addition
    if needed > limit:
        raise errors.budget_exceeded(track, scope, used, limit, needed)


def check_groups(usage: dict[tuple[str, str], int], config: Config,
                 additions: dict[tuple[str, str], int]) -> None:
    """Check several layers in order of first appearance (seed, import)."""
    for (track, scope), addition in additions.items():
        check(usage, config, track, scope, addition)


def row(usage: dict[tuple[str, str], int], config: Config, track: str,
        scope: str) -> Usage:
    return {"track": track, "scope": scope, "used": usage[(track, scope)],
            "limit": config.limit(track, scope)}


def report(usage: dict[tuple[str, str], int], config: Config) -> list[Usage]:
    """The 4 rows in the fixed order user/user-global, user/workspace, agent/..."""
    return [row(usage, config, t, s) for t, s in LAYERS]
