"""``.filemem/cache/verified.json``: where the last clean ``filemem verify`` got to, so the
next one replays only the commits made since (``filemem verify --full`` replays all).

Saved only after a verify that found no problem, as: the commit it proved (HEAD then), the
report's counts and outside-filemem commits, and the entries that outside commits deleted
(re-checked against every later HEAD, as a full replay does). The entries the audited
history had produced at that commit are not stored: the commit was proved to hold exactly
them, so the next verify reads them from its tree in git.

What the file asserts (that history up to that commit was clean) cannot be bound to git
without a secret, so it is trusted like the owner's own earlier run: whoever can write
``.filemem/`` can write ``.git`` too, and audit trailers are not signed. Anything wrong with
the file (missing, torn, another format or filemem version, a commit that is no longer an
ancestor of HEAD) means a full replay, never an error.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass
from typing import Any, Final

from filemem.files import atomic
from filemem.files.gitrepo import CommitInfo
from filemem.store.core import Store

FORMAT: Final = 1
NAME: Final = "verified.json"


@dataclass
class Checkpoint:
    commit: str
    commits: int
    filemem_commits: int
    external: list[dict[str, str]]
    merges: int
    rows: int
    removals: list[tuple[str, list[str]]]  # (outside commit, audited entries it deleted)


def _path(store: Store) -> str:
    return os.path.join(store.meta, "cache", NAME)


def _version() -> str:
    from filemem import __version__
    return __version__


def load(store: Store) -> Checkpoint | None:
    """The last clean verify's checkpoint, or None (no file, or one not to be used)."""
    try:
        raw = atomic.read_nofollow(_path(store))
        data: Any = json.loads(raw)
        if data.get("format") != FORMAT or data.get("filemem") != _version():
            return None
        return Checkpoint(
            commit=str(data["commit"]), commits=int(data["commits"]),
            filemem_commits=int(data["filememCommits"]),
            external=[{"commit": str(e["commit"]), "subject": str(e["subject"])}
                      for e in data["external"]],
            merges=int(data["merges"]), rows=int(data["rows"]),
            removals=[(str(sha), [str(i) for i in ids]) for sha, ids in data["removals"]])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def save(store: Store, point: Checkpoint) -> None:
    """Write the checkpoint (best effort: a read-only store just replays all next time)."""
    data = {"format": FORMAT, "filemem": _version(), "commit": point.commit,
            "commits": point.commits, "filememCommits": point.filemem_commits,
            "external": point.external, "merges": point.merges, "rows": point.rows,
            "removals": [[sha, ids] for sha, ids in point.removals]}
    with contextlib.suppress(OSError):
        atomic.atomic_write(_path(store), json.dumps(data).encode(), durable=False)


def forget(store: Store) -> None:
    """Drop the checkpoint (after a verify that found a problem)."""
    with contextlib.suppress(OSError):
        os.unlink(_path(store))


def commits_since(store: Store, base: str | None) -> list[CommitInfo] | None:
    """The commits reachable from HEAD but not through ``base`` (every one, if ``base`` is
    None), parents before children. With a ``base``: None unless each of them descends from
    ``base`` alone (its parents are among them or ``base`` itself): a line of history that
    forked before ``base`` and was merged in since must be replayed from its fork, which
    only a full replay has."""
    head = store.git.head()
    if head is None:
        return None if base is not None else []
    order: list[CommitInfo] = []
    done: set[str] = set() if base is None else {base}
    # (sha, its commit once its parents are on the stack): the commit is kept on the stack,
    # not read again when its parents are done, 100,000 commits later in a long line, long
    # after the commit cache has let it go (a fifth of a `verify --full` went to reading
    # every commit twice)
    stack: list[tuple[str, CommitInfo | None]] = [(head, None)]
    while stack:
        sha, expanded = stack.pop()
        if sha in done:
            continue
        if expanded is not None:
            done.add(sha)
            order.append(expanded)
            continue
        info = store.git.commit(sha)
        if base is not None and not info.parents:
            return None  # reached a first commit without passing through base
        stack.append((sha, info))
        stack.extend((p, None) for p in reversed(info.parents) if p not in done)
    return order
