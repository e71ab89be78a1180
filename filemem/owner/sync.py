"""Sync: share one store between machines through the owner's own git remote.

``filemem sync`` fetches the remote's ``main`` (dulwich), brings the local branch up to date
with it, and pushes the result back:

- up to date, or only local commits: nothing to merge (then push).
- local is behind: a fast-forward (:meth:`Transaction.advance`: journal, compare-and-swap,
  working tree and index, hand-edit refusal), no new commit.
- diverged: ONE merge commit with both parents, built per entry, not per line. Entries are
  separate files named by id, so adds on both sides merge cleanly. The conflict rules:

  * the same entry changed on both sides (replaced, moved, or added twice with one id):
    nothing is lost. The version updated later keeps the id (tie: the higher version, then
    the larger blob hash, so every machine decides alike); the other version becomes a
    new entry in its own layer (a new id derived from the old id and its content, version
    1, created when that text was written).
  * removed on one side, changed on the other: the changed version is kept.
  * a non-entry file (``filemem.yaml``, ``README.md``, ...) changed on both sides: a
    three-way line merge (the ``merge3`` package); if the changes overlap, the file is not
    text, or the merged ``filemem.yaml`` would not be a valid configuration, the local
    version is kept and the remote's is named (commit and blob) so nothing is lost.

  The merge commit's message says what was merged (remote, commits, counts) and carries an
  audit row ``sync-merge`` plus one ``sync-conflict`` row per resolution. Files coming in
  from the remote are validated first: an invalid entry file or configuration stops the
  sync before anything changes here.

After integrating, layers over their budget are reported (nothing is cut). The push is a
compare-and-swap on the remote's ``main``: if someone pushed meanwhile, the sync fetches and
merges again (a few times at most).

A sync killed at any instant leaves both sides valid: the fetch only adds objects (and the
remote-tracking ref), the local branch moves by compare-and-swap with the store's journal
(the next open repairs the working tree), and the remote's branch moves by
compare-and-swap too. Running ``filemem sync`` again finishes the job. Syncs of one store
run one at a time (``.filemem/sync.lock``); agent writes are blocked only while the merge
commit is written, never during the fetch or the push.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Final

from filemem import config as config_mod
from filemem import errors
from filemem.errors import SyncError
from filemem.files import codec, worktree
from filemem.files.codec import CodecError
from filemem.files.gitindex import GitIndex
from filemem.files.gitrepo import BRANCH, GitRepo
from filemem.files.layout import entry_path, id_from_path, is_entry_path, path_problem
from filemem.model import Entry, iso_ms
from filemem.rules import budgets
from filemem.store.auditlog import row
from filemem.store.core import Store
from filemem.store.names import CONFIG_FILE, META_DIR, private_files
from filemem.store.transaction import HeadMoved, Transaction, hand_edited
from filemem.types import AuditRow, Usage

BRANCH_REF: Final = f"refs/heads/{BRANCH}".encode()
SYNC_ATTEMPTS: Final = 5  # fetch-merge-push rounds when the remote keeps moving
SYNC_LOCK_TIMEOUT: Final = 300.0
STALE_REF_LOCK: Final = 5.0  # seconds: a ref lock this old on a local remote is a dead push's
SOURCE: Final = "filemem"
_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")
_FORK_NAMESPACE: Final = b"filemem-sync-fork\0"

Progress = Callable[[bytes], None]
Version = tuple[str, str]  # (path, blob sha) of a file on one side
Key = tuple[str, str]  # ("entry", id) or ("file", path): what the merge matches up


# ---------------------------------------------------------------- remotes


@dataclass(frozen=True)
class Remote:
    name: str
    url: str

    def to_json(self) -> dict[str, str]:
        return {"name": self.name, "url": self.url}


def remotes(git: GitRepo) -> list[Remote]:
    """The remotes in the store's ``.git/config`` (git's own ``[remote "NAME"]`` sections)."""
    config = git.repo.get_config()
    out = []
    for section in config.sections():
        if len(section) == 2 and section[0] == b"remote":
            with contextlib.suppress(KeyError):
                url = config.get(section, b"url")
                out.append(Remote(section[1].decode("utf-8", "replace"),
                                  url.decode("utf-8", "replace")))
    return sorted(out, key=lambda r: r.name)


def normalize_url(url: str) -> str:
    """A URL as stored: local paths become absolute (a sync may run from any folder);
    ``ssh://``, ``file://``, ``host:path``, ``https://`` are kept as given."""
    from dulwich.client import parse_rsync_url

    url = url.strip()
    if not url:
        raise SyncError("BAD_REMOTE", "the remote URL is empty")
    if "://" in url:
        return url
    with contextlib.suppress(ValueError):
        parse_rsync_url(url)  # user@host:path
        return url
    return os.path.abspath(os.path.expanduser(url))


def add_remote(store: Store, name: str, url: str) -> Remote:
    """Record a remote (``git remote add`` in the store's ``.git/config``)."""
    if not _NAME_RE.match(name) or ".." in name or name.endswith((".lock", ".")):
        raise SyncError("BAD_REMOTE", f"{name!r} is not a usable remote name: use letters, "
                                      "digits, '.', '_' and '-' (like `origin`)")
    remote = Remote(name, normalize_url(url))
    with store.locked():
        existing = {r.name: r for r in remotes(store.git)}
        if name in existing:
            raise SyncError("REMOTE_EXISTS", f"remote {name} already exists "
                                             f"({existing[name].url}); remove it first with "
                                             f"`filemem remote remove {name}`")
        _write_remote(store.git, remote)
    return remote


def _write_remote(git: GitRepo, remote: Remote) -> None:
    config = git.repo.get_config()
    section = (b"remote", remote.name.encode())
    config.set(section, b"url", remote.url.encode())
    config.set(section, b"fetch", f"+refs/heads/*:refs/remotes/{remote.name}/*".encode())
    config.write_to_path()


def remove_remote(store: Store, name: str) -> Remote:
    """Forget a remote and its remote-tracking refs (``git remote remove``)."""
    with store.locked():
        found = {r.name: r for r in remotes(store.git)}.get(name)
        if found is None:
            raise SyncError("NO_REMOTE", f"there is no remote {name!r} (see `filemem remote "
                                         "list`)")
        config = store.git.repo.get_config()
        del config[(b"remote", name.encode())]
        config.write_to_path()
        refs: Any = store.git.repo.refs
        prefix = f"refs/remotes/{name}/".encode()
        for ref in list(refs.keys(base=prefix)):
            refs.remove_if_equals(prefix + ref, None)
    return found


def pick_remote(git: GitRepo, name: str | None) -> Remote:
    """The remote to sync with: ``name``, else the only one, else ``origin``."""
    known = remotes(git)
    if not known:
        raise SyncError("NO_REMOTE", "this store has no remote to sync with; add one with "
                                     "`filemem remote add origin URL` (for example a bare "
                                     "repository made with `git init --bare -b main`)")
    by_name = {r.name: r for r in known}
    if name is not None:
        if name not in by_name:
            raise SyncError("NO_REMOTE", f"there is no remote {name!r}; known: "
                                         f"{', '.join(sorted(by_name))}")
        return by_name[name]
    if len(known) == 1:
        return known[0]
    if "origin" in by_name:
        return by_name["origin"]
    raise SyncError("NO_REMOTE", "this store has several remotes and none is called origin; "
                                 f"name one: filemem sync {known[0].name}")


# ---------------------------------------------------------------- transport


def _client(git: GitRepo, url: str) -> tuple[Any, str]:
    from dulwich.client import get_transport_and_path

    ssh = os.environ.get("GIT_SSH_COMMAND") or os.environ.get("GIT_SSH")
    try:
        return get_transport_and_path(url, config=git.repo.get_config_stack(),
                                      ssh_command=ssh)
    except ValueError as exc:
        raise SyncError("BAD_REMOTE", f"cannot use the remote URL {url!r}: {exc}") from exc


def _local_path(client: Any, path: str) -> str | None:
    """The folder of a remote reached as a local path (``/mnt/usb/memory.git``, file://)."""
    from dulwich.client import LocalGitClient

    return os.fsdecode(path) if isinstance(client, LocalGitClient) else None


@contextlib.contextmanager
def _transport_errors(remote: Remote, doing: str) -> Iterator[None]:
    from dulwich.errors import GitProtocolError, NotGitRepository

    try:
        yield
    except NotGitRepository as exc:
        raise SyncError("REMOTE_UNREACHABLE", f"cannot {doing} {remote.name}: {remote.url} is "
                        "not a git repository (make one with `git init --bare -b main "
                        f"{remote.url}`)") from exc
    except (GitProtocolError, OSError) as exc:
        raise SyncError("REMOTE_UNREACHABLE", f"cannot {doing} {remote.name} ({remote.url}): "
                        f"{exc or type(exc).__name__}") from exc


def _progress_fn(progress: Progress | None) -> Callable[[Any], None] | None:
    if progress is None:
        return None

    def report(data: Any) -> None:
        progress(data.encode() if isinstance(data, str) else bytes(data))

    return report


def _tracking_ref(remote: Remote) -> bytes:
    return f"refs/remotes/{remote.name}/{BRANCH}".encode()


def _set_tracking(git: GitRepo, remote: Remote, sha: str) -> None:
    """Remember where the remote's branch was (``git log origin/main`` works)."""
    from dulwich.file import FileLocked

    refs: Any = git.repo.refs
    ref = _tracking_ref(remote)
    with contextlib.suppress(FileLocked):  # a person's `git fetch` right now: it sets it too
        refs.set_if_equals(ref, None, sha.encode(), message=b"filemem sync")


def fetch(git: GitRepo, remote: Remote, progress: Progress | None = None) -> str | None:
    """Fetch the remote's ``main`` into the object store; its commit, or None if the
    remote has no ``main`` yet. Only adds objects (and the remote-tracking ref)."""
    client, path = _client(git, remote.url)
    repo = git.repo
    store: Any = repo.object_store

    def wants(refs: Any, depth: int | None = None) -> list[Any]:
        sha = refs.get(BRANCH_REF)
        return [] if sha is None or sha in store else [sha]

    with _transport_errors(remote, "fetch from"):
        result = client.fetch(os.fsencode(path), repo, determine_wants=wants,
                              progress=_progress_fn(progress))
    sha = (result.refs or {}).get(BRANCH_REF)
    if sha is None:
        return None
    head = str(sha.decode())
    _set_tracking(git, remote, head)
    return head


def push(git: GitRepo, remote: Remote, expected: str | None, new: str,
         progress: Progress | None = None) -> bool:
    """Move the remote's ``main`` from ``expected`` (None: absent) to ``new``, a commit
    that descends from it. False if the remote's ``main`` is no longer ``expected``
    (someone pushed meanwhile: fetch and merge again). SyncError if the remote refuses."""
    from dulwich.file import FileLocked

    client, path = _client(git, remote.url)
    local = _local_path(client, path)
    if local is not None:
        _check_local_target(local, remote)
    repo = git.repo
    moved: list[Any] = []

    def update_refs(refs: Any) -> Any:
        current = refs.get(BRANCH_REF)
        if (current.decode() if current else None) != expected:
            moved.append(current)
            return {}
        return {BRANCH_REF: new.encode()}

    def pack_data(have: Any, want: Any, *, ofs_delta: bool = False,
                  progress: Any = None) -> Any:
        return repo.generate_pack_data(set(have), set(want), progress=progress,
                                       ofs_delta=ofs_delta)

    with _transport_errors(remote, "push to"):
        try:
            result = client.send_pack(os.fsencode(path), update_refs, generate_pack_data=pack_data,
                                      progress=_progress_fn(progress))
        except FileLocked:
            return False  # another push is moving the ref right now: fetch and retry
    if moved:
        return False
    problem = (result.ref_status or {}).get(BRANCH_REF)
    if problem:
        if _remote_head(client, path, remote) != expected:
            return False  # lost a race to another push
        raise SyncError("PUSH_REJECTED", f"{remote.name} ({remote.url}) refused the push of "
                                         f"{BRANCH}: {problem}")
    _set_tracking(git, remote, new)
    if local is not None and expected is None:
        _point_head_at_branch(local)
    return True


def _remote_head(client: Any, path: str, remote: Remote) -> str | None:
    with _transport_errors(remote, "read the branches of"):
        refs = client.get_refs(os.fsencode(path))
    sha = getattr(refs, "refs", refs).get(BRANCH_REF)
    return sha.decode() if sha else None


def _check_local_target(path: str, remote: Remote) -> None:
    """Refuse to push into a working store (its files would not follow its branch), and
    clear a ref lock that a killed push left on a local remote."""
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    try:
        with contextlib.closing(Repo(path)) as target:
            bare = target.bare
            git_dir = target.controldir()
            symrefs: dict[Any, Any] = target.refs.get_symrefs()
            head = symrefs.get(b"HEAD")
    except NotGitRepository as exc:
        raise SyncError("REMOTE_UNREACHABLE", f"{remote.url} is not a git repository; make "
                        f"one with `git init --bare -b main {remote.url}`") from exc
    if not bare and head == BRANCH_REF:
        raise SyncError("BAD_REMOTE", f"{remote.url} is a working store with {BRANCH} checked "
                        "out: pushing there would leave its files behind its branch. Use a "
                        "bare repository as the remote (`git init --bare -b main PATH`) and "
                        "sync both machines with it")
    _clear_stale_ref_lock(os.path.join(git_dir, "refs", "heads", f"{BRANCH}.lock"), remote)


def _clear_stale_ref_lock(lock: str, remote: Remote) -> None:
    """git and dulwich move a ref by writing ``<ref>.lock`` and renaming it, which takes
    milliseconds; a lock still there after a few seconds is what a killed push left, and
    it would block every later push. Wait that long, then remove it."""
    deadline = time.monotonic() + STALE_REF_LOCK
    while os.path.exists(lock):
        try:
            age = time.time() - os.stat(lock).st_mtime
        except FileNotFoundError:
            return
        if age >= STALE_REF_LOCK:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(lock)
            return
        if time.monotonic() > deadline:
            raise SyncError("REMOTE_BUSY", f"{lock} is held: another push to {remote.name} "
                                           "is running; sync again in a moment")
        time.sleep(0.1)


def _point_head_at_branch(path: str) -> None:
    """A bare repository made with plain `git init --bare` points HEAD at ``master``;
    once filemem has published ``main`` there and nothing else, point HEAD at it so that
    a `git clone` of the remote checks the store out."""
    from dulwich.repo import Repo

    with contextlib.suppress(Exception), contextlib.closing(Repo(path)) as target:
        refs: Any = target.refs
        if refs.get_symrefs().get(b"HEAD") != BRANCH_REF and set(refs.keys(b"refs/heads/")) \
                == {BRANCH.encode()}:
            refs.set_symbolic_ref(b"HEAD", BRANCH_REF)


# ---------------------------------------------------------------- results


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

    @property
    def up_to_date(self) -> bool:
        return not self.steps

    def to_json(self) -> dict[str, Any]:
        return {"remote": self.remote, "url": self.url, "upToDate": self.up_to_date,
                "before": self.before, "after": self.after, "remoteBefore": self.remote_before,
                "remoteAfter": self.remote_after, "steps": self.steps,
                "overBudget": self.over_budget, "attempts": self.attempts}


# ---------------------------------------------------------------- the sync


def sync(store: Store, name: str | None = None, *, progress: Progress | None = None,
         attempts: int = SYNC_ATTEMPTS) -> SyncResult:
    """Fetch, integrate (fast-forward or merge), push; see the module docstring."""
    remote = pick_remote(store.git, name)
    with _sync_lock(store):
        _clear_stale_local(store.git, remote)
        head = store.git.head()
        assert head is not None
        result = SyncResult(remote.name, remote.url, before=head)
        for attempt in range(1, attempts + 1):
            result.attempts = attempt
            theirs = fetch(store.git, remote, progress)
            if attempt == 1:
                result.remote_before = theirs
            try:
                local = _integrate(store, remote, theirs, result)
            except HeadMoved:
                continue  # a person's git command moved the branch meanwhile: start over
            result.after, result.remote_after = local, theirs
            if local == theirs:
                break
            if push(store.git, remote, theirs, local, progress):
                result.remote_after = local
                result.steps.append({"kind": "push", "from": theirs, "to": local,
                                     "commits": _count(store.git, local, theirs)})
                break
        else:
            raise SyncError("REMOTE_BUSY", f"{remote.name} (or this store's branch) kept "
                            f"moving while syncing ({attempts} rounds); what was merged so far "
                            "is committed here. Run `filemem sync` again")
        result.over_budget = over_budget(store)
    return result


def over_budget(store: Store) -> list[Usage]:
    """Layers whose committed entries exceed their budget (a merge can do that; nothing
    is cut: the owner consolidates or removes entries)."""
    state = store.checked()
    assert state.config is not None
    return [r for r in budgets.report(state.usage, state.config) if r["used"] > r["limit"]]


@contextlib.contextmanager
def _sync_lock(store: Store) -> Iterator[None]:
    """One sync of a store at a time; agents' writes are not blocked by it."""
    import portalocker

    lock = portalocker.Lock(
        os.path.join(store.meta, "sync.lock"), mode="a", timeout=SYNC_LOCK_TIMEOUT,
        check_interval=0.05, fail_when_locked=False,
        flags=portalocker.LockFlags.EXCLUSIVE | portalocker.LockFlags.NON_BLOCKING)
    try:
        with private_files():
            lock.acquire()
    except portalocker.LockException:
        raise SyncError("SYNC_BUSY", f"another `filemem sync` of {store.root} has been "
                        f"running for more than {SYNC_LOCK_TIMEOUT:.0f} s") from None
    try:
        yield
    finally:
        lock.release()


_DULWICH_TMP_PACK: Final = re.compile(r"tmp[a-z0-9_]{8}\.pack\Z")


def _clear_stale_local(git: GitRepo, remote: Remote) -> None:
    """What a killed sync left in the store's .git (sync lock held, so no sync is
    running): dulwich's temporary pack files and the remote-tracking ref's lock. Neither
    harms the store; the lock would only stop the tracking ref from moving."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(git.git_dir, *_tracking_ref(remote).decode().split("/"))
                  + ".lock")
    objects = os.path.join(git.git_dir, "objects")
    pack_dir = os.path.join(objects, "pack")
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(pack_dir):
            if _DULWICH_TMP_PACK.match(name) and not os.path.exists(
                    os.path.join(pack_dir, name[:-5] + ".idx")):
                os.unlink(os.path.join(pack_dir, name))
    with contextlib.suppress(FileNotFoundError):
        for name in os.listdir(objects):
            if name.startswith("tmp_pack_"):
                os.unlink(os.path.join(objects, name))


def _count(git: GitRepo, include: str, exclude: str | None) -> int:
    """Commits reachable from ``include`` but not from ``exclude``."""
    repo: Any = git.repo
    walker = repo.get_walker(include=[include.encode()],
                             exclude=[exclude.encode()] if exclude else None)
    return sum(1 for _ in walker)


def _merge_base(git: GitRepo, ours: str, theirs: str) -> str | None:
    from dulwich.graph import find_merge_base

    shas: list[Any] = [ours.encode(), theirs.encode()]
    bases = find_merge_base(git.repo, shas)
    return bases[0].decode() if bases else None


def _integrate(store: Store, remote: Remote, theirs: str | None, result: SyncResult) -> str:
    """Bring the local branch up to date with ``theirs``; returns the local head after."""
    with store.transaction() as txn:
        ours = txn.state.head
        if theirs is None or theirs == ours:
            return ours
        base = _merge_base(store.git, ours, theirs)
        if base == theirs:
            return ours  # only local commits: nothing to take in
        theirs_tree = store.git.commit(theirs).tree
        if CONFIG_FILE not in store.git.read_tree(theirs_tree):
            raise SyncError("REMOTE_NOT_A_STORE", f"{remote.name}/{BRANCH} ({theirs[:12]}, "
                            f"{remote.url}) is not a filemem store (no {CONFIG_FILE}); "
                            "nothing was changed")
        if base == ours:
            result.steps.append(_fast_forward(txn, remote, theirs))
        else:
            result.steps.append(_merge(txn, remote, base, theirs))
        return txn.state.head


def _fast_forward(txn: Transaction, remote: Remote, theirs: str) -> dict[str, Any]:
    git, st = txn.store.git, txn.state
    diff = list(git.diff(st.tree, git.commit(theirs).tree))
    _validate(git, {p: git.read_blob(new) for p, _old, new in diff if new}, remote, theirs)
    counts = _entry_counts([(p, old, new) for p, old, new in diff])
    ours = st.head
    txn.advance(theirs, f"filemem sync: fast-forward to {remote.name}/{BRANCH}")
    return {"kind": "fast-forward", "from": ours, "to": theirs,
            "commits": _count(git, theirs, ours), "entries": counts,
            "files": sorted(p for p, _o, _n in diff if not is_entry_path(p))}


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


# ---------------------------------------------------------------- the merge


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
class _Plan:
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

    def __init__(self, git: GitRepo, ours_tree: str, remote: Remote, theirs: str) -> None:
        self.git, self.ours_tree, self.remote, self.theirs = git, ours_tree, remote, theirs
        self.plan = _Plan()

    def run(self, base: str | None) -> _Plan:
        base_tree = self.git.commit(base).tree if base else None
        ours = _side(self.git, base_tree, self.ours_tree, "the local branch")
        theirs = _side(self.git, base_tree, self.git.commit(self.theirs).tree,
                       f"{self.remote.name}/{BRANCH}")
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
        name = self.remote.name
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
        name = self.remote.name
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
    base = _merge_base(git, ours, theirs)
    merger = _Merger(git, git.commit(ours).tree, Remote("remote", ""), theirs)
    return merger.run(base).changes


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


def _merge(txn: Transaction, remote: Remote, base: str | None, theirs: str) -> dict[str, Any]:
    store, st = txn.store, txn.state
    git = store.git
    plan = _Merger(git, st.tree, remote, theirs).run(base)
    _validate(git, {p: d for p, d in plan.changes.items() if d is not None}, remote, theirs)
    head_blobs = {p: (st.blobs.get(p) if is_entry_path(p) else git.blob_at(st.tree, p))
                  for p in plan.changes}
    dirty = store.dirty_paths_at(list(plan.changes), head_blobs)  # new paths included
    if dirty:
        raise hand_edited(worktree.full_path(store.root, dirty[0]))
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


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _summary(counts: dict[str, int], conflicts: int, commits: int) -> str:
    """Commits merged in, and what the merge changed in this store's entries."""
    return (f"{_plural(commits, 'commit')}; entries: {counts['added']} added, "
            f"{counts['replaced']} replaced, {counts['removed']} removed; "
            f"{_plural(conflicts, 'conflict')}")


def _body(plan: _Plan, remote: Remote, ours: str, base: str | None, theirs: str,
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

    The clone is built in a temporary folder beside ``path`` and renamed into place, so a
    killed clone leaves no half store (only a ``.<name>.filemem-clone-*`` folder to delete).
    """
    root = os.path.abspath(os.path.expanduser(path))
    if os.path.exists(root) and (not os.path.isdir(root) or os.listdir(root)):
        raise errors.StoreExists(f"{root} exists and is not empty; choose a new or empty folder")
    parent = os.path.dirname(root)
    os.makedirs(parent, exist_ok=True)
    building = os.path.join(parent, f".{os.path.basename(root)}.filemem-clone-{os.getpid()}-"
                                    f"{os.urandom(4).hex()}")
    remote = Remote("origin", normalize_url(url))
    with private_files():
        try:
            _clone_into(building, remote, progress)
            if os.name == "nt" and os.path.isdir(root):
                os.rmdir(root)  # Windows cannot rename over an empty folder
            os.rename(building, root)
        except BaseException:
            shutil.rmtree(building, ignore_errors=True)
            raise
    return root


def _clone_into(root: str, remote: Remote, progress: Progress | None) -> None:
    os.makedirs(root, mode=0o700)
    git = GitRepo.create(root)
    try:
        _write_remote(git, remote)
        theirs = fetch(git, remote, progress)
        if theirs is None:
            raise SyncError("REMOTE_NOT_A_STORE", f"{remote.url} has no {BRANCH} branch yet: "
                            "publish a store there first (`filemem remote add origin URL` "
                            "and `filemem sync` on the machine that has it)")
        tree = git.commit(theirs).tree
        if CONFIG_FILE not in git.read_tree(tree):
            raise SyncError("REMOTE_NOT_A_STORE", f"{remote.url} ({BRANCH}) is not a filemem "
                            f"store (no {CONFIG_FILE})")
        if not git.cas_head(None, theirs, f"filemem clone {remote.url}"):
            raise SyncError("BAD_REMOTE", f"could not set {BRANCH} in {root}")
        index = GitIndex(git.git_dir)
        for path, _mode, sha in git.walk(tree):
            index.set(path, sha, worktree.write(root, path, git.read_blob(sha)))
        index.write()
        os.makedirs(os.path.join(root, META_DIR, "cache"), mode=0o700, exist_ok=True)
    finally:
        git.close()


__all__ = [
    "Conflict", "Remote", "SyncError", "SyncResult", "add_remote", "clone", "fetch",
    "merge_changes", "normalize_url", "over_budget", "pick_remote", "push", "remotes",
    "remove_remote", "sync", "three_way",
]
