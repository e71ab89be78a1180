"""A daemon thread of the process's own, fed through a queue: started on first use, and
again in a forked child (which has the queue but not the thread).

:func:`beside` runs a function on the process's one helper thread for work done beside the
caller's: what waits without Python's lock (a flush, a digest of a large buffer) while the
caller goes on with its own work."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Any, Final, Generic, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Helper(Generic[T]):
    """One thread named ``name`` calling ``handle`` on each item :meth:`put` hands it, in
    order."""

    def __init__(self, name: str, handle: Callable[[T], object]) -> None:
        self.name = name
        self._handle = handle
        self._start = threading.Lock()
        self._queue: SimpleQueue[T] | None = None
        if hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=self._forked)

    @property
    def started(self) -> bool:
        return self._queue is not None

    def put(self, item: T) -> None:
        """Hand ``item`` to the thread; handled here and now where no thread can be started
        (at interpreter shutdown, where an exit handler may still write)."""
        queue = self._queue
        if queue is None:
            with self._start:
                queue = self._queue
                if queue is None:
                    queue = SimpleQueue()
                    try:
                        threading.Thread(target=self._serve, args=(queue,), name=self.name,
                                         daemon=True).start()
                    except RuntimeError:
                        queue = None
                    self._queue = queue
        if queue is None:
            self._handle(item)
            return
        queue.put(item)

    def _serve(self, queue: SimpleQueue[T]) -> None:
        while True:
            self._handle(queue.get())

    def _forked(self) -> None:
        self._queue = None
        self._start = threading.Lock()  # a child forked while it was held


class Task(Generic[R]):
    """``fn()`` handed to the helper thread (:func:`beside`); :meth:`result` waits for it.
    What ``fn`` uses must stay alive and unchanged until then."""

    __slots__ = ("_done", "_error", "_fn", "_value")

    def __init__(self, fn: Callable[[], R]) -> None:
        self._fn: Callable[[], R] | None = fn
        self._done = threading.Lock()
        self._done.acquire()  # released by the helper once ``fn`` returned or raised
        self._value: R | None = None
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            assert self._fn is not None
            self._value = self._fn()
        except BaseException as exc:  # handed to the waiter
            self._error = exc
        finally:
            self._fn = None
            self._done.release()

    def wait(self) -> BaseException | None:
        """Return once ``fn`` is done (even if interrupted meanwhile: the caller may then
        free what it uses), with its error if it failed."""
        interrupted: BaseException | None = None
        while True:
            try:
                self._done.acquire()
                break
            except BaseException as exc:  # Ctrl-C: raised once the work is over
                interrupted = interrupted or exc
        self._done.release()  # done for good: a second wait returns at once
        if interrupted is not None:
            raise interrupted
        return self._error

    def result(self) -> R:
        """``fn``'s value, or its error raised."""
        failed = self.wait()
        if failed is not None:
            raise failed
        return self._value  # type: ignore[return-value]  # set, as fn did not fail


_tasks: Final[Helper[Task[Any]]] = Helper("filemem-helper", Task.run)


def beside(fn: Callable[[], R]) -> Task[R]:
    """Start ``fn()`` on the process's helper thread (in order with the tasks before it)
    and return at once; where no thread can be started, ``fn`` has run when this returns."""
    task = Task(fn)
    _tasks.put(task)
    return task
