"""Hand edits: what a person changed in the working tree, and adopting or discarding it.

Agents see only what is committed. A person's edit stays an uncommitted
change until the owner adopts it: :func:`status` lists edited, added and deleted entry files
(and edits of the store's own files), with the reason a file cannot be adopted;
:func:`adopt` validates the chosen changes, fills in what a hand-written file leaves out
(id, front-matter, version, timestamps), checks budgets and commits them as one commit with
``edit`` audit rows; :func:`discard` puts files back as they are at HEAD.

While a git merge, rebase, ... is unfinished in the store (:func:`in_progress`), its files
are git's work, not hand edits: status says so (a conflicted file has conflict markers, not
"invalid YAML"), and adopt and discard are refused until it is finished or aborted.
"""

from __future__ import annotations

import hashlib
import os
import shlex
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Final

from filemem import config as config_mod
from filemem import errors, shown
from filemem.config import Config
from filemem.files import codec, gitstate, worktree
from filemem.files.codec import CodecError
from filemem.files.gitindex import GitIndex, hash_blob
from filemem.files.gitrepo import TREE_MODE
from filemem.files.gitstate import Unfinished
from filemem.files.layout import (
    NO_WORKSPACE_DIR,
    NOT_AN_ENTRY,
    OUTSIDE,
    OUTSIDE_COMMITTED,
    SHARED_DIR,
    TOP_FILES,
    entry_path,
    id_from_path,
    is_editor_file,
    is_entry_path,
    key_dir,
)
from filemem.jsstr import utf16_len
from filemem.model import SCOPES, TRACKS, Entry, iso_ms, now_ms
from filemem.ops.base import Changes, Replayed, RowRule
from filemem.owner import picked
from filemem.rules import findings as checks
from filemem.store.auditlog import row
from filemem.store.core import Store
from filemem.store.names import CONFIG_FILE, private_files
from filemem.store.state import State
from filemem.store.transaction import Transaction, unreadable
from filemem.types import AuditRow

HAND_SOURCE: Final = "hand-edit"  # the source of an entry a person wrote from scratch
OUTCOME: Final = "adopted (the owner's file edit, via filemem adopt)"
STORE_FILES: Final = TOP_FILES  # the store's own files besides its entries


@dataclass
class Change:
    """One file that differs from HEAD."""

    path: str  # store-relative, POSIX
    kind: str  # "edited" | "added" | "deleted"; "invalid": committed so, not changed since
    before: Entry | None = None  # the entry at HEAD (edited, deleted)
    after: Entry | None = None  # what adopting would commit (edited, added)
    problem: str | None = None  # why it cannot be adopted
    data: bytes | None = field(default=None, repr=False)  # the working-tree bytes
    target: str | None = None  # where the adopted entry's file goes (added: may differ)
    conflict: bool = False  # git left it unmerged, or it holds conflict markers
    at_head: errors.ProtocolError | None = None  # STORE_CORRUPT: the file is invalid at HEAD
    findings: list[checks.Finding] = field(default_factory=list)  # the checks, on the text

    def notes(self) -> list[str]:
        """What the store's checks say about the text adopting would commit, for a person."""
        if self.after is None:
            return []
        warning = shown.warning(self.after.text)
        return ([warning] if warning else []) + checks.describe(self.findings)

    @property
    def is_entry(self) -> bool:
        return is_entry_path(self.path)

    @property
    def left_alone(self) -> bool:
        """A file beside the store's folders, which filemem never commits: a bare `adopt`
        leaves it as it is (one naming it is refused)."""
        return self.problem in (OUTSIDE, OUTSIDE_COMMITTED)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "kind": self.kind,
                               "adoptable": self.problem is None}
        if self.problem is not None:
            out["problem"] = self.problem
        if self.before is not None:
            out["id"] = self.before.id
        elif self.after is not None:
            out["id"] = self.after.id
        if self.after is not None:
            out["entry"] = self.after.to_protocol()
        if self.target is not None and self.target != self.path:
            out["moveTo"] = self.target
        if self.conflict:
            out["conflict"] = True
        if self.at_head is not None:
            out["invalidAtHead"] = self.at_head.to_dict()
        if self.findings:
            out["findings"] = [dict(f) for f in self.findings]
        return out


@dataclass(frozen=True)
class InProgress:
    """A git operation unfinished in the store, as ``filemem status`` tells it: ``op``
    (which, what shows it, the ways out), ``conflicts`` (the files git left unmerged) and
    ``entries`` (the entry at HEAD of each conflicted entry file)."""

    op: Unfinished
    conflicts: list[str]
    entries: dict[str, Entry]

    def to_json(self) -> dict[str, Any]:
        return {"operation": self.op.kind, "marker": self.op.marker,
                "conflicts": [{"path": p, **({"id": self.entries[p].id}
                                             if p in self.entries else {})}
                              for p in self.conflicts],
                "waysOut": self.op.ways_out}


def in_progress(store: Store) -> InProgress | None:
    """The git merge, rebase, ... unfinished in the store, or None."""
    op = gitstate.unfinished(store.git.git_dir)
    if op is None:
        return None
    state = store.state()
    by_path = {p: state.entries[i] for i, p in state.paths.items()}
    unmerged = store.index().unmerged()
    return InProgress(op, unmerged, {p: by_path[p] for p in unmerged if p in by_path})


def _mark_git_work(store: Store, index: GitIndex, changes: list[Change]) -> None:
    """Say what git, not a person, left in the working tree: a file with conflicts (git
    left it unmerged, or conflict markers are in it), and during an unfinished merge,
    rebase, ... the other files it changed, which its `git commit` takes in. Outside such
    an operation (a `git stash pop` that stopped on a conflict), a file git still lists as
    unmerged whose markers the person has removed is theirs to adopt: adopt commits those
    bytes, with no markers, and its index entry replaces git's unmerged ones."""
    op = gitstate.unfinished(store.git.git_dir)
    unmerged = set(index.unmerged())
    for c in changes:
        markers = c.data is not None and gitstate.has_conflict_markers(c.data)
        if c.path in unmerged or markers:
            c.conflict = True
        if op is not None and markers:
            c.problem = (f"it has git conflict markers (<<<<<<< ... >>>>>>>) from the "
                         f"unfinished {op.label}: finish or undo the {op.label} with git "
                         "(see above), not with adopt")
        elif op is not None and c.path in unmerged:
            c.problem = (f"git still marks it as unresolved in the unfinished {op.label}: "
                         f"finish or undo the {op.label} with git (see above; finishing "
                         "takes `git add` of it first), not with adopt")
        elif markers:
            c.problem = ("it has git conflict markers (<<<<<<< ... >>>>>>>): keep the text "
                         "you want, delete those lines, then adopt it")
        elif op is not None:
            c.problem = (f"part of the unfinished {op.label}, which commits it when it "
                         "is finished")


def _untracked_files(store: Store, tracked: set[str]) -> set[str]:
    """Files under the track folders of the working tree that are not in ``tracked`` (a
    symbolic link to a folder too, as git lists it, never walked through), except
    temp files, editors' files (:data:`~filemem.files.layout.EDITOR_FILES`) and what git
    ignores (:mod:`filemem.files.ignores`). As in git, an
    ignore pattern says nothing of a tracked file, so only the others are matched against
    the patterns (dulwich's matching took ~0.3 ms a file: most of a `status` of thousands),
    and dulwich is not even loaded while no other file is there."""
    root = store.root
    candidates: list[str] = []
    for top in TRACKS:
        candidates += [path for path in worktree.files_under(root, top)
                       if path not in tracked and not path.endswith(worktree.TMP_SUFFIX)
                       and not is_editor_file(path)]
    candidates += [p for p in worktree.outside_files(root)
                   if p not in tracked and not is_editor_file(p)]
    if not candidates:
        return set()
    from filemem.files import ignores

    return ignores.not_ignored(store.git.repo, candidates)


def _outside_at_head(store: Store, state: State) -> dict[str, str]:
    """Files committed at HEAD beside the store's folders and top files (with git: filemem
    never commits one), by path, with their blobs."""
    out: dict[str, str] = {}
    for name, (mode, sha) in store.git.read_tree(state.tree).items():
        if name in TRACKS or name in STORE_FILES:
            continue
        if mode == TREE_MODE:
            out.update((path, blob) for path, _mode, blob in store.git.walk(sha, f"{name}/"))
        else:
            out[name] = sha
    return out


def _keys_from_folder(state: State, path: str) -> tuple[dict[str, Any], str | None]:
    """track/scope/workspaceKey/agentKey a file's folder stands for, as far as it tells."""
    parts = path.split("/")
    track, scope = parts[0], parts[1] if len(parts) > 1 else ""
    if track not in TRACKS or scope not in SCOPES:
        return {}, f"{path} is not under <track>/<scope>/ (user|agent / user-global|workspace)"
    folders = parts[2:-1]
    want = 2 if scope == "workspace" else 1
    if len(folders) != want:
        shape = "<workspace>/<agent>/" if scope == "workspace" else "<agent>/"
        return {}, f"{path} is not in a {track}/{scope}/{shape} folder"
    values: dict[str, Any] = {"track": track, "scope": scope}
    if scope == "user-global":
        values["workspaceKey"] = ""
    known_agents = {key_dir(e.agent_key): e.agent_key for e in state.entries.values()
                    if e.agent_key}
    known_workspaces = {key_dir(e.workspace_key): e.workspace_key
                        for e in state.entries.values() if e.workspace_key}
    agent_dir = folders[-1]
    if agent_dir == SHARED_DIR:
        values["agentKey"] = ""
    elif agent_dir in known_agents:
        values["agentKey"] = known_agents[agent_dir]
    if scope == "workspace":
        ws_dir = folders[0]
        if ws_dir == NO_WORKSPACE_DIR:
            values["workspaceKey"] = ""
        elif ws_dir in known_workspaces:
            values["workspaceKey"] = known_workspaces[ws_dir]
    return values, None


def _id_for(path: str, data: bytes) -> str:
    """The id a file written from scratch gets: a UUID v4 derived from its path and content,
    so `status` shows the id `adopt` will give (and two adopts of it agree)."""
    digest = hashlib.sha256(path.encode("utf-8", "surrogateescape") + b"\0" + data).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def _adoptable(state: State, path: str, data: bytes, before: Entry | None,
               now: int) -> tuple[Entry | None, str | None, str | None]:
    """(the entry adopting ``path`` would commit, its file's path, or the problem)."""
    try:
        values, body = codec.decode_partial(data)
    except CodecError as exc:
        return None, None, str(exc)
    folder_values, problem = _keys_from_folder(state, path)
    if problem is not None:
        return None, None, problem
    if before is not None:  # an edit: same entry, next version
        defaults: dict[str, Any] = {**codec.field_values(before)}
        values = {k: v for k, v in values.items() if k not in ("version", "updatedAt")}
        defaults.update(version=before.version + 1, updatedAt=iso_ms(max(now, before.updated_at)))
    else:
        defaults = {"id": id_from_path(path) or _id_for(path, data), "source": HAND_SOURCE,
                    "tags": [],
                    "version": 1, "createdAt": iso_ms(now), "updatedAt": iso_ms(now),
                    "sessionId": None, **folder_values}
    missing = [k for k in ("workspaceKey", "agentKey") if k not in values and k not in defaults]
    if missing:
        return None, None, (f"cannot tell the {' and '.join(missing)} from the folders of "
                            f"{path}; add {shown.them(len(missing))} to the "
                            "front-matter")
    try:
        entry = codec.complete(values, body, defaults)
    except CodecError as exc:
        return None, None, str(exc)
    if before is not None and entry.id != before.id:
        return None, None, f"the id was changed (the file is {before.id}'s)"
    target = entry_path(entry)
    if before is not None and target != path:
        return None, None, (f"the front-matter says the entry belongs in {target}; move the "
                            "file there, or change only the text")
    stated = id_from_path(path)
    if before is None and stated is not None and stated != entry.id:
        return None, None, f"the file name says id {stated} but the front-matter says {entry.id}"
    return entry, target, None


def status(store: Store, *, budget_check: bool = True) -> list[Change]:
    """Everything in the working tree that differs from HEAD, in path order. Budgets are
    checked as if everything were adopted (``adopt`` checks the changes it picks). A write
    killed half way is repaired first, so its half-mirrored files are not shown."""
    store.repair()
    state = store.state()
    head_files = {p for p in state.blobs} | set(state.corrupt)
    index = store.index()
    changes: list[Change] = []
    now = now_ms()
    by_path = {p: state.entries[i] for i, p in state.paths.items()}
    folders: set[str] = set()  # found to be real folders (is_clean would look through links)
    for path in sorted(head_files):
        before = by_path.get(path)
        link = worktree.linked_folder(store.root, path, folders)
        if link is not None:  # what a link points to is never read, let alone committed
            changes.append(Change(path, "edited", before, problem=unreadable(
                worktree.Unreadable("folder link", link), path)))
            continue
        if worktree.is_clean(store.root, path, state.blobs.get(path), index):
            continue
        data, odd = worktree.read_checked(store.root, path)
        if odd is not None:  # a link, a FIFO, a device, an unreadable file: never read
            changes.append(Change(path, "edited", before, problem=unreadable(odd, path)))
            continue
        if data is None:
            changes.append(Change(path, "deleted", before=before))
            continue
        entry, target, problem = _adoptable(state, path, data, before, now)
        changes.append(Change(path, "edited", before, entry, problem, data, target))
    # an id is free again if its file was deleted (a person moving a file to another layer);
    # the file that takes it over is that entry's next version
    moved = {c.before.id: c.before for c in changes
             if c.kind == "deleted" and c.before is not None}
    seen_ids = {e.id for e in state.entries.values()} - moved.keys()
    # files a person committed with git beside the store's folders: git's, not filemem's
    outside = _outside_at_head(store, state)
    for path, blob in sorted(outside.items()):
        if not worktree.is_clean(store.root, path, blob, index):
            kind = "deleted" if not os.path.lexists(worktree.full_path(store.root, path)) \
                else "edited"
            changes.append(Change(path, kind, problem=OUTSIDE_COMMITTED))
    for path in sorted(_untracked_files(store, head_files | outside.keys())):
        if path.split("/", 1)[0] not in TRACKS:  # never read: not the store's
            changes.append(Change(path, "added", problem=OUTSIDE))
            continue
        data, odd = worktree.read_checked(store.root, path)
        if odd is not None:
            if not any(p.startswith(f"{path}/") for p in head_files):  # else: said for each
                changes.append(Change(path, "added", problem=unreadable(odd, path)))
            continue
        if data is None:
            continue
        if not path.endswith(".md"):
            changes.append(Change(path, "added", problem=NOT_AN_ENTRY, data=data))
            continue
        entry, target, problem = _adoptable(state, path, data, None, now)
        if entry is not None and entry.id in moved:
            entry, target, problem = _adoptable(state, path, data, moved[entry.id], now)
        if entry is not None and entry.id in seen_ids:
            problem = f"id {entry.id} is already used by another entry"
            entry = None
        if entry is not None:
            seen_ids.add(entry.id)
        changes.append(Change(path, "added", None, entry, problem, data, target))
    for path in STORE_FILES:
        head_blob = store.git.blob_at(state.tree, path)
        if worktree.is_clean(store.root, path, head_blob, index):
            continue
        data, odd = worktree.read_checked(store.root, path)
        if odd is not None:
            changes.append(Change(path, "edited" if head_blob else "added",
                                  problem=unreadable(odd, path)))
            continue
        kind = "deleted" if data is None else ("edited" if head_blob else "added")
        problem = None
        if path == CONFIG_FILE:
            problem = "filemem.yaml cannot be deleted" if data is None else config_mod.problem(data)
        changes.append(Change(path, kind, problem=problem, data=data))
    _check_texts(state.config or Config(), changes)
    if budget_check:
        _check_budgets(state, state.config or Config(), changes)
    _mark_git_work(store, index, changes)
    return changes


def invalid(store: Store, changes: list[Change] | None = None) -> list[Change]:
    """The files committed invalid at HEAD (what makes agents' reads and writes fail with
    STORE_CORRUPT), each with that error: the file, the commit that brought it and the way
    out. Kind ``invalid`` for a file unchanged since; a file already changed in the working
    tree (one of ``changes``, from :func:`status`) is that change, marked ``at_head``."""
    state = store.state()
    changed = {c.path: c for c in changes or ()}
    found = []
    for problem in store.invalid.problems(state):
        path = str(problem.details["file"])
        change = changed.get(path)
        if change is None:
            change = _as_is(store, state, path)
        change.at_head = problem
        found.append(change)
    return found


def _as_is(store: Store, state: State, path: str) -> Change:
    """A file invalid at HEAD and unchanged since, as adopting it as it is would take it: a
    file a person would have adopted had they not committed it with git (bare text, a
    front-matter without filemem's keys) gets its id and front-matter, as an added file
    does; any other keeps the problem that needs a fix first."""
    fix = ("it is committed as it is; fix it in the working tree, or undo the commit that "
           "brought it (see the error)")
    data, odd = worktree.read_checked(store.root, path)
    if odd is not None or data is None or not is_entry_path(path):
        return Change(path, "invalid", problem=fix)
    entry, target, problem = _adoptable(state, path, data, None, now_ms())
    if entry is not None and (entry.id in state.entries or target in state.blobs):
        problem = f"id {entry.id} is already used by another entry"
    if entry is None or problem is not None:
        return Change(path, "invalid", problem=fix)
    change = Change(path, "invalid", None, entry, None, data, target)
    _check_texts(state.config or Config(), [change])
    return change


def _check_texts(cfg: Config, changes: list[Change]) -> None:
    """The store's checks over each text adopting would commit, under HEAD's configuration (a
    rule relaxed by the same edit counts once that is committed): a blocking finding (a
    secret, a planted instruction, hidden characters under ``refuse``) is a problem, since a
    file in the store's folder may have been written by anything, an agent included."""
    for c in changes:
        if c.after is None or c.problem is not None:
            continue
        c.findings = checks.scan(c.after.text, cfg)
        block = checks.blocking(c.findings)
        if block:
            c.problem = (f"the store's checks block its text ({checks.summary(block)}); "
                         "change the text, or relax the rule in filemem.yaml (checks) and "
                         "commit that first")


def check_budgets(store: Store, changes: list[Change]) -> None:
    """Mark what adopting exactly ``changes`` would put over budget."""
    state = store.state()
    _check_budgets(state, state.config or Config(), changes)


def _check_budgets(state: State, cfg: Config, changes: list[Change]) -> None:
    """Mark the entry changes of a layer that adopting everything would put over budget."""
    usage = dict(state.usage)
    for c in changes:
        if c.problem is not None or not c.is_entry:
            continue
        if c.before is not None:
            usage[c.before.layer] -= c.before.size
        if c.after is not None:
            usage[c.after.layer] += c.after.size
    for layer, used in usage.items():
        limit = cfg.limit(*layer)
        if used <= limit:
            continue
        for c in changes:
            grows = c.after is not None and c.after.layer == layer and c.problem is None and (
                c.before is None or c.after.size > c.before.size)
            if grows:  # every way on: an edit left unadopted can stop a sync
                c.problem = (f"over budget: adopting the changes in {layer[0]}/{layer[1]} "
                             f"needs {used}/{limit} chars; shorten this text, delete other "
                             "entries' files of that layer and adopt that with it, raise "
                             f"{config_mod.budget_key(*layer)} in filemem.yaml and "
                             "`filemem adopt filemem.yaml` first, or drop this change: "
                             f"`filemem discard {shlex.quote(c.path)}`")


def named(store: Store, paths: Iterable[str] | None, as_is: bool = False) -> list[Change]:
    """The changes ``paths`` name (all: None), from :func:`status` without budgets; the
    files invalid at HEAD that they name go to :func:`picked.select` too, for the error that
    says what mends them (``as_is``, adopting: to be taken as they are, if they can)."""
    found = status(store, budget_check=False)
    unchanged = [] if paths is None else \
        [c for c in invalid(store, found) if c.kind == "invalid"]
    return picked.select(found, store.root, paths, unchanged, as_is)


def adopt(store: Store, paths: Iterable[str] | None = None) -> list[Change]:
    """Commit the chosen hand edits as one commit with ``edit`` audit rows (refused while
    a git merge, rebase, ... is unfinished: its files are git's work in progress)."""
    store.refuse_unfinished_git()
    def attempt(txn: Transaction) -> list[Change]:
        changes = named(store, paths, as_is=True)
        if paths is None:
            changes = [c for c in changes if not c.left_alone]
        _check_budgets(txn.state, txn.state.config or Config(), changes)
        bad = [c for c in changes if c.problem is not None]
        if bad:
            raise errors.invalid_input("cannot adopt " + "; ".join(
                f"{c.path}: {c.problem}" for c in bad) + "; nothing was adopted")
        _commit(txn, changes)
        return changes

    # not validated: adopting a fix is how a person repairs a bad file at HEAD
    return store.retrying(attempt, validate=False)


def _check_edit(r: AuditRow, c: Changes) -> str | None:
    eid = r["entryId"]
    if eid is None:
        return None  # an edit of a file by path: verify checks the path is named
    e = c.added.get(eid) or (c.modified[eid][1] if eid in c.modified else c.deleted.get(eid))
    if e is None or e.text != r["text"]:
        return f"edit row for {eid}: no changed file with that text"
    return None


def _replay_edit(r: AuditRow, entries: Replayed, c: Changes) -> None:
    eid = r["entryId"]
    if not eid:
        return
    entries.pop(eid, None)
    after = c.added.get(eid) or (c.modified[eid][1] if eid in c.modified else None)
    if after is not None:  # the version the file says
        entries[eid] = (after.text, after.version)


# the `edit` rows adopt writes: how `filemem verify` checks and replays them
ROW_RULES: Final = {"edit": RowRule(_check_edit, _replay_edit)}


def _commit(txn: Transaction, changes: list[Change]) -> None:
    files: dict[str, bytes | None] = {}
    rows = []
    for c in changes:
        if not c.is_entry:
            files[c.path] = c.data
            rows.append(row("edit", text=f"{c.kind} {c.path}", outcome=OUTCOME, source="owner"))
            continue
        if c.kind == "deleted" and c.before is None:  # a file that was invalid at HEAD
            files[c.path] = None
            rows.append(row("edit", text=f"deleted {c.path}", outcome=f"{OUTCOME}: deleted",
                            source="owner"))
            continue
        if c.kind == "deleted":
            assert c.before is not None
            files[c.path] = None
            rows.append(row("edit", track=c.before.track, scope=c.before.scope,
                            entry_id=c.before.id, text=c.before.text,
                            outcome=f"{OUTCOME}: deleted", source=c.before.source))
            continue
        assert c.after is not None and c.target is not None and c.data is not None
        has_front_matter = c.data.startswith((b"---", b"\xef\xbb\xbf---"))
        files[c.target] = codec.encode(c.after, c.data if has_front_matter else None)
        if c.target != c.path:
            files[c.path] = None  # a hand-named file becomes <id>.md
            if c.kind != "added":  # the old file is in git (invalid at HEAD): a row names it
                rows.append(row("edit", text=f"moved {c.path}",
                                outcome=f"{OUTCOME}: moved to {c.target}", source="owner"))
        rows.append(row("edit", track=c.after.track, scope=c.after.scope,
                        entry_id=c.after.id, text=c.after.text,
                        outcome=f"{OUTCOME}: {_done(c)}", source=c.after.source))
    subject = f"edit: adopt {len(changes)} hand edit{'s' if len(changes) != 1 else ''}"
    body = "\n".join(f"{_done(c)}: {c.path}" for c in changes)
    allow: dict[str, str | None] = {c.target: None for c in changes if c.target}
    allow.update({c.path: hash_blob(c.data) if c.data is not None else None for c in changes})
    txn.commit_files(files, rows=rows, subject=subject, body=body, allow_dirty=allow)


def _done(c: Change) -> str:
    """What adopting ``c`` did: a file committed invalid and adopted as it is was edited."""
    return "edited" if c.kind == "invalid" else c.kind


def discard(store: Store, paths: Iterable[str] | None = None) -> list[Change]:
    """Put the chosen files back as they are at HEAD (a file added by hand is deleted).
    Refused while a git merge, rebase, ... is unfinished: putting a conflicted file back
    would quietly resolve git's conflict (`git merge --abort` is the way to undo one)."""
    store.refuse_unfinished_git()
    with store.locked(), private_files():
        changes = picked.select(status(store), store.root, paths)
        store.check_writable([c.path for c in changes])  # a folder link: STORE_CORRUPT
        state = store.state()
        index = store.index()
        heads = {c.path: state.blobs.get(c.path) if c.is_entry else
                 store.git.blob_at(state.tree, c.path) for c in changes}
        # journaled like a commit's mirror (the hand edit is "old", HEAD's version "new"):
        # a kill half way is finished by the next open, never left half discarded
        store.journal.begin(state.head, state.head, {
            c.path: (hash_blob(c.data) if c.data is not None else None, heads[c.path])
            for c in changes})
        for c in changes:
            head_blob = heads[c.path]
            if head_blob is None:
                worktree.remove(store.root, c.path)
                continue
            st = worktree.write(store.root, c.path, store.git.read_blob(head_blob))
            index.set(c.path, head_blob, st)
        store._write_index(index)
        store.journal.clear()
        return changes


def sizes(change: Change) -> tuple[int, int]:
    """(size before, size after) in code units, for a summary line."""
    before = change.before.size if change.before else 0
    after = change.after.size if change.after else (utf16_len(change.data.decode("utf-8",
                                                    "replace")) if change.data else 0)
    return before, after


__all__ = ["Change", "InProgress", "adopt", "check_budgets", "discard", "in_progress",
           "invalid", "named", "sizes", "status"]
