"""The store: a git repository of entry files, its lock, its view of HEAD and its local state.

- Reads see the entries committed at HEAD, never the working tree. The view is rebuilt
  incrementally when HEAD moves (a cheap ref read per call notices it), parsing only files
  whose blob changed, and is kept in ``.filemem/cache/state.jsonl`` (:mod:`.viewcache`) so a
  cold process does not re-parse every file.
- Writes happen in a :mod:`.transaction` under the store lock (:mod:`.storelock`, on
  ``.filemem/lock``), again on the new HEAD when the branch moved (:meth:`Store.retrying`);
  a write killed at any instant is finished or undone from HEAD by the next one or open.
- ``.filemem/`` (never committed) holds the lock, the caches, the read-side audit ledger,
  the recall counters and pending approvals. It is the owner's private state, not a trusted
  source: nothing in it is followed through a symbolic link (a link where the lock, the
  journal, the ledger or the recall log is refused as STORE_CORRUPT naming it; the cache
  and pending records are never read through one), the view cache is verified against git
  (:mod:`.viewcache`), and the journal is acted on only for store paths whose blobs are
  what its commits hold (:meth:`Store._recover`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Final, TypeVar

from filemem import config as config_mod
from filemem import errors
from filemem.config import STORE_SCHEMA, Config
from filemem.files import atomic, codec, gitstate, retire, wal, worktree
from filemem.files.atomic import LinkRefused, LockFile
from filemem.files.codec import CodecError
from filemem.files.gitindex import GitIndex, IndexUnsupported, rebuild
from filemem.files.gitrepo import GitRepo, RepositoryDamaged
from filemem.files.layout import (
    NOT_AN_ENTRY,
    in_entry_folder,
    is_entry_path,
    layer_dir,
    path_problem,
)
from filemem.model import Entry
from filemem.store import create, recovery
from filemem.store.auditlog import Ledger
from filemem.store.audittrail import AuditTrail
from filemem.store.invalid import InvalidFiles
from filemem.store.logs import log
from filemem.store.names import (
    CONFIG_FILE,
    META_DIR,
    linked,
    private_files,
    read_only,
)
from filemem.store.packschedule import PackSchedule
from filemem.store.pending import PendingStore, Record
from filemem.store.recall import RecallCounters
from filemem.store.state import State, usage_of
from filemem.store.storelock import StoreLock
from filemem.store.viewcache import SAVE_EVERY, Parsed, ViewCache
from filemem.types import AuditRow

if TYPE_CHECKING:
    from filemem.store.transaction import Transaction

COMMIT_ATTEMPTS: Final = 5  # branch moves (by git) tolerated during one write
_DUPLICATE: Final = "duplicate entry id"
T = TypeVar("T")


class Store:
    """A filemem store on disk. Use :func:`filemem.open_store` rather than this directly."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(root))
        if not os.path.isdir(os.path.join(self.root, ".git")):
            raise create.not_a_store(self.root)
        self.git = GitRepo(self.root)
        self.meta = os.path.join(self.root, META_DIR)
        if not os.path.isdir(self.meta):
            self._require_store()
        for folder in (self.meta, os.path.join(self.meta, "cache"),
                       os.path.join(self.meta, "pending")):
            if os.path.islink(folder):
                raise linked(folder)
        try:
            with private_files():
                os.makedirs(os.path.join(self.meta, "cache"), mode=0o700, exist_ok=True)
        except OSError as exc:
            if not read_only(exc):
                raise
        self._read_only_noted = False
        self.ledger = Ledger(self.meta)
        self.pending = PendingStore(self.meta, recover=self._recover_claims)
        self.recall = RecallCounters(self.meta)
        self.journal = worktree.Journal.at(self.meta)
        self.wal = wal.Wal.at(self.meta)
        self.trail = AuditTrail(self.git, self.ledger)
        self._state: State | None = None
        self._parsed: Parsed = {}
        self._config_cache: tuple[str, Config | None, errors.ProtocolError | None] | None = None
        self._cache = ViewCache(self.meta, self.git)
        self.invalid = InvalidFiles(self.root, self.git)
        self._index: GitIndex | None = None
        self._index_id: tuple[int, int, int, int] | None = None
        self.packs = PackSchedule()
        self._lock = threading.RLock()
        self._store_lock = StoreLock(self.root, self.meta, self._lock)
        if recovery.unfinished(self):
            # a killed write (or a log from before a restart) is finished or undone here; a
            # running write finishes its own, a read-only or full store is read as it is
            # (reads see HEAD, never the working tree): readers never wait for a writer
            with contextlib.suppress(errors.StoreBusy, errors.StoreReadOnly, errors.StoreFull), \
                    self.locked(timeout=0.0), self.disk_full_is_reported():
                self._recover()

    def _require_store(self) -> None:
        """Refuse a git repository that is not a filemem store before writing anything in
        it (a fresh clone of a store is one: its filemem.yaml is committed)."""
        if not create.holds_store(self.git):
            raise create.not_a_store(self.root)

    @classmethod
    def create(cls, root: str | os.PathLike[str]) -> Store:
        """Lay a new store down from the template (see :mod:`.create`) and open it."""
        root = os.path.abspath(os.fspath(root))
        create.make(root)
        return cls(root)

    # ------------------------------------------------------------ locking

    def locked(self, timeout: float | None = None) -> contextlib.AbstractContextManager[None]:
        """The store lock (:mod:`.storelock`): StoreBusy after ``timeout`` (default
        LOCK_TIMEOUT), StoreReadOnly if it cannot be written."""
        return self._store_lock.held(timeout)

    # ------------------------------------------------------------ the view of HEAD

    def state(self) -> State:
        """The committed state at HEAD (rebuilt only if HEAD moved). Not validated: callers
        that serve entries call :meth:`checked`."""
        head = self.git.head(seen=True)
        if head is None:
            raise errors.store_corrupt(self.root, "the repository has no commits")
        current = self._state
        if current is not None and current.head == head:
            return current
        with self._lock:
            current = self._state
            if current is not None and current.head == head:
                return current
            self._state = self._load(head)
            return self._state

    def checked(self) -> State:
        """:meth:`state`, raising STORE_CORRUPT / STORE_UNSUPPORTED_VERSION if it is invalid."""
        st = self.state()
        if st.config_problem is not None or st.corrupt:
            problem = self.invalid.first(st)  # the file, its commit, the way out
            assert problem is not None
            raise problem
        return st

    def config(self) -> Config:
        st = self.checked()
        assert st.config is not None
        return st.config

    def _parse(self, path: str, blob: str) -> tuple[Entry | None, str | None, bool]:
        """(entry, None, canonical) for a valid entry file at ``path``, else (None, why, _).

        Decoding is cached by blob (content); whether the path fits is checked each time,
        since the same content can move (``git mv``, a revert)."""
        decoded = self._parsed.get(blob)
        if decoded is None:
            try:
                got = codec.decode(self.git.read_blob(blob, path))
                decoded = (got.entry, None, got.canonical)
            except CodecError as exc:
                decoded = (None, str(exc), False)
            if len(self._parsed) > 100_000:
                self._parsed.clear()
            self._parsed[blob] = decoded
        entry = decoded[0]
        if entry is None:
            return decoded
        problem = path_problem(path, entry)
        return decoded if problem is None else (None, problem, False)

    def _read_config(self, blob: str | None) -> tuple[Config | None, errors.ProtocolError | None]:
        if blob is None:
            return None, errors.bad_file(self.root, CONFIG_FILE, "it is missing at HEAD")
        if self._config_cache and self._config_cache[0] == blob:
            return self._config_cache[1], self._config_cache[2]
        cfg: Config | None = None
        problem: errors.ProtocolError | None = None
        try:
            cfg = config_mod.load(self.git.read_blob(blob))
        except errors.ProtocolError as exc:
            if exc.code == errors.STORE_UNSUPPORTED_VERSION:
                problem = errors.store_unsupported_version(self.root, exc.details["found"],
                                                           STORE_SCHEMA)
            else:
                problem = errors.bad_file(self.root, CONFIG_FILE, exc.message)
        self._config_cache = (blob, cfg, problem)
        return cfg, problem

    def _load(self, head: str, *, full: bool = False) -> State:
        try:
            commit = self.git.commit(head)
        except RepositoryDamaged as exc:
            raise exc.at("", "HEAD, the store's newest commit") from None
        base = None if full else self._state
        if base is None:
            self._load_cache()
        root_tree = self.git.read_tree(commit.tree, "")
        config_item = root_tree.get(CONFIG_FILE)
        config_blob = config_item[1] if config_item else None
        cfg, problem = self._read_config(config_blob)
        if base is not None and any(r.startswith(_DUPLICATE) for r in base.corrupt.values()):
            base = None  # a duplicate may have been resolved: decide again from scratch
        if base is not None:  # .copy(): a view with a removal's hole, as in state.evolve
            entries = base.entries.copy()
            paths = base.paths.copy()
            blobs = base.blobs.copy()
            corrupt = base.corrupt.copy()
            noncanonical = set(base.noncanonical)
            changes = [(p, new) for p, _old, new in self.git.diff(base.tree, commit.tree)
                       if in_entry_folder(p)]
        else:
            entries, paths, blobs, corrupt, noncanonical = {}, {}, {}, {}, set()
            changes = [(p, sha) for p, _mode, sha in self.git.walk(commit.tree)
                       if in_entry_folder(p)]
        by_path = {p: i for i, p in paths.items()}
        misses = 0  # files a cold start reads from git that the cache could have held
        if base is None:
            misses = sum(1 for _p, b in changes if b is not None and b not in self._parsed)
        for path, blob in changes:
            old_id = by_path.pop(path, None)
            if old_id is not None and paths.get(old_id) == path:
                entries.pop(old_id, None)
                paths.pop(old_id, None)
                noncanonical.discard(old_id)
            blobs.pop(path, None)
            corrupt.pop(path, None)
            if blob is None:
                continue
            blobs[path] = blob
            if not is_entry_path(path):  # agents never see it, but the store holds it
                corrupt[path] = NOT_AN_ENTRY
                continue
            entry, reason, canonical = self._parse(path, blob)
            if entry is None:
                corrupt[path] = reason or "invalid entry file"
                continue
            if entry.id in entries:  # the same id in two files
                if base is not None:
                    # which file is "the" entry must not depend on the order files changed
                    # in: decide on a full walk (path order), as a cold start would
                    return self._load(head, full=True)
                corrupt[path] = f"{_DUPLICATE} {entry.id} (also in {paths[entry.id]})"
                continue
            entries[entry.id] = entry
            paths[entry.id] = path
            by_path[path] = entry.id
            if not canonical:
                noncanonical.add(entry.id)
        state = State(
            head=head, tree=commit.tree, config=cfg, config_problem=problem, entries=entries,
            paths=paths, blobs=blobs, noncanonical=frozenset(noncanonical), corrupt=corrupt,
            usage=usage_of(entries), config_blob=config_blob,
        )
        if base is None:  # a cold start: saves the cache if it lacks enough of the files
            self._cache.unsaved = misses
            if self._cache.stale(state):
                self._cache.save(state)
        else:
            self._cache.unsaved += len(changes)
            if self._cache.unsaved >= SAVE_EVERY:
                self._cache.save(state)
        return state

    def _load_cache(self) -> None:
        """A cold start: the view cache's entries that check out against their blobs go
        into the parse memo; the view itself is built from HEAD's tree (:mod:`.viewcache`)."""
        if not self._parsed:
            self._cache.load(self._parsed)

    def committed(self, state: State | None, files: int) -> None:
        """After a commit: serve ``state`` (None: reload from HEAD), save the view cache
        now and then, pack loose objects now and then, fold the recall log when big."""
        if state is None:
            state = self.state()
        else:
            self._state = state
        self._cache.changed(state, files)
        gitstate.left_quiet(self.git.git_dir)
        self.packs.after_commit(self.git, self.wal)
        if self.recall.needs_compaction():
            self.recall.compact(set(state.entries))

    def close(self) -> None:
        """Save the view cache if it lacks enough files (:meth:`ViewCache.stale`) and release
        git handles."""
        st = self._state
        if st is not None and self._cache.stale(st):
            self._cache.save(st)
        self.git.close()
        self.ledger.close()
        self._store_lock.close()

    # ------------------------------------------------------------ the git index

    def index(self) -> GitIndex:
        ident = atomic.identity_at(self.git.file_of("index"))
        if self._index is not None and ident == self._index_id:
            return self._index
        try:
            self._index = GitIndex.load(self.git.git_dir)
        except IndexUnsupported as exc:
            if ident is not None:
                log.warning("filemem: rebuilding %s/.git/index from HEAD (%s); anything staged "
                            "with `git add` is unstaged (the files stay on disk)", self.root, exc)
            head = self.git.head()
            files = [] if head is None else list(self.git.walk(self.git.commit(head).tree))
            self._index = rebuild(self.git.git_dir, self.root, files)
        self._index_id = ident
        return self._index

    def lock_index(self) -> LockFile:
        """Hold git's ``index.lock`` (StoreBusy if a git command keeps it): a write holds it
        from before the branch moves until the index matches, as git's own commands do with
        each other, so a ``git commit -a`` can never build its tree from an index that lacks
        a commit filemem has just made."""
        try:
            return self.index().lock()
        except TimeoutError as exc:  # git's index.lock stayed taken
            raise errors.StoreBusy(f"the store is busy: {exc}") from None

    def _write_index(self, index: GitIndex, lock: LockFile | None = None,
                     meanwhile: Callable[[], object] | None = None) -> None:
        try:
            index.write(lock=lock, meanwhile=meanwhile)
        except TimeoutError as exc:  # git's index.lock stayed taken
            raise errors.StoreBusy(f"the store is busy: {exc}") from None
        self._index_id = atomic.identity(os.stat(index.path))

    # ------------------------------------------------------------ recovery

    def _recover(self) -> list[str]:  # finish or undo what a killed write left (lock held)
        return recovery.recover(self)

    def repair(self) -> None:
        """Finish or undo a killed write now, if one left its journal (takes the lock)."""
        if recovery.unfinished(self):
            with self.locked(), private_files():
                if recovery.unfinished(self):
                    self._recover()

    def _recover_claims(self) -> None:
        """Put back (or drop, if settled) pending approvals claimed by a process that is
        gone: an approve or reject killed mid-way (under the lock, so a live one's commit
        cannot land meanwhile)."""
        with self.locked():
            if recovery.unfinished(self):
                self._recover()
            self.pending.recover_stale(self._settled)

    def _settled(self, record: Record) -> bool:
        return recovery.settled(self, record)

    # ------------------------------------------------------------ writing

    @contextlib.contextmanager
    def transaction(self, *, validate: bool = True) -> Iterator[Transaction]:
        """Hold the store lock, repair a half-done write if any, and work on a fresh view
        (validated unless ``validate=False``, for the owner repairing a bad file)."""
        from filemem.store.transaction import Transaction  # the write side: not for a read

        # the files the write replaces are freed once the lock is let go (files/retire.py)
        with retire.deferred(), self.locked(), private_files(), self.disk_full_is_reported():
            if recovery.unfinished(self):
                self._recover()
            self.packs.before_write(self.git)  # a killed write's half-made pack
            yield Transaction(self, self.checked() if validate else self.state())

    @contextlib.contextmanager
    def disk_full_is_reported(self) -> Iterator[None]:
        """A full disk (or quota) while writing the store's files is StoreFull, and a file
        or folder this process may not write (part of ``.git`` read-only) StoreReadOnly
        naming it, one clear line each: the atomic primitive and the object writers never
        give a half-written file its real name, so the store is as it was."""
        try:
            yield
        except OSError as exc:
            if isinstance(exc, errors.FilememError):
                raise
            if read_only(exc):
                where = exc.filename or self.root
                raise errors.StoreReadOnly(
                    self.root, f"{exc.strerror}: {where}; make its folder writable for this "
                    f"user (`chmod -R u+w {os.path.dirname(where)}`), or write as the user "
                    "who owns it") from None
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            raise errors.StoreFull(
                f"the disk holding the store {self.root} is full ({exc.strerror}); nothing "
                "was written; free some space and try again") from None

    def stage(self, record: dict[str, Any]) -> str:
        """Save a pending approval (see :class:`PendingStore`); StoreFull on a full disk."""
        with self.disk_full_is_reported():
            return self.pending.stage(record)

    def retrying(self, work: Callable[[Transaction], T], *, validate: bool = True,
                 exhausted: Callable[[errors.StoreBusy], T] | None = None) -> T:
        """Run ``work`` in a :meth:`transaction`, again on the new HEAD whenever the branch
        moved under it (a person's git command between the view and the compare-and-swap;
        other filemem processes wait for the lock instead). Once it has moved
        COMMIT_ATTEMPTS times, or a lock stays taken: ``exhausted(why)``, else that
        StoreBusy (nothing was written, and the caller is told so)."""
        from filemem.store.transaction import HeadMoved

        busy = errors.StoreBusy(
            f"the store is busy: its branch moved {COMMIT_ATTEMPTS} times during one write "
            f"(someone is committing with git in {self.root}); nothing was written; try again")
        for _ in range(COMMIT_ATTEMPTS):
            try:
                with self.transaction(validate=validate) as txn:
                    return work(txn)
            except HeadMoved:
                self.git.forget_refs()  # the view missed the move: read the files again
                continue
            except errors.StoreBusy as exc:
                busy = exc
                break
        if exhausted is not None:
            return exhausted(busy)
        raise busy

    def record(self, rows: list[AuditRow], *, subject: str, body: str) -> None:
        """An audit-only commit (a denied, refused or staged write): no entry changes. It is
        never dropped: if it cannot be committed (the branch keeps moving, a lock stays
        taken, a git merge began meanwhile), the rows go to the read-side ledger instead,
        where ``auditList`` shows them just the same."""
        def commit(txn: Transaction) -> None:
            txn.commit(rows=rows, subject=subject, body=body)

        def in_ledger(why: errors.FilememError) -> None:
            log.warning("filemem: %r is recorded in the ledger, not committed: %s", subject,
                        why.message)
            self.append_ledger(rows)

        try:
            self.retrying(commit, exhausted=in_ledger)
        except errors.GitOperationInProgress as exc:  # a git merge began while asking
            in_ledger(exc)

    def check_writable(self, paths: list[str], wait: float = 2.0,
                       checked: set[str] | None = None) -> None:
        """Refuse, before anything is written, a write the working tree cannot take: a
        folder on the way that is a symbolic link (filemem never writes through links), or
        git's index locked by a git command (waited for briefly, as git itself does not).
        ``checked``: filled with the folders found inside the store and no link, which the
        same write's files are then not checked again in (:func:`worktree.guard`)."""
        checked = set() if checked is None else checked
        for folder in dict.fromkeys(p.rpartition("/")[0] for p in paths):
            try:
                worktree.guard(self.root, f"{folder}/x" if folder else "x", checked)
            except LinkRefused as exc:
                raise errors.store_corrupt(
                    str(exc.filename), "is a symbolic link; filemem does not write through "
                    "links in the store (replace it with a real folder)") from None
        lock = self.git.file_of("index.lock")
        deadline = time.monotonic() + wait
        seen = None
        while True:
            held = atomic.identity_at(lock)
            if held is None or self.journal.exists() or self.wal.unsettled() is not None:
                return  # no lock, or a filemem write's own (its journal or record is there)
            # the same lock file seen twice, with no filemem write under way: a git command's.
            # Seen once, it may be a write by another process that ended between the looks
            # (a check before the store lock is taken, as an approval's): look again.
            if held == seen and time.monotonic() > deadline:
                raise errors.StoreBusy(
                    f"the store is busy: {lock} exists, so a git command is using this "
                    "store's index; wait for it to finish, or delete the file if no git "
                    "command is running; nothing was written")
            seen = held
            time.sleep(0.02)

    def refuse_unfinished_git(self) -> None:
        """GitOperationInProgress while a git merge, rebase, ... is unfinished in the store
        (:mod:`filemem.files.gitstate`): asked before any write is approved."""
        gitstate.refuse_if_unfinished(self.root)

    def precheck(self, state: State, targets: list[Entry],
                  new_layers: list[tuple[str, str, str, str]]) -> None:
        """What a commit changing ``targets`` and adding entries to ``new_layers`` would
        refuse, checked up front (before anyone is asked to approve)."""
        paths = [state.paths[t.id] for t in targets]
        paths += [f"{layer_dir(*layer)}/new.md" for layer in dict.fromkeys(new_layers)]
        self.check_writable(paths, wait=0.0)
        dirty = self.dirty_paths(state, [state.paths[t.id] for t in targets])
        if dirty:
            # ``state`` may be older than the files: another process may have committed (and
            # written the file, or removed it) since it was read, which is no hand edit. Only
            # under the lock do HEAD and the working tree agree, so judge again there.
            self.repair()
            with self.locked():
                fresh = self.state()
                dirty = self.dirty_paths(fresh, [fresh.paths[t.id] for t in targets
                                                 if t.id in fresh.paths])
        if dirty:
            from filemem.store.transaction import hand_edited

            raise hand_edited(self.root, dirty[0])

    def dirty_paths(self, state: State, paths: list[str]) -> list[str]:
        """Which of ``paths`` have uncommitted changes in the working tree (hand edits)."""
        return self.dirty_paths_at(paths, state.blobs)

    def dirty_paths_at(self, paths: list[str], head_blobs: Mapping[str, str | None]) -> list[str]:
        """Which of ``paths`` differ in the working tree from their blob at HEAD."""
        index = self.index() if paths else None  # an add: no index to load or stat
        return [p for p in paths
                if not worktree.is_clean(self.root, p, head_blobs.get(p), index)]

    def audit(self, limit: int) -> list[AuditRow]:
        """The newest ``limit`` audit rows across history and the ledger, newest first."""
        return self.trail.newest(limit)

    def number(self, rows: list[AuditRow], head: str | None) -> None:
        """Stamp ``rows`` with seqs after every row so far (HEAD's, the ledger's, and those
        handed to commits in progress), from the ledger's counter: never the store lock."""
        with self.ledger.numbering(
                lambda: self.trail.last_seq(head) if head else self.ledger.last_seq()) as stamp:
            for r in rows:
                stamp(r)

    def append_ledger(self, rows: list[AuditRow]) -> list[AuditRow]:
        """Record read-side rows (recalled, snapshot) with their seq. Takes no store lock:
        a reader never waits for a writer. On a read-only store the rows are not recorded
        (a note on stderr says so)."""
        head = self.git.head()
        try:
            with private_files(), self.ledger.numbering(
                    lambda: self.trail.last_seq(head) if head else self.ledger.last_seq()
            ) as stamp:
                for r in rows:
                    stamp(r)
                self.ledger.append(rows)
        except OSError as exc:
            if not read_only(exc) and exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self.note_read_only(exc)
        return rows

    def bump_recall(self, ids: list[str], ts: int) -> None:
        """Count a query's results as recalled; skipped, with a note, on a read-only store or
        a full disk."""
        try:
            self.recall.bump(ids, ts)
        except OSError as exc:  # usage statistics, not memory: the read still answers
            if not read_only(exc) and exc.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise
            self.note_read_only(exc)

    def note_read_only(self, exc: OSError) -> None:
        """One line on stderr (through logging, never stdout), once per open store."""
        if self._read_only_noted:
            return
        self._read_only_noted = True
        why = "full" if exc.errno in (errno.ENOSPC, errno.EDQUOT) else "read-only"
        log.warning("filemem: the store at %s is %s: this read is answered, but its "
                    "recall counts and read-side audit rows are not recorded", self.root, why)
