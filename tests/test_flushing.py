"""filemem.files.flushing: a write's flush in a helper thread while its pack is written."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import pytest

from filemem.files import flushing


def test_the_work_runs_while_the_flush_is_underway(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The flush waits for an event only the work sets: one after the other, it would
    time out (and the flush would report it)."""
    worked = threading.Event()
    synced: list[int] = []

    def sync(fd: int) -> None:
        if not worked.wait(timeout=30):
            raise TimeoutError("the work did not run during the flush")
        synced.append(fd)

    monkeypatch.setattr(flushing, "_sync", sync)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        flushing.flush_while(fd, worked.set)
    finally:
        os.close(fd)
    assert synced == [fd]


def test_the_flush_is_done_when_it_returns(tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    release = threading.Event()
    done: list[bool] = []

    def sync(fd: int) -> None:
        release.wait(timeout=30)
        done.append(True)

    monkeypatch.setattr(flushing, "_sync", sync)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        flushing.flush_while(fd, lambda: (release.set(), done.append(False)))
    finally:
        os.close(fd)
    assert done == [False, True]  # the work's mark, then the flush's, before the return


def test_a_failed_flush_is_raised(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    os.close(fd)  # a closed descriptor: EBADF from the helper thread
    ran: list[bool] = []
    with pytest.raises(OSError) as caught:
        flushing.flush_while(fd, lambda: ran.append(True))
    assert ran == [True] and caught.value.errno == 9


def test_the_works_error_is_raised_after_the_flush(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    synced: list[int] = []
    monkeypatch.setattr(flushing, "_sync", synced.append)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)

    def work() -> None:
        raise ValueError("the pack could not be written")

    try:
        with pytest.raises(ValueError, match="the pack"):
            flushing.flush_while(fd, work)
    finally:
        os.close(fd)
    assert synced == [fd]  # the descriptor was not closed under the helper


def test_when_both_fail_the_works_error_is_raised(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    os.close(fd)  # the flush fails too (EBADF)

    def work() -> None:
        raise ValueError("the pack could not be written")

    with pytest.raises(ValueError, match="the pack") as caught:
        flushing.flush_while(fd, work)
    assert caught.value.__context__ is None  # not buried under the flush's error


def test_a_forked_child_flushes_with_a_helper_of_its_own(tmp_path: Path) -> None:
    path = tmp_path / "f"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    flushing.flush_while(fd, lambda: None)  # the parent's helper runs
    pid = os.fork()
    if pid == 0:  # the parent's helper thread is not in the child
        code = 1
        signal.signal(signal.SIGALRM, signal.SIG_DFL)  # a child waiting on a helper it
        signal.alarm(30)                                # lacks is killed, not left hanging
        try:
            os.write(fd, b"child")
            flushing.flush_while(fd, lambda: None)
            code = 0
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    os.close(fd)
    assert os.waitstatus_to_exitcode(status) == 0
    assert path.read_bytes() == b"child"


def test_where_no_thread_can_start_the_flush_is_done_in_line(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """At interpreter shutdown a thread cannot be started (an exit handler may still
    write): the helper's work is done by the caller, in order, and nothing is lost."""
    from filemem.files import helper

    def refused(self: threading.Thread) -> None:
        raise RuntimeError("can't create new thread at interpreter shutdown")

    done: list[str] = []
    late = helper.Helper("late", lambda item: done.append(item))
    monkeypatch.setattr(threading.Thread, "start", refused)
    late.put("first")
    late.put("second")
    assert done == ["first", "second"] and not late.started

    synced: list[int] = []
    monkeypatch.setattr(helper, "_tasks", helper.Helper("late-tasks", helper.Task.run))
    monkeypatch.setattr(flushing, "_sync", synced.append)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    try:
        flushing.flush_while(fd, lambda: synced.append(-1))
    finally:
        os.close(fd)
    assert synced == [fd, -1]  # flushed first, then the work: not overlapped, still done


def test_a_task_beside_runs_on_the_helper_thread_in_order_and_hands_back_its_value() -> None:
    from filemem.files import helper

    release = threading.Event()
    order: list[str] = []
    first = helper.beside(lambda: (release.wait(timeout=30), order.append("first")))
    second = helper.beside(lambda: (order.append("second"), threading.current_thread().name))
    order.append("caller")  # both are waiting behind the event: the caller went on
    release.set()
    assert second.result()[1] == "filemem-helper"
    assert order == ["caller", "first", "second"]
    assert first.wait() is None and first.wait() is None  # waited for twice: still done


def test_a_tasks_error_is_handed_to_its_waiter() -> None:
    from filemem.files import helper

    def fail() -> None:
        raise OSError(28, "No space left on device")

    task = helper.beside(fail)
    error = task.wait()
    assert isinstance(error, OSError) and error.errno == 28
    with pytest.raises(OSError, match="No space"):
        task.result()
    assert helper.beside(lambda: 42).result() == 42  # the thread goes on after an error
