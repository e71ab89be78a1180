"""The entry-level merge of a sync, and the three-way text merge it uses for other files.

A pure algorithm: it reads git objects (the two commits, their merge base) and returns file
changes; the sync (:mod:`filemem.owner.sync`) fetches, commits and pushes. Entries are
separate files named by id, so adds on both sides merge cleanly. The conflict rules:

- the same entry changed on both sides (replaced, moved, or added twice with one id):
  nothing is lost. The version updated later keeps the id (tie: the higher version, then
  the larger blob hash, so every machine decides alike); the other version becomes a new
  entry in its own layer (a new id derived from the old id and its content, version 1,
  created when that text was written).
- removed on one side, changed on the other: the changed version is kept.
- a non-entry file (``filemem.yaml``, ``README.md``, ...) changed on both sides: a
  three-way line merge (the ``merge3`` package); if the changes overlap, the file is not
  text, or the merged ``filemem.yaml`` would not be a valid configuration, the local
  version is kept and the remote's is named (commit and blob) so nothing is lost.

Each resolution is a :class:`Conflict` (a ``sync-conflict`` audit row). The merge depends
only on the two commits and their merge base, so ``filemem verify`` can recompute it.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from filemem import config as config_mod
from filemem.errors import SyncError
from filemem.files import codec
from filemem.files.gitindex import hash_blob
from filemem.files.gitrepo import BRANCH, CommitInfo, GitRepo, PendingObjects
from filemem.files.layout import entry_path, id_from_path, is_entry_path
from filemem.model import Entry, iso_ms
from filemem.store.auditlog import row
from filemem.store.names import CONFIG_FILE
from filemem.types import AuditRow

SOURCE: Final = "filemem"
_FORK_NAMESPACE: Final = b"filemem-sync-fork\0"

Version = tuple[str, str]  # (path, blob sha) of a file on one side
Key = tuple[str, str]  # ("entry", id) or ("file", path): what the merge matches up


@dataclass
class Conflict:
    """One resolution the merge made; becomes a ``sync-conflict`` audit row."""

    kind: str  # both-changed | removed-vs-changed | file
    path: str
    kept: str  # local | remote | both
    message: str
    entry: Entry | None = None  # the entry as kept under its id
    new_entry_id: str | None = None

    def to_json(self) -> dict[str, Any]:
        e = self.entry
        return {"kind": self.kind, "path": self.path, "entryId": e.id if e else None,
                "track": e.track if e else None, "scope": e.scope if e else None,
                "kept": self.kept, "newEntryId": self.new_entry_id, "message": self.message}

    def row(self) -> AuditRow:
        e = self.entry
        return row("sync-conflict", track=e.track if e else None, scope=e.scope if e else None,
                   entry_id=e.id if e else None, text=e.text if e else self.path,
                   outcome=self.message, source=SOURCE)


def merge_base(git: GitRepo, ours: str, theirs: str) -> str | None:
    """The merge base of two commits, or None if their histories are unrelated.

    dulwich's walk visits commits newest first and stops once only common ancestors are
    left; among commits of one second (filemem's usual pace, or clocks that differ between
    machines) it can visit an old common ancestor before the newer one that descends from
    it, and then answers both, oldest first. So bases that are ancestors of another base
    are dropped (git's remove_redundant): a fast-forward stays one, and a merge is
    three-way against the nearest base, not an older one."""
    from dulwich.graph import find_merge_base

    shas: list[Any] = [ours.encode(), theirs.encode()]
    found = [b.decode() for b in find_merge_base(git.repo, shas)]
    bases = [b for b in found if not _reaches(git, b, [o for o in found if o != b])]
    return bases[0] if bases else None


def _reaches(git: GitRepo, target: str, sources: list[str]) -> bool:
    """Whether ``target`` is an ancestor of one of ``sources``. Paints the ancestors of
    ``target`` and of ``sources`` in one walk (commit times only order it) and stops when
    every commit left to visit is an ancestor of both: the commits between a source and
    ``target`` descend from ``target``, so they are never painted both and the walk
    reaches ``target`` from that side before it stops, whatever the commit times."""
    import heapq

    if not sources:
        return False
    one, other, both = 1, 2, 3
    flags: dict[str, int] = {target: one}
    for sha in sources:
        flags[sha] = flags.get(sha, 0) | other
    if flags[target] == both:
        return True
    queue = [(-git.commit(sha).time, sha) for sha in flags]
    heapq.heapify(queue)
    while any(flags[sha] != both for _t, sha in queue):
        _t, sha = heapq.heappop(queue)
        paint = flags[sha]
        for parent in git.commit(sha).parents:
            had = flags.get(parent, 0)
            if had | paint == had:
                continue
            flags[parent] = had | paint
            if parent == target:
                return True  # only the other side can add paint to target
            heapq.heappush(queue, (-git.commit(parent).time, parent))
    return False


def _key(path: str) -> Key:
    eid = id_from_path(path) if is_entry_path(path) else None
    return ("entry", eid) if eid else ("file", path)


def _side(git: GitRepo, base_tree: str | None, tree: str, who: str
          ) -> dict[Key, tuple[Version | None, Version | None]]:
    """What one side changed since the merge base, per entry id (so a move is one change)
    and per other file: key -> (base version, this side's version); None = absent."""
    out: dict[Key, tuple[Version | None, Version | None]] = {}
    for path, old, new in git.diff(base_tree, tree):
        key = _key(path)
        before, after = out.get(key, (None, None))
        if old is not None:
            before = (path, old)
        if new is not None:
            if after is not None:
                raise SyncError("REMOTE_INVALID", f"{who} has two files for entry {key[1]} "
                                f"({after[0]}, {path}); nothing was changed")
            after = (path, new)
        out[key] = (before, after)
    return out


@dataclass
class Plan:
    """The merge as file changes on top of the local tree, and what it did."""

    changes: dict[str, bytes | None] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)  # other files taken or merged
    conflicts: list[Conflict] = field(default_factory=list)

    def take(self, before: Version | None, after: Version | None, data: bytes | None) -> None:
        """Make the local tree hold ``after`` where it held ``before``."""
        if before is not None and (after is None or after[0] != before[0]):
            self.changes[before[0]] = None
        if after is not None:
            assert data is not None
            self.changes[after[0]] = data


class _Merger:
    """Builds the entry-level merge of ``theirs`` into the local state (see module doc)."""

    def __init__(self, git: GitRepo, ours_tree: str, remote: str, theirs: str) -> None:
        self.git, self.ours_tree, self.remote, self.theirs = git, ours_tree, remote, theirs
        self.plan = Plan()

    def run(self, base: str | None) -> Plan:
        base_tree = self.git.commit(base).tree if base else None
        ours = _side(self.git, base_tree, self.ours_tree, "the local branch")
        theirs = _side(self.git, base_tree, self.git.commit(self.theirs).tree,
                       f"{self.remote}/{BRANCH}")
        for key in sorted(theirs):
            before, t = theirs[key]
            if key not in ours:
                self._take_theirs(key, before, t)
                continue
            o = ours[key][1]
            if o == t:
                continue
            if key[0] == "entry":
                self._entry_conflict(before, o, t)
            else:
                self._file_conflict(key[1], before, o, t)
        return self.plan

    def _take_theirs(self, key: Key, before: Version | None, t: Version | None) -> None:
        self.plan.take(before, t, self.git.read_blob(t[1]) if t else None)
        if key[0] == "file":
            self.plan.files.append(key[1])

    # ---------------------------------------------------------- entries

    def _entry(self, version: Version) -> tuple[Entry, bytes]:
        data = self.git.read_blob(version[1])
        return codec.decode(data).entry, data

    def _entry_conflict(self, before: Version | None, o: Version | None,
                        t: Version | None) -> None:
        name = self.remote
        if o is None or t is None:  # removed on one side, changed on the other
            kept = o or t
            assert kept is not None
            entry, data = self._entry(kept)
            if t is not None:
                self.plan.take(None, t, data)
            where = ("removed here, changed on " + name) if o is None \
                else f"removed on {name}, changed here"
            self.plan.conflicts.append(Conflict(
                "removed-vs-changed", kept[0], "remote" if o is None else "local",
                f"{where}: kept the changed version (a removal never wins over a change)",
                entry))
            return
        mine, mine_data = self._entry(o)
        other, other_data = self._entry(t)
        rank_o = (mine.updated_at, mine.version, o[1])
        rank_t = (other.updated_at, other.version, t[1])
        remote_wins = rank_t > rank_o
        winner, loser = (other, mine) if remote_wins else (mine, other)
        loser_data = mine_data if remote_wins else other_data
        if remote_wins:
            self.plan.take(o, t, other_data)
        fork = self._fork(loser, loser_data)
        why = "updated later" if winner.updated_at != loser.updated_at else \
            "same update time; chosen by version and content hash"
        kept_side, other_side = (f"{name}'s", "the local") if remote_wins \
            else ("the local", f"{name}'s")
        message = (f"changed on both sides: kept {kept_side} version ({why}, "
                   f"{iso_ms(winner.updated_at)}) as this entry; {other_side} version "
                   f"is now entry {fork.id}")
        self.plan.conflicts.append(Conflict("both-changed", (t if remote_wins else o)[0],
                                            "both", message, winner, fork.id))

    def _fork(self, loser: Entry, data: bytes) -> Entry:
        """The displaced version as a new entry. Its id is derived from the old id and the
        file's content, so every machine resolving this conflict makes the same entry."""
        digest = hashlib.sha256(_FORK_NAMESPACE + loser.id.encode() + b"\0" + data).digest()
        fork_id = str(uuid.UUID(bytes=digest[:16], version=4))
        fork = loser.revised(id=fork_id, version=1, created_at=loser.updated_at)
        path = entry_path(fork)
        if path not in self.plan.changes and self.git.blob_at(self.ours_tree, path) is None:
            self.plan.changes[path] = codec.encode(fork, data)  # keeps a person's own keys
        return fork

    # ---------------------------------------------------------- other files

    def _file_conflict(self, path: str, before: Version | None, o: Version | None,
                       t: Version | None) -> None:
        name = self.remote
        if o is None or t is None:
            if t is not None:
                self.plan.take(None, t, self.git.read_blob(t[1]))
                self.plan.files.append(path)
            where = f"deleted here, changed on {name}" if o is None \
                else f"deleted on {name}, changed here"
            self.plan.conflicts.append(Conflict(
                "file", path, "remote" if o is None else "local",
                f"{path} {where}: kept the changed file"))
            return
        base = self.git.read_blob(before[1]) if before else b""
        mine, other = self.git.read_blob(o[1]), self.git.read_blob(t[1])
        merged = three_way(base, mine, other)
        if merged is not None and path == CONFIG_FILE and config_mod.problem(merged):
            merged = None
        if merged is not None:
            if merged != mine:
                self.plan.changes[path] = merged
            self.plan.files.append(path)
            return
        self.plan.conflicts.append(Conflict(
            "file", path, "local",
            f"{path} changed on both sides and the changes overlap: kept the local version; "
            f"{name}'s is blob {t[1][:12]} (`git show {self.theirs[:12]}:{path}`)"))


def merge_changes(git: GitRepo, ours: str, theirs: str) -> dict[str, bytes | None]:
    """The file changes a sync merge of commit ``theirs`` into commit ``ours`` makes on
    top of ``ours`` (None deletes). The merge depends only on the two commits and their
    merge base, so a checker (``filemem verify``) can recompute a ``sync-merge`` commit's
    tree from its parents."""
    return plan_merge(git, git.commit(ours).tree, "remote", merge_base(git, ours, theirs),
                      theirs).changes


def plan_merge(git: GitRepo, ours_tree: str, remote: str, base: str | None,
               theirs: str) -> Plan:
    """The merge of commit ``theirs`` (from the remote named ``remote``, as conflict
    messages call it) into the local tree ``ours_tree``, given their merge base."""
    return _Merger(git, ours_tree, remote, theirs).run(base)


def three_way(base: bytes, mine: bytes, other: bytes) -> bytes | None:
    """A line-based three-way merge of text files (``merge3``), or None if the changes
    overlap or a file is not UTF-8 text."""
    import merge3

    try:
        texts = [b.decode("utf-8") for b in (base, mine, other)]
    except UnicodeDecodeError:
        return None
    if any("\0" in t for t in texts):
        return None
    lines = [t.splitlines(keepends=True) for t in texts]
    out: list[str] = []
    for group in merge3.Merge3(lines[0], lines[1], lines[2]).merge_groups():
        if group[0] == "conflict":
            return None
        out.extend(group[1])
    return "".join(out).encode("utf-8")




def check_commit(git: GitRepo, info: CommitInfo, rows: list[AuditRow]) -> list[str]:
    """``filemem verify`` of a merge commit: its rows are one ``sync-merge`` (and its
    conflicts), and its tree is exactly the merge of its two parents, recomputed."""
    if [r["action"] for r in rows if r["action"] not in ("sync-conflict",)] != ["sync-merge"] \
            or len(info.parents) != 2:
        return ["a merge commit whose audit rows are not one sync-merge (and its conflicts)"]
    ours, theirs = info.parents
    try:
        changes = merge_changes(git, ours, theirs)
        tree, _ = git.splice(git.commit(ours).tree, changes, PendingObjects())
    except Exception as exc:  # a merge that cannot be recomputed is a finding, not a crash
        return [f"the sync merge cannot be recomputed from its parents: {exc}"]
    if tree != info.tree and not _same_but_form(git, git.commit(ours).tree, changes, info.tree):
        return ["the merge commit's tree is not the merge of its two parents"]
    return []


def _same_but_form(git: GitRepo, ours_tree: str, changes: dict[str, bytes | None],
                   merged_tree: str) -> bool:
    """Whether ``merged_tree`` is ``ours_tree`` with ``changes`` except for how entry files
    are written, not what they hold: a merge made by a filemem that wrote entry files
    without a final newline, recomputed by one that writes it."""
    paths = {p for p, _old, _new in git.diff(ours_tree, merged_tree)} | changes.keys()
    for path in paths:
        have = git.blob_at(merged_tree, path)
        ours = git.blob_at(ours_tree, path)
        want = changes[path] if path in changes else (git.read_blob(ours) if ours else None)
        if want is None or have is None:
            if want is None and have is None:
                continue
            return False
        if hash_blob(want) == have:
            continue
        if not is_entry_path(path):
            return False
        try:
            if codec.decode(want).entry != codec.decode(git.read_blob(have)).entry:
                return False
        except codec.CodecError:
            return False
    return True


__all__ = ["Conflict", "Plan", "check_commit", "merge_base", "merge_changes", "plan_merge",
           "three_way"]
