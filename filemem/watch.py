"""Watching the store: hand edits as they happen, and HEAD moving under a running process.

watchdog reports file events in under a millisecond, but one commit makes ~50 events
under ``.git/`` and an editor may write a file in several steps, so: the entry folders
and the store's own files are watched (not ``.git/`` recursively), only the branch ref
files of ``.git`` are, and events are debounced (200 ms) before ``status`` is recomputed.
What is reported is the difference from the last report: a change that appeared, changed
or went away (adopted, discarded), and HEAD moving (a commit, a ``git pull``), after which
the store's view is rebuilt so nothing stale is served.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any, Final

from . import handedits
from .model import TRACKS
from .store import Store

DEBOUNCE: Final = 0.2

Event = dict[str, Any]


def _key(change: handedits.Change) -> tuple[str, str | None, str | None]:
    return (change.kind, change.problem, change.after.text if change.after else None)


class Watcher:
    """Calls ``emit`` with one event dict per thing that changed, from a worker thread."""

    def __init__(self, store: Store, emit: Callable[[Event], None]) -> None:
        self.store = store
        self.emit = emit
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._known: dict[str, tuple[str, str | None, str | None]] = {}
        self._head = store.git.head()
        self._observer: Any = None
        self._watched: set[str] = set()

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
                for path, reason in sorted(state.corrupt.items()):
                    self.emit({"event": "invalid-at-head", "path": path, "problem": reason})
            changes = {c.path: c for c in handedits.status(self.store)}
            for path, change in changes.items():
                key = _key(change)
                if self._known.get(path) != key:
                    self.emit({"event": "hand-edit", **change.to_json()})
            for path in self._known.keys() - changes.keys():
                self.emit({"event": "settled", "path": path})
            self._known = {p: _key(c) for p, c in changes.items()}
            self._watch_new_folders()

    def _later(self) -> None:
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
            self._timer = threading.Timer(DEBOUNCE, self._safe_scan)
            self._timer.daemon = True
            self._timer.start()

    def _safe_scan(self) -> None:
        try:
            self.scan()
        except Exception as exc:  # a half-written file, a store mid-write: try again soon
            self.emit({"event": "error", "message": str(exc)})

    # ------------------------------------------------------------ watching

    def _watch_new_folders(self) -> None:
        if self._observer is None:
            return
        for top in TRACKS:
            folder = os.path.join(self.store.root, top)
            if folder not in self._watched and os.path.isdir(folder):
                self._schedule(folder, recursive=True)

    def _schedule(self, folder: str, *, recursive: bool) -> None:
        from watchdog.events import FileSystemEventHandler

        watcher = self

        class Handler(FileSystemEventHandler):
            def on_any_event(self, event: Any) -> None:
                if event.event_type in ("opened", "closed_no_write"):
                    return
                path = str(event.src_path)
                if path.endswith(".lock") or "/objects/" in path:
                    return
                watcher._later()

        self._observer.schedule(Handler(), folder, recursive=recursive)
        self._watched.add(folder)

    def start(self) -> None:
        from watchdog.observers import Observer

        self._observer = Observer()
        self._schedule(self.store.root, recursive=False)  # the store's own files, new folders
        git_dir = self.store.git.git_dir
        self._schedule(git_dir, recursive=False)  # HEAD, packed-refs
        refs = os.path.join(git_dir, "refs", "heads")
        if os.path.isdir(refs):
            self._schedule(refs, recursive=True)
        self._watch_new_folders()
        self._observer.start()
        self.scan(initial=True)

    def stop(self) -> None:
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
        with self._lock:
            if self._timer is not None:
                self._timer.cancel()
