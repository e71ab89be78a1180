"""The git layer: objects, trees, commits and the branch ref of the store's repository.

It knows nothing about memory entries. Writes splice only the changed paths into the
parent's trees (dulwich's porcelain rebuilds every tree: O(entries) per commit) and move the
branch with a compare-and-swap. A write's new objects go in as one small pack
(:mod:`.packwrite`) before the ref moves. Reading goes through dulwich's object
store, which finds loose and packed objects, including packs other processes just wrote;
the common cases are read without it (:mod:`.objread`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import heapq
import os
import time
import weakref
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar

from filemem.files import atomic, gitstate, modes, objread, packwrite, treebytes, wal
from filemem.files.giterrors import GitError, OffBranch, RefLocked, RepositoryDamaged, restore_hint
from filemem.files.objread import Packs
from filemem.files.treebytes import FILE_MODE, TREE_MODE, Tree, serialize_tree

if TYPE_CHECKING:
    from dulwich.repo import Repo

__all__ = ["FILE_MODE", "TREE_MODE", "GitError", "GitRepo", "OffBranch", "RefLocked",
           "RepositoryDamaged", "Tree", "serialize_tree"]
BRANCH: Final = "main"
_BRANCH_REF: Final = f"refs/heads/{BRANCH}"
_HEAD_ON_BRANCH: Final = f"ref: {_BRANCH_REF}".encode()
_TYPES: Final = {1: b"commit", 2: b"tree", 3: b"blob"}
_TREE_CACHE_MAX: Final = 20_000
# filemem's own temp files in .git/objects (atomic.temp_name's, ending in its suffix)
_PACK_TEMP: Final = packwrite.TMP_PREFIX + "pack-"
_OBJ_TEMP: Final = wal.OBJ_TMP_PREFIX
_ENTRIES_KEPT: Final = 4096  # tree entries kept encoded between writes (splice): ~1.5 MB
IDENT_FOR_REFLOG: Final = "filemem <filemem@localhost>"

class CommitInfo(NamedTuple):
    sha: str
    tree: str
    parents: tuple[str, ...]
    message: str
    time: int  # committer time, seconds


def object_sha(kind: bytes, raw: bytes) -> str:
    digest = hashlib.sha1(b"%s %d\0" % (kind, len(raw)))
    digest.update(raw)  # not copied after its header first (a seed's commit is ~0.7 MB)
    return digest.hexdigest()


class PendingObjects:
    """Objects made for one commit, written together before the ref moves."""

    def __init__(self) -> None:
        self.items: dict[str, tuple[bytes, bytes]] = {}  # sha -> (kind, raw)

    def add(self, kind: bytes, raw: bytes) -> str:
        sha = object_sha(kind, raw)
        self.items.setdefault(sha, (kind, raw))
        return sha


def newest_first(head: str, time_of: Callable[[str], int],
                 parents_of: Callable[[str], Sequence[str]]) -> Iterator[str]:
    """The commits reachable from ``head``, newest first by commit time (equal times in sha
    order), whatever tells each commit's time and parents: git's objects, or an index of
    them (a time is asked for only where two lines of history meet)."""
    heap = [(-time_of(head), head)]
    seen: set[str] = set()
    while heap:
        _, sha = heapq.heappop(heap)
        if sha in seen:
            continue
        while True:
            seen.add(sha)
            yield sha
            parents = parents_of(sha)
            # a line of single parents with nothing else waiting (most of a history): the
            # parent is what the heap would give next, so it is taken without the heap
            if len(parents) == 1 and not heap and parents[0] not in seen:
                sha = parents[0]
                continue
            for parent in parents:
                if parent not in seen:
                    heapq.heappush(heap, (-time_of(parent), parent))
            break


class GitRepo:
    """A non-bare repository with one branch, reached through dulwich."""

    def __init__(self, root: str) -> None:
        self.root = root
        self.git_dir = os.path.join(root, ".git")
        self._repo: Repo | None = None
        self.packs = Packs(self.git_dir)
        self._trees: dict[str, Tree] = {}
        self._entries: dict[str, treebytes.Entries] = {}  # trees recent splices made (see there)
        self._commits: dict[str, CommitInfo] = {}
        # HEAD and the branch's ref as last read, by the stat they had (see _read)
        self._small: dict[str, tuple[tuple[int, int, int, int], bytes]] = {}
        self._files: dict[str, str] = {}  # a ref or log name -> its file, made once

    # ------------------------------------------------------------ set-up

    @classmethod
    def create(cls, root: str) -> GitRepo:
        """``git init`` with the settings a store needs (durable objects, branch ``main``)."""
        from dulwich.repo import Repo

        repo = Repo.init(root, mkdir=False)
        refs: Any = repo.refs  # dulwich's NewType'd ref names are plain bytes at run time
        refs.set_symbolic_ref(b"HEAD", f"refs/heads/{BRANCH}".encode())
        config = repo.get_config()
        config.set((b"core",), b"autocrlf", False)
        config.set((b"core",), b"looseCompression", b"1")  # big leaf trees compress 3x faster
        config.set((b"gc",), b"auto", b"0")  # filemem packs loose objects itself, under its lock
        config.write_to_path()
        repo.close()
        return cls(root)

    @property
    def repo(self) -> Repo:
        if self._repo is None:
            from dulwich.repo import Repo

            self._repo = Repo(self.root)
            weakref.finalize(self, self._repo.close)  # no noisy __del__ at interpreter exit
            # packs we write are fsynced like our loose objects (git's own setting for this,
            # core.fsyncObjectFiles, is deprecated in git and would make it warn)
            self._repo.object_store.fsync_object_files = True
        return self._repo

    def close(self) -> None:
        self.packs.close()
        if self._repo is not None:
            self._repo.close()
            self._repo = None

    def forget(self) -> None:
        """Drop the parsed trees and commits kept in memory (after a redaction: they hold
        old texts and messages)."""
        self._trees.clear()
        self._entries.clear()
        self._commits.clear()
        self._small.clear()

    def forget_refs(self) -> None:
        """Read HEAD and the ref again next time, whatever their stat says (the branch moved
        where the view did not see it: a file changed in place within one clock tick)."""
        self._small.clear()

    def file_of(self, name: str) -> str:
        """The file in ``.git`` named ``name`` ("/"-separated: ``refs/heads/main``, ``HEAD``,
        ``logs/HEAD``, ``index``): each write reads and writes the same few."""
        path = self._files.get(name)
        if path is None:
            path = self._files[name] = os.path.join(self.git_dir, *name.split("/"))
        return path

    def _read(self, path: str, seen: bool) -> bytes:
        """A small file's bytes; ``seen``: unless it has the stat it had when last read
        (git replaces a ref by a rename, so a new one is a new file; an edit in place
        changes its size or times), which is one ``stat`` instead of three calls."""
        if not seen:
            return atomic.read_small(path)
        key = atomic.identity(os.stat(path))
        got = self._small.get(path)
        if got is not None and got[0] == key:
            return got[1]
        data = atomic.read_small(path)  # a change after the stat is seen the next time
        self._small[path] = (key, data)
        return data

    # ------------------------------------------------------------ refs

    def head_ref(self, seen: bool = False) -> str:
        """The branch HEAD points at: ``refs/heads/main``, the one branch filemem reads,
        writes and syncs. Any other branch, or a detached HEAD, is refused
        (:class:`OffBranch`), for reads, writes and sync alike: the one place that decides.
        Except during a rebase or bisect of that branch: then it is the branch they will
        move (reads serve it as last committed; writes are refused, see :mod:`.gitstate`)."""
        try:
            content = self._read(self.file_of("HEAD"), seen).strip()
        except FileNotFoundError:
            raise RepositoryDamaged(self.root, ".git/HEAD is missing",
                                    restore_hint(self.root)) from None
        if content == _HEAD_ON_BRANCH:
            return _BRANCH_REF
        if content.startswith(b"ref: "):
            raise OffBranch(self.root, BRANCH,
                            branch=content[5:].decode("utf-8", "replace").removeprefix(
                                "refs/heads/"))
        op = gitstate.unfinished(self.git_dir)
        if op is not None and op.branch == _BRANCH_REF:
            return op.branch
        raise OffBranch(self.root, BRANCH, sha=content[:40].decode("ascii", "replace"))

    def head(self, seen: bool = False) -> str | None:
        """The commit HEAD points at, or None for a repository with no commits yet.

        Reads the ref file directly: this runs before every read, so it must cost
        microseconds, not dulwich's ref container set-up. ``seen``: files unchanged since
        last read are not read again (for the view of HEAD; the compare-and-swap reads).
        """
        return self._commit_of(self.head_ref(seen), seen)

    def _commit_of(self, ref: str, seen: bool = False) -> str | None:
        """The commit branch ``ref`` points at (its file, else packed-refs), or None."""
        try:
            value = self._read(self.file_of(ref), seen).strip()
            if len(value) == 40:
                return value.decode()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            pass
        try:
            with open(os.path.join(self.git_dir, "packed-refs"), "rb") as f:
                for line in f:
                    sha, _, name = line.strip().partition(b" ")
                    if name.decode("utf-8", "replace") == ref and len(sha) == 40:
                        return sha.decode()
        except FileNotFoundError:
            pass
        return None

    def cas_head(self, old: str | None, new: str, message: str, durable: bool = True,
                 then: list[Callable[[], None]] | None = None) -> bool:
        """Move the branch from ``old`` to ``new`` only if it still points at ``old``.

        git's own protocol: ``<ref>.lock`` created exclusively (a git command holding it
        makes this raise :class:`RefLocked`, not wait), the value re-read under it, written,
        fsynced and renamed into place, and the folder fsynced (``durable``; else the
        write-ahead log holds the move); then a reflog line, as git writes one. dulwich's
        set_if_equals re-reads the repository config for every reflog line (~1 ms a
        commit). A git operation stopped half way (a merge with conflicts, a rebase, ...)
        raises GitOperationInProgress under the lock: nothing is committed on top of one.
        ``then``: the reflog lines are not written here but added to it, for the caller to
        write while it waits on something else (a write: git's index being hashed)."""
        ref = self.head_ref(seen=True)  # git replaces HEAD by a rename, as it does a ref
        path = self.file_of(ref)
        try:
            try:
                lock = atomic.LockFile(path, durable=durable)
            except FileNotFoundError:  # refs/heads/ not there (yet)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                lock = atomic.LockFile(path, durable=durable)
        except atomic.Locked:
            raise RefLocked(path + ".lock") from None
        with lock:
            op = gitstate.unfinished(self.git_dir)
            if op is not None:
                raise gitstate.refusal(self.root, op, gitstate.conflicts(self.git_dir))
            if self._commit_of(ref) != old:  # the ref itself, as git verifies a ref's old value
                return False
            lock.write(new.encode() + b"\n")
            lock.commit()  # released by the rename: the .lock name is the next writer's
        if then is None:
            self._reflog(ref, old, new, message)
        else:
            then.append(functools.partial(self._reflog, ref, old, new, message))
        return True

    def _reflog(self, ref: str, old: str | None, new: str, message: str) -> None:
        line = (f"{old or '0' * 40} {new} {IDENT_FOR_REFLOG} {int(time.time())} +0000\t"
                f"{' '.join(message.split())[:200]}\n").encode()
        for name in (ref, "HEAD"):
            log = self.file_of(f"logs/{name}")
            with contextlib.suppress(OSError):
                try:
                    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
                except FileNotFoundError:  # logs/... not there (yet)
                    os.makedirs(os.path.dirname(log), exist_ok=True)
                    fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
                try:
                    atomic.write_all(fd, line)
                finally:
                    os.close(fd)

    # ------------------------------------------------------------ reading

    def read_raw(self, sha: str, kind: str = "object") -> tuple[bytes, bytes]:
        """(kind, content) of an object, loose or packed; dulwich (imported only then) reads
        what :mod:`.objread` cannot. A missing or unreadable object is
        :class:`RepositoryDamaged` (``kind``: what it should be, for the message)."""
        # the packs already mapped first (most objects of a long history are packed: a
        # failed open of a loose path for each costs more), then the loose file, then any
        # pack that appeared since
        packed = self.packs.get(sha, rescan=False)
        if packed is not None:
            return packed
        found = objread.loose(self.git_dir, sha)
        if isinstance(found, tuple):
            return found
        unreadable = found  # None: there is no loose file
        packed = self.packs.get(sha)
        if packed is not None:
            return packed
        from dulwich import errors as dulwich_errors

        store: Any = self.repo.object_store
        try:
            type_num, raw = store.get_raw(sha.encode())
        except KeyError:
            problem = unreadable or "is missing from .git/objects (not loose, not in a pack)"
            if unreadable:
                problem = f"is unreadable: {unreadable}"
            raise self.damaged(kind, sha, problem) from None
        except (ValueError, AssertionError, zlib.error, OSError,
                dulwich_errors.FileFormatException, dulwich_errors.ChecksumMismatch,
                dulwich_errors.ApplyDeltaError) as exc:
            raise self.damaged(kind, sha, f"is unreadable: {unreadable or exc}") from None
        return _TYPES.get(type_num, b"?"), raw

    def damaged(self, kind: str, sha: str, problem: str,
                path: str | None = None) -> RepositoryDamaged:
        err = RepositoryDamaged(self.root, f"{kind} {sha} {problem}", restore_hint(self.root),
                                sha=sha)
        return err.at(path) if path is not None else err

    def _read_kind(self, sha: str, want: bytes, path: str | None = None) -> bytes:
        try:
            kind, raw = self.read_raw(sha, want.decode())
        except RepositoryDamaged as exc:
            raise (exc.at(path) if path is not None else exc) from None
        if kind != want:
            raise self.damaged(want.decode(), sha, f"is a {kind.decode()}, not a "
                               f"{want.decode()}", path)
        return raw

    def read_blob(self, sha: str, path: str | None = None) -> bytes:
        return self._read_kind(sha, b"blob", path)

    def read_tree(self, sha: str, path: str | None = None) -> Tree:
        """A tree by sha; ``path`` (the folder it is, ``""`` for the root) names it in an
        error."""
        tree = self._trees.get(sha)
        if tree is None:
            raw = self._read_kind(sha, b"tree", path)
            try:
                parsed = treebytes.parse(raw)
            except (ValueError, IndexError):
                raise self.damaged("tree", sha, "is not a valid tree", path) from None
            tree = _remember(self._trees, sha, parsed)
        return tree

    def commit(self, sha: str) -> CommitInfo:
        info = self._commits.get(sha)
        if info is None:
            info = _remember(self._commits, sha,
                             _parse_commit(sha, self._read_kind(sha, b"commit")))
        return info

    def newest_first(self, head: str) -> Iterator[CommitInfo]:
        """Every commit reachable from ``head``, newest first by commit time (the history
        walk of ``auditList``, ``filemem log`` and the like)."""
        for sha in newest_first(head, lambda sha: self.commit(sha).time,
                                lambda sha: self.commit(sha).parents):
            yield self.commit(sha)

    def subtree(self, tree_sha: str, path: str) -> str | None:
        """The tree at ``path`` (``a/b``) under ``tree_sha``, or None."""
        sha: str | None = tree_sha
        done = ""
        for part in path.split("/") if path else ():
            if sha is None:
                return None
            item = self.read_tree(sha, done).get(part)
            done = f"{done}/{part}" if done else part
            sha = item[1] if item and item[0] == TREE_MODE else None
        return sha

    def blob_at(self, tree_sha: str, path: str) -> str | None:
        parent, _, name = path.rpartition("/")
        sub = self.subtree(tree_sha, parent)
        if sub is None:
            return None
        item = self.read_tree(sub).get(name)
        return item[1] if item and item[0] != TREE_MODE else None

    def walk(self, tree_sha: str, prefix: str = "") -> Iterator[tuple[str, int, str]]:
        """Every file under a tree: (path, mode, blob sha)."""
        for name, (mode, sha) in self.read_tree(tree_sha, prefix.rstrip("/")).items():
            path = f"{prefix}{name}"
            if mode == TREE_MODE:
                yield from self.walk(sha, path + "/")
            else:
                yield path, mode, sha

    def diff(self, old: str | None, new: str | None,
             prefix: str = "") -> Iterator[tuple[str, str | None, str | None]]:
        """Files that differ between two trees: (path, old blob, new blob); None = absent."""
        if old == new:
            return
        a = self.read_tree(old, prefix.rstrip("/")) if old else {}
        b = self.read_tree(new, prefix.rstrip("/")) if new else {}
        for name in sorted({name for name, _item in a.items() ^ b.items()}):
            ia, ib = a.get(name), b.get(name)
            path = f"{prefix}{name}"
            ta = ia[1] if ia and ia[0] == TREE_MODE else None
            tb = ib[1] if ib and ib[0] == TREE_MODE else None
            if ta or tb:
                yield from self.diff(ta, tb, path + "/")
            fa = ia[1] if ia and ia[0] != TREE_MODE else None
            fb = ib[1] if ib and ib[0] != TREE_MODE else None
            if fa != fb:
                yield path, fa, fb

    # ------------------------------------------------------------ writing

    def splice(self, base_tree: str | None, changes: Mapping[str, bytes | None],
               pending: PendingObjects) -> tuple[str, dict[str, str]]:
        """A new root tree: ``base_tree`` with ``changes`` applied (None deletes a path).

        Returns (root tree sha, {path: blob sha}). Only trees on changed paths are rebuilt.
        """
        blobs: dict[str, str] = {}
        # the trees recent writes made, entry by entry: a write's trees start from them, so
        # a tree changed again (a seed after a seed, an add beside an earlier one, in any
        # of the layers written lately) encodes only its changed entries
        before: dict[str, treebytes.Entries] = self._entries
        made: dict[str, treebytes.Entries] = {}

        def build(tree_sha: str | None, sub: Mapping[str, bytes | None], prefix: str) -> str | None:
            # .copy(): dict() of a dict with a hole (a removal) inserts key by key
            tree = self.read_tree(tree_sha).copy() if tree_sha else {}
            changed: dict[str, tuple[int, str] | None] = {}
            groups: dict[str, dict[str, bytes | None]] = {}
            for path, data in sub.items():
                head, sep, rest = path.partition("/")
                if sep:
                    groups.setdefault(head, {})[rest] = data
                elif data is None:
                    changed[head] = None
                else:
                    sha = pending.add(b"blob", data)
                    blobs[prefix + head] = sha
                    changed[head] = (FILE_MODE, sha)
            for name, group in groups.items():
                current = tree.get(name)
                child = current[1] if current and current[0] == TREE_MODE else None
                new_child = build(child, group, f"{prefix}{name}/")
                changed[name] = None if new_child is None else (TREE_MODE, new_child)
            base = before.get(tree_sha) if tree_sha else None
            # (a tree read from the cache has the names a write added last, not in order)
            entries = base.copy() if base is not None else treebytes.in_order(
                (name, treebytes.entry(name, mode, sha)) for name, (mode, sha) in tree.items())
            new: list[treebytes.Item] = []
            for name, item in changed.items():
                if item is None:
                    tree.pop(name, None)
                    entries.pop(name, None)
                else:
                    tree[name] = item
                    if name in entries:
                        entries[name] = treebytes.entry(name, *item)
                    else:
                        new.append((name, treebytes.entry(name, *item)))
            if new:
                entries = treebytes.with_new(entries, new)
            if tree_sha is not None:
                # the version this one replaces goes: else a long-running process kept
                # every version of every folder it wrote (~4 MB per 1,000 adds, unbounded
                # until 20,000 trees)
                self._trees.pop(tree_sha, None)
            if not tree and prefix:
                return None  # git has no empty folders
            sha = pending.add(b"tree", treebytes.joined(entries))
            _remember(self._trees, sha, tree)
            made[sha] = entries
            return sha

        root = build(base_tree, changes, "")
        assert root is not None
        _keep_entries(self._entries, made)
        return root, blobs

    def make_commit(self, tree: str, parents: list[str], message: str, ident: str,
                    when: int, pending: PendingObjects) -> str:
        lines = [f"tree {tree}"] + [f"parent {p}" for p in parents]
        lines += [f"author {ident} {when} +0000", f"committer {ident} {when} +0000", ""]
        raw = ("\n".join(lines) + "\n" + message).encode("utf-8")
        return pending.add(b"commit", raw)

    def write(self, pending: PendingObjects, durable: bool = True) -> str | None:
        """Put the objects into the object store, as one pack (:mod:`.packwrite`), before
        any ref names them; fsynced if ``durable`` (else the write-ahead log holds them).
        Returns the pack's name (None: nothing to write)."""
        pack = self.encode(pending)
        return None if pack is None else self.put(pack, pending, durable)

    @staticmethod
    def pack_name(pending: PendingObjects) -> str:
        """The name :meth:`encode` gives the pack of ``pending``, known before it is made."""
        return packwrite.name_of(pending.items)

    def encode(self, pending: PendingObjects) -> packwrite.Pack | None:
        """The pack :meth:`write` writes, not yet written (None: no objects)."""
        items = [(sha, k, raw) for sha, (k, raw) in pending.items.items()]
        return packwrite.encode(items) if items else None

    def put(self, pack: packwrite.Pack, pending: PendingObjects, durable: bool) -> str:
        """Write ``pack``, :meth:`encode`'s of ``pending``; its name."""
        name = packwrite.put(self.git_dir, pack, durable)
        for sha, (kind, raw) in pending.items.items():  # the next write numbers its rows
            if kind == b"commit":  # from this commit: no lookup through the packs for it
                _remember(self._commits, sha, _parse_commit(sha, raw))
        return name

    def clear_temp_packs(self) -> list[str]:
        """Remove what a write killed making a pack left (``tmp_pack-*.tmp``; hold the
        lock); what was removed."""
        removed = []
        for name in modes.pack_names(self.git_dir):
            if name.startswith(_PACK_TEMP) and name.endswith(atomic.TMP_SUFFIX):
                path = os.path.join(self.git_dir, "objects", "pack", name)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                    removed.append(path)
        return removed

    def clear_stale_locks(self) -> list[str]:
        """Remove the lock and temp files a killed filemem write left in .git (store lock
        held): the branch's lock, its pack's and loose objects' temp files (named by
        :func:`atomic.temp_name`) and dulwich's object locks. A git command's own temp
        files (``tmp_pack_*``, ``tmp_idx_*``, ``tmp_obj_*``) are not touched: that command
        may be running now (a ``git fetch`` a killed sync started goes on by itself, and
        fails if they vanish). A killed one's in ``objects/pack`` go with a repack once
        stale (:func:`.packing.clear_killed_repack`)."""
        removed = []
        ref_lock = self.file_of(self.head_ref()) + ".lock"
        if os.path.exists(ref_lock):
            os.unlink(ref_lock)
            removed.append(ref_lock)
        removed += self.clear_temp_packs()
        objects = os.path.join(self.git_dir, "objects")
        for folder in os.listdir(objects):
            if len(folder) != 2:
                continue
            full = os.path.join(objects, folder)
            for name in os.listdir(full):
                if (name.startswith(_OBJ_TEMP) and name.endswith(atomic.TMP_SUFFIX)) \
                        or name.endswith(".lock"):
                    os.unlink(os.path.join(full, name))
                    removed.append(os.path.join(full, name))
        return removed


_V = TypeVar("_V")


def _remember(cache: dict[str, _V], key: str, value: _V) -> _V:
    """Cache an immutable object by sha, dropping everything when the cache is full."""
    if len(cache) > _TREE_CACHE_MAX:
        cache.clear()
    cache[key] = value
    return value


def _keep_entries(kept: dict[str, treebytes.Entries], made: dict[str, treebytes.Entries]) -> None:
    """Add the trees a splice made to those kept (newest last), then drop the oldest until
    :data:`_ENTRIES_KEPT` entries are kept in all, but never one just made."""
    for sha in made:
        kept.pop(sha, None)
    kept.update(made)
    total = sum(map(len, kept.values()))
    while total > _ENTRIES_KEPT:
        oldest = next(iter(kept))
        if oldest in made:
            break
        total -= len(kept.pop(oldest))


def _parse_commit(sha: str, raw: bytes) -> CommitInfo:
    header, _, message = raw.partition(b"\n\n")
    tree = ""
    parents: list[str] = []
    when = 0
    for line in header.split(b"\n"):
        if line.startswith(b"tree "):
            tree = line[5:].decode()
        elif line.startswith(b"parent "):
            parents.append(line[7:].decode())
        elif line.startswith(b"committer "):
            try:
                when = int(line.rsplit(b" ", 2)[1])
            except (IndexError, ValueError):
                when = 0
    return CommitInfo(sha, tree, tuple(parents), message.decode("utf-8", "replace"), when)
