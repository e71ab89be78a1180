"""Sync: share one store between machines through the owner's own git remote.

``filemem sync`` fetches the remote's ``main`` (:mod:`filemem.owner.remotes`), brings the
local branch up to date with it, and pushes the result back:

- up to date, or only local commits: nothing to merge (then push).
- local is behind: a fast-forward (:meth:`Transaction.advance`: journal, compare-and-swap,
  working tree and index, hand-edit refusal), no new commit.
- unrelated histories, and this store holds nothing but its own creation (one commit, the
  ``init`` row, no entries, no hand edits): a *join*, the same move as a fast-forward onto
  the remote's ``main``. A machine that ran ``filemem init``, ``filemem remote add`` and
  ``filemem sync`` gets the shared store as it is, budgets and policies included (its own
  default ``filemem.yaml`` is not merged in, and nothing of it is pushed). Such a store
  with hand edits is refused (adopt or discard them first, or ``filemem clone``).
- diverged: ONE merge commit with both parents, built per entry, not per line, by
  :mod:`filemem.owner.merge` (its docstring gives the conflict rules). A key of
  ``filemem.yaml`` that both sides changed differently stops the sync before anything
  changes (CONFIG_CONFLICT, naming each key and both values) unless the owner chose
  ``keep_config="local"`` or ``"remote"`` (``filemem sync --keep-config ...``).

  The merge commit's message says what was merged (remote, commits, counts) and carries an
  audit row ``sync-merge`` plus one ``sync-conflict`` row per resolution. Files coming in
  from the remote are validated first: an invalid entry file or configuration stops the
  sync before anything changes here.

Before either, every path of the remote's tree is checked (``layout.check_tree_path``, through
``treecheck.first_bad_path``): a path out of the store or into
``.git`` in any spelling, a symbolic link, a submodule or any file a store does not hold is
refused (REMOTE_INVALID, naming the path) and nothing is written. ``filemem clone`` checks
the same before it sets its branch or writes a file; its ``.git`` is only what it made.

After integrating, layers over their budget are reported (nothing is cut). The push is a
compare-and-swap on the remote's ``main``: if someone pushed meanwhile, the sync fetches and
merges again (a few times at most).

A sync killed at any instant leaves both sides valid: the fetch only adds objects (and the
remote-tracking ref), the local branch moves by compare-and-swap with the store's journal
(the next open repairs the working tree), and the remote's branch moves by
compare-and-swap too. Running ``filemem sync`` again finishes the job. Syncs of one store
run one at a time (``.filemem/sync.lock``); agent writes are blocked only while the merge
commit is written, never during the fetch or the push. A sync is refused while a git merge,
rebase, ... is unfinished in the store (:mod:`filemem.files.gitstate`).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from filemem import config as config_mod
from filemem import errors
from filemem.config import Config
from filemem.errors import StoreReadOnly, SyncError
from filemem.files import codec, flock, worktree
from filemem.files.codec import CodecError
from filemem.files.gitindex import GitIndex
from filemem.files.gitrepo import BRANCH, GitRepo
from filemem.files.layout import check_tree_path, id_from_path, is_entry_path, path_problem
from filemem.files.treecheck import first_bad_path
from filemem.owner import gitwalk, handedits, redactsync
from filemem.owner.filemerge import PREFER, KeyConflict, Prefer, shown
from filemem.owner.merge import SOURCE, Conflict, Plan, merge_base, plan_merge
from filemem.owner.remotes import (
    Progress,
    Remote,
    clear_stale_local,
    ensure_tracking,
    fetch,
    normalize_url,
    pick_remote,
    push,
    refuse_working_store,
    tracking_ref,
    write_remote,
)
from filemem.rules import budgets
from filemem.rules import findings as checks
from filemem.shown import counted
from filemem.store import redactstage
from filemem.store.auditlog import parse_rows, row
from filemem.store.core import Store
from filemem.store.logs import log
from filemem.store.names import CONFIG_FILE, META_DIR, open_private, private_files, read_only
from filemem.store.pending import holder, holder_alive
from filemem.store.state import State
from filemem.store.transaction import HeadMoved, Transaction, hand_edited
from filemem.types import Usage

SYNC_ATTEMPTS: Final = 5  # fetch-merge-push rounds when the remote keeps moving
SYNC_LOCK_TIMEOUT: Final = 300.0


# ---------------------------------------------------------------- results


@dataclass
class SyncResult:
    """What a sync did. ``steps`` lists fast-forwards, merges and pushes in order."""

    remote: str
    url: str
    before: str
    after: str = ""
    remote_before: str | None = None
    remote_after: str | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    over_budget: list[Usage] = field(default_factory=list)
    attempts: int = 0
    tracking_before: str | None = None  # the remote-tracking ref before the first fetch
    # the store's checks on each entry the sync brought in or changed (those with findings)
    findings: list[dict[str, Any]] = field(default_factory=list)

    @property
    def up_to_date(self) -> bool:
        return not self.steps

    def notes(self) -> list[str]:
        """For a person: what the checks found in the entries the sync brought in."""
        lines = []
        for item in self.findings:
            block = checks.blocking(item["findings"])
            held = (f" (withheld from snapshots: {checks.rule_of(block[0])}; read it with "
                    f"`filemem log --entry {item['id']}`)") if block else ""
            lines.append(f"entry {item['id']} in {item['track']}/{item['scope']}{held}:")
            lines += [f"  {line}" for line in checks.describe(item["findings"])]
            hidden = [f for f in item["findings"] if f["kind"] == checks.INVISIBLE]
            if hidden:
                lines.append(f"  {sum(f.get('count', 1) for f in hidden)} invisible or "
                             "control characters (`filemem list` shows them as escapes)")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {"remote": self.remote, "url": self.url, "upToDate": self.up_to_date,
                "before": self.before, "after": self.after, "remoteBefore": self.remote_before,
                "remoteAfter": self.remote_after, "steps": self.steps,
                "overBudget": self.over_budget, "attempts": self.attempts,
                "findings": self.findings}


# ---------------------------------------------------------------- the sync


def sync(store: Store, name: str | None = None, *, progress: Progress | None = None,
         attempts: int = SYNC_ATTEMPTS, keep_config: Prefer | None = None) -> SyncResult:
    """Fetch, integrate (fast-forward, join or merge), push; see the module docstring.
    ``keep_config`` (``"local"`` or ``"remote"``): whose value a key of ``filemem.yaml``
    that both sides changed differently takes; without it such a key stops the sync."""
    if keep_config is not None and keep_config not in PREFER:
        raise errors.invalid_input(f"keep_config must be 'local' or 'remote', not "
                                   f"{keep_config!r}")
    remote = pick_remote(store.git, name)
    refuse_working_store(store.git, remote)  # before anything is fetched, merged or pushed
    store.refuse_unfinished_git()  # a `git pull` that stopped on a conflict, a rebase, ...
    with _sync_lock(store), private_files():  # fetched packs and refs, merge files
        with store.locked():  # no filemem write is packing objects meanwhile
            clear_stale_local(store.git, remote)  # what a killed fetch left in .git
            # a store whose remote was added before filemem set up git's tracking: set it
            # now (a convenience for git's own commands: a .git/config it cannot write
            # stops no sync)
            with contextlib.suppress(OSError):
                ensure_tracking(store.git)
        head = store.git.head()
        assert head is not None
        result = SyncResult(remote.name, remote.url, before=head,
                            tracking_before=redactsync.tracking(store, remote))
        known = {e.id: e.text for e in store.state().entries.values()}
        for attempt in range(1, attempts + 1):
            result.attempts = attempt
            # a redaction made here: push its history over the remote's old one, unfetched
            pending = redactsync.lease(store, remote)
            if pending is not None and not redactsync.check_lease(store, remote, pending):
                pending = None  # a killed sync had pushed it already
            expected = theirs = pending["rewritten"] if pending else fetch(store.git, remote,
                                                                           progress)
            if pending is not None:
                expected = pending["lease"] or None
            if attempt == 1:
                result.remote_before = expected
            try:
                local = _integrate(store, remote, theirs, result, keep_config)
            except HeadMoved:
                continue  # a person's git command moved the branch meanwhile: start over
            if any(s["kind"] == "take-redacted" for s in result.steps):
                redactsync.forget(store)
            result.after, result.remote_after = local, expected
            if local == expected:
                break
            if push(store.git, remote, expected, local, progress):
                if pending is not None:
                    redactstage.push_done(store, remote.name)
                result.remote_after = local
                result.steps.append({"kind": "push-redacted" if pending else "push",
                                     "from": expected, "to": local,
                                     "commits": _count(store.git, local, theirs)})
                break
        else:
            raise SyncError("REMOTE_BUSY", f"{remote.name} (or this store's branch) kept "
                            f"moving while syncing ({attempts} rounds); what was merged so far "
                            "is committed here. Run `filemem sync` again")
        result.over_budget = over_budget(store)
        result.findings = arrived(store, known)
    return result


def arrived(store: Store, known: dict[str, str]) -> list[dict[str, Any]]:
    """The store's checks on every entry whose text is not in ``known`` (id to text before
    the sync): ``{"id", "track", "scope", "findings"}`` for those with findings. An entry a
    blocking rule matches stays in the store and is withheld from snapshots."""
    state = store.state()
    cfg = state.config or Config()
    out: list[dict[str, Any]] = []
    for e in state.ordered():
        if known.get(e.id) == e.text:
            continue
        found = checks.scan(e.text, cfg)
        if found:
            out.append({"id": e.id, "track": e.track, "scope": e.scope,
                        "findings": [dict(f) for f in found]})
    return out


def over_budget(store: Store) -> list[Usage]:
    """Layers whose committed entries exceed their budget (a merge can do that; nothing
    is cut: the owner consolidates or removes entries)."""
    state = store.checked()
    assert state.config is not None
    return [r for r in budgets.report(state.usage, state.config) if r["used"] > r["limit"]]


@contextlib.contextmanager
def _sync_lock(store: Store) -> Iterator[None]:
    """One sync of a store at a time; agents' writes are not blocked by it."""
    path = os.path.join(store.meta, "sync.lock")

    def waiting() -> None:
        log.warning("filemem: waiting for another `filemem sync` of %s to finish (%s; up to "
                    "%.0f s)", store.root, flock.holder(path) or "its lock is taken",
                    SYNC_LOCK_TIMEOUT)

    try:
        lock = flock.acquire(path, flock.LOCK_FILE, SYNC_LOCK_TIMEOUT, 0.05, open_private,
                             waiting)
    except flock.Busy:
        raise SyncError("SYNC_BUSY", f"another `filemem sync` of {store.root} has been "
                        f"running for more than {SYNC_LOCK_TIMEOUT:.0f} s "
                        f"({flock.holder(path) or 'its lock is taken'})") from None
    except OSError as exc:
        if not read_only(exc):
            raise
        raise StoreReadOnly(store.root, f"cannot write {store.meta}/sync.lock: "
                            f"{exc.strerror}") from None
    try:
        yield
    finally:
        flock.release(lock)


def _count(git: GitRepo, include: str, exclude: str | None) -> int:
    """Commits reachable from ``include`` but not from ``exclude``."""
    counted = gitwalk.count(git, include, exclude)
    if counted is not None:
        return counted
    repo: Any = git.repo
    walker = repo.get_walker(include=[include.encode()],
                             exclude=[exclude.encode()] if exclude else None)
    return sum(1 for _ in walker)


def _integrate(store: Store, remote: Remote, theirs: str | None, result: SyncResult,
               keep_config: Prefer | None) -> str:
    """Bring the local branch up to date with ``theirs``; returns the local head after."""
    with store.transaction() as txn:
        ours = txn.state.head
        if theirs is None or theirs == ours:
            return ours
        base = merge_base(store.git, ours, theirs)
        if base == theirs:
            return ours  # only local commits: nothing to take in
        # a redaction keeps the commits before the first that held the text, so a store
        # with the old history shares commits with the new one (unless the text was in the
        # store's very first commit): unrelated histories, a join, are not walked for it
        if base is not None and redactsync.arriving(store, remote, ours, theirs,
                                                    result.tracking_before):
            _check_paths(store.git, store.git.commit(theirs).tree, None, remote.name)
            step = _fast_forward(txn, remote, theirs, f"filemem sync: took the redacted "
                                 f"history of {remote.name}/{BRANCH}")
            result.steps.append({**step, "kind": "take-redacted"})
            return txn.state.head
        theirs_tree = store.git.commit(theirs).tree
        if CONFIG_FILE not in store.git.read_tree(theirs_tree):
            raise SyncError("REMOTE_NOT_A_STORE", f"{remote.name}/{BRANCH} ({theirs[:12]}, "
                            f"{remote.url}) is not a filemem store (no {CONFIG_FILE}); "
                            f"nothing was changed. If {remote.name} points at the wrong "
                            f"repository: `filemem remote remove {remote.name}`, then `filemem "
                            f"remote add {remote.name} URL` with the right one")
        _check_paths(store.git, theirs_tree, txn.state.tree,
                     f"{remote.name}/{BRANCH} ({theirs[:12]}, {remote.url})")
        if base == ours:
            result.steps.append(_fast_forward(txn, remote, theirs))
        elif base is None and only_created(store, txn.state):
            result.steps.append(_join(txn, remote, theirs))
        else:
            result.steps.append(_merge(txn, remote, base, theirs, keep_config))
        return txn.state.head


def _fast_forward(txn: Transaction, remote: Remote, theirs: str,
                  reason: str | None = None) -> dict[str, Any]:
    git, st = txn.store.git, txn.state
    diff = list(git.diff(st.tree, git.commit(theirs).tree))
    _validate(git, {p: git.read_blob(new) for p, _old, new in diff if new}, remote, theirs)
    counts = _entry_counts([(p, old, new) for p, old, new in diff])
    ours = st.head
    txn.advance(theirs, reason or f"filemem sync: fast-forward to {remote.name}/{BRANCH}")
    return {"kind": "fast-forward", "from": ours, "to": theirs,
            "commits": _count(git, theirs, ours), "entries": counts,
            "files": sorted(p for p, _o, _n in diff if not is_entry_path(p))}


def only_created(store: Store, state: State) -> bool:
    """Whether the store holds nothing but its own creation: one commit, made by
    ``filemem init`` (its one audit row is ``init``), no entries. Refused (WRITE_DENIED,
    ``hand-edit-pending``) if such a store has hand edits, which a join would leave out."""
    info = store.git.commit(state.head)
    if info.parents or state.entries or state.corrupt:
        return False
    try:
        rows = parse_rows(info.message)
    except ValueError:
        return False
    if rows is None or [r["action"] for r in rows] != ["init"]:
        return False
    edits = handedits.status(store, budget_check=False)
    if edits:
        raise errors.write_denied(
            "hand-edit-pending",
            f"{worktree.full_path(store.root, edits[0].path)} has changes not adopted yet "
            f"({counted(len(edits), 'file')}; `filemem status` lists them). This store holds "
            "nothing else but its creation, so a sync would give it the remote's store as it "
            "is and leave these edits out. Keep them: `filemem adopt`, then sync (the two stores "
            "are joined by a merge). Drop them: `filemem discard`, then sync. Or make this "
            "machine's store with `filemem clone URL` in an empty folder",
            path=worktree.full_path(store.root, edits[0].path))
    return True


def _join(txn: Transaction, remote: Remote, theirs: str) -> dict[str, Any]:
    """Give a store that holds only its creation the remote's history (a fast-forward onto
    an unrelated commit: this store's one commit is left behind, nothing of it pushed)."""
    step = _fast_forward(txn, remote, theirs, f"filemem sync: took {remote.name}/{BRANCH} "
                         "(this store held only its creation)")
    step["kind"] = "join"
    return step


def _entry_counts(diff: list[tuple[str, str | None, str | None]]) -> dict[str, int]:
    """Entries added, replaced and removed by a file diff (a move counts as replaced)."""
    before: set[str] = set()
    after: set[str] = set()
    for path, old, new in diff:
        key = id_from_path(path) if is_entry_path(path) else None
        if key is None:
            continue
        if old is not None:
            before.add(key)
        if new is not None:
            after.add(key)
    return {"added": len(after - before), "replaced": len(after & before),
            "removed": len(before - after)}


def _check_paths(git: GitRepo, tree: str, known: str | None, where: str) -> None:
    """Refuse a remote's tree holding any path a store may not hold (outside the store,
    into ``.git``, a symbolic link, a submodule, a file a store never has), before anything
    of it is written. ``known``: the local tree (what is here already is not re-checked)."""
    bad = first_bad_path(git, tree, check_tree_path, known)
    if bad is not None:
        path, problem = bad
        raise SyncError("REMOTE_INVALID", f"{where} holds {path!r}: {problem}. Nothing was "
                        "changed here (none of it was written). filemem never commits such a "
                        "path: that history was made by other means; check who can push to "
                        "the remote")


def _validate(git: GitRepo, files: dict[str, bytes], remote: Remote, theirs: str) -> None:
    """Refuse, before anything changes here, entry files or a configuration from the
    remote that this store could not serve (STORE_CORRUPT would follow)."""
    where = f"{remote.name}/{BRANCH} ({theirs[:12]})"
    for path, data in sorted(files.items()):
        problem: str | None = None
        if path == CONFIG_FILE:
            problem = config_mod.problem(data)
        elif is_entry_path(path):
            try:
                problem = path_problem(path, codec.decode(data).entry)
            except CodecError as exc:
                problem = str(exc)
        if problem is not None:
            raise SyncError("REMOTE_INVALID", f"{where} has an invalid file {path}: {problem}. "
                            "Nothing was changed here; fix it on the machine that committed it "
                            "(`filemem status` there) and sync again")


# ---------------------------------------------------------------- the merge commit


def _merge(txn: Transaction, remote: Remote, base: str | None, theirs: str,
           keep_config: Prefer | None) -> dict[str, Any]:
    store, st = txn.store, txn.state
    git = store.git
    config_blob = git.blob_at(git.commit(theirs).tree, CONFIG_FILE)
    assert config_blob is not None  # _integrate checked that the remote is a store
    _validate(git, {CONFIG_FILE: git.read_blob(config_blob)}, remote, theirs)  # before merging
    plan = plan_merge(git, st.head, remote.name, base, theirs, keep_config)
    if plan.config_conflicts:
        raise config_conflict(plan.config_conflicts, remote, theirs)
    _validate(git, {p: d for p, d in plan.changes.items() if d is not None}, remote, theirs)
    head_blobs = {p: (st.blobs.get(p) if is_entry_path(p) else git.blob_at(st.tree, p))
                  for p in plan.changes}
    dirty = store.dirty_paths_at(list(plan.changes), head_blobs)  # new paths included
    if dirty:
        raise hand_edited(store.root, dirty[0])
    commits, local_commits = _count(git, theirs, st.head), _count(git, st.head, theirs)
    counts = _entry_counts([(p, head_blobs[p], None if d is None else "new")
                            for p, d in plan.changes.items()])
    summary = _summary(counts, len(plan.conflicts), commits)
    subject = f"sync-merge {remote.name}/{BRANCH}: {summary}"
    merge_row = row("sync-merge", source=SOURCE, outcome=(
        f"merged {remote.name}/{BRANCH} at {theirs[:12]} ({remote.url}): {summary}"))
    body = _body(plan, remote, st.head, base, theirs, commits, local_commits)
    ours = st.head
    commit = txn.commit_files(plan.changes, rows=[merge_row, *(c.row() for c in plan.conflicts)],
                              subject=subject, body=body, parents=[theirs])
    return {"kind": "merge", "commit": commit, "ours": ours, "theirs": theirs, "base": base,
            "commits": commits, "localCommits": local_commits, "entries": counts,
            "files": sorted(plan.files), "conflicts": [c.to_json() for c in plan.conflicts]}


def config_conflict(conflicts: list[KeyConflict], remote: Remote, theirs: str) -> SyncError:
    """CONFIG_CONFLICT: keys of filemem.yaml both sides changed differently, each with both
    values, and the two commands that decide them."""
    name = remote.name
    keys = "; ".join(f"{c.name}: {shown(c.local)} here, {shown(c.remote)} on {name}"
                     for c in conflicts)
    return SyncError(
        "CONFIG_CONFLICT",
        f"{CONFIG_FILE} was changed on both sides in the same "
        f"{'key' if len(conflicts) == 1 else 'keys'}, differently ({keys}). Nothing was "
        f"changed here or on {name}. Decide, then sync again: `filemem sync {name} "
        f"--keep-config local` keeps this machine's "
        f"{'value' if len(conflicts) == 1 else 'values'}, `filemem sync {name} "
        f"--keep-config remote` takes {name}'s; every other change (entries, other keys) "
        "is merged either way. For another value, take one, then edit "
        f"{CONFIG_FILE} and commit it",
        {"remote": name, "remoteCommit": theirs, "file": CONFIG_FILE,
         "keys": [c.to_json() for c in conflicts]})


def _summary(counts: dict[str, int], conflicts: int, commits: int) -> str:
    """Commits merged in, and what the merge changed in this store's entries."""
    return (f"{counted(commits, 'commit')}; entries: {counts['added']} added, "
            f"{counts['replaced']} replaced, {counts['removed']} removed; "
            f"{counted(conflicts, 'conflict')}")


def _body(plan: Plan, remote: Remote, ours: str, base: str | None, theirs: str,
          commits: int, local_commits: int) -> str:
    lines = [
        f"Merged {remote.name}/{BRANCH} ({theirs[:12]}, {remote.url}) into {BRANCH} "
        f"({ours[:12]}).",
        f"Merge base: {base[:12]}." if base else
        "Merge base: none (two unrelated store histories joined).",
        f"Commits only on {remote.name}: {commits}; only here: {local_commits}.",
    ]
    if plan.files:
        lines.append(f"Other files taken or merged: {', '.join(sorted(plan.files))}.")
    if plan.conflicts:
        lines.append("Conflicts resolved:")
        lines += [f"- {c.path}: {c.message}" for c in plan.conflicts]
    return "\n".join(lines)


# ---------------------------------------------------------------- clone


def clone(url: str, path: str, progress: Progress | None = None) -> str:
    """Make a new store at ``path`` from a remote's ``main`` (remote ``origin``).

    The clone is built in a temporary folder beside ``path``,
    ``.<name>.filemem-clone-<pid>-<start time>-<random>``, and renamed into place, so a
    killed clone leaves no half store. The folder a killed clone leaves (SIGKILL, power
    loss: no clean-up ran) is removed by the next clone into that parent folder, once the
    process named in it is gone (:func:`_clear_dead_builds`).
    """
    root = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(root) and (not os.path.isdir(root) or os.listdir(root)):
        raise errors.StoreExists(f"{root} exists and is not empty; choose a new or empty folder")
    parent = os.path.dirname(root)
    building = os.path.join(parent, f".{os.path.basename(root)}{_BUILDING}{holder()}-"
                                    f"{os.urandom(4).hex()}")
    remote = Remote("origin", normalize_url(url))
    with private_files():  # the parent, .git/config, packs, refs: the owner's only
        os.makedirs(parent, exist_ok=True)
        _clear_dead_builds(parent)
        try:
            _clone_into(building, remote, progress)
            if os.name == "nt" and os.path.isdir(root):
                os.rmdir(root)  # Windows cannot rename over an empty folder
            os.rename(building, root)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
    return root


_BUILDING: Final = ".filemem-clone-"
_BUILD_NAME: Final = re.compile(r"\..+\.filemem-clone-(\d+(?:-\d*)?)-[0-9a-f]{8}\Z")


def _clear_dead_builds(parent: str) -> None:
    """Remove the half-built clones that killed ``filemem clone`` runs left in ``parent``:
    only folders named as :func:`clone` names them, and only once the process named
    there (pid and start time) is gone; a clone still running is left alone."""
    with contextlib.suppress(OSError):
        for name in os.listdir(parent):
            found = _BUILD_NAME.match(name)
            full = os.path.join(parent, name)
            if found and not holder_alive(found.group(1)) and os.path.isdir(full) \
                    and not os.path.islink(full):
                shutil.rmtree(full, ignore_errors=True)


def _clone_into(root: str, remote: Remote, progress: Progress | None) -> None:
    os.makedirs(root, mode=0o700)
    git = GitRepo.create(root)
    try:
        write_remote(git, remote)
        ensure_tracking(git)  # `git pull` and `git push` work in the clone, as after `git clone`
        theirs = fetch(git, remote, progress, doing="clone")
        if theirs is None:
            raise SyncError("REMOTE_NOT_A_STORE", f"{remote.url} has no {BRANCH} branch yet: "
                            "publish a store there first (`filemem remote add origin URL` "
                            "and `filemem sync` on the machine that has it)")
        tree = git.commit(theirs).tree
        if CONFIG_FILE not in git.read_tree(tree):
            raise SyncError("REMOTE_NOT_A_STORE", f"{remote.url} ({BRANCH}) is not a filemem "
                            f"store (no {CONFIG_FILE})")
        # every path and file checked before the branch is set or a file is written: the
        # repository's own .git is never anything but what GitRepo.create made
        _check_paths(git, tree, None, f"{remote.url} ({BRANCH} at {theirs[:12]})")
        files = [(path, sha, git.read_blob(sha)) for path, _mode, sha in git.walk(tree)]
        _validate(git, {path: data for path, _sha, data in files}, remote, theirs)
        if not git.cas_head(None, theirs, f"filemem clone {remote.url}"):
            raise SyncError("BAD_REMOTE", f"could not set {BRANCH} in {root}")
        refs: Any = git.repo.refs  # `git log origin`, as `git clone` leaves it
        refs.set_symbolic_ref(f"refs/remotes/{remote.name}/HEAD".encode(),
                              tracking_ref(remote))
        index = GitIndex(git.git_dir)
        for path, sha, data in files:
            index.set(path, sha, worktree.write(root, path, data, new=True))
        index.write()
        os.makedirs(os.path.join(root, META_DIR, "cache"), mode=0o700, exist_ok=True)
    finally:
        git.close()


__all__ = ["Conflict", "SyncError", "SyncResult", "clone", "config_conflict", "only_created",
           "over_budget", "sync"]
