"""A fetch from a remote on this machine (a path, a USB disk, file://) by the git CLI, when
it is on PATH: ``git fetch`` negotiates and copies a pack in C, where dulwich's fetch walks
and re-packs every new object in Python (about 10x slower for 10,000 commits).

Only the remote's ``main`` is fetched, into the remote-tracking ref, with no tags, no
FETCH_HEAD, no hooks and no automatic gc: like dulwich's fetch, it only adds objects and
that one ref. Anything git refuses (a missing ``main``, an old git without an option, not
a repository) returns None and the caller fetches with dulwich, which reports the problem
in filemem's words. Network remotes always go through dulwich: the git CLI could ask for
credentials there.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable

from filemem.files import gitcli
from filemem.files.gitrepo import GitRepo


def fetch_local(git: GitRepo, path: str, branch_ref: str, tracking: str,
                progress: Callable[[bytes], None] | None = None) -> str | None:
    """Fetch ``branch_ref`` of the repository at ``path`` into ``tracking``; the commit
    fetched, or None if the git CLI is missing or did not do it. ``progress``: given git's
    progress lines as it fetches."""
    exe = gitcli.which()
    if exe is None or not os.path.isabs(path):
        return None  # (a relative path: dulwich reads it from the current folder, git would not)
    env = gitcli.env(GIT_TERMINAL_PROMPT="0")
    done = gitcli.transfer(
        [exe, "-C", git.root, "-c", "gc.auto=0", "-c", "core.hooksPath=/dev/null",
         "-c", "fetch.writeCommitGraph=false", "-c", "fetch.unpackLimit=1",  # a pack, always
         "fetch", "--progress" if progress else "--quiet", "--no-tags",
         "--no-write-fetch-head", "--no-recurse-submodules", "--", path,
         f"+{branch_ref}:{tracking}"], env, progress)
    if done.returncode != 0:
        return None
    head = subprocess.run([exe, "-C", git.root, "rev-parse", "--verify", "-q",
                           f"{tracking}^{{commit}}"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, env=env)
    sha = head.stdout.strip()
    return sha if head.returncode == 0 and len(sha) == 40 else None
