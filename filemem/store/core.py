"""The store: a git repository of entry files, its lock, its view of HEAD and its local state.

- Reads see the entries committed at HEAD, never the working tree. The view is rebuilt
  incrementally when HEAD moves (a cheap ref read per call notices it), parsing only files
  whose blob changed, and is kept in ``.filemem/cache/state.json`` so a cold process does
  not re-parse every file.
- Writes happen in a transaction: the store lock (portalocker, on ``.filemem/lock``), a fresh
  view, then :meth:`Transaction.commit`: objects, journal, compare-and-swap of the branch,
  working tree, index, journal cleared. The commit is the commit point; a write killed at
  any instant is finished or undone from HEAD by the next transaction or open.
- ``.filemem/`` (never committed) holds the lock, the caches, the read-side audit ledger and
  the recall counters.
"""

from __future__ import annotations

import contextlib
import heapq
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, TypeVar

from filemem import config as config_mod
from filemem import errors
from filemem.config import STORE_SCHEMA, Config
from filemem.files import atomic, codec, worktree
from filemem.files.codec import CodecError
from filemem.files.gitindex import GitIndex, IndexUnsupported, rebuild
from filemem.files.gitrepo import CommitInfo, GitError, GitRepo, PendingObjects
from filemem.files.layout import entry_path, is_entry_path, layer_dir, path_problem
from filemem.model import LAYERS, Entry, now_ms
from filemem.store.auditlog import (
    Ledger,
    commit_message,
    external_row,
    last_trailer_seq,
    next_seq,
    parse_rows,
    row,
)
from filemem.store.pending import PendingStore
from filemem.store.recall import RecallCounters
from filemem.types import AuditRow

META_DIR: Final = ".filemem"
CONFIG_FILE: Final = "filemem.yaml"
IDENT: Final = "filemem <filemem@localhost>"
_CACHE_FORMAT: Final = 1
_SAVE_EVERY: Final = 64  # changed files between saves of the on-disk view cache ...
_SAVE_INTERVAL: Final = 60.0  # ... by a long-running writer, at most once a minute
_PACK_CHECK_EVERY: Final = 100  # commits between checks for loose objects to pack
_PACK_WHEN_LOOSE: Final = 6000
LOCK_TIMEOUT: Final = 60.0
COMMIT_ATTEMPTS: Final = 5  # branch moves (by git) tolerated during one write
_DUPLICATE: Final = "duplicate entry id"
log = logging.getLogger("filemem")
T = TypeVar("T")


class HeadMoved(Exception):
    """The branch moved between reading HEAD and the compare-and-swap (someone used git)."""


@contextlib.contextmanager
def private_files() -> Iterator[None]:
    """Files and folders made inside are private to the owner (0600/0700 on POSIX)."""
    old = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(old)


@dataclass
class State:
    """The store as committed at one HEAD. Treat as immutable; writes make a new one."""

    head: str
    tree: str
    config: Config | None
    config_problem: errors.ProtocolError | None
    entries: dict[str, Entry]
    paths: dict[str, str]  # entry id -> path
    blobs: dict[str, str]  # path -> blob sha (entry files only)
    noncanonical: frozenset[str]  # ids whose file has keys of its own (spliced on replace)
    corrupt: dict[str, str]  # path -> reason
    usage: dict[tuple[str, str], int]
    config_blob: str | None = None
    _layers: dict[tuple[str, str], list[Entry]] | None = field(default=None, repr=False)
    _ordered: list[Entry] | None = field(default=None, repr=False)
    _newest: int | None = field(default=None, repr=False)

    def layer(self, track: str, scope: str) -> list[Entry]:
        if self._layers is None:
            layers: dict[tuple[str, str], list[Entry]] = {k: [] for k in LAYERS}
            for e in self.entries.values():
                layers[(e.track, e.scope)].append(e)
            self._layers = layers
        return self._layers.get((track, scope), [])

    def newest_created(self) -> int:
        """The latest createdAt so far (0 if none): new entries are created after it, so the
        listing order (createdAt, id) is the order of the writes."""
        if self._newest is None:
            self._newest = max((e.created_at for e in self.entries.values()), default=0)
        return self._newest

    def ordered(self) -> list[Entry]:
        """All entries by (createdAt, id): the listing order."""
        if self._ordered is None:
            self._ordered = sorted(self.entries.values(), key=lambda e: (e.created_at, e.id))
        return self._ordered


def _usage(entries: dict[str, Entry]) -> dict[tuple[str, str], int]:
    usage = dict.fromkeys(LAYERS, 0)
    for e in entries.values():
        usage[(e.track, e.scope)] += e.size
    return usage


def template_files() -> dict[str, bytes]:
    """The files of ``store-template/`` (installed as ``filemem/_store_template``)."""
    from importlib import resources

    base: Any = resources.files("filemem") / "_store_template"
    if not base.is_dir():
        base = Path(__file__).resolve().parents[2] / "store-template"
    out: dict[str, bytes] = {}

    def collect(node: Any, prefix: str) -> None:
        for child in node.iterdir():
            name = f"{prefix}{child.name}"
            if child.is_dir():
                collect(child, name + "/")
            elif not child.name.endswith((".pyc",)):
                out[name] = child.read_bytes()

    collect(base, "")
    if CONFIG_FILE not in out:
        raise FileNotFoundError("the store template (store-template/) is not installed")
    return out


class Store:
    """A filemem store on disk. Use :func:`filemem.open_store` rather than this directly."""

    def __init__(self, root: str | os.PathLike[str]) -> None:
        self.root = os.path.abspath(os.fspath(root))
        if not os.path.isdir(os.path.join(self.root, ".git")):
            raise errors.StoreNotFound(
                f"no filemem store at {self.root}; create one with `filemem init {self.root}`"
            )
        self.git = GitRepo(self.root)
        self.meta = os.path.join(self.root, META_DIR)
        if not os.path.isdir(self.meta):
            self._require_store()
        with private_files():
            os.makedirs(os.path.join(self.meta, "cache"), mode=0o700, exist_ok=True)
        self.ledger = Ledger(self.meta)
        self.pending = PendingStore(self.meta)
        self.recall = RecallCounters(self.meta)
        self.journal = worktree.Journal.at(self.meta)
        self._state: State | None = None
        self._parsed: dict[str, tuple[Entry | None, str | None, bool]] = {}
        self._config_cache: tuple[str, Config | None, errors.ProtocolError | None] | None = None
        self._index: GitIndex | None = None
        self._index_id: tuple[int, int, int] | None = None
        self._unsaved = 0
        self._saved_tree: str | None = None
        self._saved_at = 0.0
        self._saved_config: str | None = None
        self._commits_since_pack_check = _PACK_CHECK_EVERY  # check on the first commit
        self._rows: dict[str, list[AuditRow]] = {}  # commit sha -> its rows, newest first
        self._lock = threading.RLock()
        self._file_lock: Any = None
        self._lock_depth = 0
        if self.journal.exists():
            with self.locked():
                self._recover()

    def _require_store(self) -> None:
        """Refuse a git repository that is not a filemem store before writing anything in
        it (a fresh clone of a store is one: its filemem.yaml is committed)."""
        try:
            head = self.git.head()
            has_config = head is not None and \
                CONFIG_FILE in self.git.read_tree(self.git.commit(head).tree)
        except (GitError, KeyError, OSError):
            has_config = False
        if not has_config:
            raise errors.StoreNotFound(
                f"{self.root} is a git repository but not a filemem store (no {CONFIG_FILE} "
                "committed); use another folder or create a store with `filemem init`"
            )

    # ------------------------------------------------------------ creation

    @classmethod
    def create(cls, root: str | os.PathLike[str]) -> Store:
        """Lay a new store down from the template and make the first commit.

        The store is built in a temporary folder beside ``root`` and renamed into place,
        so several processes creating the same store at once end with one whole store
        (the others open it) and nobody ever sees a half-made one."""
        root = os.path.abspath(os.fspath(root))
        if os.path.exists(root) and (not os.path.isdir(root) or os.listdir(root)):
            if os.path.isdir(os.path.join(root, ".git")):
                return cls(root)  # someone made it meanwhile (or it is already a store)
            raise errors.StoreExists(
                f"{root} exists and is not empty; choose a new or empty folder for the store"
            )
        parent = os.path.dirname(root)
        os.makedirs(parent, exist_ok=True)
        with private_files():
            building = os.path.join(
                parent, f".{os.path.basename(root)}.filemem-init-{os.getpid()}-"
                        f"{os.urandom(4).hex()}")
            try:
                cls._lay_down(building)
                if os.path.isdir(root) and not os.listdir(root) and os.name == "nt":
                    os.rmdir(root)  # Windows cannot rename over an empty folder
                os.rename(building, root)  # POSIX: replaces a missing or empty folder only
            except OSError:
                import shutil

                shutil.rmtree(building, ignore_errors=True)
                if os.path.isdir(os.path.join(root, ".git")):
                    return cls(root)  # another process won the race: its store is whole
                raise
        return cls(root)

    @staticmethod
    def _lay_down(root: str) -> None:
        """The template's files, the first commit, the working tree and the index."""
        os.makedirs(root, mode=0o700)
        os.chmod(root, 0o700)
        git = GitRepo.create(root)
        os.makedirs(os.path.join(root, META_DIR, "cache"), mode=0o700, exist_ok=True)
        files = template_files()
        ts = now_ms()
        init_row = row("init", text="filemem store created", outcome="ok", source="filemem")
        init_row["seq"], init_row["ts"] = next_seq(ts, 0), ts
        message = commit_message("init filemem store",
                                 "Created by `filemem init` from store-template/.", [init_row])
        pending = PendingObjects()
        tree, blobs = git.splice(None, files, pending)
        commit = git.make_commit(tree, [], message, IDENT, ts // 1000, pending)
        git.write(pending)
        if not git.cas_head(None, commit, "filemem init"):
            raise GitError(f"could not create the first commit in {root}")
        index = GitIndex(git.git_dir)
        for path, data in files.items():
            index.set(path, blobs[path], worktree.write(root, path, data))
        index.write()
        git.close()

    # ------------------------------------------------------------ locking

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The store lock: one writer at a time across threads and processes."""
        import portalocker

        with self._lock:
            if self._lock_depth == 0:
                lock = portalocker.Lock(
                    os.path.join(self.meta, "lock"), mode="a", timeout=LOCK_TIMEOUT,
                    check_interval=0.002, fail_when_locked=False,
                    flags=portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING,
                )
                try:
                    with private_files():  # the lock file too is the owner's only
                        lock.acquire()
                except portalocker.LockException:
                    raise errors.StoreBusy(
                        f"the store is busy: its lock {self.meta}/lock has been held by another "
                        f"filemem process for more than {LOCK_TIMEOUT:.0f} s; nothing was "
                        "written; try again when that process has finished"
                    ) from None
                self._file_lock = lock
            self._lock_depth += 1
            try:
                yield
            finally:
                self._lock_depth -= 1
                if self._lock_depth == 0:
                    self._file_lock.release()
                    self._file_lock = None

    # ------------------------------------------------------------ the view of HEAD

    def state(self) -> State:
        """The committed state at HEAD (rebuilt only if HEAD moved). Not validated: callers
        that serve entries call :meth:`checked`."""
        head = self.git.head()
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
        if st.config_problem is not None:
            raise st.config_problem
        if st.corrupt:
            path = min(st.corrupt)
            more = len(st.corrupt) - 1
            reason = st.corrupt[path] + (f" (and {more} more invalid file(s); run `filemem "
                                         "status`)" if more else "")
            raise errors.store_corrupt(worktree.full_path(self.root, path), reason)
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
                got = codec.decode(self.git.read_blob(blob))
                decoded = (got.entry, None, got.canonical)
            except CodecError as exc:
                decoded = (None, str(exc), False)
            except (GitError, KeyError) as exc:
                decoded = (None, f"cannot read the file from git: {exc}", False)
            if len(self._parsed) > 100_000:
                self._parsed.clear()
            self._parsed[blob] = decoded
        entry = decoded[0]
        if entry is None:
            return decoded
        problem = path_problem(path, entry)
        return decoded if problem is None else (None, problem, False)

    def _read_config(self, blob: str | None) -> tuple[Config | None, errors.ProtocolError | None]:
        path = os.path.join(self.root, CONFIG_FILE)
        if blob is None:
            return None, errors.store_corrupt(path, "filemem.yaml is missing at HEAD")
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
                problem = errors.store_corrupt(path, exc.message)
        self._config_cache = (blob, cfg, problem)
        return cfg, problem

    def _load(self, head: str, *, full: bool = False) -> State:
        commit = self.git.commit(head)
        base = None if full else (self._state or self._load_cache())
        root_tree = self.git.read_tree(commit.tree)
        config_item = root_tree.get(CONFIG_FILE)
        config_blob = config_item[1] if config_item else None
        cfg, problem = self._read_config(config_blob)
        if base is not None and any(r.startswith(_DUPLICATE) for r in base.corrupt.values()):
            base = None  # a duplicate may have been resolved: decide again from scratch
        if base is not None:
            entries = dict(base.entries)
            paths = dict(base.paths)
            blobs = dict(base.blobs)
            corrupt = dict(base.corrupt)
            noncanonical = set(base.noncanonical)
            changes = [(p, new) for p, _old, new in self.git.diff(base.tree, commit.tree)
                       if is_entry_path(p)]
        else:
            entries, paths, blobs, corrupt, noncanonical = {}, {}, {}, {}, set()
            changes = [(p, sha) for p, _mode, sha in self.git.walk(commit.tree)
                       if is_entry_path(p)]
        by_path = {p: i for i, p in paths.items()}
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
            usage=_usage(entries), config_blob=config_blob,
        )
        self._unsaved += len(changes) if base is not None else _SAVE_EVERY
        if self._unsaved >= _SAVE_EVERY:
            self._save_cache(state)
        return state

    # ------------------------------------------------------------ the on-disk view cache

    def _cache_path(self) -> str:
        return os.path.join(self.meta, "cache", "state.json")

    def _load_cache(self) -> State | None:
        try:
            with open(self._cache_path(), encoding="utf-8") as f:
                raw = json.load(f)
            if raw.get("format") != _CACHE_FORMAT:
                return None
            entries: dict[str, Entry] = {}
            paths: dict[str, str] = {}
            blobs: dict[str, str] = {}
            corrupt: dict[str, str] = {}
            noncanonical: set[str] = set()
            for path, (blob, fields, reason, canonical) in raw["files"].items():
                blobs[path] = blob
                if fields is None:
                    corrupt[path] = reason
                    continue
                (eid, track, scope, wk, ak, text, source, tags, version, created, updated,
                 session) = fields
                e = Entry(eid, track, scope, wk, ak, text, source, tuple(tags), version,
                          created, updated, session)
                entries[eid] = e
                paths[eid] = path
                self._parsed[blob] = (e, None, canonical)
                if not canonical:
                    noncanonical.add(eid)
            cfg_blob, cfg_raw = raw.get("config") or (None, None)
            if cfg_blob and cfg_raw is not None:  # spares a YAML parse on a cold start
                self._config_cache = (cfg_blob, config_mod.parse(cfg_raw), None)
            self._saved_tree = raw["tree"]
            self._saved_config = cfg_blob
            # the cached tree must still exist (it does unless someone rewrote history and gc'd)
            self.git.read_tree(raw["tree"])
        except (OSError, ValueError, KeyError, TypeError, GitError, errors.ProtocolError):
            return None
        return State(head=raw["head"], tree=raw["tree"], config=None, config_problem=None,
                     entries=entries, paths=paths, blobs=blobs,
                     noncanonical=frozenset(noncanonical), corrupt=corrupt,
                     usage=_usage(entries))

    def _save_cache(self, state: State) -> None:
        files: dict[str, Any] = {}
        for eid, path in state.paths.items():
            e = state.entries[eid]
            files[path] = [state.blobs[path], [
                e.id, e.track, e.scope, e.workspace_key, e.agent_key, e.text, e.source,
                list(e.tags), e.version, e.created_at, e.updated_at, e.session_id,
            ], None, eid not in state.noncanonical]
        for path, reason in state.corrupt.items():
            files[path] = [state.blobs.get(path, ""), None, reason, False]
        cfg = [state.config_blob, config_mod.to_json(state.config)] \
            if state.config is not None and state.config_blob else None
        data = json.dumps({"format": _CACHE_FORMAT, "head": state.head, "tree": state.tree,
                           "config": cfg, "files": files},
                          ensure_ascii=False, separators=(",", ":"))
        try:
            # not durable: a cache lost in a crash is rebuilt from HEAD
            atomic.atomic_write(self._cache_path(), data.encode("utf-8"), durable=False)
            self._unsaved = 0
            self._saved_tree = state.tree
            self._saved_config = state.config_blob
            self._saved_at = time.monotonic()
        except OSError:
            pass  # the cache is an optimisation; never fail a read or write over it

    def close(self) -> None:
        """Save the view cache if it is behind and release git handles."""
        st = self._state
        if st is not None and (self._saved_tree != st.tree
                               or self._saved_config != st.config_blob):
            self._save_cache(st)
        self.git.close()

    # ------------------------------------------------------------ the git index

    def index(self) -> GitIndex:
        path = os.path.join(self.git.git_dir, "index")
        try:
            st = os.stat(path)
            ident = (st.st_ino, st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            ident = None
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

    def _write_index(self, index: GitIndex) -> None:
        try:
            index.write()
        except TimeoutError as exc:  # git's index.lock stayed taken
            raise errors.StoreBusy(f"the store is busy: {exc}") from None
        st = os.stat(index.path)
        self._index_id = (st.st_ino, st.st_mtime_ns, st.st_size)

    # ------------------------------------------------------------ recovery

    def _recover(self) -> list[str]:
        """Finish or undo what a killed write left in the working tree (lock held)."""
        paths = self.journal.read()
        if paths is None:
            return []
        self.git.clear_stale_locks()
        lock = os.path.join(self.git.git_dir, "index.lock")
        with contextlib.suppress(FileNotFoundError):
            if os.stat(lock).st_mtime_ns >= os.stat(self.journal.path).st_mtime_ns:
                os.unlink(lock)  # ours: taken after the journal was written
        head = self.git.head()
        tree = self.git.commit(head).tree if head else None
        head_blob = {p: (self.git.blob_at(tree, p) if tree else None) for p in paths}
        data = {sha: self.git.read_blob(sha) for sha in head_blob.values() if sha}
        for _old, new in paths.values():  # to recognise a torn new file (worktree.repair)
            if new and new not in data:
                with contextlib.suppress(KeyError, GitError):
                    data[new] = self.git.read_blob(new)
        with private_files():
            repaired = worktree.repair(self.root, paths, head_blob, data)
            index = self.index()
            for path, sha in head_blob.items():
                if sha is None:
                    index.remove(path)
                    continue
                content = worktree.read(self.root, path)
                clean = content is not None and content == data[sha]
                index.set(path, sha, os.stat(worktree.full_path(self.root, path))
                          if clean else None)
            self._write_index(index)
        self.journal.clear()
        return repaired

    # ------------------------------------------------------------ writing

    @contextlib.contextmanager
    def transaction(self, *, validate: bool = True) -> Iterator[Transaction]:
        """Hold the store lock, repair a half-done write if any, and work on a fresh view
        (validated unless ``validate=False``, for the owner repairing a bad file)."""
        with self.locked(), private_files():
            if self.journal.exists():
                self._recover()
            yield Transaction(self, self.checked() if validate else self.state())

    def retrying(self, work: Callable[[Transaction], T], *, validate: bool = True,
                 exhausted: Callable[[], T] | None = None) -> T:
        """Run ``work`` in a :meth:`transaction`, again on the new HEAD whenever the branch
        moved under it (a person's git command between the view and the compare-and-swap;
        other filemem processes wait for the lock instead). Once it has moved
        COMMIT_ATTEMPTS times: ``exhausted()``, else StoreBusy (nothing was written, and
        the caller is told so)."""
        for _ in range(COMMIT_ATTEMPTS):
            try:
                with self.transaction(validate=validate) as txn:
                    return work(txn)
            except HeadMoved:
                continue
        if exhausted is not None:
            return exhausted()
        raise errors.StoreBusy(
            f"the store is busy: its branch moved {COMMIT_ATTEMPTS} times during one write "
            f"(someone is committing with git in {self.root}); nothing was written; try again")

    def record(self, rows: list[AuditRow], *, subject: str, body: str) -> None:
        """An audit-only commit (a denied, refused or staged write): no entry changes. It is
        never dropped: if the branch keeps moving, the rows go to the read-side ledger
        instead, where ``auditList`` shows them just the same."""
        def commit(txn: Transaction) -> None:
            txn.commit(rows=rows, subject=subject, body=body)

        def in_ledger() -> None:
            log.warning("filemem: the branch kept moving; %r is recorded in the ledger", subject)
            self.append_ledger(rows)

        self.retrying(commit, exhausted=in_ledger)

    def check_writable(self, paths: list[str], wait: float = 2.0) -> None:
        """Refuse, before anything is written, a write the working tree cannot take: a
        folder on the way that is a symbolic link (filemem never writes through links), or
        git's index locked by a git command (waited for briefly, as git itself does not)."""
        for folder in dict.fromkeys(p.rsplit("/", 1)[0] for p in paths):
            link = worktree.linked_folder(self.root, folder + "/x")
            if link is not None:
                raise errors.store_corrupt(
                    link, "is a symbolic link; filemem does not write through links in the "
                    "store (replace it with a real folder)")
        lock = os.path.join(self.git.git_dir, "index.lock")
        deadline = time.monotonic() + wait
        while os.path.exists(lock) and not self.journal.exists():
            if time.monotonic() > deadline:
                raise errors.StoreBusy(
                    f"the store is busy: {lock} exists, so a git command is using this "
                    "store's index; wait for it to finish, or delete the file if no git "
                    "command is running; nothing was written")
            time.sleep(0.02)

    def precheck(self, state: State, targets: list[Entry],
                  new_layers: list[tuple[str, str, str, str]]) -> None:
        """What a commit changing ``targets`` and adding entries to ``new_layers`` would
        refuse, checked up front (before anyone is asked to approve)."""
        paths = [state.paths[t.id] for t in targets]
        paths += [f"{layer_dir(*layer)}/new.md" for layer in dict.fromkeys(new_layers)]
        self.check_writable(paths, wait=0.0)
        dirty = self.dirty_paths(state, [state.paths[t.id] for t in targets])
        if dirty:
            raise hand_edited(worktree.full_path(self.root, dirty[0]))

    def dirty_paths(self, state: State, paths: list[str]) -> list[str]:
        """Which of ``paths`` have uncommitted changes in the working tree (hand edits)."""
        return self.dirty_paths_at(paths, state.blobs)

    def dirty_paths_at(self, paths: list[str], head_blobs: Mapping[str, str | None]) -> list[str]:
        """Which of ``paths`` differ in the working tree from their blob at HEAD."""
        index = self.index()
        return [p for p in paths
                if not worktree.is_clean(self.root, p, head_blobs.get(p), index)]

    def last_seq(self, state: State) -> int:
        """The highest audit seq so far (HEAD's last row, or the ledger's)."""
        return max(self._commit_last_seq(state.head), self.ledger.last_seq())

    def _commit_last_seq(self, sha: str) -> int:
        """The seq of a commit's newest row, without parsing a filemem commit's whole
        message. Commits made outside filemem take their seq after their first parent's, so
        a run of them is walked iteratively (no recursion limit on long histories)."""
        chain: list[CommitInfo] = []
        base = 0
        current: str | None = sha
        while current is not None:
            cached = self._rows.get(current)
            if cached is not None:
                base = int(cached[0]["seq"])
                break
            info = self.git.commit(current)
            seq = last_trailer_seq(info.message)
            if seq is not None:
                base = seq
                break
            chain.append(info)
            current = info.parents[0] if info.parents else None
        for info in reversed(chain):
            base = int(self.commit_rows(info, after_seq=base)[0]["seq"])
        return base

    def commit_rows(self, info: CommitInfo, after_seq: int | None = None) -> list[AuditRow]:
        """The audit rows a commit carries, newest first (a row of its own for a commit
        made outside filemem, ordered after its parents)."""
        rows = self._rows.get(info.sha)
        if rows is None:
            try:
                parsed = parse_rows(info.message)
                problem = None
            except ValueError as exc:
                parsed, problem = None, str(exc)
            if parsed:
                rows = list(reversed(parsed))
            else:
                if after_seq is None:
                    after_seq = max((self._commit_last_seq(p) for p in info.parents), default=0)
                ext = external_row(info.sha, info.time, info.message, after_seq)
                if problem is not None:
                    ext["outcome"] = f"unreadable audit trailers ({problem}) in {info.sha[:12]}"
                rows = [ext]
            if len(self._rows) > 50_000:
                self._rows.clear()
            self._rows[info.sha] = rows
        return rows

    def audit(self, limit: int) -> list[AuditRow]:
        """The newest ``limit`` audit rows across history and the ledger, newest first."""
        rows: list[AuditRow] = []
        head = self.git.head()
        if head is not None:
            heap = [(-self.git.commit(head).time, head)]
            seen: set[str] = set()
            while heap and len(rows) < limit:
                _, sha = heapq.heappop(heap)
                if sha in seen:
                    continue
                seen.add(sha)
                info = self.git.commit(sha)
                rows.extend(self.commit_rows(info))
                for parent in info.parents:
                    if parent not in seen:
                        heapq.heappush(heap, (-self.git.commit(parent).time, parent))
        rows.extend(self.ledger.tail(limit))
        rows.sort(key=lambda r: r["seq"], reverse=True)
        return [r.copy() for r in rows[:limit]]

    def append_ledger(self, rows: list[AuditRow]) -> list[AuditRow]:
        """Record read-side rows (recalled, snapshot) with their seq, under the lock."""
        with self.locked(), private_files():
            ts = now_ms()
            last = self.last_seq(self.state())
            for r in rows:
                if r["ts"] is None:
                    r["ts"] = ts
                r["seq"] = last = next_seq(r["ts"], last)
            self.ledger.append(rows)
        return rows

    def maybe_pack(self) -> None:
        """Pack loose objects now and then (nothing else does on this write path)."""
        self._commits_since_pack_check += 1
        if self._commits_since_pack_check < _PACK_CHECK_EVERY:
            return
        self._commits_since_pack_check = 0
        objects = os.path.join(self.git.git_dir, "objects")
        sample = 0
        for folder in ("00", "3f", "7e", "bd"):
            with contextlib.suppress(FileNotFoundError):
                sample += len(os.listdir(os.path.join(objects, folder)))
        if sample * 64 >= _PACK_WHEN_LOOSE:
            self.git.pack_loose_objects()


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
                                 evolve=(puts, deletes))

    def commit_files(self, changes: dict[str, bytes | None], *, rows: list[AuditRow],
                     subject: str, body: str = "", parents: list[str] | None = None,
                     evolve: tuple[list[Entry], list[Entry]] | None = None,
                     allow_dirty: Collection[str] = ()) -> str:
        """Write one commit changing files (None deletes) on top of HEAD, with extra
        ``parents`` for a merge; the journal, the compare-and-swap and the working tree as
        in :meth:`commit`. Without ``evolve`` (the entries put and deleted) the view of
        HEAD is rebuilt from the new tree. ``allow_dirty``: paths whose uncommitted content
        is what is being committed (adopting hand edits)."""
        store, st, git = self.store, self.state, self.store.git
        head_blobs = {p: st.blobs.get(p) if is_entry_path(p) else git.blob_at(st.tree, p)
                      for p in changes}
        if changes:
            store.check_writable(list(changes))
        # a path new to HEAD is a fresh id's file: nothing to check there (the file is
        # created exclusively below, so nothing that appeared meanwhile is overwritten)
        dirty = store.dirty_paths_at([p for p, sha in head_blobs.items()
                                      if sha is not None and p not in allow_dirty], head_blobs)
        if dirty:
            raise hand_edited(worktree.full_path(store.root, dirty[0]))
        ts = now_ms()
        last = store.last_seq(st)
        for r in rows:
            r["ts"] = ts
            r["seq"] = last = next_seq(ts, last)
        message = commit_message(subject, body, rows)
        pending = PendingObjects()
        if changes:
            tree, blobs = git.splice(st.tree, changes, pending)
        else:
            tree, blobs = st.tree, {}
        commit = git.make_commit(tree, [st.head, *(parents or [])], message, IDENT, ts // 1000,
                                 pending)
        git.write(pending)
        if changes:
            store.journal.begin(st.head, commit, {p: (head_blobs[p], blobs.get(p))
                                                  for p in changes})
        if not git.cas_head(st.head, commit, subject):
            store.journal.clear()
            raise HeadMoved(f"the branch moved while writing {subject!r}")
        # from here on the write has happened; the rest mirrors it into the working tree
        self._mirror(commit, changes, blobs,
                     {p for p in changes if head_blobs[p] is None and p not in allow_dirty})
        if evolve is not None:
            self.state = store._state = _evolve(st, commit, tree, *evolve, blobs)
        else:
            self.state = store.state()  # reloads the view from the new HEAD
        store._unsaved += len(changes)
        if store._unsaved >= _SAVE_EVERY and time.monotonic() - store._saved_at > _SAVE_INTERVAL:
            store._save_cache(self.state)
        store.maybe_pack()
        if store.recall.needs_compaction():
            store.recall.compact(set(self.state.entries))
        return commit

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
        if diff:
            store.check_writable(list(head_blobs))
        # paths new to HEAD included: a file a person put where one is coming is theirs
        dirty = store.dirty_paths_at(list(head_blobs), head_blobs)
        if dirty:
            raise hand_edited(worktree.full_path(store.root, dirty[0]))
        changes = {path: git.read_blob(new) if new else None for path, _old, new in diff}
        blobs = {path: new for path, _old, new in diff if new}
        if diff:
            store.journal.begin(st.head, target, {p: (old, new) for p, old, new in diff})
        if not git.cas_head(st.head, target, reason):
            store.journal.clear()
            raise HeadMoved(f"the branch moved while {reason}")
        self._mirror(target, changes, blobs, {p for p, old in head_blobs.items() if old is None})
        self.state = store.state()

    def _mirror(self, commit: str, changes: dict[str, bytes | None], blobs: dict[str, str],
                new: set[str]) -> None:
        """Put the files a commit changed into the working tree and the index, then clear
        the journal. ``new``: paths created exclusively (nothing may be there yet). If this
        fails the commit stands and the journal stays: the next transaction (or open)
        puts the working tree in step with HEAD."""
        if not changes:
            return
        store = self.store
        try:
            index = store.index()
            for path, data in changes.items():
                if data is None:
                    worktree.remove(store.root, path)
                    index.remove(path)
                else:
                    index.set(path, blobs[path], worktree.write(
                        store.root, path, data, new=path in new))
            store._write_index(index)
            store.journal.clear()
        except (OSError, TimeoutError) as exc:
            log.warning("filemem: commit %s is written, but updating the working tree "
                        "failed (%s); it will be repaired on the next write", commit, exc)


def _evolve(st: State, head: str, tree: str, puts: list[Entry], deletes: list[Entry],
            blobs: dict[str, str]) -> State:
    entries = dict(st.entries)
    paths = dict(st.paths)
    all_blobs = dict(st.blobs)
    noncanonical = set(st.noncanonical)
    usage = dict(st.usage)
    for e in deletes:
        old = entries.pop(e.id)
        usage[old.layer] -= old.size
        all_blobs.pop(paths.pop(e.id), None)
        noncanonical.discard(e.id)
    for e in puts:
        previous = entries.get(e.id)
        if previous is not None:
            usage[previous.layer] -= previous.size
        entries[e.id] = e
        usage[e.layer] += e.size
        path = entry_path(e)
        paths[e.id] = path
        all_blobs[path] = blobs[path]
        # a spliced file keeps its own keys, so it stays non-canonical; new files are canonical
    return State(head=head, tree=tree, config=st.config, config_problem=st.config_problem,
                 entries=entries, paths=paths, blobs=all_blobs,
                 noncanonical=frozenset(noncanonical), corrupt=dict(st.corrupt), usage=usage,
                 config_blob=st.config_blob,
                 _newest=max([st.newest_created(), *(e.created_at for e in puts)]))


def hand_edited(path: str) -> errors.ProtocolError:
    return errors.write_denied(
        "hand-edit-pending",
        f"{path} has uncommitted changes made outside filemem; run `filemem status`, then "
        "adopt or discard them before this entry can be changed",
        path=path,
    )
