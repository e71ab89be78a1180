"""The memory's history proved: ``filemem verify`` (``filemem log`` is
:mod:`filemem.owner.logview`).

:func:`verify` replays history from the first commit and proves that HEAD is what the
audited commits produce: every commit's trailers parse, every change a commit makes is
claimed by one of its audit rows (an ``add`` adds that id with that text, a ``replace``
changes it to that text and the next version, a ``remove`` deletes it, a denial changes
nothing, ...), every row's claim holds, the replayed entries equal the entries at HEAD,
and every entry at HEAD is valid. Commits made outside filemem (a person's own ``git
commit``, a merge) are reported as such, not failed; replay continues from their tree.
After a clean verify, the next one resumes from the commit it proved, whose entries are
read from its tree (:mod:`filemem.owner.verifycheck`); ``full=True`` replays everything.

History is a graph, not a line: each commit is replayed from its first parent's replay,
so the two lines a ``filemem sync`` merge joins are each replayed on their own. A sync
merge's tree is recomputed from its two parents (:func:`filemem.owner.merge.check_commit`);
when it matches, the replay takes the merge's changes as they are, and the merged-in
line's replay must agree with that parent's entries.
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from filemem import ops
from filemem.files import codec
from filemem.files.codec import CodecError
from filemem.files.gitrepo import CommitInfo
from filemem.files.layout import entry_path, is_entry_path, path_problem
from filemem.model import Entry
from filemem.ops.base import Changes, Replayed
from filemem.owner import gitwalk, handedits, merge, redaction, verifycheck
from filemem.shown import counted, them
from filemem.store.auditlog import parse_rows
from filemem.store.core import Store
from filemem.types import AuditRow

# every audit action a commit can carry that changes entries -> how it is checked and
# replayed: the write operations' (filemem.ops), the owner's adopt (handedits) and the
# record of a redaction (redaction)
ROW_RULES: Final = {**ops.ROW_RULES, **handedits.ROW_RULES, **redaction.ROW_RULES}
# actions whose commit changes no file
_NO_CHANGE_SUFFIXES = ("-denied", "-failed", "-pending")
_DECODED_MAX: Final = 20_000  # entry files kept decoded during a replay


def commits_oldest_first(store: Store) -> list[CommitInfo]:
    """Every commit reachable from HEAD, parents before children (topological order)."""
    return verifycheck.commits_since(store, None) or []


# ---------------------------------------------------------------- verify


@dataclass
class Report:
    commits: int = 0
    filemem_commits: int = 0
    external: list[dict[str, str]] = field(default_factory=list)
    merges: int = 0
    rows: int = 0
    entries: int = 0
    problems: list[dict[str, str]] = field(default_factory=list)
    resumed_from: str | None = None  # the commit a clean earlier verify proved

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "commits": self.commits, "filememCommits": self.filemem_commits,
                "externalCommits": self.external, "merges": self.merges, "auditRows": self.rows,
                "entriesAtHead": self.entries, "problems": self.problems,
                "resumedFrom": self.resumed_from}


def _decoded(store: Store, blob: str, cache: dict[str, Entry | None]) -> Entry | None:
    if blob not in cache:
        if len(cache) >= _DECODED_MAX:  # a long history: memory bounded, a few re-reads
            cache.clear()
        try:
            cache[blob] = codec.decode(store.git.read_blob(blob)).entry
        except CodecError:
            cache[blob] = None
    return cache[blob]


def _check_commit(store: Store, info: CommitInfo, rows: list[AuditRow],
                  changes: list[tuple[str, str | None, str | None]],
                  cache: dict[str, Entry | None],
                  where: Mapping[str, str]) -> tuple[list[str], Changes]:
    """Problems with one filemem commit (changes not claimed by a row, claims not held),
    and what it did to entries (``where``: the file of each audited entry before it). A row
    about a file written before entry files had a final newline gets, in ``rows`` itself,
    the text that file reads as now (:func:`_as_read_now`), so the replay that follows
    agrees with HEAD."""
    problems: list[str] = []
    added: dict[str, Entry] = {}
    modified: dict[str, tuple[Entry, Entry]] = {}
    deleted: dict[str, Entry] = {}
    others: list[str] = []
    unreadable_deleted: list[str] = []
    files: dict[str, str] = {}  # entry id -> the blob its row speaks of (new, else old)
    for path, old, new in changes:
        if not is_entry_path(path):
            others.append(path)
            continue
        before = _decoded(store, old, cache) if old else None
        after = _decoded(store, new, cache) if new else None
        if before is not None and old is not None:
            files.setdefault(before.id, old)
        if after is not None and new is not None:
            files[after.id] = new
        if new is not None and after is None:
            problems.append(f"{path} is not a valid entry file")
            continue
        if new is None and (before is None or where.get(before.id) != path):
            # an invalid file removed (filemem adopt): unreadable, or not the file the
            # audited entry is in (a copy of it, or the entry moved to a folder it does not
            # belong in), which no read served
            unreadable_deleted.append(path)
            continue
        if after is not None and before is not None:
            modified[after.id] = (before, after)
        elif after is not None:
            added[after.id] = after
        elif before is not None:
            deleted[before.id] = before
    claimed: set[str] = set()
    actions = {r["action"] for r in rows}
    done = Changes(added, modified, deleted)
    rows[:] = [_as_read_now(store, r, files.get(str(r.get("entryId") or ""))) for r in rows]
    for r in rows:
        action, eid = r["action"], r.get("entryId")
        rule = ROW_RULES.get(action)
        if rule is not None:  # a write's row: the module that writes it says what it claims
            problem = rule.check(r, done)
            if problem is not None:
                problems.append(problem)
        elif action == "init":
            if info.parents:
                problems.append("an init row in a commit that is not the first one")
        elif not action.endswith(_NO_CHANGE_SUFFIXES):
            problems.append(f"unknown audit action {action!r}")
        if eid:
            claimed.add(eid)
    for eid in (added.keys() | modified.keys() | deleted.keys()) - claimed:
        problems.append(f"entry {eid} changed without an audit row claiming it")
    # a file that is not an entry changes in the first commit (the template) or when an
    # `edit` row names it ("edited filemem.yaml"); an invalid entry file deleted, or moved
    # to <id>.md by an adopt of its fix, likewise ("deleted <path>", "moved <path>")
    named = {str(r.get("text") or "").split(" ", 1)[-1] for r in rows
             if r["action"] == "edit" and not r.get("entryId")}
    for path in others + unreadable_deleted:
        if not (("init" in actions and not info.parents) or path in named):
            problems.append(f"{path} changed without an audit row naming it")
    return problems, done


def _as_read_now(store: Store, r: AuditRow, blob: str | None) -> AuditRow:
    """``r`` with the text its file reads as today, where the file was written before entry
    files had a final newline and its text ended in one (see :func:`codec.legacy_text`):
    the row recorded the text that was approved, and the same bytes now read as that text
    without its last newline. Any other row as it is."""
    text = r.get("text")
    if blob is None or not isinstance(text, str) or not text.endswith("\n"):
        return r
    data = store.git.read_blob(blob)
    if codec.legacy_text(data) != text:
        return r
    return {**r, "text": codec.decode(data).entry.text}


class _Replay:
    """The entries the audited history has produced at one commit: id -> (text, version),
    and the file of each id (when the same id is in two files, the first in path order is
    the entry, as for a read)."""

    def __init__(self, entries: Replayed | None = None,
                 where: dict[str, str] | None = None) -> None:
        self.entries: Replayed = entries if entries is not None else {}
        self.where: dict[str, str] = where if where is not None else {}

    def copy(self) -> _Replay:
        return _Replay(dict(self.entries), dict(self.where))


def _apply(replay: _Replay, store: Store, changes: list[tuple[str, str | None, str | None]],
           cache: dict[str, Entry | None]) -> list[str]:
    """Take a commit made outside filemem (or a sync merge, whose tree verify recomputed)
    as it is (an invalid file, or one in the wrong
    place, is no entry, as for a read); returns the audited entries it deletes. One it
    leaves in an invalid file (bad YAML, moved to a wrong folder) is not deleted: while the
    file is invalid at HEAD that is reported on its own, and a fix brings the entry back."""
    before_ids = set(replay.entries)
    spoiled: set[str] = set()
    files = [(path, _decoded(store, old, cache) if old is not None else None, new)
             for path, old, new in changes if is_entry_path(path)]
    for path, before, _new in files:  # every old version first: a file may move
        if before is not None and replay.where.get(before.id, path) == path:
            replay.entries.pop(before.id, None)
            replay.where.pop(before.id, None)
    for path, before, new in files:
        after = _decoded(store, new, cache) if new is not None else None
        if after is not None and path_problem(path, after) is None:
            if replay.where.get(after.id, path) < path and after.id in replay.entries:
                continue  # the same id again, after its file: not the entry
            replay.entries[after.id] = (after.text, after.version)
            replay.where[after.id] = path
        elif after is not None:
            spoiled.add(after.id)
        elif before is not None and new is not None:
            spoiled.add(before.id)
    return sorted(before_ids - set(replay.entries) - spoiled)


def _apply_rows(replay: _Replay, rows: list[AuditRow], done: Changes) -> None:
    """Replay a filemem commit from its audit rows (an edit takes the file's version)."""
    for r in rows:
        rule = ROW_RULES.get(r["action"])
        if rule is not None:
            rule.replay(r, replay.entries, done)
    for eid in done.deleted:
        replay.where.pop(eid, None)
    for e in [*done.added.values(), *(after for _b, after in done.modified.values())]:
        replay.where[e.id] = entry_path(e)  # filemem writes an entry where it belongs


class _Branches:
    """The entries the audited history has produced, per commit: each commit's replay
    starts from its first parent's, so two lines of history merged by a sync are replayed
    each on its own. A commit's replay is kept only while a child still needs it."""

    def __init__(self, commits: list[CommitInfo]) -> None:
        self.waiting: dict[str, int] = {}
        for info in commits:
            for parent in info.parents:
                self.waiting[parent] = self.waiting.get(parent, 0) + 1
        self.done: dict[str, _Replay] = {}

    def start(self, info: CommitInfo) -> _Replay:
        """The replay a commit starts from: its first parent's (a copy, entries and files,
        if another child still needs it)."""
        if not info.parents:
            return _Replay()
        first = info.parents[0]
        self.waiting[first] -= 1
        if self.waiting[first] == 0:
            return self.done.pop(first, None) or _Replay()
        kept = self.done.get(first)
        return kept.copy() if kept is not None else _Replay()

    def peek(self, sha: str) -> Replayed:
        """What the history gave at ``sha``, a parent of the commit being replayed."""
        kept = self.done.get(sha)
        return kept.entries if kept is not None else {}

    def finish(self, info: CommitInfo, replay: _Replay) -> None:
        """Keep a commit's replay for its children; release its other parents'."""
        for other in info.parents[1:]:
            self.waiting[other] -= 1
            if self.waiting[other] == 0:
                self.done.pop(other, None)
        if self.waiting.get(info.sha, 0) > 0:
            self.done[info.sha] = replay


def _tree_entries(store: Store, tree: str, cache: dict[str, Entry | None]) -> Replayed:
    """The entries of a tree as a read sees them: a valid file in its place; the same id
    twice, the first in path order."""
    return _tree_replay(store, tree, cache).entries


def _tree_replay(store: Store, tree: str, cache: dict[str, Entry | None]) -> _Replay:
    """:func:`_tree_entries` with the file of each."""
    out = _Replay()
    for path, _mode, blob in sorted(store.git.walk(tree)):
        if is_entry_path(path):
            entry = _decoded(store, blob, cache)
            if entry is not None and path_problem(path, entry) is None \
                    and entry.id not in out.entries:
                out.entries[entry.id] = (entry.text, entry.version)
                out.where[entry.id] = path
    return out


def _mismatch(where: str, at: Replayed, replayed: Replayed,
              paths: dict[str, str]) -> str | None:
    """The problem when the entries of a commit (``at``) are not what replaying the
    audited history gave (``replayed``), with the entries named and the way to look and
    repair; None if they agree."""
    if at == replayed:
        return None
    extra = sorted(at.keys() - replayed.keys())
    missing = sorted(replayed.keys() - at.keys())
    differ = sorted(k for k in at.keys() & replayed.keys() if at[k] != replayed[k])
    versions = [k for k in differ if at[k][1] != replayed[k][1]]
    named = [f"{k} is version {at[k][1]} at {where} but version {replayed[k][1]} in the "
             "audited history" if k in versions else
             f"{k} has another text at {where} than in the audited history" for k in differ[:3]]
    named += [f"{k} is at {where} without an audit row adding it" for k in extra[:3]]
    named += [f"{k} was deleted without an audit row removing it" for k in missing[:3]]
    first = (differ + extra + missing)[:1]
    look = (f"`git log -p -- {paths[first[0]]}` shows the commits that changed that file"
            if first and first[0] in paths else
            "`git log -p` shows the commits that changed the entries")
    if first:
        look += f", and `filemem log --entry {first[0][:8]}` its audited versions"
    return (f"replaying history does not give the entries at {where} ({len(extra)} extra, "
            f"{len(missing)} missing, {len(differ)} differ: {'; '.join(named)}). "
            f"{look}. {_in_step(where, extra, missing, versions)}")


def _in_step(where: str, extra: list[str], missing: list[str], versions: list[str]) -> str:
    """What brings the replay and ``where`` back in step: `filemem replace` counts on from
    the replayed version, a git commit or an adopted edit takes the file's (a rebase's gap)."""
    if where != "HEAD":  # a line of history merged in: nothing written now changes it
        return ("That line of history is merged in as it is: nothing written now changes this, "
                "and it stays reported as its record (see the commits named above)")
    way = ("To undo a change made without filemem, `git revert <that commit>` (git's own "
           "commit is taken as it is, so history and HEAD agree again)")
    if extra or versions:
        way += ("; to keep what HEAD has, change each such entry's file (its text, or only "
                "its `version:` line) and `filemem adopt` it: an adopted edit is recorded at "
                "the version its file then has, which puts history and HEAD in step "
                "(`filemem replace` does not: it counts on from the audited version)")
    elif not missing:
        way += ("; to keep it, write the text you want with `filemem replace` (a new audited "
                "version), or edit the file and `filemem adopt` it")
    if missing:
        way += ("; an entry missing at HEAD comes back by that revert (`filemem remove` it "
                "then, to have it gone)")
    return way


def verify(store: Store, progress: Callable[[int, int], None] | None = None, *,
           full: bool = False) -> Report:
    """Replay the history (from the last clean verify's commit unless ``full``); a
    :class:`Report` (``ok`` False on any real problem). ``progress(done, total)`` after
    each commit replayed."""
    report = Report()
    # HEAD's entries by blob, as the view has them (decoded from git, or from the view cache
    # after encoding each gave its blob's sha again): the replay of a tree reads most of them
    state = store.state()
    cache: dict[str, Entry | None] = {state.blobs[path]: state.entries[eid] for eid, path in
                                      itertools.islice(state.paths.items(), _DECODED_MAX)}
    removals: list[_Removal] = []
    point = None if full else verifycheck.load(store)
    commits = verifycheck.commits_since(store, point.commit) if point is not None else None
    if point is None or commits is None:
        commits = commits_oldest_first(store)
        branches = _Branches(commits)
        replay = _Replay()
    else:  # resume: the proved commit's entries are those of its tree
        report.resumed_from = point.commit
        report.commits, report.filemem_commits = point.commits, point.filemem_commits
        report.external, report.merges, report.rows = point.external, point.merges, point.rows
        removals = [_Removal(0, store.git.commit(sha), ids, {sha, point.commit})
                    for sha, ids in point.removals]  # every later commit descends from both
        branches = _Branches(commits)
        replay = _tree_replay(store, store.git.commit(point.commit).tree, cache)
        branches.done[point.commit] = replay
    infos = {info.sha: info for info in commits}
    total = len(commits)
    # the files each commit changed, by git when it is there (git stops when this does)
    with contextlib.closing(gitwalk.first_parent_diffs(store.git, commits)) as diffs:
        for i, (info, by_git) in enumerate(zip(commits, diffs, strict=True)):
            report.commits += 1
            replay = branches.start(info)
            if by_git is not None:
                changes = by_git
            else:
                first = info.parents[0] if info.parents else None
                parent_tree = None if first is None else \
                    (infos[first] if first in infos else store.git.commit(first)).tree
                changes = list(store.git.diff(parent_tree, info.tree))
            try:
                rows = parse_rows(info.message)
            except ValueError as exc:
                report.problems.append({"commit": info.sha, "problem":
                                        f"audit trailers do not parse: {exc}"})
                rows = []
            merging = len(info.parents) > 1
            if merging:
                report.merges += 1
            if rows is None or (merging and not rows):
                report.external.append({"commit": info.sha,
                                        "subject": info.message.split("\n", 1)[0]})
                dropped = _external(store, info, replay, branches, changes, cache)
                if dropped:  # e.g. a `git commit -a` that built its tree from a stale index
                    removals.append(_Removal(len(report.problems), info, dropped, {info.sha}))
            elif merging:
                report.filemem_commits += 1
                report.rows += len(rows)
                _check_merge(store, info, rows, branches, cache, report)
                _apply(replay, store, changes, cache)  # the recomputed merge: take its tree
            else:
                report.filemem_commits += 1
                report.rows += len(rows)
                problems, done = _check_commit(store, info, rows, changes, cache,
                                               replay.where)
                sha = info.sha[:12]
                for problem in problems:  # trailers that do not match the commit: not filemem's
                    report.problems.append({"commit": info.sha, "problem": (
                        f"{problem} (`git show {sha}` shows the commit: its audit rows do not "
                        "describe what it changed, so it was made or altered outside filemem. "
                        f"`git revert {sha}` undoes its change; this finding stays in the "
                        "report as the record of that commit)")})
                _apply_rows(replay, rows, done)
            branches.finish(info, replay)
            for r in removals:
                r.after(info, replay)
            removals = [r for r in removals if r.ids]
            if progress is not None:
                progress(i + 1, total)
    state = store.state()
    report.entries = len(state.entries)
    for r in reversed(removals):
        lost = [eid for eid in r.ids if eid not in state.entries]
        if lost:
            report.problems.insert(r.at, {"commit": r.commit.sha,
                                          "problem": _removal(r.commit, lost)})
    for bad in store.invalid.problems(state):  # the file, its commit and the way out
        report.problems.append({"commit": str(bad.details.get("commit") or state.head),
                                "problem": bad.message})
    at_head = {e.id: (e.text, e.version) for e in state.entries.values()}
    found = _mismatch("HEAD", at_head, replay.entries, dict(state.paths))
    if found is not None:
        report.problems.append({"commit": state.head, "problem": found})
    if report.ok and state.head is not None:
        verifycheck.save(store, verifycheck.Checkpoint(
            state.head, report.commits, report.filemem_commits, report.external,
            report.merges, report.rows, [(r.commit.sha, r.ids) for r in removals]))
    elif not report.ok:
        verifycheck.forget(store)
    return report


def _check_merge(store: Store, info: CommitInfo, rows: list[AuditRow], branches: _Branches,
                 cache: dict[str, Entry | None], report: Report) -> None:
    """A sync merge: its tree is the merge recomputed from its parents, and the other line
    of history, replayed on its own, agrees with the parent the merge took in."""
    problems = merge.check_commit(store.git, info, rows)
    for problem in problems:
        report.problems.append({"commit": info.sha, "problem": problem})
    if problems:
        return
    for other in info.parents[1:]:
        other_tree = store.git.commit(other).tree
        found = _mismatch(f"commit {other[:12]} (merged by {info.sha[:12]})",
                          _tree_entries(store, other_tree, cache), branches.peek(other), {})
        if found is not None:
            report.problems.append({"commit": other, "problem": found})


def _external(store: Store, info: CommitInfo, replay: _Replay, branches: _Branches,
              changes: list[tuple[str, str | None, str | None]],
              cache: dict[str, Entry | None]) -> list[str]:
    """A commit made outside filemem is taken as it is; returns the audited entries it
    deletes, but not those another parent of a merge (a `git pull`) had already removed."""
    dropped = _apply(replay, store, changes, cache)
    for other in info.parents[1:]:
        theirs = branches.peek(other)
        dropped = [k for k in dropped if k in theirs]
    return dropped


class _Removal:
    """Audited entries a commit made outside filemem deleted (``at``: where its problem goes
    in the report). An entry a later commit on a line of history descending from it brought
    back (`git revert` of the removal, as the problem advises) is no problem any more, even
    if filemem removes it after that: the audited removal is what explains its absence."""

    __slots__ = ("_line", "at", "commit", "ids")

    def __init__(self, at: int, commit: CommitInfo, ids: list[str], line: set[str]) -> None:
        self.at, self.commit, self.ids, self._line = at, commit, ids, line

    def after(self, info: CommitInfo, replay: _Replay) -> None:
        """Take in the next commit replayed (oldest first), as ``replay`` stands after it."""
        if any(parent in self._line for parent in info.parents):
            self._line.add(info.sha)
            self.ids = [eid for eid in self.ids if eid not in replay.entries]


def _removal(info: CommitInfo, lost: list[str]) -> str:
    """The problem of a commit made outside filemem that deletes audited entries."""
    revert = f"git revert {'-m 1 ' if len(info.parents) > 1 else ''}{info.sha[:12]}"
    it = them(len(lost))
    return (f"this commit, made outside filemem, removes "
            f"{counted(len(lost), 'audited entry', 'audited entries')} ({', '.join(lost)}); "
            f"`{revert}` brings {it} back, and then this is no problem; to delete {it} on "
            f"purpose, `filemem remove` {it} after that (an audited removal), and next time "
            "delete entry files and `filemem adopt`")
