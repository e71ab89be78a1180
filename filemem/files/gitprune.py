"""Forgetting objects for good: after a history rewrite, what only the old history reached
must leave the object store, or ``git cat-file --batch-all-objects`` still holds it.

Done with the git CLI, which is what a person checks with afterwards: every reflog expired
(a reflog keeps old commits reachable, and filemem's reflog lines carry commit subjects),
pseudo-refs that name old commits removed, every pack rewritten from what is reachable
(``repack -a -d`` drops unreachable packed objects) and unreachable loose objects pruned.
Run under the store lock; killed half way it is simply run again.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any, Final

from filemem.files import gitcli
from filemem.files.giterrors import GitError

# files in .git that name commits (or carry a commit message) outside refs and reflogs
_PSEUDO: Final = ("ORIG_HEAD", "FETCH_HEAD", "COMMIT_EDITMSG", "MERGE_MSG", "SQUASH_MSG",
                  "AUTO_MERGE")


def git_cli() -> str:
    """The git command, or GitError saying it is needed (nothing is changed without it)."""
    git = gitcli.which()
    if git is None:
        raise GitError("this needs the git command (not found on PATH): install git, then "
                       "run it again; nothing was changed")
    return git


def _run(root: str, *args: str) -> None:
    import subprocess  # here: a cold command that only reads never loads it

    done = subprocess.run([git_cli(), "-C", root, "-c", "gc.auto=0", *args],
                          capture_output=True, stdin=subprocess.DEVNULL, env=gitcli.env())
    if done.returncode != 0:
        raise GitError(f"`git {' '.join(args)}` failed in {root}: "
                       f"{done.stderr.decode('utf-8', 'replace').strip()[:300]}")


def forget_unreachable(root: str) -> None:
    """Expire every reflog, drop pseudo-refs, rewrite the packs from what is reachable and
    prune the rest: afterwards the object store holds only what refs and the index reach."""
    git_dir = os.path.join(root, ".git")
    for name in _PSEUDO:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(os.path.join(git_dir, name))
    _run(root, "reflog", "expire", "--expire=now", "--expire-unreachable=now", "--all")
    _run(root, "repack", "-a", "-d", "-q")
    _run(root, "prune", "--expire=now")
    with contextlib.suppress(FileNotFoundError):
        os.unlink(os.path.join(git_dir, "objects", "info", "packs"))


def commit_refs(repo: Any) -> dict[str, str]:
    """Every ref naming a commit, by name (symbolic refs such as HEAD left out)."""
    out: dict[str, str] = {}
    refs = repo.refs
    for name in refs.allkeys():
        if name == b"HEAD":
            continue
        with contextlib.suppress(KeyError):
            if refs.read_ref(name).startswith(b"ref: "):
                continue
        sha = refs[name]
        out[name.decode("utf-8", "surrogateescape")] = sha.decode()
    return out


def move_refs(repo: Any, moves: Mapping[str, tuple[str, str]]) -> None:
    """Move refs (other than the store's branch) from old to new by compare-and-swap; a ref
    already at its new value is left alone (a move finished before a kill)."""
    refs = repo.refs
    for name, (old, new) in moves.items():
        ref = name.encode("utf-8", "surrogateescape")
        try:
            current = refs[ref]
        except KeyError:
            current = None
        if current is not None and current.decode() == new:
            continue
        if current is None or current.decode() != old:
            continue  # moved by someone else since: theirs to keep
        refs.set_if_equals(ref, old.encode(), new.encode(), message=b"filemem redact")
