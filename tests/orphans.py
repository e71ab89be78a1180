"""Killing a real filemem process the way ``kill -9 PID`` does, then waiting for what it
left running.

A SIGKILL takes only the process it is sent to: a ``git fetch`` or ``git repack`` that
filemem had started goes on by itself and finishes a moment later. A check run meanwhile
races it: ``git fsck`` lists the objects first and reads the reflogs last, so a fetch that
lands in between shows as "invalid reflog entry <sha>" in a sound repository. So the
command is started in a session of its own (its process group, which every process it
starts joins), and after the kill the test waits until no live process is left in that
group: an event, not a clock (the deadline only stops a hang).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Any

DEADLINE = 120.0  # seconds: a git command left running is done in well under one


def start(cmd: list[str], **popen: Any) -> subprocess.Popen[Any]:
    """Start ``cmd`` as the leader of a new process group (see the module docstring)."""
    return subprocess.Popen(cmd, start_new_session=True, **popen)


def kill(child: subprocess.Popen[Any]) -> int:
    """SIGKILL ``child`` alone, reap it, then wait for every process it started to end.
    Returns its exit code (-9)."""
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    wait_for_group(child.pid)
    return child.returncode


def wait_for_group(pgid: int) -> None:
    """Wait until no live process (zombies aside: an orphan's parent may reap it late) is
    in process group ``pgid``."""
    deadline = time.monotonic() + DEADLINE
    while _alive_in(pgid):
        if time.monotonic() > deadline:
            raise AssertionError(f"processes of group {pgid} still running after "
                                 f"{DEADLINE:.0f} s")
        time.sleep(0.02)


def _alive_in(pgid: int) -> bool:
    if not os.path.isdir("/proc/self"):
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return False
        return True
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # gone meanwhile
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses
        fields = stat[stat.rindex(b")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != b"Z":
            return True
    return False
