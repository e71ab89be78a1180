"""Checking a tree that came from elsewhere (a remote's commit) before anything of it is
written: every path as git stores it, against the store's path rules."""

from __future__ import annotations

from collections.abc import Callable

from filemem.files.gitrepo import TREE_MODE, GitError, GitRepo
from filemem.files.treebytes import MODES, stored_items


def first_bad_path(git: GitRepo, tree: str, check: Callable[[str, int], str | None],
                   known: str | None = None, prefix: str = "") -> tuple[str, str] | None:
    """The first path under ``tree`` (a commit made elsewhere) that ``check(path, mode)``
    refuses, or that is not what git itself would write: a malformed tree, a name that
    is not UTF-8 or holds ``/``, one name twice, an unknown mode, an object missing or
    of the wrong kind. Returns (path, why) or None. Files and subtrees equal to
    ``known``'s (the local tree) at the same path are here already and not looked into;
    each folder is checked before anything in it, so a deep tree stops at its top."""
    if tree == known:
        return None
    try:
        items = stored_items(git._read_kind(tree, b"tree"))
    except (GitError, KeyError) as exc:
        return prefix.rstrip("/") or "/", f"an unreadable tree ({exc})"
    have = git.read_tree(known) if known else {}
    seen: set[str] = set()
    for raw_name, raw_mode, sha in items:
        path = prefix + raw_name.decode("utf-8", "backslashreplace")
        try:
            name = raw_name.decode("utf-8")
        except UnicodeDecodeError:
            return path, "a name that is not UTF-8"
        mode = MODES.get(raw_mode)
        if "/" in name or not name:
            return path, "a name that is empty or holds '/' (git never writes one)"
        if mode is None:
            return path, f"a malformed mode {raw_mode.decode('ascii', 'replace')!r}"
        if name in seen:
            return path, "a name listed twice in one tree"
        seen.add(name)
        if have.get(name) == (mode, sha):
            continue  # here already, at this path: nothing new is written
        problem = check(path, mode)
        if problem is not None:
            return path, problem
        if mode == TREE_MODE:
            mine = have.get(name)
            found = first_bad_path(git, sha, check,
                               mine[1] if mine and mine[0] == TREE_MODE else None, path + "/")
            if found is not None:
                return found
            continue
        try:
            kind = git.read_raw(sha)[0]
        except (KeyError, GitError):  # RepositoryDamaged: missing or unreadable
            return path, f"a missing object {sha}"
        if kind != b"blob":
            return path, f"a {kind.decode('ascii', 'replace')} object where a file belongs"
    return None


__all__ = ["first_bad_path"]
