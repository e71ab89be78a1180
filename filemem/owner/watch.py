"""Watching the store: hand edits as they happen, and HEAD moving under a running process.

watchdog reports file events in under a millisecond, but one commit makes ~50 events
under ``.git/`` and an editor may write a file in several steps, so: the entry folders
and the store's own files are watched (not ``.git/`` recursively), only the branch ref
files of ``.git`` are, and events are debounced (200 ms) before ``status`` is recomputed.
What is reported is the difference from the last report: a change that appeared, changed
or went away (adopted, discarded), and HEAD moving (a commit, a ``git pull``), after which
the store's view is rebuilt so nothing stale is served.

Locks: watchdog holds its observer lock while it calls our event handler, and takes it
in ``schedule`` and ``stop``. So the handler only sets an Event (consumed by one worker
thread that debounces and scans), ``scan`` never calls into the observer while it holds
``Watcher._lock`` (it claims new folders under the lock and schedules them after), and
``stop`` holds no lock and waits for threads only with a timeout.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from filemem.model import TRACKS
from filemem.owner import handedits
from filemem.store.core import Store

DEBOUNCE: Final = 0.2
STOP_TIMEOUT: Final = 5.0  # stop() returns by then even if a thread is stuck

Event = dict[str, Any]


def _key(change: handedits.Change) -> tuple[str, str | None, str | None]:
    return (change.kind, change.problem, change.after.text if change.after else None)


class Watcher:
    """Calls ``emit`` with one event dict per thing that changed, from a worker thread."""

    def __init__(self, store: Store, emit: Callable[[Event], None]) -> None:
        # watchdog is imported here, before a caller says it is watching and a person may
        # interrupt: a KeyboardInterrupt raised while an import creates its classes comes
        # out as a RuntimeError
        from watchdog.observers import Observer

        self._observer_class: Any = Observer
        self.store = store
        self.emit = emit
        self.stopped = threading.Event()  # set by stop(), or if the worker ends
        self._lock = threading.Lock()  # _head, _known, _watched; never held into watchdog
        self._known: dict[str, tuple[str, str | None, str | None]] = {}
        self._head = store.git.head()
        self._observer: Any = None
        self._handler: Any = None
        self._watched: set[str] = set()
        self._wake = threading.Event()  # a file event arrived: a scan is due
        self._stopping = threading.Event()
        self._worker: threading.Thread | None = None

    # ------------------------------------------------------------ reporting

    def scan(self, *, initial: bool = False) -> None:
        """Compare HEAD and the working tree with the last report; emit the differences."""
        with self._lock:
            head = self.store.git.head()
            if head != self._head or initial:
                moved = head != self._head
                self._head = head
                state = self.store.state()  # rebuild the view now, not on the next request
                if moved:
                    info = self.store.git.commit(state.head)
                    self.emit({"event": "head-moved", "commit": head,
                               "subject": info.message.split("\n", 1)[0],
                               "entries": len(state.entries)})
                for problem in self.store.invalid.problems(state):  # file, commit, way out
                    self.emit({"event": "invalid-at-head", "path": problem.details["file"],
                               "problem": problem.message})
            changes = {c.path: c for c in handedits.status(self.store)}
            for path, change in changes.items():
                key = _key(change)
                if self._known.get(path) != key:
                    self.emit({"event": "hand-edit", **change.to_json()})
            for path in self._known.keys() - changes.keys():
                self.emit({"event": "settled", "path": path})
            self._known = {p: _key(c) for p, c in changes.items()}
            new = self._claim_new_folders()
        if new:
            self._schedule_all(new)  # outside the lock: schedule takes watchdog's lock
            self._wake.set()  # once more: what was written there before its watch began

    def _safe_scan(self) -> None:
        try:
            self.scan()
        except Exception as exc:  # a half-written file, a store mid-write: try again soon
            self.emit({"event": "error", "message": str(exc)})

    def _run(self) -> None:
        """The worker: one scan once no file event has arrived for DEBOUNCE."""
        try:
            while self._wake.wait() and not self._stopping.is_set():
                while True:
                    self._wake.clear()  # events from here on count, even during the scan
                    if self._stopping.wait(DEBOUNCE):
                        return
                    if not self._wake.is_set():
                        break
                self._safe_scan()
        finally:
            self.stopped.set()

    # ------------------------------------------------------------ watching

    def _claim_new_folders(self) -> list[str]:
        """Track folders not watched yet, marked watched; call with self._lock held."""
        if self._observer is None:
            return []
        new = [folder for folder in (os.path.join(self.store.root, top) for top in TRACKS)
               if folder not in self._watched and os.path.isdir(folder)]
        self._watched.update(new)
        return new

    def _schedule_all(self, folders: list[str]) -> None:
        for i, folder in enumerate(folders):
            try:
                self._schedule(folder, recursive=True)
            except BaseException:
                with self._lock:  # not watched after all: a later scan tries again
                    self._watched.difference_update(folders[i:])
                raise

    def _schedule(self, folder: str, *, recursive: bool) -> None:
        if self._handler is None:
            self._handler = _handler(self._wake)
        self._observer.schedule(self._handler, folder, recursive=recursive)

    def start(self) -> None:
        self._observer = self._observer_class()
        self._schedule(self.store.root, recursive=False)  # the store's own files, new folders
        git_dir = self.store.git.git_dir
        self._schedule(git_dir, recursive=False)  # HEAD, packed-refs
        refs = os.path.join(git_dir, "refs", "heads")
        if os.path.isdir(refs):
            self._schedule(refs, recursive=True)
        self._worker = threading.Thread(target=self._run, name="filemem-watch", daemon=True)
        self._worker.start()
        self._observer.start()
        self.scan(initial=True)  # also schedules the track folders there are

    def stop(self) -> None:
        """Stop watching and reporting; returns within STOP_TIMEOUT, holding no lock."""
        self._stopping.set()
        self._wake.set()  # let the worker see it
        deadline = time.monotonic() + STOP_TIMEOUT
        threads: list[threading.Thread] = []
        observer = self._observer
        if observer is not None:
            # watchdog's stop() joins its emitters without a timeout: run it aside, bounded.
            # An observer a signal kept from starting is stopped too: its inotify reader
            # thread runs from the observer's construction on, and only stop() ends it
            stopper = threading.Thread(target=observer.stop, daemon=True)
            stopper.start()
            threads += [stopper, observer]
        if self._worker is not None and self._worker is not threading.current_thread():
            threads.append(self._worker)  # a scan in progress finishes its report
        for thread in threads:
            # a signal can cut Thread.start() short: a thread never started (or still
            # starting) cannot be joined, and a starting worker sees _stopping and returns
            if thread.is_alive():
                thread.join(max(0.0, deadline - time.monotonic()))
        self.stopped.set()


def _handler(wake: threading.Event) -> Any:
    """The watchdog event handler: it runs under watchdog's lock, so it only sets ``wake``."""
    from watchdog.events import FileSystemEventHandler

    class Handler(FileSystemEventHandler):
        def on_any_event(self, event: Any) -> None:
            if event.event_type in ("opened", "closed_no_write"):
                return
            path = str(event.src_path)
            if path.endswith(".lock") or "/objects/" in path:
                return
            wake.set()

    return Handler()
