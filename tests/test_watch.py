"""Watching the store, and never serving a stale view when HEAD moves.

`filemem watch --json` runs in a subprocess while the test edits files, adopts them and
commits with git, as a person would; every line it prints is parsed. The Python Watcher is
driven directly too. A Provider opened before a person's `git commit`, `git reset` or
`git pull` must serve the new HEAD on its next call, watcher or not.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.owner.watch import Watcher
from tests.conftest import (
    assert_clean_repo,
    ctx,
    entry_fields,
    entry_file_text,
    file_of,
    git,
    head,
    rel,
    set_text,
)

UG = {"track": "user", "scope": "user-global"}
SHARED_UG = "user/user-global/_shared"
TIMEOUT = 15.0  # generous: the machine is shared
Event = dict[str, Any]
Pred = Callable[[Event], bool]
MakeProvider = Callable[..., filemem.Provider]


def fm(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "filemem", *args, "--store", str(store)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          cwd=str(store.parent))


def commit_new_file(store: Path, content: str, message: str, name: str | None = None) -> str:
    """A person writes a file and commits it with git directly; returns its path."""
    folder = store / SHARED_UG
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / (name or f"{uuid.uuid4()}.md")
    path.write_text(content, encoding="utf-8")
    git(store, "add", rel(store, path))
    git(store, "commit", "-q", "-m", message)
    return rel(store, path)


class Events:
    """Lines from a stream, parsed as JSON, collected by a thread; wait for one that fits."""

    def __init__(self) -> None:
        self.seen: list[Event] = []
        self._queue: queue.Queue[Event] = queue.Queue()

    def put(self, event: Event) -> None:
        self._queue.put(event)

    def wait_for(self, pred: Pred, what: str, timeout: float = TIMEOUT) -> Event:
        """The first event (seen before or arriving) that fits ``pred``; consumed."""
        for i, e in enumerate(self.seen):
            if pred(e):
                del self.seen[i]
                return e
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"no {what} within {timeout}s; saw {self.seen}")
            try:
                e = self._queue.get(timeout=left)
            except queue.Empty:
                continue
            if pred(e):
                return e
            self.seen.append(e)

    def drop(self, pred: Pred) -> None:
        """Forget the events seen so far that fit ``pred``."""
        self.seen = [e for e in self.seen if not pred(e)]


class WatchProc:
    """`filemem watch --json` on a store, in a subprocess."""

    def __init__(self, store: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "filemem", "watch", "--json", "--store", str(store)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.events = Events()
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            self.events.put(json.loads(line))  # every line is one JSON object

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=TIMEOUT)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()


@pytest.fixture
def watch(store_path: Path) -> Iterator[Callable[[], WatchProc]]:
    started: list[WatchProc] = []

    def start() -> WatchProc:
        w = WatchProc(store_path)
        started.append(w)
        return w

    yield start
    for w in started:
        if w.proc.poll() is None:
            w.proc.kill()
            w.proc.wait()


def is_event(name: str, /, **fields: Any) -> Pred:
    return lambda e: e.get("event") == name and all(e.get(k) == v for k, v in fields.items())


def ready(w: WatchProc, store: Path) -> None:
    """Make a hand edit of README.md and wait until the watcher reports it: it is watching."""
    with open(store / "README.md", "a", encoding="utf-8") as f:
        f.write("\nwatching\n")
    w.events.wait_for(is_event("hand-edit", path="README.md"), "the first report",
                      timeout=TIMEOUT * 2)


# ---------------------------------------------------------------- filemem watch --json


def test_watch_reports_edits_adopts_commits_and_invalid_files(
        make_provider: MakeProvider, store_path: Path,
        watch: Callable[[], WatchProc]) -> None:
    p = make_provider()
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    cake = p.add({**UG, "text": "likes cake"}, ctx())["entry"]
    w = watch()
    ready(w, store_path)

    # a hand edit is reported within seconds, with what adopting it would commit
    path = file_of(store_path, tea["id"])
    t0 = time.monotonic()
    set_text(path, "likes green tea")
    e = w.events.wait_for(is_event("hand-edit", path=rel(store_path, path)), "hand-edit")
    latency = time.monotonic() - t0
    assert (e["kind"], e["adoptable"], e["id"]) == ("edited", True, tea["id"])
    assert (e["entry"]["text"], e["entry"]["version"]) == ("likes green tea", 2)
    print(f"\nhand edit reported after {latency:.2f}s")
    assert latency < 10

    # adopting it moves HEAD; the edit is settled
    out = fm("adopt", "--yes", rel(store_path, path), store=store_path)
    assert out.returncode == 0, out.stderr
    moved = w.events.wait_for(is_event("head-moved"), "head-moved after adopt")
    assert moved == {"event": "head-moved", "commit": head(store_path),
                     "subject": "edit: adopt 1 hand edit", "entries": 2}
    w.events.wait_for(is_event("settled", path=rel(store_path, path)), "settled")

    # a person's own git commit moves HEAD too
    cake_path = file_of(store_path, cake["id"])
    set_text(cake_path, "likes carrot cake")
    git(store_path, "commit", "-q", "-m", "Carrot cake, by hand", rel(store_path, cake_path))
    moved = w.events.wait_for(is_event("head-moved", subject="Carrot cake, by hand"),
                              "head-moved after git commit")
    assert moved["commit"] == head(store_path) and moved["entries"] == 2

    # a file committed invalid is reported as such (agents get STORE_CORRUPT meanwhile)
    robot = entry_fields(track="robot")
    bad = commit_new_file(store_path, entry_file_text(robot, "beep"), "My robot note",
                          name=f"{robot['id']}.md")
    w.events.wait_for(is_event("head-moved", subject="My robot note"), "head-moved (bad)")
    invalid = w.events.wait_for(is_event("invalid-at-head", path=bad), "invalid-at-head")
    assert "track must be one of user|agent" in invalid["problem"]

    # a new hand-written file and a deletion
    # written whole, then renamed in: a file seen half-written (created, not yet filled) is
    # rightly reported as not adoptable, which is not what this step checks
    (store_path / SHARED_UG / ".note.md.tmp").write_text("by hand", encoding="utf-8")
    os.replace(store_path / SHARED_UG / ".note.md.tmp", store_path / SHARED_UG / "note.md")
    added = w.events.wait_for(is_event("hand-edit", path=f"{SHARED_UG}/note.md"), "added")
    assert added["kind"] == "added" and added["adoptable"] is True
    assert added["moveTo"].startswith(f"{SHARED_UG}/") and added["entry"]["text"] == "by hand"
    # the watcher may have seen the robot note in the moment between its writing and git's
    # commit (rightly: an untracked file) and said "added", then "settled" in the scan after
    # the commit, which came before this one: forget those, they are not about the deletion
    w.events.drop(lambda e: e.get("path") == bad)
    (store_path / bad).unlink()
    gone = w.events.wait_for(is_event("hand-edit", path=bad, kind="deleted"), "deleted")
    assert gone["kind"] == "deleted"

    # discarding settles them
    assert fm("discard", "--yes", store=store_path).returncode == 0
    # by path: the carrot-cake edit may have been seen before its commit and settled since
    for settled in (f"{SHARED_UG}/note.md", bad, "README.md"):
        w.events.wait_for(is_event("settled", path=settled), f"{settled} settled")
    assert w.events.seen == [] or all(e["event"] in ("hand-edit", "settled")
                                      for e in w.events.seen)

    t0 = time.monotonic()
    assert w.stop() == 0  # SIGTERM ends it cleanly
    assert time.monotonic() - t0 < 10
    assert w.proc.stderr is not None and "Traceback" not in w.proc.stderr.read()
    assert all(line.endswith("\n") for line in w.lines)


def test_watch_sees_a_git_pull(make_provider: MakeProvider, store_path: Path, tmp_path: Path,
                               watch: Callable[[], WatchProc]) -> None:
    p = make_provider()
    p.add({**UG, "text": "likes tea"}, ctx())
    clone = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", str(store_path), str(clone))
    with filemem.open_store(clone, write_policy="auto") as other:
        other.add({**UG, "text": "written on the laptop"}, ctx())
    w = watch()
    ready(w, store_path)
    branch = git(store_path, "branch", "--show-current").strip()
    git(store_path, "pull", "-q", "--ff-only", str(clone), branch)
    moved = w.events.wait_for(is_event("head-moved", commit=head(store_path)), "head-moved")
    assert moved["entries"] == 2 and moved["subject"].startswith("add user/user-global")
    assert sorted(e["text"] for e in p.list_entries()) == ["likes tea",
                                                           "written on the laptop"]
    assert w.stop() == 0


def test_watch_human_output(make_provider: MakeProvider, store_path: Path) -> None:
    p = make_provider()
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    path = file_of(store_path, tea["id"])
    set_text(path, "likes green tea")  # before it starts: the first scan reports it
    proc = subprocess.Popen([sys.executable, "-m", "filemem", "watch", "--store",
                             str(store_path)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert f"edited {rel(store_path, path)} - `filemem adopt` to commit it" in line
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=TIMEOUT) == 0
        assert proc.stderr is not None
        assert f"Watching {store_path}" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# ---------------------------------------------------------------- the Python Watcher


def test_watcher_scan_reports_differences_only(make_provider: MakeProvider,
                                               store_path: Path) -> None:
    """``scan`` driven by hand: deterministic, no file events involved."""
    p = make_provider()
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    path = file_of(store_path, tea["id"])
    events: list[Event] = []
    w = Watcher(p.store, events.append)
    w.scan(initial=True)
    assert events == []
    set_text(path, "likes green tea")
    w.scan()
    assert [(e["event"], e["path"], e["entry"]["text"]) for e in events] == [
        ("hand-edit", rel(store_path, path), "likes green tea")]
    events.clear()
    w.scan()
    assert events == []  # nothing new: nothing reported again
    set_text(path, "likes black tea")
    w.scan()
    assert [e["entry"]["text"] for e in events] == ["likes black tea"]  # changed again
    events.clear()
    git(store_path, "commit", "-q", "-m", "black tea", rel(store_path, path))
    w.scan()
    assert [e["event"] for e in events] == ["head-moved", "settled"]
    assert events[0]["commit"] == head(store_path) and events[0]["subject"] == "black tea"
    # the view was rebuilt at once: what the store serves is the new HEAD
    assert p.store._state is not None and p.store._state.head == head(store_path)
    assert [e["text"] for e in p.list_entries()] == ["likes black tea"]


def test_watcher_with_file_events(make_provider: MakeProvider, store_path: Path) -> None:
    p = make_provider()
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    path = file_of(store_path, tea["id"])
    events = Events()
    w = Watcher(p.store, events.put)
    w.start()
    try:
        set_text(path, "likes green tea")
        e = events.wait_for(is_event("hand-edit", path=rel(store_path, path)), "hand-edit")
        assert e["entry"]["text"] == "likes green tea"
        # a layer folder that did not exist when watching started is watched too
        folder = store_path / "agent" / "user-global" / "_shared"
        folder.mkdir(parents=True)
        (folder / "n.md").write_text("in a new folder", encoding="utf-8")
        e = events.wait_for(is_event("hand-edit", path="agent/user-global/_shared/n.md"),
                            "hand-edit in a new folder")
        assert e["kind"] == "added" and e["entry"]["track"] == "agent"
        # an agent write moves HEAD: reported as such
        p.add({**UG, "text": "likes cake"}, ctx())
        moved = events.wait_for(is_event("head-moved", commit=head(store_path)), "head-moved")
        assert moved["entries"] == 2
    finally:
        w.stop()
    # stopped: nothing more is reported
    set_text(path, "likes no tea")
    time.sleep(1.0)
    assert not any(e.get("entry", {}).get("text") == "likes no tea"
                   for e in events.seen + list(events._queue.queue))


def test_watcher_reports_a_file_invalid_at_head_when_it_starts(make_provider: MakeProvider,
                                                               store_path: Path) -> None:
    p = make_provider()
    p.add({**UG, "text": "likes tea"}, ctx())
    bad = commit_new_file(store_path, "no front-matter", "oops", name="oops.md")
    with pytest.raises(filemem.ProtocolError):
        p.list_entries()
    events: list[Event] = []
    Watcher(p.store, events.append).scan(initial=True)
    assert [(e["event"], e.get("path")) for e in events] == [("invalid-at-head", bad)]


# ---------------------------------------------------------------- no deadlock, always stops

BOUND = 20.0  # a failure bound only: every test below is ordered by events, not sleeps


@pytest.mark.parametrize("where", ["scheduling a new folder", "reporting"])
def test_scan_and_a_watchdog_event_at_once_cannot_deadlock(
        make_provider: MakeProvider, store_path: Path, monkeypatch: pytest.MonkeyPatch,
        where: str) -> None:
    """watchdog holds its observer lock while it calls the event handler, and takes it
    in ``schedule``. One thread scans and is held right where it schedules the new
    ``agent/`` folder (or where it reports, inside the scan); another does what
    watchdog's dispatch thread does: takes the observer lock and delivers an event. A
    lock-order inversion between the two hangs here for good."""
    from watchdog.events import FileModifiedEvent
    from watchdog.observers import Observer

    p = make_provider()
    p.add({**UG, "text": "likes tea"}, ctx())
    observer = Observer()  # never started: no events but the one delivered below
    scanner_there = threading.Event()
    dispatcher_in = threading.Event()
    lock_held_at_schedule: list[bool] = []

    def hold(point: str) -> None:
        if point == where and threading.current_thread() is scanner \
                and not scanner_there.is_set():
            scanner_there.set()
            dispatcher_in.wait(BOUND)

    w = Watcher(p.store, lambda event: hold("reporting"))
    w._observer = observer
    w._schedule(str(store_path), recursive=False)
    [handler] = [h for hs in observer._handlers.values() for h in hs]
    w.scan(initial=True)  # reports nothing, watches user/
    new = store_path / "agent" / "user-global" / "_shared"
    new.mkdir(parents=True)
    (new / "n.md").write_text("by hand", encoding="utf-8")

    real_schedule = observer.schedule

    def schedule(*args: Any, **kwargs: Any) -> Any:
        lock_held_at_schedule.append(w._lock.locked())
        hold("scheduling a new folder")
        return real_schedule(*args, **kwargs)

    def dispatch() -> None:  # as watchdog's BaseObserver.dispatch_events does
        with observer._lock:
            dispatcher_in.set()
            scanner_there.wait(BOUND)
            handler.dispatch(FileModifiedEvent(str(store_path / "README.md")))

    monkeypatch.setattr(observer, "schedule", schedule)
    scanner = threading.Thread(target=w.scan, daemon=True)
    dispatcher = threading.Thread(target=dispatch, daemon=True)
    scanner.start()
    dispatcher.start()
    scanner.join(BOUND)
    dispatcher.join(BOUND)
    assert scanner_there.is_set() and dispatcher_in.is_set()
    assert not scanner.is_alive() and not dispatcher.is_alive(), "deadlocked"
    assert lock_held_at_schedule == [False]  # never into watchdog holding the watcher's lock
    assert str(store_path / "agent") in w._watched
    assert str(store_path / "agent") in {watch.path for watch in observer._watches}
    observer.stop()


def test_stop_returns_while_a_scan_is_stuck_reporting(
        make_provider: MakeProvider, store_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """stop() holds no lock and waits for the worker only so long: a report that cannot
    be written (a full pipe) does not keep Ctrl-C from working."""
    import filemem.owner.watch

    monkeypatch.setattr(filemem.owner.watch, "STOP_TIMEOUT", 0.5)
    p = make_provider()
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    stuck, release = threading.Event(), threading.Event()

    def emit(event: Event) -> None:
        if threading.current_thread() is not threading.main_thread():
            stuck.set()
            release.wait(BOUND * 3)  # stuck for longer than stop() is given below

    w = Watcher(p.store, emit)
    w.start()
    try:
        set_text(file_of(store_path, tea["id"]), "likes green tea")
        assert stuck.wait(BOUND), "the worker never reported the edit"
        stopper = threading.Thread(target=w.stop, daemon=True)
        stopper.start()
        stopper.join(BOUND)
        assert not stopper.is_alive() and w.stopped.is_set()
    finally:
        release.set()


def test_stop_after_a_signal_cut_the_start_short(
        make_provider: MakeProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while start() waits for the worker thread to start: stop() must not try to
    join a thread that never started (threading raises RuntimeError for that)."""
    import filemem.owner.watch

    class Interrupted(threading.Thread):
        def start(self) -> None:
            if self.name == "filemem-watch":
                raise KeyboardInterrupt  # as the signal handler does, before the thread runs
            super().start()

    class Threading:  # threading as watch.py sees it; watchdog's threads stay untouched
        Thread = Interrupted

        def __getattr__(self, name: str) -> object:
            return getattr(threading, name)

    monkeypatch.setattr(filemem.owner.watch, "threading", Threading())
    w = Watcher(make_provider().store, lambda event: None)
    before = set(threading.enumerate())
    with pytest.raises(KeyboardInterrupt):
        w.start()
    # the observer was made (and with it watchdog's inotify reader thread), never started
    assert w._observer is not None and not w._observer.is_alive()
    assert set(threading.enumerate()) - before
    w.stop()
    assert w.stopped.is_set()
    # stop() ended what start() had started: no thread of it is left running (the bound on
    # the join is only there so that a leak fails instead of hanging)
    left = set(threading.enumerate()) - before
    for thread in left:
        thread.join(30)
    assert [t.name for t in left if t.is_alive()] == []


class HumanWatch:
    """`filemem watch` (human output) in a subprocess, both streams read by threads."""

    def __init__(self, store: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "filemem", "watch", "--store", str(store)],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        self.out: queue.Queue[str] = queue.Queue()
        self.err: list[str] = []
        self._err_lines: queue.Queue[str] = queue.Queue()
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._readers = [threading.Thread(target=self._read, args=(stream, sink), daemon=True)
                         for stream, sink in ((self.proc.stdout, self.out.put),
                                              (self.proc.stderr, self._err))]
        for reader in self._readers:
            reader.start()

    def _err(self, line: str) -> None:
        self.err.append(line)
        self._err_lines.put(line)

    @staticmethod
    def _read(stream: Any, sink: Callable[[str], None]) -> None:
        for line in stream:
            sink(line)

    @staticmethod
    def _wait(lines: queue.Queue[str], text: str) -> str:
        deadline = time.monotonic() + BOUND
        while (left := deadline - time.monotonic()) > 0:
            try:
                line = lines.get(timeout=left)
            except queue.Empty:
                break
            if text in line:
                return line
        raise AssertionError(f"no line with {text!r} within {BOUND}s")

    def wait_out(self, text: str) -> str:
        return self._wait(self.out, text)

    def wait_started(self) -> None:
        self._wait(self._err_lines, "Ctrl-C to stop")  # its first line, as it starts

    def signal_and_wait(self, sig: int) -> tuple[int, str]:
        """Send ``sig``; the exit code and all of stderr, once it has exited."""
        self.proc.send_signal(sig)
        code = self.proc.wait(timeout=BOUND)
        for reader in self._readers:
            reader.join(BOUND)
        return code, "".join(self.err)

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


SIGNALS = [pytest.param(signal.SIGINT, id="SIGINT"), pytest.param(signal.SIGTERM, id="SIGTERM")]


@pytest.mark.parametrize("sig", SIGNALS)
def test_watch_stops_on_a_signal(make_provider: MakeProvider, store_path: Path,
                                 sig: int) -> None:
    make_provider().add({**UG, "text": "likes tea"}, ctx())
    w = HumanWatch(store_path)
    try:
        w.wait_started()
        code, err = w.signal_and_wait(sig)
        assert code == 0, err
        assert "Traceback" not in err and "Aborted" not in err
    finally:
        w.kill()


@pytest.mark.parametrize("sig", SIGNALS)
def test_watch_exits_cleanly_however_often_the_signal_comes(
        make_provider: MakeProvider, store_path: Path, sig: int) -> None:
    """Ctrl-C pressed again and again: the first stops the watch, the rest change nothing,
    even those that land while Python shuts down (its default action there kills the
    process with no message: exit status -2)."""
    make_provider().add({**UG, "text": "likes tea"}, ctx())
    w = HumanWatch(store_path)
    try:
        w.wait_started()
        deadline = time.monotonic() + BOUND
        while w.proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(ProcessLookupError):
                w.proc.send_signal(sig)
            time.sleep(0.002)
        code = w.proc.wait(timeout=BOUND)
        for reader in w._readers:
            reader.join(BOUND)
        err = "".join(w.err)
        assert code == 0, err
        assert "Traceback" not in err and "Aborted" not in err
    finally:
        w.kill()


@pytest.mark.parametrize("sig", SIGNALS)
def test_watch_stops_on_a_signal_while_it_watches_new_folders(
        make_provider: MakeProvider, store_path: Path, sig: int) -> None:
    """A new track folder makes a scan schedule it; then a signal arrives while more
    edits are being debounced and scanned."""
    make_provider().add({**UG, "text": "likes tea"}, ctx())
    w = HumanWatch(store_path)
    try:
        w.wait_started()
        folder = store_path / "agent" / "user-global" / "_shared"
        folder.mkdir(parents=True)
        (folder / "a.md").write_text("in a new folder", encoding="utf-8")
        w.wait_out("added agent/user-global/_shared/a.md")
        (folder / "b.md").write_text("seen: the new folder is watched", encoding="utf-8")
        w.wait_out("added agent/user-global/_shared/b.md")
        more = store_path / "agent" / "workspace"
        more.mkdir()
        for i in range(20):
            (more / f"{i}.md").write_text(f"note {i}", encoding="utf-8")
        code, err = w.signal_and_wait(sig)
        assert code == 0, err
        assert "Traceback" not in err and "Aborted" not in err
    finally:
        w.kill()


# ---------------------------------------------------------------- never a stale view


def test_a_provider_serves_the_new_head_after_a_persons_commit(make_provider: MakeProvider,
                                                               store_path: Path) -> None:
    p = make_provider()
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    first = {"id": "old-session", "header": {"cwd": "/work/proj"}}
    frozen = p.snapshot(first)
    assert p.query({"text": "tea"})["total"] == 1 and p.budgets()[0]["used"] == 9
    # a person edits the entry, adds a file and lowers a budget, and commits it all with git
    set_text(file_of(store_path, tea["id"]), "likes mint tea")
    jasmine = entry_fields()
    new_path = commit_new_file(store_path, entry_file_text(jasmine, "likes jasmine"), "prep",
                               name=f"{jasmine['id']}.md")
    cfg = store_path / "filemem.yaml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("userGlobal: 2000",
                                                           "userGlobal: 500", 1),
                   encoding="utf-8")
    git(store_path, "commit", "-q", "-am", "mint tea, jasmine, smaller budget")
    assert_clean_repo(store_path)

    assert sorted(e["text"] for e in p.list_entries()) == ["likes jasmine", "likes mint tea"]
    found = p.query({"text": "mint"})
    assert found["total"] == 1 and found["entries"][0]["version"] == 1
    assert p.query({"text": "jasmine"})["entries"][0]["id"] in new_path
    assert p.budgets()[0] == {"track": "user", "scope": "user-global",
                              "used": len("likes mint tea") + len("likes jasmine"),
                              "limit": 500}
    fresh = p.snapshot({"id": "new-session", "header": {"cwd": "/work/proj"}})
    assert "likes mint tea" in fresh and "likes jasmine" in fresh
    assert p.snapshot(first) == frozen  # a session's snapshot stays what it was shown
    # writes go on top of the person's commit
    p.replace({**UG, "match": "mint", "text": "likes peppermint tea"}, ctx())
    assert git(store_path, "log", "-2", "--format=%s").split("\n")[1] == \
        "mint tea, jasmine, smaller budget"
    with pytest.raises(filemem.ProtocolError) as info:  # the new budget applies at once
        p.add({**UG, "text": "z" * 480}, ctx())
    assert info.value.code == "BUDGET_EXCEEDED" and info.value.details["limit"] == 500


def test_a_provider_follows_reset_revert_and_pull(make_provider: MakeProvider,
                                                  store_path: Path, tmp_path: Path) -> None:
    p = make_provider()
    p.add({**UG, "text": "one"}, ctx())
    p.add({**UG, "text": "two"}, ctx())
    assert len(p.list_entries()) == 2
    git(store_path, "reset", "-q", "--hard", "HEAD~1")
    assert [e["text"] for e in p.list_entries()] == ["one"]
    assert p.query({"text": "two"})["total"] == 0
    p.add({**UG, "text": "three"}, ctx())
    git(store_path, "revert", "--no-edit", "HEAD")
    assert [e["text"] for e in p.list_entries()] == ["one"]
    assert p.budgets()[0]["used"] == 3
    clone = tmp_path / "laptop"
    git(tmp_path, "clone", "-q", str(store_path), str(clone))
    with filemem.open_store(clone, write_policy="auto") as other:
        other.add({**UG, "text": "from the laptop"}, ctx())
    branch = git(store_path, "branch", "--show-current").strip()
    git(store_path, "pull", "-q", "--ff-only", str(clone), branch)
    assert [e["text"] for e in p.list_entries()] == ["one", "from the laptop"]
    assert "from the laptop" in p.snapshot({"id": "after-pull", "header": {}})
    assert_clean_repo(store_path)


def test_a_provider_reports_an_invalid_file_committed_under_it(make_provider: MakeProvider,
                                                               store_path: Path) -> None:
    p = make_provider()
    p.add({**UG, "text": "likes tea"}, ctx())
    bad = commit_new_file(store_path, "no front-matter", "oops", name="oops.md")
    for call in (p.list_entries, lambda: p.query({"text": "tea"}), p.budgets,
                 lambda: p.snapshot({"id": "s-bad", "header": {}})):
        with pytest.raises(filemem.ProtocolError) as info:
            call()
        assert info.value.code == "STORE_CORRUPT"
        assert info.value.details["path"] == str(store_path / bad)
    git(store_path, "revert", "--no-edit", "HEAD")
    assert [e["text"] for e in p.list_entries()] == ["likes tea"]
