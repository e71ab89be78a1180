"""Killing a real filemem process at each of its stop points (filemem/files/stoppoint.py).

:func:`run_killed` starts the command with ``$FILEMEM_TEST_STOP_AT=N``; the process stops
itself (SIGSTOP) just before its N-th change, the test sees that with
``waitpid(WUNTRACED)`` (no clock, no polling), and sends it a real SIGKILL. A run that
reaches no N-th point ends normally: :func:`every_stop` counts the points that way.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Run:
    killed: bool  # stopped at the point, then SIGKILLed
    returncode: int
    point: str  # "N: what" of the point it was killed at ('' if it ran to the end)
    stderr: str


def run_killed(argv: list[str], n: int, *, env: dict[str, str], cwd: Path) -> Run:
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, cwd=cwd, env={**env, "FILEMEM_TEST_STOP_AT": str(n)},
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                stderr=err)
        _, status = os.waitpid(proc.pid, os.WUNTRACED)
        killed = os.WIFSTOPPED(status)
        if killed:
            os.kill(proc.pid, signal.SIGKILL)
            _, status = os.waitpid(proc.pid, 0)
            assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        text = err.read().decode("utf-8", "replace")
    point = ""
    for line in text.splitlines():
        if line.startswith("filemem: stop point "):
            point = line.removeprefix("filemem: stop point ")
    assert killed == bool(point), text
    return Run(killed, proc.returncode, point, text)


def every_stop(argv: list[str], *, env: dict[str, str], cwd: Path,
               limit: int = 20) -> Iterator[Run]:
    """Each run killed at point 1, 2, ... (the caller puts the files back between runs),
    then the run that reached no further point and ended by itself."""
    for n in range(1, limit + 1):
        run = run_killed(argv, n, env=env, cwd=cwd)
        yield run
        if not run.killed:
            return
    raise AssertionError(f"more than {limit} stop points in {argv}")
