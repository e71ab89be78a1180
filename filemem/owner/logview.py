"""``filemem log``: the audit rows commit by commit (who, what, when, outcome), newest
first; for one entry (``--entry``, an id or a unique start of one) the commits that named
it or changed its file, found through :mod:`filemem.owner.logindex`, each with the version
and text the entry then had."""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from filemem.files import codec
from filemem.files.codec import CodecError
from filemem.files.gitrepo import CommitInfo
from filemem.files.layout import id_from_path
from filemem.model import Entry
from filemem.owner import gitwalk, logindex
from filemem.store.core import Store
from filemem.types import AuditRow


def commits_newest_first(store: Store) -> Iterator[CommitInfo]:
    """Every commit reachable from HEAD, newest first by commit time."""
    head = store.git.head()
    if head is not None:
        yield from store.git.newest_first(head)



def _entry_at(store: Store, info: CommitInfo, entry_id: str,
              changes: list[gitwalk.Change] | None) -> Entry | None:
    """The entry as the commit left it (None if the commit removed it), from the files the
    commit changed against its first parent (``changes``; None: diffed here)."""
    if changes is None:
        parent_tree = store.git.commit(info.parents[0]).tree if info.parents else None
        changes = list(store.git.diff(parent_tree, info.tree))
    for path, _old, new in changes:
        if id_from_path(path) == entry_id and new is not None:
            try:
                return codec.decode(store.git.read_blob(new)).entry
            except CodecError:
                return None
    return None


def _about(store: Store, prefix: str) -> list[CommitInfo]:
    """The commits whose rows may name an entry whose id starts with ``prefix``, newest
    first, found in :mod:`filemem.owner.logindex` (rebuilt once if it lacks a commit)."""
    head = store.git.head()
    if head is None:
        return []
    for _attempt in range(2):
        known = logindex.commits_by_entry(store)
        about = logindex.about(known, prefix)
        try:
            picked = [store.git.commit(sha) for sha in logindex.newest_first(known, head)
                      if sha in about]
        except KeyError:  # the index lacks a commit
            picked = None
        # the commits read from git anyway (HEAD's too) must be as the index has them
        if picked is not None and all(
                logindex.time_and_parents(known, c.sha) == (c.time, c.parents)
                for c in [store.git.commit(head), *picked]):
            return picked
        logindex.forget(store)
    return list(commits_newest_first(store))


def _unique_entry(store: Store, prefix: str, commits: list[CommitInfo]) -> None:
    """INVALID_INPUT unless ``prefix`` names one entry of the history."""
    from filemem import errors

    ids: set[str] = set()
    for info in commits:
        rows = store.trail.commit_rows(info)
        named = logindex.changed_entries(store, info) if logindex.external(rows) else \
            [str(r.get("entryId") or "") for r in rows]
        ids.update(i for i in named if i.startswith(prefix))
    if len(ids) > 1:
        raise errors.invalid_input(
            f"{prefix!r} is ambiguous: it is the start of {len(ids)} entry ids "
            f"({', '.join(sorted(ids)[:5])}"
            f"{', ...' if len(ids) > 5 else ''}); give more of the id")


def log(store: Store, entry_id: str | None = None, limit: int | None = None
        ) -> list[dict[str, Any]]:
    """History items newest first: the commit, its time and each audit row; with
    ``entry_id`` (or a unique prefix) only that entry's rows, with its version."""
    return list(history(store, entry_id, limit))


def history(store: Store, entry_id: str | None = None, limit: int | None = None
            ) -> Iterator[dict[str, Any]]:
    """:func:`log`'s items one by one, as the history is walked: the newest are there at
    once, where the whole of a history of 100,000 commits takes seconds. With
    ``entry_id``, INVALID_INPUT (ambiguous) comes before the first item."""
    if entry_id is None:
        yield from itertools.islice(_items(store, commits_newest_first(store), None,
                                           itertools.repeat(None)), limit)
        return
    commits = _about(store, entry_id)
    _unique_entry(store, entry_id, commits)
    # the files each commit changed, by git when it is there: its trees, delta chains of a
    # long history, read in Python took a quarter of a `log --entry` at 100,000 commits
    with contextlib.closing(gitwalk.first_parent_diffs(store.git, commits)) as diffs:
        yield from itertools.islice(_items(store, commits, entry_id, diffs), limit)


def _items(store: Store, commits: Iterable[CommitInfo], entry_id: str | None,
           diffs: Iterator[list[gitwalk.Change] | None]) -> Iterator[dict[str, Any]]:
    """The audit rows of ``commits`` (with ``entry_id``: those naming it, each with the
    entry's version, found in the commit's changed files from ``diffs``)."""
    for info, changes in zip(commits, diffs, strict=False):  # diffs: one a commit, or None
        rows = store.trail.commit_rows(info)
        if entry_id is not None and logindex.external(rows):
            yield from _external_items(store, info, rows[0], entry_id, changes)
            continue
        for r in rows:
            if entry_id is not None and not str(r.get("entryId") or "").startswith(entry_id):
                continue
            item = {"commit": info.sha, **r}
            if entry_id is not None and r.get("entryId"):
                entry = _entry_at(store, info, str(r["entryId"]), changes)
                item["version"] = entry.version if entry else None
            yield item


def _external_items(store: Store, info: CommitInfo, row: AuditRow, prefix: str,
                    changes: list[gitwalk.Change] | None) -> list[dict[str, Any]]:
    """A commit made outside filemem, in one entry's history: an item for each entry
    starting with ``prefix`` whose file it changed, with the text the file then held (the
    owner asked: a text withheld from snapshots is shown too), ``subject`` its message's."""
    items = []
    for eid, (path, blob) in sorted(logindex.changed_entries(store, info, changes).items()):
        if not eid.startswith(prefix):
            continue
        entry, done = None, "deleted its file"
        if blob is not None:
            try:
                entry, done = codec.decode(store.git.read_blob(blob)).entry, "changed its file"
            except CodecError as exc:
                done = (f"left its file unreadable as an entry ({exc}; `git show "
                        f"{info.sha[:12]}:{path}` shows it)")
        items.append({"commit": info.sha, **row, "entryId": eid,
                      "track": entry.track if entry else None,
                      "scope": entry.scope if entry else None,
                      "outcome": f"{row['outcome']}: {done}", "subject": row["text"],
                      "text": entry.text if entry else None,
                      "version": entry.version if entry else None})
    return items
