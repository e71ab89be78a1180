"""The one lock-file primitive (filemem.files.flock): another process's lock is waited for
and then reported as Busy, with nothing left open; a released lock is taken; a counter
opened read-write keeps its bytes; a link is never locked through."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from filemem.files import atomic, flock

FLAGS = flock.LOCK_FILE

# another process takes the lock as filemem (and portalocker on POSIX) does, says so, and
# keeps it until its stdin closes
HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
print("held", flush=True)
sys.stdin.read()
"""


def open_fds() -> set[str]:
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_lock_another_process_holds_is_busy_then_taken_once_released(tmp_path: Path) -> None:
    path = str(tmp_path / "lock")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        before = open_fds()
        with pytest.raises(flock.Busy):
            flock.acquire(path, FLAGS, 0.0, 0.01)  # one try
        with pytest.raises(flock.Busy):
            flock.acquire(path, FLAGS, 0.1, 0.01)  # tried until the deadline
        assert open_fds() == before  # the file opened for each try was closed again
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)
    f = flock.acquire(path, FLAGS, 5.0, 0.01)
    assert not f.closed
    # while it is held here, a second open file (another caller) cannot take it
    with pytest.raises(flock.Busy):
        flock.acquire(path, FLAGS, 0.0, 0.01)
    flock.release(f)
    assert f.closed
    flock.release(flock.acquire(path, FLAGS, 0.0, 0.01))  # released: taken again


def test_a_counter_file_opened_read_write_keeps_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "counter"
    path.write_bytes(b"00000000000000000042\n")
    f = flock.acquire(str(path), os.O_RDWR | os.O_CREAT, 0.0, 0.01)
    assert os.pread(f.fileno(), 21, 0) == b"00000000000000000042\n"
    os.pwrite(f.fileno(), b"00000000000000000043\n", 0)
    flock.release(f)
    assert path.read_bytes() == b"00000000000000000043\n"


def test_a_link_is_never_locked_through(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    (tmp_path / "lock").symlink_to(target)
    with pytest.raises(atomic.LinkRefused):
        flock.acquire(str(tmp_path / "lock"), FLAGS, 0.0, 0.01, atomic.open_nofollow)
    assert not target.exists()
