"""A push to a remote on this machine (a path, a USB disk, file://) by the git CLI, when it
is on PATH: ``git push`` finds and packs the new objects in C, where dulwich's push walks
and packs every one of them in Python (37 s for 10,000 commits, against about 2 s).

The branch moves only from the commit the caller expects (``--force-with-lease``: a push
that landed meanwhile makes this one refused as stale, and the caller fetches again). The
remote runs ``git receive-pack`` as for any push: its hooks and ``receive.*`` settings
apply. This store's own hooks do not run (``--no-verify``), and no ref of this store is
touched (the remote is named by its path, so git keeps no remote-tracking ref for it).
Anything else git cannot do (an old git, a lock held on the remote, not a repository)
returns None and the caller pushes with dulwich, which reports the problem in filemem's
words. Network remotes always go through dulwich: the git CLI could ask for credentials.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final, NamedTuple

from filemem.files import gitcli

_BUSY: Final = ("lock", "failed to update ref")  # a remote's refusal that is a held lock


class Pushed(NamedTuple):
    """What a push did: ``moved`` (the remote's branch was not at the expected commit,
    nothing pushed), or the remote's ``refused`` reason (its hook or a receive rule, with
    what the hook printed), or neither (the branch moved to the new commit)."""

    moved: bool
    refused: str | None


def push_local(root: str, path: str, ref: str, expected: str | None, new: str,
               progress: Callable[[bytes], None] | None = None) -> Pushed | None:
    """Move ``ref`` of the repository at ``path`` from ``expected`` (None: absent) to
    ``new``, a commit of the store at ``root``; None if the git CLI is missing or did not
    do it. ``progress``: given git's progress lines as it pushes."""
    exe = gitcli.which()
    if exe is None or not os.path.isabs(path):
        return None  # (a relative path: dulwich reads it from the current folder, git would not)
    done = gitcli.transfer(
        [exe, "-C", root, "push", "--porcelain", "--no-verify", "--no-follow-tags",
         "--no-recurse-submodules", *(["--progress"] if progress else []),
         f"--force-with-lease={ref}:{expected or ''}", "--", path, f"{new}:{ref}"],
        gitcli.env(GIT_TERMINAL_PROMPT="0"), progress)
    stdout = done.stdout.decode("utf-8", "replace")
    stderr = done.stderr.decode("utf-8", "replace")
    status = _status(stdout, ref)
    if status is None:
        return None
    flag, summary = status
    if done.returncode == 0 and flag in " *+":
        return Pushed(moved=False, refused=None)
    if summary.startswith("[rejected]"):  # the lease: the branch is elsewhere now
        return Pushed(moved=True, refused=None)
    if summary.startswith("[remote rejected]"):
        reason = summary.removeprefix("[remote rejected]").strip().strip("()")
        if not any(word in reason for word in _BUSY):
            said = [line[len("remote:"):].strip() for line in stderr.splitlines()
                    if line.startswith("remote:") and line[len("remote:"):].strip()]
            return Pushed(moved=False, refused=reason + (f" (it said: {'; '.join(said)})"
                                                         if said else ""))
    return None


def _status(out: str, ref: str) -> tuple[str, str] | None:
    """The flag and summary of ``ref``'s line in ``git push --porcelain``'s output
    (``<flag>\\t<from>:<to>\\t<summary>``)."""
    for line in out.splitlines():
        parts = line.split("\t")
        if len(parts) >= 3 and parts[1].endswith(f":{ref}") and parts[0]:
            return parts[0], parts[2]
    return None
