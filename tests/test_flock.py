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
from tests.conftest import open_files

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


def fds_on(path: str) -> set[str]:
    """This process's open files that name ``path``. Only those: other tests' files, closed
    by the garbage collector at any moment, must not count."""
    real = os.path.realpath(path)
    return {fd for fd, link in open_files().items() if link.removesuffix(" (deleted)") == real}


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_lock_another_process_holds_is_busy_then_taken_once_released(tmp_path: Path) -> None:
    path = str(tmp_path / "lock")
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, path], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        # each traceback is kept: its frames would keep a file left open from being collected
        with pytest.raises(flock.Busy) as once:
            flock.acquire(path, FLAGS, 0.0, 0.01)  # one try
        with pytest.raises(flock.Busy) as waited:
            flock.acquire(path, FLAGS, 0.1, 0.01)  # tried until the deadline
        assert once.tb is not None and waited.tb is not None
        assert fds_on(path) == set()  # the file opened for each try was closed again
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


# --- a lock kept open between holds (flock.Kept: the store lock, the audit counter)

posix_only = pytest.mark.skipif(flock.fcntl is None or not os.path.isdir("/proc/self/fd"),
                                reason="the kept file is POSIX's (Windows opens it per hold)")


def holder(path: str) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, path], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


def let_go(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)
    assert proc.stdout is not None
    proc.stdout.close()


def taken_elsewhere(path: str) -> bool:
    """Whether another process finds the lock at ``path`` taken."""
    probe = ("import fcntl, os, sys\n"
             "fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)\n"
             "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
             "except BlockingIOError:\n    print('taken')\nelse:\n    print('free')\n")
    out = subprocess.run([sys.executable, "-c", probe, path], capture_output=True, text=True,
                         check=True).stdout
    return out.strip() == "taken"


@posix_only
def test_a_kept_lock_stays_open_between_holds_and_excludes_other_processes(
        tmp_path: Path) -> None:
    path = str(tmp_path / "lock")
    kept = flock.Kept(path, FLAGS)
    fd = kept.hold(0.0, 0.01)
    assert fds_on(path) == {str(fd)}
    assert taken_elsewhere(path)
    kept.release()
    assert not taken_elsewhere(path)  # let go, though its file stays open
    assert os.fstat(fd).st_ino == os.stat(path).st_ino
    assert kept.hold(0.0, 0.01) == fd  # the same open file: no open, no close
    kept.release()
    proc = holder(path)
    try:
        with pytest.raises(flock.Busy):
            kept.hold(0.1, 0.01)  # another process holds it: waited for, then Busy
    finally:
        let_go(proc)
    kept.hold(5.0, 0.01)
    kept.release()
    kept.close()
    assert fds_on(path) == set()


@posix_only
@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_a_kept_lock_whose_file_went_is_taken_on_the_file_now_at_its_path(
        tmp_path: Path, how: str) -> None:
    path = str(tmp_path / "lock")
    kept = flock.Kept(path, FLAGS)
    kept.hold(0.0, 0.01)
    kept.release()
    # by hand, between two holds: the kept file would be locked alone
    if how == "deleted":
        os.unlink(path)
    else:
        other = tmp_path / "new"
        other.write_bytes(b"")
        os.replace(other, path)
    proc = holder(path)  # another process locks the file now at the path
    try:
        with pytest.raises(flock.Busy):
            kept.hold(0.1, 0.01)  # excluded by it, where the kept file would be free
    finally:
        let_go(proc)
    kept.hold(0.0, 0.01)
    assert taken_elsewhere(path)  # and this one is taken on the file at the path
    kept.release()
    kept.close()


@posix_only
def test_threads_sharing_a_kept_lock_take_turns(tmp_path: Path) -> None:
    import threading

    kept = flock.Kept(str(tmp_path / "lock"), FLAGS)
    kept.hold(0.0, 0.01)
    outcome: list[str] = []

    def other() -> None:
        try:
            kept.hold(0.0, 0.01)  # the same open file's lock would let it in
        except flock.Busy:
            outcome.append("busy")
        else:
            outcome.append("held")
            kept.release()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert outcome == ["busy"]
    kept.release()
    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert outcome == ["busy", "held"]
    kept.close()


@posix_only
@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.parametrize("parent_holds", [True, False])
def test_a_forked_child_does_not_share_its_parents_kept_lock(tmp_path: Path,
                                                             parent_holds: bool) -> None:
    path = str(tmp_path / "lock")
    kept = flock.Kept(path, FLAGS)
    kept.hold(0.0, 0.01)  # its file is open from here on
    if not parent_holds:
        kept.release()
    to_parent, from_child = os.pipe()
    to_child, from_parent = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's open file would let either in beside the other
        try:
            kept.hold(0.0, 0.01)
            os.write(from_child, b"held")
            os.read(to_child, 1)  # held until the parent has tried
            kept.release()
        except flock.Busy:
            os.write(from_child, b"busy")
        finally:
            os._exit(0)
    said = os.read(to_parent, 10)
    try:
        if parent_holds:
            assert said == b"busy"
        else:
            assert said == b"held"
            with pytest.raises(flock.Busy):
                kept.hold(0.0, 0.01)
    finally:
        os.write(from_parent, b"x")
        os.waitpid(pid, 0)
        for fd in (to_parent, from_child, to_child, from_parent):
            os.close(fd)
    if parent_holds:
        assert taken_elsewhere(path)  # the child's exit left the parent's lock held
        kept.release()
    kept.close()


@posix_only
def test_a_kept_lock_dropped_without_closing_closes_its_file(tmp_path: Path) -> None:
    import gc

    path = str(tmp_path / "lock")
    kept = flock.Kept(path, FLAGS)
    kept.hold(0.0, 0.01)
    kept.release()
    assert len(fds_on(path)) == 1
    del kept
    gc.collect()
    assert fds_on(path) == set()


@posix_only
def test_closing_a_kept_lock_another_thread_holds_leaves_its_file_open(tmp_path: Path) -> None:
    import threading

    path = tmp_path / "counter"
    kept = flock.Kept(str(path), os.O_RDWR | os.O_CREAT)
    held, closed, done = threading.Event(), threading.Event(), threading.Event()

    def holder() -> None:
        fd = kept.hold(0.0, 0.01)
        held.set()
        closed.wait(10)
        os.pwrite(fd, b"42\n", 0)  # its file still open, though close() was called
        kept.release()
        done.set()

    t = threading.Thread(target=holder)
    t.start()
    assert held.wait(10)
    kept.close()
    closed.set()
    t.join()
    assert done.is_set() and path.read_bytes() == b"42\n"
    kept.close()  # now it is
    assert kept._fd is None
