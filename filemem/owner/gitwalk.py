"""Walks of a long history by the git CLI, when it is on PATH: ``git rev-list`` walks
10,000 commits in milliseconds, where dulwich's walker reads every commit in Python, trying
each pack in turn (a store keeps a few packs: each write adds a small one).

Each function returns None when the git CLI is missing or does not answer, and the caller
walks with dulwich as before; the answers are the same commits either way. The same for
the files each commit changed (``git diff-tree``), which ``filemem verify`` needs for
every commit.
"""

from __future__ import annotations

import itertools
import subprocess
import threading
from collections.abc import Callable, Generator, Iterator, Sequence
from typing import IO, Final

from filemem.files import gitcli
from filemem.files.gitrepo import CommitInfo, GitRepo


def _rev_list(git: GitRepo, include: str, exclude: str | None, *options: str) -> str | None:
    exe = gitcli.which()
    if exe is None:
        return None
    done = subprocess.run(
        [exe, "-C", git.root, "rev-list", *options, include,
         *([f"^{exclude}"] if exclude else []), "--"],
        capture_output=True, text=True, stdin=subprocess.DEVNULL, env=gitcli.env())
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
    exe = gitcli.which()
    if exe is None:
        return None
    done = subprocess.run([exe, "-C", git.root, "merge-base", "--all", ours, theirs],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          env=gitcli.env())
    if done.returncode == 1 and not done.stdout.strip() and not done.stderr.strip():
        return []  # no common ancestor
    shas = done.stdout.split()
    if done.returncode != 0 or not all(len(s) == 40 for s in shas):
        return None
    return shas


Change = tuple[str, str | None, str | None]  # path, old blob, new blob (None: absent)
_ABSENT: Final = b"0" * 40


def _change_order(change: Change) -> tuple[tuple[str, int], ...]:
    """GitRepo.diff's order: names sorted within a folder, a folder's files before a file
    of the same name (git's own order sorts a folder as ``name/``)."""
    *folders, name = change[0].split("/")
    return (*((f, 0) for f in folders), (name, 1))


def first_parent_diffs(git: GitRepo, commits: Sequence[CommitInfo]
                       ) -> Generator[list[Change] | None, None, None]:
    """For each commit in turn, the files that differ from its first parent (everything,
    for a root commit), as :meth:`GitRepo.diff` gives them, from one ``git diff-tree
    --stdin``: a verify of 100,000 commits reads no tree in Python. None for a commit git
    did not answer for (no git CLI, a damaged object, git stopped): the caller diffs that
    one itself, and gets the error a damaged store deserves. A commit's answer is used
    only once git has gone on to the next (or ended well), never half of one."""
    exe = gitcli.which()
    if exe is None or not commits:
        yield from itertools.repeat(None, len(commits))
        return
    proc = subprocess.Popen(
        [exe, "-C", git.root, "diff-tree", "--stdin", "-r", "-z", "--root", "--always",
         "--no-renames"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, env=gitcli.env())
    assert proc.stdin is not None and proc.stdout is not None
    stdin, stdout = proc.stdin, proc.stdout

    def feed() -> None:  # a thread: git answers while it reads, so both must go on at once
        try:
            for info in commits:
                stdin.write(f"{info.sha} {info.parents[0]}\n".encode() if info.parents
                            else f"{info.sha}\n".encode())
            stdin.close()
        except OSError:  # git stopped early: what it answered is used, the rest diffed
            pass

    writer = threading.Thread(target=feed, name="filemem-diff-tree", daemon=True)
    writer.start()
    given = 0
    try:
        for sha, changes in _whole(_answers(stdout), lambda: proc.wait() == 0):
            if given >= len(commits) or sha != commits[given].sha:
                break
            yield sorted(changes, key=_change_order)
            given += 1
    except ValueError:  # output this parser does not know: the rest is diffed in Python
        pass
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        stdout.close()
        writer.join()
    yield from itertools.repeat(None, len(commits) - given)


def _whole(answers: Iterator[tuple[str, list[Change]]], ended_well: Callable[[], bool]
           ) -> Iterator[tuple[str, list[Change]]]:
    """The answers known to be whole: each once the next has begun, the last once git
    has ended well."""
    pending = None
    for answer in answers:
        if pending is not None:
            yield pending
        pending = answer
    if pending is not None and ended_well():
        yield pending


def _answers(stdout: IO[bytes]) -> Iterator[tuple[str, list[Change]]]:
    """(commit sha, its changes) from ``git diff-tree --stdin -r -z --always`` output: a
    commit's sha, then ``:mode mode sha sha status`` and the path for each changed file,
    every field ended by NUL. A change of mode alone is no change of content."""
    tokens = _fields(stdout)
    current: tuple[str, list[Change]] | None = None
    for token in tokens:
        if token.startswith(b":"):
            meta = token[1:].split(b" ")
            path = next(tokens, None)
            if current is None or len(meta) != 5 or path is None:
                raise ValueError("unexpected diff-tree output")
            old, new = meta[2], meta[3]
            if old != new:
                current[1].append((path.decode("utf-8", "surrogateescape"),
                                   None if old == _ABSENT else old.decode("ascii"),
                                   None if new == _ABSENT else new.decode("ascii")))
        else:
            if len(token) != 40:
                raise ValueError("unexpected diff-tree output")
            if current is not None:
                yield current
            current = (token.decode("ascii"), [])
    if current is not None:
        yield current


def _fields(stdout: IO[bytes]) -> Iterator[bytes]:
    rest = b""
    while True:
        chunk = stdout.read(1 << 16)
        if not chunk:
            break
        parts = (rest + chunk).split(b"\0")
        rest = parts.pop()
        yield from parts
    if rest:
        raise ValueError("diff-tree output does not end with NUL")
