"""A daemon thread of the process's own, fed through a queue: started on first use, and
again in a forked child (which has the queue but not the thread)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from queue import SimpleQueue
from typing import Generic, TypeVar

T = TypeVar("T")


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
