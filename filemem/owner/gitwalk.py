"""Walks of a long history by the git CLI, when it is on PATH: ``git rev-list`` walks
10,000 commits in milliseconds, where dulwich's walker reads every commit in Python, trying
each pack in turn (a store keeps a few packs: each write adds a small one).

Each function returns None when the git CLI is missing or does not answer, and the caller
walks with dulwich as before; the answers are the same commits either way.
"""

from __future__ import annotations

import shutil
import subprocess

from filemem.files.gitrepo import GitRepo


def _rev_list(git: GitRepo, include: str, exclude: str | None, *options: str) -> str | None:
    exe = shutil.which("git")
    if exe is None:
        return None
    done = subprocess.run(
        [exe, "-C", git.root, "rev-list", *options, include,
         *([f"^{exclude}"] if exclude else []), "--"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL)
    return done.stdout if done.returncode == 0 else None


def count(git: GitRepo, include: str, exclude: str | None) -> int | None:
    """How many commits ``include`` reaches that ``exclude`` does not."""
    out = _rev_list(git, include, exclude, "--count")
    try:
        return int(out) if out is not None else None
    except ValueError:
        return None


def grep(git: GitRepo, include: str, exclude: str | None, line: str) -> list[str] | None:
    """The commits ``include`` reaches and ``exclude`` does not whose message has ``line``
    as a whole line (a candidate list: the caller reads each message to be sure)."""
    out = _rev_list(git, include, exclude, "--fixed-strings", f"--grep={line}")
    if out is None:
        return None
    shas = out.split()
    return shas if all(len(s) == 40 for s in shas) else None


def merge_bases(git: GitRepo, ours: str, theirs: str) -> list[str] | None:
    """``git merge-base --all``: the best common ancestors ([] for unrelated histories)."""
    exe = shutil.which("git")
    if exe is None:
        return None
    done = subprocess.run([exe, "-C", git.root, "merge-base", "--all", ours, theirs],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode == 1 and not done.stdout.strip() and not done.stderr.strip():
        return []  # no common ancestor
    shas = done.stdout.split()
    if done.returncode != 0 or not all(len(s) == 40 for s in shas):
        return None
    return shas
