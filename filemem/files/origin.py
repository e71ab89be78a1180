"""Which commit brought a file: for an error about a file at HEAD, the commit a person can
undo (``git revert``) or look at (``git show``).

Walked only when such an error is reported, never on the way of a read: from HEAD back
through the parents while one of them holds the same content at that path, as far as
history goes back since the file got it (usually a few commits)."""

from __future__ import annotations

from filemem.files.gitrepo import CommitInfo, GitError, GitRepo


def introduced(git: GitRepo, head: str, path: str) -> CommitInfo | None:
    """The commit that gave ``path`` the content it has at ``head`` (the one that deleted it,
    if it is absent at ``head``). Through a merge, the side that already had it is
    followed; a merge that made the content itself is the answer. None when history does
    not tell: a missing or unreadable object (a shallow clone's edge), or a file that was
    never there."""
    try:
        info = git.commit(head)
        want = git.blob_at(info.tree, path)
        while True:
            for parent in info.parents:
                before = git.commit(parent)
                if before.tree == info.tree or git.blob_at(before.tree, path) == want:
                    info = before
                    break
            else:
                return None if want is None and not info.parents else info
    except (GitError, KeyError, ValueError):
        return None


__all__ = ["introduced"]
