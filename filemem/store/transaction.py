"""One write under the store lock: :meth:`Transaction.commit` is the commit point.

The write-ahead log's record (the one fsync; see filemem.files.wal), with the objects'
pack made and written while it flushes (a seed's pack, or any pack where there is no log,
is written and fsynced before), then the compare-and-swap of the branch (HeadMoved if it
moved: someone used git), then the working tree and the index (the next view made while
the index is hashed), then the record marked settled (or, without a log, a journal begun
before the swap and cleared after). A write killed at any instant is finished or undone
from HEAD by the next transaction or open; after a restart the log is replayed first.
"""

from __future__ import annotations

import contextlib
import shlex
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from filemem import errors
from filemem.files import codec, packwrite, worktree
from filemem.files.atomic import LockFile
from filemem.files.gitrepo import PendingObjects, RefLocked
from filemem.files.layout import entry_path, is_entry_path
from filemem.files.manyfiles import write_files
from filemem.files.wal import CHECKPOINT_BYTES, WalRecord
from filemem.model import Entry, now_ms
from filemem.store import room
from filemem.store.auditlog import commit_message
from filemem.store.logs import log
from filemem.store.names import IDENT
from filemem.store.state import State, evolve
from filemem.types import AuditRow

if TYPE_CHECKING:
    from filemem.store.core import Store

class HeadMoved(Exception):
    """The branch moved between reading HEAD and the compare-and-swap (someone used git)."""


class Transaction:
    """One write under the store lock. :meth:`commit` is the commit point."""

    def __init__(self, store: Store, state: State) -> None:
        self.store = store
        self.state = state

    def commit(self, *, puts: list[Entry] = (), deletes: list[Entry] = (),  # type: ignore[assignment]
               rows: list[AuditRow], subject: str, body: str = "") -> str:
        """Write one commit that puts/deletes entries and records ``rows``; returns its sha.

        Raises WRITE_DENIED (outcome ``hand-edit-pending``) if a file to change has
        uncommitted hand edits, and HeadMoved if the branch moved meanwhile.
        """
        st, git = self.state, self.store.git
        changes: dict[str, bytes | None] = {}
        for e in deletes:
            changes[st.paths[e.id]] = None
        for e in puts:
            path = entry_path(e)
            old_path = st.paths.get(e.id)
            if old_path is not None and old_path != path:
                changes[old_path] = None
            previous = git.read_blob(st.blobs[old_path]) \
                if old_path is not None and e.id in st.noncanonical else None
            changes[path] = codec.encode(e, previous)
        return self.commit_files(changes, rows=rows, subject=subject, body=body,
                                 evolve_with=(puts, deletes))

    def commit_files(self, changes: dict[str, bytes | None], *, rows: list[AuditRow],
                     subject: str, body: str = "", parents: list[str] | None = None,
                     evolve_with: tuple[list[Entry], list[Entry]] | None = None,
                     allow_dirty: Mapping[str, str | None] | None = None) -> str:
        """Write one commit changing files (None deletes) on top of HEAD, with extra
        ``parents`` for a merge; the journal, the compare-and-swap and the working tree as
        in :meth:`commit`. Without ``evolve_with`` (the entries put and deleted) the view of
        HEAD is rebuilt from the new tree. ``allow_dirty``: paths whose uncommitted content
        is what is being committed (adopting hand edits), each with the blob of that content
        (None: no file there), journaled so that a kill while mirroring is repaired."""
        allow_dirty = allow_dirty or {}
        store, st, git = self.store, self.state, self.store.git
        head_blobs = {p: st.blobs.get(p) if is_entry_path(p) else git.blob_at(st.tree, p)
                      for p in changes}
        checked: set[str] = set()  # folders found inside the store and no link
        if changes:
            store.check_writable(list(changes), checked=checked)
        # a path new to HEAD is a fresh id's file: nothing to check there (the file is
        # created exclusively below, so nothing that appeared meanwhile is overwritten)
        dirty = store.dirty_paths_at([p for p, sha in head_blobs.items()
                                      if sha is not None and p not in allow_dirty], head_blobs)
        if dirty:
            raise hand_edited(store.root, dirty[0])
        ts = now_ms()
        for r in rows:
            r["ts"] = ts
        store.number(rows, st.head)
        message = commit_message(subject, body, rows)
        pending = PendingObjects()
        if changes:
            tree, blobs = git.splice(st.tree, changes, pending)
        else:
            tree, blobs = st.tree, {}
        commit = git.make_commit(tree, [st.head, *(parents or [])], message, IDENT, ts // 1000,
                                 pending)
        room.check(store, changes, pending)  # not a byte written before this
        store.trail.made(commit, rows)  # what the next write numbers after, if it lands
        # one fdatasync, of the write-ahead log, makes the write durable where it is on
        # (wal.py), and its record is the write's journal until settled; elsewhere the
        # pack, the journal and the ref are fsynced
        logged = store.wal.enabled
        # a batch's pack (a seed, an import) is fsynced itself: its record then only
        # names the move (a seed's objects were 1.8 MB of base64 to encode and flush)
        batch = len(pending.items) > packwrite.BATCH
        if batch or not logged:
            git.write(pending, durable=True)
        paths = {p: (head_blobs[p], blobs.get(p)) for p in changes}
        adopted = {p: b for p, b in allow_dirty.items() if p in changes}
        wal_size = 0
        if logged:
            wal_size = self._log(commit, pending, paths, adopted, batch)
        elif changes:
            store.journal.begin(st.head, commit, paths, adopted=adopted)
        moved = mirrored = False
        evolved: list[State] = []  # the next view, made while git's index is hashed
        reflog: list[Callable[[], None]] = []  # the move's reflog lines, written meanwhile too

        def view() -> None:
            _run(reflog)
            if evolve_with is not None:
                evolved.append(evolve(st, commit, tree, *evolve_with, blobs))

        try:
            with self._index_locked(bool(changes)) as lock:
                if not self._swap(commit, subject, durable=not logged, then=reflog):
                    raise HeadMoved(f"the branch moved while writing {subject!r}")
                moved = True
                # from here on the write has happened; the rest mirrors it into the working
                # tree (if that fails, the record stays unsettled: the next write repairs)
                mirrored = self._mirror(
                    commit, changes, blobs,
                    {p for p in changes if head_blobs[p] is None and p not in allow_dirty},
                    lock, checked, view, journaled=not logged)
        finally:  # settled once mirrored, or once sure the branch never moved
            _run(reflog)  # a mirror that failed before its wait: the lines still go
            if logged and (mirrored or (not moved and self._branch_not_at(commit))):
                self._settle(commit)
        if wal_size > CHECKPOINT_BYTES:
            store.wal.checkpoint(git)
        if evolve_with is not None:
            if not evolved:  # no index written (no change, or the mirror failed)
                view()
            self.state = evolved[0]
            store.committed(self.state, len(changes))
        else:
            self.state = store.state()  # reloads the view from the new HEAD
            store.committed(None, len(changes))
        return commit

    def _log(self, commit: str, pending: PendingObjects,
             paths: dict[str, tuple[str | None, str | None]], adopted: Mapping[str, str | None],
             batch: bool) -> int:
        """Append the write's record to the log and flush it; the log's size. A batch's
        record names only the move (its pack is written and fsynced already); any other
        carries the objects, and their pack is made and written while the disk flushes the
        record (named by its objects, :func:`packwrite.name_of`, so the record can name it):
        nothing names the pack before the branch moves, after the flush (a kill before
        then leaves a record whose branch never moved, undone by the next open)."""
        wal, git, old = self.store.wal, self.store.git, self.state.head
        kept = {p: b for p, b in adopted.items() if b is not None}
        if batch:
            return wal.append(WalRecord(old, commit, [], paths, kept, []))
        objects = [(sha, kind, raw) for sha, (kind, raw) in pending.items.items()]

        def make_pack() -> None:  # during the flush: the record names it by its objects
            pack = git.encode(pending)
            assert pack is not None and pack.name == name  # a commit at least
            git.put(pack, pending, durable=False)

        name = git.pack_name(pending)
        return wal.append(WalRecord(old, commit, objects, paths, kept, [name]),
                          meanwhile=make_pack)

    def advance(self, target: str, reason: str) -> None:
        """Move the branch forward to ``target``, an existing commit that descends from
        HEAD (a fast-forward to what ``filemem sync`` fetched): no new commit, but the same
        hand-edit refusal, journal, compare-and-swap and working-tree/index update as
        :meth:`commit_files`, so a process killed at any instant leaves the store before or
        after the move, repaired from HEAD by the next open. The caller checks that the
        target is valid; HeadMoved if the branch moved meanwhile."""
        store, st, git = self.store, self.state, self.store.git
        diff = list(git.diff(st.tree, git.commit(target).tree))
        head_blobs = {path: old for path, old, _new in diff}
        checked: set[str] = set()
        if diff:
            store.check_writable(list(head_blobs), checked=checked)
        # paths new to HEAD included: a file a person put where one is coming is theirs
        dirty = store.dirty_paths_at(list(head_blobs), head_blobs)
        if dirty:
            raise hand_edited(store.root, dirty[0])
        changes = {path: git.read_blob(new) if new else None for path, _old, new in diff}
        blobs = {path: new for path, _old, new in diff if new}
        room.check(store, changes, None)
        if diff:
            store.journal.begin(st.head, target, {p: (old, new) for p, old, new in diff})
        with self._index_locked(bool(diff)) as lock:
            if not self._swap(target, reason):
                raise HeadMoved(f"the branch moved while {reason}")
            self._mirror(target, changes, blobs,
                         {p for p, old in head_blobs.items() if old is None}, lock, checked)
        self.state = store.state()

    def _settle(self, commit: str) -> None:
        """Mark the log's record done. If that fails (a disk that just filled up), the
        write still stands: the record stays unsettled and the next write or open finds
        the working tree already in step and settles it."""
        try:
            self.store.wal.settle()
        except OSError as exc:
            log.warning("filemem: commit %s is written, but marking it done in the "
                        "write-ahead log failed (%s); the next write will", commit, exc)

    def _branch_not_at(self, commit: str) -> bool:
        try:
            return self.store.git.head() != commit
        except Exception:  # unreadable: recovery decides, from the unsettled record
            return False

    @contextlib.contextmanager
    def _index_locked(self, needed: bool) -> Iterator[LockFile | None]:
        """git's index.lock from before the compare-and-swap until the index is written
        (taken after the journal, so a killed write's lock is recognised as ours)."""
        if not needed:
            yield None
            return
        try:
            lock = self.store.lock_index()
        except BaseException:
            self.store.journal.clear()  # nothing moved: the journal describes no write
            raise
        with lock:  # released (aborted) on any way out that did not write the index
            yield lock

    def _swap(self, new: str, message: str, wait: float = 2.0, durable: bool = True,
              then: list[Callable[[], None]] | None = None) -> bool:
        """The compare-and-swap of the branch from this view's HEAD to ``new``; False if it
        moved. A branch lock file taken by a git command is waited for briefly, then
        StoreBusy naming the file; the journal is cleared whenever the move did not happen.
        ``then``: as for :meth:`GitRepo.cas_head` (the reflog lines, for the caller)."""
        store = self.store
        deadline = time.monotonic() + wait
        while True:
            try:
                moved = not store.git.cas_head(self.state.head, new, message, durable, then)
                break
            except errors.GitOperationInProgress:  # the last line of defence: nothing moved
                store.journal.clear()
                raise
            except RefLocked as exc:
                if time.monotonic() > deadline:
                    store.journal.clear()
                    raise errors.StoreBusy(
                        f"the store is busy: {exc.lock_path} exists, so a git command is "
                        "moving the store's branch (git commit, git gc, ...), or one was "
                        "killed and left it behind; wait for it to finish, or delete the file "
                        "if no git command is running; nothing was written") from None
                time.sleep(0.02)
        if moved:
            store.journal.clear()
        return not moved

    def _mirror(self, commit: str, changes: dict[str, bytes | None], blobs: dict[str, str],
                new: set[str], lock: LockFile | None = None,
                checked: set[str] | None = None,
                meanwhile: Callable[[], object] | None = None, journaled: bool = True) -> bool:
        """Put the files a commit changed into the working tree and the index, then clear
        the journal (``journaled``: under the log there is none, as the transaction's start
        found). ``new``: paths created exclusively (nothing may be there yet);
        ``checked``: the folders :meth:`Store.check_writable` found inside the store and no
        link under this lock; ``meanwhile``: done while the index is hashed. If this fails
        (False) the commit stands and the journal stays: the next transaction (or open)
        puts the working tree in step with HEAD."""
        if not changes:
            return True
        store = self.store
        try:
            index = store.index()
            for path, data in changes.items():
                if data is None:  # removals first: a file moved on a case-blind disk
                    worktree.remove(store.root, path, checked)
                    index.remove(path)
            written = write_files(store.root, {p: d for p, d in changes.items()
                                               if d is not None}, new, checked)
            index.set_many((path, blobs[path], st) for path, st in written.items())
            store._write_index(index, lock, meanwhile)
            if journaled:
                store.journal.clear()
            return True
        except (OSError, TimeoutError) as exc:
            self._index_at_head(changes, blobs, lock)
            log.warning("filemem: commit %s is written, but updating the working tree "
                        "failed (%s); it will be repaired on the next write", commit, exc)
            return False

    def _index_at_head(self, changes: dict[str, bytes | None], blobs: dict[str, str],
                       lock: LockFile | None) -> None:
        """After a mirror that failed: git's index given the commit's blobs for the paths it
        changed (stat unknown: git looks at the files), so that the index agrees with HEAD
        and a `git commit` of it cannot undo the commit (an index left as it was would
        commit the new entry's deletion). Best effort: it needs a few KB the failed mirror
        may not have had; the unsettled record repairs the rest on the next write."""
        store = self.store
        try:
            index = store.index()
            for path, data in changes.items():
                if data is None:
                    index.remove(path)
                else:
                    index.set(path, blobs[path], None)
            store._write_index(index, lock if lock is not None and lock.open else None)
        except (OSError, TimeoutError) as exc:
            log.warning("filemem: git's index could not be updated either (%s): until the "
                        "next filemem write, `git status` shows this commit's files as "
                        "staged to be undone; do not `git commit` before it", exc)


def _run(calls: list[Callable[[], None]]) -> None:
    """Call each of ``calls`` once, and forget them."""
    while calls:
        calls.pop(0)()


def unreadable(odd: worktree.Unreadable, path: str) -> str:
    """What keeps the working-tree file at ``path`` from being read, and the way out: the
    one wording for `filemem status` and a write that meets it."""
    if odd.what == "folder link":
        return (f"the folder {odd.file} is a symbolic link, which filemem never follows: put "
                "the real folder back in its place (remove the link, then move the folder it "
                "points to there)")
    if odd.what == "no permission":
        return (f"{odd.file} cannot be read (permission denied): restore its permissions "
                f"(`chmod 600 {shlex.quote(odd.file)}`)")
    what = "a symbolic link, which filemem never follows" if odd.what == "link" else \
        f"{odd.kind}, not a regular file, which filemem never opens"
    return (f"{odd.file} is {what}: `filemem discard {shlex.quote(path)}` removes it (and "
            "puts back the committed file, if there is one)")


def hand_edited(root: str, path: str) -> errors.ProtocolError:
    """WRITE_DENIED for the file at ``path`` that differs from HEAD: a person's edit, or
    something filemem cannot read (then what it is and the way out)."""
    full = worktree.full_path(root, path)
    _data, odd = worktree.read_checked(root, path)
    if odd is not None:
        return errors.write_denied(
            "hand-edit-pending",
            f"{unreadable(odd, path)}; until then filemem cannot tell whether it holds "
            "changes made outside filemem, so it changes nothing there",
            path=full)
    return errors.write_denied(
        "hand-edit-pending",
        f"{full} has uncommitted changes made outside filemem; run `filemem status`, then "
        "adopt or discard them before this entry can be changed",
        path=full,
    )
