"""Making a new store: the template's files, the first commit, the working tree and the
index, built in a temporary folder beside the target and renamed into place, so several
processes creating the same store at once end with one whole store and nobody ever sees a
half-made one. A creation killed half way leaves its temporary folder behind; the next
creation of that store removes it once its process is gone."""

from __future__ import annotations

import os
import shlex
import time
from typing import Any, Final

from filemem import errors
from filemem.files import worktree
from filemem.files.gitindex import GitIndex
from filemem.files.gitrepo import GitError, GitRepo, PendingObjects
from filemem.model import now_ms
from filemem.store import pending
from filemem.store.auditlog import commit_message, next_seq, row
from filemem.store.names import CONFIG_FILE, IDENT, META_DIR, private_files


def template_files() -> dict[str, bytes]:
    """The files of ``store-template/`` (installed as ``filemem/_store_template``)."""
    from importlib import resources  # with pathlib and shutil, only when a store is made
    from pathlib import Path

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
        raise FileNotFoundError(f"filemem's store template is missing from this installation "
                                f"(no {CONFIG_FILE} in {base}); reinstall filemem "
                                "(pip install --force-reinstall filemem)")
    return out


# ---------------------------------------------------------------- what is at a path

_OTHER: Final = ("point --store (or $FILEMEM_STORE) at your store's folder, or make a new "
                 "store in a new or empty folder with `filemem init NEW-FOLDER`")
_NEW: Final = ("filemem makes a store only in a new or empty folder: run `filemem init "
               "NEW-FOLDER` with one (a folder that does not exist yet is made)")


def holds_store(git: GitRepo) -> bool:
    """HEAD's tree has ``filemem.yaml``: a filemem store (a fresh clone of one is too)."""
    try:
        head = git.head()
        return head is not None and CONFIG_FILE in git.read_tree(git.commit(head).tree)
    except (GitError, KeyError, OSError):
        return False


def _enclosing(root: str) -> str | None:
    """The filemem store ``root`` is inside of, if any (a person passed a subfolder)."""
    here = os.path.dirname(root)
    while True:
        if os.path.isdir(os.path.join(here, ".git")) and \
                os.path.isfile(os.path.join(here, CONFIG_FILE)):
            return here
        up = os.path.dirname(here)
        if up == here:
            return None
        here = up


def _empty_or_missing(root: str) -> bool:
    try:
        return not os.path.lexists(root) or (os.path.isdir(root) and not os.listdir(root))
    except OSError:
        return False


def not_a_store(root: str) -> errors.StoreNotFound:
    """Why there is no store to open at ``root``, with advice that leads somewhere: only a
    folder `filemem init` can use is sent to it."""
    if _empty_or_missing(root):
        return errors.StoreNotFound(
            f"no filemem store at {root}; create one with `filemem init {shlex.quote(root)}`")
    top = _enclosing(root)
    if top is not None:
        return errors.StoreNotFound(f"{root} is inside the filemem store at {top}, not a store "
                                    f"itself; use --store {shlex.quote(top)}")
    if os.path.isdir(os.path.join(root, ".git")):
        return errors.StoreNotFound(
            f"{root} is a git repository but not a filemem store (no {CONFIG_FILE} committed), "
            f"and filemem does not turn an existing repository into a store; {_OTHER}")
    what = "a folder holding other files" if os.path.isdir(root) else "a file"
    return errors.StoreNotFound(f"{root} is {what}, not a filemem store; {_OTHER}")


def not_empty(root: str) -> errors.StoreExists:
    """Why ``filemem init`` cannot make a store at ``root`` (it exists and is not empty),
    never pointing back at the same command."""
    top = _enclosing(root)
    if top is not None:
        why = f"is inside the filemem store at {top} (use it with --store {shlex.quote(top)})"
    elif os.path.isdir(os.path.join(root, ".git")):
        why = ("is a git repository that is not a filemem store, and filemem does not turn "
               "an existing repository into a store")
    elif os.path.isdir(root):
        why = "exists and is not empty"
    else:
        why = "is a file"
    return errors.StoreExists(f"{root} {why}; {_NEW}")


_BUILDING: Final = ".filemem-init-"  # .<name>.filemem-init-<pid>-<8 hex>: a store being made
# a creation takes well under a second: one untouched this long is not in progress even if
# its pid means nothing here (another machine's, on a shared folder)
_ABANDONED_AFTER: Final = 600.0


def sweep_abandoned(parent: str, name: str) -> None:
    """Remove the temporary folders of earlier creations of ``parent/name`` whose process is
    gone (killed while laying the store down) and that nothing touched for
    :data:`_ABANDONED_AFTER` seconds: nothing else ever removes them. A folder whose process
    still runs is that process's creation in progress, and is left alone.
    POSIX only: Windows has no signal-0 probe (``os.kill(pid, 0)`` sends CTRL_C there)."""
    if os.name == "nt":
        return
    import re
    import shutil

    ours = re.compile(re.escape(f".{name}{_BUILDING}") + r"([0-9]{1,9})-[0-9a-f]{8}\Z")
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return
    now = time.time()
    for entry in entries:
        found = ours.match(entry.name)
        try:
            stale = entry.is_dir(follow_symlinks=False) and \
                now - entry.stat(follow_symlinks=False).st_mtime > _ABANDONED_AFTER
        except OSError:
            continue
        if found and stale and not pending.alive(int(found[1])):
            shutil.rmtree(entry.path, ignore_errors=True)


def make(root: str) -> None:
    """Lay a new store down at ``root`` (missing or an empty folder). Returns quietly if a
    store is there already (another process may have just made it); StoreExists if the
    folder holds something else."""
    if os.path.exists(root) and (not os.path.isdir(root) or os.listdir(root)):
        if os.path.isdir(os.path.join(root, ".git")):
            git = GitRepo(root)
            try:
                if holds_store(git):
                    return  # someone made it meanwhile (or it is already a store)
            finally:
                git.close()
        raise not_empty(root)
    parent = os.path.dirname(root)
    with private_files():
        os.makedirs(parent, exist_ok=True)  # folders filemem makes are 0700, as the store
        name = os.path.basename(root)
        sweep_abandoned(parent, name)
        building = os.path.join(parent, f".{name}{_BUILDING}{os.getpid()}-"
                                        f"{os.urandom(4).hex()}")
        try:
            _lay_down(building)
            if os.path.isdir(root) and not os.listdir(root) and os.name == "nt":
                os.rmdir(root)  # Windows cannot rename over an empty folder
            os.rename(building, root)  # POSIX: replaces a missing or empty folder only
        except OSError:
            import shutil

            shutil.rmtree(building, ignore_errors=True)
            if os.path.isdir(os.path.join(root, ".git")):
                return  # another process won the race: its store is whole
            raise


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
