"""The git layer's errors: the repository is not in a state filemem can work with.

:class:`RepositoryDamaged` is also the protocol's STORE_CORRUPT, so every surface reports a
missing or unreadable object, or a HEAD that is not on the store's branch (:class:`OffBranch`:
nothing damaged, a person's ``git switch`` or ``git checkout``), as it reports an invalid
entry file.
"""

from __future__ import annotations

import os
from typing import Any

from filemem import errors


class GitError(RuntimeError):
    """The repository is not in a state filemem can work with (the message says why)."""


class RepositoryDamaged(GitError, errors.ProtocolError):
    """STORE_CORRUPT for the repository itself: an object that is missing or unreadable, a
    detached HEAD. The message names the object (and the file or folder it holds, when
    known) and the way out; ``details``: ``path``, ``object``."""

    def __init__(self, root: str, problem: str, fix: str, *, sha: str | None = None,
                 path: str | None = None) -> None:
        self.root, self.problem, self.fix, self.sha, self.where = root, problem, fix, sha, path
        details: dict[str, Any] = {"path": os.path.join(root, *path.split("/")) if path
                                   else root}
        if sha is not None:
            details["object"] = sha
        errors.ProtocolError.__init__(
            self, errors.STORE_CORRUPT,
            f"the store's git repository at {root} is damaged: {problem}; nothing was "
            f"changed; {fix}", details)

    def at(self, path: str, label: str | None = None) -> RepositoryDamaged:
        """The same damage, saying which file or folder of the store the object holds
        (``""``: the root folder), or what it is (``label``)."""
        if self.where is not None or self.sha is None:
            return self
        kind, _, rest = self.problem.partition(" ")  # "<kind> <sha> is missing ..."
        sha, _, rest = rest.partition(" ")
        if label is None:
            label = "the store's root folder" if not path else \
                f"the folder {path}/" if kind == "tree" else f"the file {path}"
        return RepositoryDamaged(self.root, f"{kind} {sha} ({label}) {rest}", self.fix,
                                 sha=self.sha, path=path)


class OffBranch(RepositoryDamaged):
    """STORE_CORRUPT for a store whose HEAD is not on its branch: on another branch (``git
    switch -c``), or detached outside a rebase or bisect (``git checkout <commit>``).
    Nothing is damaged, but filemem reads, writes and syncs that one branch only, so
    everything is refused until HEAD is back on it; the message says where HEAD is and the
    way back. ``details``: ``path``, and ``branch`` (the other branch) or ``object`` (the
    commit a detached HEAD is at)."""

    def __init__(self, root: str, main: str, *, branch: str | None = None,
                 sha: str | None = None) -> None:
        import shlex  # the error path only

        from filemem import shown

        self.root, self.sha, self.where, self.branch = root, sha, "", branch
        git = f"git -C {shlex.quote(root)}"
        if branch is not None:
            name = shown.visible(branch)
            self.problem = f"HEAD is on the branch {name}"
            keep = (f"if {name} holds commits you want to keep, bring them onto {main} with "
                    f"`{git} merge {shlex.quote(name)}` after that (the next `filemem sync` "
                    f"then shares them)")
        else:
            self.problem = f"HEAD is detached at commit {sha}"
            keep = (f"if you committed while detached, keep those commits with "
                    f"`{git} merge {sha}` after that")
        self.fix = f"go back with `{git} switch {main}`; {keep}"
        details: dict[str, Any] = {"path": root}
        if branch is not None:
            details["branch"] = branch
        if sha is not None:
            details["object"] = sha
        errors.ProtocolError.__init__(
            self, errors.STORE_CORRUPT,
            f"the store {root} is not on its git branch {main} ({self.problem}): filemem "
            f"reads, writes and syncs {main} only, so nothing was read or changed; "
            f"{self.fix}", details)


class RefLocked(GitError):
    """The branch's ``<ref>.lock`` exists: a git command is moving it (``git commit``,
    ``git gc`` packing refs), or one was killed and left the file behind."""

    def __init__(self, lock_path: str) -> None:
        super().__init__(f"{lock_path} exists")
        self.lock_path = lock_path


def restore_hint(root: str) -> str:
    return (f"`git -C {root} fsck` shows the damage; restore the store from a clone or its "
            "remote (`filemem clone <url> <folder>`, then use that folder), or copy the "
            "missing object back from another clone of it")
