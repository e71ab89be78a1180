"""Remotes and the transport of a sync.

A store's remotes are git's own ``[remote "NAME"]`` sections in its ``.git/config``. The
transport (dulwich; for a remote on this machine the git CLI where it is installed,
:mod:`.gitfetch` and :mod:`.gitpush`) fetches the remote's ``main`` and pushes to it: the
fetch only adds objects (and the remote-tracking ref); the push is a compare-and-swap on
the remote's ``main``. A remote reached as a local path is never a working store (checked
when it is added and before a sync fetches: :func:`refuse_working_store`), and what a
killed push left there is cleared once stale (:mod:`.leftovers`).

git's own commands work beside filemem's (:func:`ensure_tracking`): the branch's upstream
(``branch.main.remote`` / ``merge``) is the remote ``filemem sync`` uses by default, and
``pull.rebase = false``, so a plain ``git pull`` merges (never rebases the audit commits,
nor stops at git's "divergent branches" hint) and a plain ``git push`` pushes ``main``.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Final

from filemem.errors import SyncError
from filemem.files.gitrepo import BRANCH, GitRepo
from filemem.files.modes import pack_names, private_packs
from filemem.owner import gitfetch, gitpush, leftovers
from filemem.store.core import Store
from filemem.store.names import private_files

BRANCH_REF: Final = f"refs/heads/{BRANCH}".encode()
_NAME_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")

Progress = Callable[[bytes], None]

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
    refuse_working_store(store.git, remote, adding=True)  # a path not there yet is fine
    with store.locked(), private_files():  # .git/config stays the owner's only
        existing = {r.name: r for r in remotes(store.git)}
        if name in existing:
            raise SyncError("REMOTE_EXISTS", f"remote {name} already exists "
                                             f"({existing[name].url}); remove it first with "
                                             f"`filemem remote remove {name}`")
        write_remote(store.git, remote)
        ensure_tracking(store.git)
    return remote


def write_remote(git: GitRepo, remote: Remote) -> None:
    config = git.repo.get_config()
    section = (b"remote", remote.name.encode())
    config.set(section, b"url", remote.url.encode())
    config.set(section, b"fetch", f"+refs/heads/*:refs/remotes/{remote.name}/*".encode())
    with private_files():
        config.write_to_path()


def remove_remote(store: Store, name: str) -> Remote:
    """Forget a remote and its remote-tracking refs (``git remote remove``)."""
    with store.locked(), private_files():
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
        ensure_tracking(store.git)  # as `git remote remove`: the upstream goes with it
    return found


_BRANCH_SECTION: Final = (b"branch", BRANCH.encode())


def upstream(git: GitRepo) -> str | None:
    """The remote ``git pull`` and ``git push`` use for ``main`` (``branch.main.remote``)."""
    with contextlib.suppress(KeyError):
        return git.repo.get_config().get(_BRANCH_SECTION, b"remote").decode("utf-8", "replace")
    return None


def ensure_tracking(git: GitRepo) -> None:
    """Set up what git's own ``git pull`` and ``git push`` need in the store, as ``git clone``
    does: ``main``'s upstream is the remote ``filemem sync`` would pick with no argument (kept
    if it already names a remote that exists; dropped with the remote it named), and
    ``pull.rebase = false`` unless the store's own config already says how to pull
    (``pull.rebase`` or ``pull.ff``): a pull merges, as ``filemem sync`` does, instead of
    rewriting the audit commits or stopping at git's "divergent branches" hint. Call it
    holding the store lock."""
    known = {r.name for r in remotes(git)}
    config = git.repo.get_config()
    changed = False
    current = upstream(git)
    if current is None or current not in known:
        try:
            chosen: str | None = pick_remote(git, None).name
        except SyncError:  # no remote, or several and none called origin: git asks, too
            chosen = None
        if chosen is not None:
            config.set(_BRANCH_SECTION, b"remote", chosen.encode())
            config.set(_BRANCH_SECTION, b"merge", BRANCH_REF)
            changed = True
        elif current is not None:
            for key in (b"remote", b"merge"):
                with contextlib.suppress(KeyError):
                    config.remove(_BRANCH_SECTION, key)
            changed = True
    if known and not any(config.has_section((b"pull",)) and _has(config, (b"pull",), key)
                         for key in (b"rebase", b"ff")):
        config.set((b"pull",), b"rebase", False)
        changed = True
    if changed:
        with private_files():
            config.write_to_path()


def _has(config: Any, section: tuple[bytes, ...], key: bytes) -> bool:
    try:
        config.get(section, key)
    except KeyError:
        return False
    return True


def pick_remote(git: GitRepo, name: str | None) -> Remote:
    """The remote to sync with: ``name``, else the only one, else ``origin``, else the one
    ``main`` tracks (``branch.main.remote``: the one ``git pull`` uses)."""
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
    tracked = upstream(git)
    if tracked in by_name:
        return by_name[tracked]
    raise SyncError("NO_REMOTE", "this store has several remotes, none is called origin and "
                                 f"main tracks none of them; name one: filemem sync "
                                 f"{known[0].name}")


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
    from dulwich.errors import GitProtocolError, NotGitRepository, ObjectFormatException

    try:
        yield
    except ObjectFormatException as exc:
        raise SyncError("REMOTE_INVALID", f"cannot {doing} {remote.name} ({remote.url}): it "
                        f"holds a malformed git object ({exc}); nothing was changed here") from exc
    except NotGitRepository as exc:
        raise not_a_repository(remote, doing) from exc
    except (GitProtocolError, OSError) as exc:
        # ssh's or git's stderr, quoted: its lines end in "\r\n" (shown as a stray \r)
        said = "\n".join(line.rstrip() for line in str(exc).split("\n")).strip()
        raise SyncError("REMOTE_UNREACHABLE", f"cannot {doing} {remote.name} ({remote.url}): "
                        f"{said or type(exc).__name__}") from exc


def not_a_repository(remote: Remote, doing: str) -> SyncError:
    """REMOTE_UNREACHABLE for a URL with no git repository. A clone's URL was most likely
    mistyped (a store is cloned from where one was published); a sync's remote may be a
    wrong URL too, or a bare repository not made yet."""
    if doing == "clone":
        return SyncError("REMOTE_UNREACHABLE", f"cannot clone {remote.url}: there is no git "
                         "repository there. Check the URL; a clone needs a store published "
                         "there first (by `filemem remote add origin URL` and `filemem sync` "
                         "on the machine that has it)")
    return SyncError("REMOTE_UNREACHABLE", f"cannot {doing} {remote.name}: {remote.url} is not "
                     f"a git repository. If the URL is wrong: `filemem remote remove "
                     f"{remote.name}`, then `filemem remote add {remote.name} URL`; if the "
                     "bare repository is not made yet: `git init --bare -b main "
                     f"{remote.url}`")


def _progress_fn(progress: Progress | None) -> Callable[[Any], None] | None:
    if progress is None:
        return None

    def report(data: Any) -> None:
        progress(data.encode() if isinstance(data, str) else bytes(data))

    return report


def tracking_ref(remote: Remote) -> bytes:
    return f"refs/remotes/{remote.name}/{BRANCH}".encode()


def _set_tracking(git: GitRepo, remote: Remote, sha: str) -> None:
    """Remember where the remote's branch was (``git log origin/main`` works)."""
    from dulwich.file import FileLocked

    refs: Any = git.repo.refs
    ref = tracking_ref(remote)
    with contextlib.suppress(FileLocked):  # a person's `git fetch` right now: it sets it too
        refs.set_if_equals(ref, None, sha.encode(), message=b"filemem sync")


def fetch(git: GitRepo, remote: Remote, progress: Progress | None = None, *,
          doing: str = "fetch from") -> str | None:
    """Fetch the remote's ``main`` into the object store; its commit, or None if the
    remote has no ``main`` yet. Only adds objects (and the remote-tracking ref), private
    to the owner whatever the umask: folders 0700, refs and logs 0600, packs 0400.
    ``doing``: what errors say was attempted (``"clone"`` for a clone's advice)."""
    from dulwich.file import FileLocked

    client, path = _client(git, remote.url)
    local = _local_path(client, path)
    if local is not None:  # on this machine: the git CLI's fetch, if there is one
        with private_files():
            fetched = gitfetch.fetch_local(git, local, BRANCH_REF.decode(),
                                           tracking_ref(remote).decode(), progress)
            private_packs(git.git_dir)
        if fetched is not None:
            return fetched
    repo = git.repo
    store: Any = repo.object_store

    def wants(refs: Any, depth: int | None = None) -> list[Any]:
        sha = refs.get(BRANCH_REF)
        return [] if sha is None or sha in store else [sha]

    with private_files():
        try:
            with _transport_errors(remote, doing):
                result = client.fetch(os.fsencode(path), repo, determine_wants=wants,
                                      progress=_progress_fn(progress))
        except FileLocked as exc:  # not a killed fetch's: clear_stale_local removed those
            raise _locked_file(exc, remote, pushing=False) from None
        finally:
            private_packs(git.git_dir)  # dulwich writes its packs 0444
        sha = (result.refs or {}).get(BRANCH_REF)
        if sha is None:
            return None
        head = str(sha.decode())
        _set_tracking(git, remote, head)
    return head


def push(git: GitRepo, remote: Remote, expected: str | None, new: str,
         progress: Progress | None = None) -> bool:
    """Move the remote's ``main`` from ``expected`` (None: absent) to ``new``, a commit
    that descends from it (or a redaction's rewritten history, which replaces it: a
    setting such as ``receive.denyNonFastForwards`` there refuses that, as it refuses
    ``git push --force``). False if the remote's ``main`` is no longer ``expected``
    (someone pushed meanwhile: fetch and merge again). SyncError if the remote refuses.
    A remote on this machine is pushed to by the git CLI where it can (:mod:`.gitpush`)."""
    client, path = _client(git, remote.url)
    local = _local_path(client, path)
    target = _check_local_target(git, remote) if local is not None else None
    before = pack_names(target) if target is not None else set()
    # a local remote gets what this push writes there (pack, ref, its log) with no bit for
    # group or other: git's own files there keep the modes git gave them
    with _transport_errors(remote, "push to"), private_files():
        try:
            sent = gitpush.push_local(git.root, local, BRANCH_REF.decode(), expected, new,
                                      progress) if local is not None else None
            if sent is None:
                sent = _send_pack(git, client, path, remote, target, expected, new, progress)
        finally:
            if target is not None:
                private_packs(target, keep=before)  # the pack this push added: 0400
    if sent.moved:
        return False
    if sent.refused:
        if _remote_head(client, path, remote) != expected:
            return False  # lost a race to another push
        raise SyncError("PUSH_REJECTED", f"{remote.name} ({remote.url}) refused the push of "
                                         f"{BRANCH}: {sent.refused}")
    with private_files():
        _set_tracking(git, remote, new)
        if local is not None and expected is None:
            _point_head_at_branch(local)
    return True


def _send_pack(git: GitRepo, client: Any, path: str, remote: Remote, target: str | None,
               expected: str | None, new: str, progress: Progress | None) -> gitpush.Pushed:
    """:func:`push` by dulwich: any remote, and a local one the git CLI did not push to."""
    from dulwich.file import FileLocked

    if target is not None and _receive_rules(target):
        from dulwich.client import SubprocessGitClient

        client = SubprocessGitClient()  # `git receive-pack` there: its hooks and settings
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

    try:
        result = client.send_pack(os.fsencode(path), update_refs, generate_pack_data=pack_data,
                                  progress=_progress_fn(progress))
    except FileLocked as exc:
        if leftovers.PACK_INDEX_LOCK.match(os.path.basename(os.fsdecode(exc.lockfilename))):
            raise _locked_file(exc, remote, pushing=True) from None
        return gitpush.Pushed(moved=True, refused=None)  # another push is moving the ref right now
    problem = (result.ref_status or {}).get(BRANCH_REF)
    return gitpush.Pushed(moved=bool(moved), refused=str(problem) if problem else None)


def remote_head(git: GitRepo, remote: Remote) -> str | None:
    """The remote's ``main`` now (None if it has none), without fetching anything."""
    client, path = _client(git, remote.url)
    return _remote_head(client, path, remote)


def _remote_head(client: Any, path: str, remote: Remote) -> str | None:
    with _transport_errors(remote, "read the branches of"):
        refs = client.get_refs(os.fsencode(path))
    sha = getattr(refs, "refs", refs).get(BRANCH_REF)
    return sha.decode() if sha else None


def refuse_working_store(git: GitRepo, remote: Remote, *, adding: bool = False
                         ) -> str | None:
    """The one rule: a remote reached as a local path is never a working store with
    ``main`` checked out (a push there would leave its files behind its branch). Checked
    when the remote is added and before a sync fetches anything, so a refusal means nothing
    was added, fetched, merged or pushed. A local path with no repository is
    REMOTE_UNREACHABLE for a sync; ``adding``: allowed (a disk not mounted yet). Returns
    the local remote's git folder (None: not a local path, or not there yet)."""
    from dulwich.errors import NotGitRepository
    from dulwich.repo import Repo

    local = _local_path(*_client(git, remote.url))
    if local is None:
        return None
    try:
        with contextlib.closing(Repo(local)) as target:
            bare = target.bare
            symrefs: dict[Any, Any] = target.refs.get_symrefs()
            head = symrefs.get(b"HEAD")
            git_dir = str(target.controldir())
    except NotGitRepository as exc:
        if adding:
            return None
        raise not_a_repository(remote, "sync with") from exc
    if bare or head != BRANCH_REF:
        return git_dir
    bare_one = "`git init --bare -b main PATH`"
    if adding:
        then = (f"nothing was added. Make a bare repository ({bare_one}), add that "
                f"(`filemem remote add {remote.name} PATH`) and sync both stores with it")
    else:
        then = (f"nothing was fetched, merged or pushed. Use a bare repository instead "
                f"({bare_one}): here `filemem remote remove {remote.name}`, `filemem remote "
                f"add {remote.name} PATH` and `filemem sync {remote.name}`, and in the store "
                f"at {remote.url} `filemem remote add origin PATH` and `filemem sync`")
    raise SyncError("BAD_REMOTE", f"{remote.url} is a working store with {BRANCH} checked out: "
                    f"pushing there would leave its files behind its branch, so `filemem sync` "
                    f"never does; {then}")


_RECEIVE_HOOKS: Final = ("pre-receive", "update", "post-receive", "post-update",
                         "reference-transaction", "proc-receive")


def _receive_rules(git_dir: str) -> bool:
    """Whether a local remote has rules of its own for what it receives: a hook git runs
    on a push, or a ``receive.*`` setting (``denyNonFastForwards``, ...). A push there then
    goes through ``git receive-pack``, which keeps them, as ``git push`` and a push over ssh
    do; one without them is written in process (quicker, and the same)."""
    from dulwich.repo import Repo

    with contextlib.closing(Repo(git_dir)) as repo:
        config = repo.get_config()
        try:
            hooks = os.fsdecode(config.get((b"core",), b"hooksPath"))
        except KeyError:
            hooks = "hooks"
        receive = config.has_section((b"receive",))
    hooks = os.path.join(git_dir, os.path.expanduser(hooks))
    return receive or any(os.access(os.path.join(hooks, name), os.X_OK)
                          for name in _RECEIVE_HOOKS)


def _check_local_target(git: GitRepo, remote: Remote) -> str:
    """Before a push to a local remote: :func:`refuse_working_store`, and clear a ref lock
    that a killed push left there. Returns its git folder."""
    git_dir = refuse_working_store(git, remote)
    assert git_dir is not None  # a local path, and a repository (else refused)
    lock = os.path.join(git_dir, "refs", "heads", f"{BRANCH}.lock")
    if not leftovers.ref_lock_cleared(lock):
        raise SyncError("REMOTE_BUSY", f"{lock} is held: another push to {remote.name} "
                                       "is running; sync again in a moment")
    leftovers.clear_temp_packs(git_dir, older_than=leftovers.STALE_TEMP_PACK)
    return git_dir


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


def clear_stale_local(git: GitRepo, remote: Remote) -> None:
    """What a killed fetch left in the store's .git: dulwich's temporary pack files, a pack
    index it was writing (:mod:`.leftovers`) and the remote-tracking ref's
    lock. None harms the store; the ref lock would stop the tracking ref from moving and
    the index lock every later fetch of the same objects. Call it holding the sync lock
    and the store lock: no other sync is fetching then, and no filemem write is packing
    loose objects, so nothing alive owns what is left."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(git.git_dir, *tracking_ref(remote).decode().split("/"))
                  + ".lock")
    leftovers.clear_temp_packs(git.git_dir)


def _locked_file(exc: Any, remote: Remote, *, pushing: bool) -> SyncError:
    """A git file dulwich found locked during a transfer, as one clear error naming it."""
    lock = os.fsdecode(exc.lockfilename)
    if not pushing:
        return SyncError("SYNC_BUSY", f"cannot fetch from {remote.name}: {lock} is held (a "
                         "program other than filemem is writing it in this store); when it "
                         "has finished, or if nothing is running, remove that file and sync "
                         "again")
    return SyncError("REMOTE_BUSY", f"cannot push to {remote.name}: {lock} is held (another "
                     "push is writing it, or one was killed while writing it; the next sync "
                     f"removes it once it is {leftovers.STALE_TEMP_PACK / 60:.0f} minutes old); "
                     "sync again later")


__all__ = [
    "BRANCH_REF", "Progress", "Remote", "add_remote", "clear_stale_local", "ensure_tracking",
    "fetch", "normalize_url", "not_a_repository", "pick_remote", "push", "refuse_working_store",
    "remotes", "remove_remote", "tracking_ref", "upstream", "write_remote",
]
