"""A git command stopped half way in the store's repository: the one place that tells.

``git merge`` and ``git pull`` that hit a conflict (or ran with ``--no-commit``), a rebase
(either backend), ``git am``, a cherry-pick or revert, a bisect: each leaves a mark in
``.git`` until the person finishes or aborts it, and meanwhile the branch, the index and the
working tree are git's work in progress. A commit made on top (an agent's write, an adopt,
a sync) would bury that work: the merge would lose its second parent, a rebase would carry
the commit into the rewritten branch or drop it. So :func:`unfinished` is asked before any
write is approved (the store's pre-check: one stat while ``.git`` is as this process's last
commit left it, :func:`left_quiet`) and again under the branch's lock at the
compare-and-swap (:meth:`GitRepo.cas_head`), and :func:`refusal` is the error, naming the
operation, its conflicted files and the ways out. Reads go on: they serve the branch as
last committed (during a rebase or bisect, whose HEAD is detached, the branch it will move).
"""

from __future__ import annotations

import os
from typing import Final, NamedTuple

from filemem import errors
from filemem.files import atomic
from filemem.files.gitindex import GitIndex, IndexUnsupported
from filemem.shown import counted

_LABELS: Final = {
    "merge": "git merge",
    "rebase": "git rebase",
    "am": "git am",
    "cherry-pick": "git cherry-pick",
    "revert": "git revert",
    "bisect": "git bisect",
}
_WAYS_OUT: Final = {
    "merge": "finish it: fix the conflicted files (keep the text you want and delete the "
             "<<<<<<< ======= >>>>>>> lines), `git add` them and `git commit`; or undo it: "
             "`git merge --abort`. If it came from `git pull` of another machine's store, "
             "`git merge --abort` and then `filemem sync` merges the two entry by entry, "
             "with no conflict markers",
    # undoing leads: finishing rewrites filemem's audited commits, which verify then
    # reports for good, while a sync after the abort merges and keeps both audit trails
    "rebase": "undo it: `git rebase --abort`, then, if it came from `git pull --rebase`, "
              "`filemem sync`, which merges the other machine's store entry by entry and "
              "keeps both sides' audit trail (an entry both changed keeps both texts). "
              "Finishing it instead (fix the conflicted files, `git add` them and `git "
              "rebase --continue`) rewrites filemem's commits, and `filemem verify` reports "
              "each rewritten commit from then on",
    "am": "finish it: fix the conflicted files, `git add` them and `git am --continue` (or "
          "`git am --skip` this patch); or undo it: `git am --abort`",
    "cherry-pick": "finish it: fix the conflicted files, `git add` them and `git "
                   "cherry-pick --continue`; or undo it: `git cherry-pick --abort`",
    "revert": "finish it: fix the conflicted files, `git add` them and `git revert "
              "--continue`; or undo it: `git revert --abort`",
    "bisect": "end it with `git bisect reset`, which puts the branch back",
}
CONFLICT_OPEN: Final = b"<<<<<<< "
CONFLICT_CLOSE: Final = b">>>>>>> "


class Unfinished(NamedTuple):
    """A git operation waiting in ``.git``: ``kind`` (merge, rebase, am, cherry-pick,
    revert, bisect), ``marker`` (what shows it, e.g. ``.git/MERGE_HEAD``) and ``branch``,
    the ref a rebase or bisect will move when it ends (None for the others, which work on
    the branch HEAD points at)."""

    kind: str
    marker: str
    branch: str | None = None

    @property
    def label(self) -> str:
        return _LABELS[self.kind]

    @property
    def ways_out(self) -> str:
        return _WAYS_OUT[self.kind]


_MARKERS: Final = frozenset({"rebase-apply", "rebase-merge", "MERGE_HEAD", "CHERRY_PICK_HEAD",
                             "REVERT_HEAD", "sequencer", "BISECT_START"})


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(4096).decode("utf-8", "replace").strip()
    except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
        return None


def unfinished(git_dir: str) -> Unfinished | None:
    """The git operation that stopped half way in ``git_dir``, or None. One listing of
    ``.git`` says whether any of its markers is there (asked twice a write); then a few
    ``stat`` calls, in git's own order (``git status``)."""
    try:
        names = set(os.listdir(git_dir))
    except OSError:
        names = None
    if names is not None and names.isdisjoint(_MARKERS):
        return None
    apply = os.path.join(git_dir, "rebase-apply")
    if os.path.isdir(apply):
        if os.path.exists(os.path.join(apply, "applying")):
            return Unfinished("am", ".git/rebase-apply")
        return Unfinished("rebase", ".git/rebase-apply",
                          _read(os.path.join(apply, "head-name")))
    merge = os.path.join(git_dir, "rebase-merge")
    if os.path.isdir(merge):
        return Unfinished("rebase", ".git/rebase-merge", _read(os.path.join(merge, "head-name")))
    for name, kind in (("MERGE_HEAD", "merge"), ("CHERRY_PICK_HEAD", "cherry-pick"),
                       ("REVERT_HEAD", "revert")):
        if os.path.exists(os.path.join(git_dir, name)):
            return Unfinished(kind, f".git/{name}")
    todo = _read(os.path.join(git_dir, "sequencer", "todo"))
    if todo is not None:  # a cherry-pick or revert of several commits, between two of them
        first = todo.split(None, 1)[0] if todo else "pick"
        return Unfinished("revert" if first in ("revert", "r") else "cherry-pick",
                          ".git/sequencer")
    start = _read(os.path.join(git_dir, "BISECT_START"))
    if start is not None:
        branch = start if start.startswith("refs/") else f"refs/heads/{start}"
        return Unfinished("bisect", ".git/BISECT_START", branch)
    return None


def conflicts(git_dir: str) -> list[str]:
    """The files git left unmerged in the index (store-relative), sorted."""
    try:
        return GitIndex.load(git_dir).unmerged()
    except (IndexUnsupported, OSError, ValueError, IndexError):
        return []


# ``.git`` as a commit of this process left it (folder, modification and change times), a
# commit having found none of the marks under its branch's lock: while it is so, no name
# was added to it or taken from it since, so the check before the next write is one stat
_quiet: Final[dict[str, tuple[int, int, int, int]]] = {}


def _identity(git_dir: str) -> tuple[int, int, int, int] | None:
    try:
        return atomic.identity(os.stat(git_dir))
    except OSError:
        return None


def left_quiet(git_dir: str) -> None:
    """After a commit (whose compare-and-swap asked :func:`unfinished` under the branch's
    lock): remember ``.git`` as it is now. A mark made within the same tick of the file
    system's clock may go unseen before the next write; its compare-and-swap asks again."""
    identity = _identity(git_dir)
    if identity is not None:
        _quiet[git_dir] = identity


def refuse_if_unfinished(root: str) -> None:
    """Raise :func:`refusal` if a git operation is unfinished in the store at ``root``."""
    git_dir = os.path.join(root, ".git")
    if git_dir in _quiet and _quiet[git_dir] == _identity(git_dir):
        return
    _quiet.pop(git_dir, None)
    op = unfinished(git_dir)
    if op is not None:
        raise refusal(root, op, conflicts(git_dir))


def has_conflict_markers(data: bytes) -> bool:
    """Whether a file holds the lines git writes around a conflict (``<<<<<<< ours`` ...
    ``>>>>>>> theirs``), each at the start of a line."""
    lines = data.split(b"\n")
    return any(line.startswith(CONFLICT_OPEN) for line in lines) and \
        any(line.startswith(CONFLICT_CLOSE) for line in lines)


def refusal(root: str, op: Unfinished, conflicts: list[str]) -> errors.GitOperationInProgress:
    """The error for a write refused because ``op`` is unfinished in the store at ``root``;
    ``conflicts``: the files git left unmerged (store-relative)."""
    listed = ""
    if conflicts:
        names = ", ".join(conflicts[:5]) + (f" and {len(conflicts) - 5} more"
                                            if len(conflicts) > 5 else "")
        listed = f"; conflicts in {counted(len(conflicts), 'file')}: {names}"
    return errors.GitOperationInProgress(
        f"a {op.label} is in progress in the store {root} ({op.marker}{listed}), and filemem "
        f"does not commit on top of an unfinished git operation; nothing was written. "
        f"{op.ways_out[0].upper()}{op.ways_out[1:]}; then run the command again",
        {"path": root, "operation": op.kind, "marker": op.marker, "conflicts": conflicts})


__all__ = ["Unfinished", "conflicts", "has_conflict_markers", "left_quiet", "refusal",
           "refuse_if_unfinished", "unfinished"]
