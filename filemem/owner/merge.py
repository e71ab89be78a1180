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
- ``filemem.yaml`` changed on both sides: merged key by key
  (:func:`filemem.owner.filemerge.merge_yaml`). A key both sides changed differently is
  never decided here: the plan lists it in ``Plan.config_conflicts`` and changes nothing
  in the file, and the sync refuses, unless the owner chose ``keep_config="local"`` or
  ``"remote"`` for such keys (one ``sync-conflict`` row per key).
- another non-entry file (``README.md``, ``.gitignore``, ...) changed on both sides: a
  three-way line merge (the ``merge3`` package); if the changes overlap or the file is not
  text, the local version is kept and the remote's is named (commit and blob) so nothing
  is lost.

Two histories with no merge base (a store made apart joining the remote's): the files
other than entries are merged against the version both stores were created with, where
their first commits hold the same one (both made by ``filemem init`` from one template),
so a budget set on one machine is taken, not fought over, when the other never changed it.

Each resolution is a :class:`Conflict` (a ``sync-conflict`` audit row). The merge depends
only on the two commits (their merge base, their first commits) and the owner's
``keep_config`` choice, so ``filemem verify`` can recompute it.
"""

from __future__ import annotations

import hashlib
import uuid
from dataclasses import dataclass, field
from typing import Any, Final

from filemem import config as config_mod
from filemem.errors import SyncError
from filemem.files import codec
from filemem.files.gitrepo import BRANCH, CommitInfo, GitRepo, PendingObjects
from filemem.files.layout import entry_path, id_from_path, is_entry_path
from filemem.model import Entry, iso_ms
from filemem.owner import gitwalk
from filemem.owner.filemerge import KeyConflict, Prefer, merge_yaml, same, shown, three_way
from filemem.shown import counted
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

    kind: str  # both-changed | removed-vs-changed | file | config-key
    path: str
    kept: str  # local | remote | both
    message: str
    entry: Entry | None = None  # the entry as kept under its id
    new_entry_id: str | None = None
    key: str | None = None  # config-key: the key of filemem.yaml, e.g. budgets.user.workspace

    def to_json(self) -> dict[str, Any]:
        e = self.entry
        out = {"kind": self.kind, "path": self.path, "entryId": e.id if e else None,
               "track": e.track if e else None, "scope": e.scope if e else None,
               "kept": self.kept, "newEntryId": self.new_entry_id, "message": self.message}
        if self.key is not None:
            out["key"] = self.key
        return out

    def row(self) -> AuditRow:
        e = self.entry
        text = e.text if e else self.path if self.key is None else f"{self.path}: {self.key}"
        return row("sync-conflict", track=e.track if e else None, scope=e.scope if e else None,
                   entry_id=e.id if e else None, text=text, outcome=self.message, source=SOURCE)


def merge_base(git: GitRepo, ours: str, theirs: str) -> str | None:
    """The merge base of two commits, or None if their histories are unrelated.

    dulwich's walk visits commits newest first and stops once only common ancestors are
    left; among commits of one second (filemem's usual pace, or clocks that differ between
    machines) it can visit an old common ancestor before the newer one that descends from
    it, and then answers both, oldest first. So bases that are ancestors of another base
    are dropped (git's remove_redundant): a fast-forward stays one, and a merge is
    three-way against the nearest base, not an older one."""
    found = gitwalk.merge_bases(git, ours, theirs)  # git's answer, when git is on PATH
    if found is None:
        from dulwich.graph import find_merge_base

        shas: list[Any] = [ours.encode(), theirs.encode()]
        found = [b.decode() for b in find_merge_base(git.repo, shas)]
    else:  # in dulwich's order: oldest first
        found.sort(key=lambda sha: (git.commit(sha).time, sha))
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
    # keys of filemem.yaml both sides changed differently, left undecided (no keep_config):
    # filemem.yaml is then not in ``changes``, and the sync must not commit this plan
    config_conflicts: list[KeyConflict] = field(default_factory=list)

    def take(self, before: Version | None, after: Version | None, data: bytes | None) -> None:
        """Make the local tree hold ``after`` where it held ``before``."""
        if before is not None and (after is None or after[0] != before[0]):
            self.changes[before[0]] = None
        if after is not None:
            assert data is not None
            self.changes[after[0]] = data


class _Merger:
    """Builds the entry-level merge of ``theirs`` into the local state (see module doc)."""

    def __init__(self, git: GitRepo, ours: str, remote: str, theirs: str,
                 keep_config: Prefer | None, alike: bool = True) -> None:
        self.git, self.remote, self.theirs = git, remote, theirs
        self.ours, self.ours_tree = ours, git.commit(ours).tree
        self.keep_config, self.alike = keep_config, alike
        self.plan = Plan()
        self.created: dict[str, str] = {}  # path -> blob both stores were created with

    def run(self, base: str | None) -> Plan:
        base_tree = self.git.commit(base).tree if base else None
        if base is None and self.alike:
            self.created = created_alike(self.git, self.ours, self.theirs)
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
        if before is None and path in self.created:
            before = (path, self.created[path])
        base = self.git.read_blob(before[1]) if before else None
        mine, other = self.git.read_blob(o[1]), self.git.read_blob(t[1])
        if path == CONFIG_FILE:
            self._config_conflict(base, mine, other)
            return
        merged = three_way(base or b"", mine, other)
        if merged is not None:
            if merged != mine:
                self.plan.changes[path] = merged
            self.plan.files.append(path)
            return
        self.plan.conflicts.append(Conflict(
            "file", path, "local",
            f"{path} changed on both sides and the changes overlap: kept the local version; "
            f"{name}'s is blob {t[1][:12]} (`git show {self.theirs[:12]}:{path}`)"))

    def _config_conflict(self, base: bytes | None, mine: bytes, other: bytes) -> None:
        """filemem.yaml changed on both sides: key by key; keys changed differently on both
        sides are left undecided (``config_conflicts``) unless ``keep_config`` decides."""
        result = merge_yaml(base, mine, other, what=CONFIG_FILE,
                            max_bytes=config_mod.CONFIG_MAX_BYTES, prefer=self.keep_config)
        if result.text is not None and config_mod.problem(result.text) is not None:
            result.problem = (f"the merged {CONFIG_FILE} would not be a valid configuration: "
                              f"{config_mod.problem(result.text)}")
        if result.problem is not None:  # never from two valid configurations; refuse
            raise SyncError("CONFIG_CONFLICT", f"{CONFIG_FILE} changed on both sides and "
                            f"cannot be merged ({result.problem}); nothing was changed. Make "
                            f"it the same on both machines (`git show {self.theirs[:12]}:"
                            f"{CONFIG_FILE}` is {self.remote}'s), commit it, and sync again")
        if result.text is None:
            self.plan.config_conflicts = result.conflicts
            return
        if result.text != mine:
            self.plan.changes[CONFIG_FILE] = result.text
        self.plan.files.append(CONFIG_FILE)
        for c in result.conflicts:
            kept = c.local if self.keep_config == "local" else c.remote
            side = "this machine's" if self.keep_config == "local" else f"{self.remote}'s"
            self.plan.conflicts.append(Conflict(
                "config-key", CONFIG_FILE, str(self.keep_config),
                f"{CONFIG_FILE} key {c.name} changed on both sides ({shown(c.local)} here, "
                f"{shown(c.remote)} on {self.remote}): kept {side} {shown(kept)}, as the "
                f"owner chose (filemem sync --keep-config {self.keep_config})", key=c.name))


def created_alike(git: GitRepo, ours: str, theirs: str) -> dict[str, str]:
    """The files other than entries that both histories' first commits hold alike (path ->
    blob): what two stores made apart by ``filemem init`` both started from. Empty when
    their first commits share no such file."""
    mine = [_top_files(git, root) for root in _roots(git, ours)]
    other = [_top_files(git, root) for root in _roots(git, theirs)]
    out: dict[str, str] = {}
    for a in mine:
        for b in other:
            for path, blob in sorted(a.items()):
                if b.get(path) == blob:
                    out.setdefault(path, blob)
    return out


def _roots(git: GitRepo, head: str) -> list[str]:
    """The commits without parents that ``head`` descends from, sorted."""
    roots: set[str] = set()
    seen: set[str] = set()
    stack = [head]
    while stack:
        sha = stack.pop()
        if sha in seen:
            continue
        seen.add(sha)
        parents = git.commit(sha).parents
        if not parents:
            roots.add(sha)
        stack.extend(p for p in parents if p not in seen)
    return sorted(roots)


def _top_files(git: GitRepo, commit: str) -> dict[str, str]:
    tree = git.commit(commit).tree
    return {path: blob for path, _mode, blob in git.walk(tree) if not is_entry_path(path)}


def merge_changes(git: GitRepo, ours: str, theirs: str,
                  keep_config: Prefer | None = None) -> dict[str, bytes | None]:
    """The file changes a sync merge of commit ``theirs`` into commit ``ours`` makes on
    top of ``ours`` (None deletes). The merge depends only on the two commits (and the
    owner's ``keep_config``), so a checker (``filemem verify``) can recompute a
    ``sync-merge`` commit's tree from its parents."""
    return plan_merge(git, ours, "remote", merge_base(git, ours, theirs), theirs,
                      keep_config).changes


def plan_merge(git: GitRepo, ours: str, remote: str, base: str | None, theirs: str,
               keep_config: Prefer | None = None, *, alike: bool = True) -> Plan:
    """The merge of commit ``theirs`` (from the remote named ``remote``, as conflict
    messages call it) into commit ``ours``, given their merge base; ``keep_config``
    decides the keys of ``filemem.yaml`` both sides changed differently. ``alike``
    False: no common creation as base for unrelated histories (how filemem merged
    before; for ``filemem verify`` of such merges)."""
    return _Merger(git, ours, remote, theirs, keep_config, alike).run(base)


def _matches(git: GitRepo, ours_tree: str, changes: dict[str, bytes | None],
             tree: str) -> list[str]:
    """The paths where ``tree`` is not ``ours_tree`` with ``changes`` applied, compared by
    what the files mean, not how they are written: ``filemem.yaml`` as data (its layout may
    come from another ruamel version), an entry file as the entry it decodes to (a merge
    made by a filemem that wrote entry files without a final newline, recomputed by one
    that writes it)."""
    built, _ = git.splice(ours_tree, changes, PendingObjects())
    if built == tree:
        return []
    differ: list[str] = []
    for path, made, got in git.diff(built, tree):
        if made is None or got is None:
            differ.append(path)
            continue
        # a path the changes did not touch holds ours' blob, which is in the store
        expected = changes[path] if path in changes else git.read_blob(made)
        if expected is None or not _same_file(path, expected, git.read_blob(got)):
            differ.append(path)
    return differ


def _same_file(path: str, expected: bytes, got: bytes) -> bool:
    """Whether two versions of one file mean the same to filemem."""
    try:
        if path == CONFIG_FILE:
            return same(config_mod.load_yaml(expected), config_mod.load_yaml(got))
        if is_entry_path(path):
            return codec.decode(expected).entry == codec.decode(got).entry
    except Exception:  # an unreadable file is a difference
        return False
    return False


def _merges(git: GitRepo, ours: str, theirs: str,
            rows: list[AuditRow]) -> list[dict[str, bytes | None]]:
    """Every merge ``filemem sync`` may have made of these two commits: this version's,
    with each ``keep_config`` choice when keys of ``filemem.yaml`` conflict; and, as
    earlier versions made it, without the common creation as base for unrelated histories,
    and keeping the local ``filemem.yaml`` whole when a ``sync-conflict`` row says so."""
    base = merge_base(git, ours, theirs)
    kept_local = any(r["action"] == "sync-conflict" and r.get("text") == CONFIG_FILE
                     for r in rows)
    keeps: tuple[Prefer, ...] = ("local", "remote")
    out: list[dict[str, bytes | None]] = []
    for alike in ((True, False) if base is None else (True,)):
        plan = plan_merge(git, ours, "remote", base, theirs, alike=alike)
        if plan.config_conflicts:
            out += [plan_merge(git, ours, "remote", base, theirs, keep, alike=alike).changes
                    for keep in keeps]
        else:
            out.append(plan.changes)
        if kept_local:
            out.append({p: d for p, d in plan.changes.items() if p != CONFIG_FILE})
    return out


def check_commit(git: GitRepo, info: CommitInfo, rows: list[AuditRow]) -> list[str]:
    """``filemem verify`` of a merge commit: its rows are one ``sync-merge`` (and its
    conflicts), and its tree is exactly the merge of its two parents, recomputed (with the
    owner's choice for ``filemem.yaml`` keys both sides changed, if the merge needed one;
    a merge made before filemem merged ``filemem.yaml`` key by key may have kept the local
    file whole, which its ``sync-conflict`` row says)."""
    sha = info.sha[:12]
    if [r["action"] for r in rows if r["action"] not in ("sync-conflict",)] != ["sync-merge"] \
            or len(info.parents) != 2:
        return [f"merge commit {sha} does not carry the audit rows of a `filemem sync` merge "
                "(one sync-merge row and its sync-conflict rows): it was made or rewritten "
                f"by other means; `git show {sha}` shows it. If its changes are not wanted, "
                f"`git revert -m 1 {sha}` undoes them"]
    ours, theirs = info.parents
    ours_tree = git.commit(ours).tree
    try:
        options = _merges(git, ours, theirs, rows)
        differ: list[str] = []
        for changes in options:  # the first that matches, else the nearest miss
            found = _matches(git, ours_tree, changes, info.tree)
            if not found:
                differ = []
                break
            if not differ or len(found) < len(differ):
                differ = found
    except Exception as exc:  # a merge that cannot be recomputed is a finding, not a crash
        return [f"the sync merge {sha} cannot be recomputed from its parents ({exc}); "
                f"`git show {sha}` shows it"]
    if differ:
        shown_paths = ", ".join(differ[:5]) + (", ..." if len(differ) > 5 else "")
        return [f"merge commit {sha}'s tree is not what `filemem sync` makes from its two "
                f"parents (it differs in {counted(len(differ), 'file')}: {shown_paths}): it "
                f"was changed by other means; `git show --first-parent {sha}` shows what it "
                f"changed. If that is not wanted, `git revert -m 1 {sha}` undoes it"]
    return []


__all__ = ["Conflict", "KeyConflict", "Plan", "check_commit", "created_alike", "merge_base",
           "merge_changes", "plan_merge", "three_way"]
