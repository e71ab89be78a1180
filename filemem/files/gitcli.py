"""The git command, pointed at a store and nothing else.

Git reads the repository to work on from its environment before ``-C``: a ``GIT_DIR``,
``GIT_WORK_TREE`` or ``GIT_INDEX_FILE`` left by whatever started filemem (a git hook of
another project, a shell that exported them) would send ``git -C <store> repack`` or
``fetch`` to that other repository. Every git command filemem runs gets an environment
without the variables git itself lists as the repository's own (``git rev-parse
--local-env-vars``), so ``-C <store>`` is the repository. :func:`transfer` runs a fetch or
push, handing its progress lines on to whoever watches.
"""

from __future__ import annotations

import os
import re
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Final

# `git rev-parse --local-env-vars` (git 2.39), and GIT_QUARANTINE_PATH (a push's objects)
LOCAL_ENV: Final = frozenset({
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_CONFIG", "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT", "GIT_OBJECT_DIRECTORY", "GIT_DIR", "GIT_WORK_TREE",
    "GIT_IMPLICIT_WORK_TREE", "GIT_GRAFT_FILE", "GIT_INDEX_FILE", "GIT_NO_REPLACE_OBJECTS",
    "GIT_REPLACE_REF_BASE", "GIT_PREFIX", "GIT_INTERNAL_SUPER_PREFIX", "GIT_SHALLOW_FILE",
    "GIT_COMMON_DIR", "GIT_QUARANTINE_PATH",
})


def which() -> str | None:
    """The git command on PATH, or None."""
    import shutil  # not for the commands that never run git (a cold `filemem query`)

    return shutil.which("git")


def env(**extra: str) -> dict[str, str]:
    """This process's environment without git's repository variables (and without
    ``GIT_CONFIG_KEY_<n>`` / ``GIT_CONFIG_VALUE_<n>``, which ``GIT_CONFIG_COUNT`` names),
    plus ``extra``."""
    out = {k: v for k, v in os.environ.items()
           if k not in LOCAL_ENV and not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))}
    out.update(extra)
    return out


# a line of git's own progress ("Writing objects:  45% (4500/10000)", "remote: Counting
# objects: 302, done."), not its hints or errors, which filemem says in its own words
_PROGRESS_LINE: Final = re.compile(rb"(?:remote: )?[A-Z][a-z]+(?: [a-z]+)*: +\d")
# seconds a transfer runs before its progress is shown, as git delays its own: a sync of a
# few commits prints only what it did
PROGRESS_AFTER = 1.0


def transfer(args: list[str], env: dict[str, str],
             progress: Callable[[bytes], None] | None = None
             ) -> subprocess.CompletedProcess[bytes]:
    """Run a git command that moves objects (fetch, push), its output captured. With
    ``progress`` (the caller's command asks git for ``--progress``), git's progress lines
    are handed to it as git writes them (a line redrawn ends in ``\\r``) once the command
    has run for :data:`PROGRESS_AFTER` seconds: a push or fetch of 100,000 commits takes
    seconds."""
    if progress is None:
        return subprocess.run(args, capture_output=True, stdin=subprocess.DEVNULL, env=env)
    with subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, env=env) as proc:
        stdout, stderr = proc.stdout, proc.stderr
        assert stdout is not None and stderr is not None
        out: list[bytes] = []
        reader = threading.Thread(target=lambda: out.append(stdout.read()), daemon=True)
        reader.start()  # (a full stdout pipe would stop git while stderr is read here)
        err, pending, shown_from = bytearray(), b"", time.monotonic() + PROGRESS_AFTER
        while chunk := os.read(stderr.fileno(), 65536):
            err += chunk
            *lines, pending = re.split(rb"(?<=[\r\n])", pending + chunk)
            if time.monotonic() < shown_from:
                continue
            for line in lines:
                if _PROGRESS_LINE.match(line):
                    progress(line)
        reader.join()
        code = proc.wait()
    return subprocess.CompletedProcess(args, code, b"".join(out), bytes(err))
