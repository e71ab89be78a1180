"""A wait for the store lock (or for another `filemem sync`) says so once it has lasted a
second, naming the process that holds the lock where the system tells (/proc/locks), and
the STORE_BUSY / SYNC_BUSY it ends in names it too: a minute's silence looks like a hang."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import filemem
from filemem import errors
from filemem.files import flock
from filemem.owner import sync
from filemem.store import storelock
from tests.conftest import ctx

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/locks"),
                                reason="the holder is told from /proc/locks (Linux)")

_HOLDER = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(120)
"""


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "mem"
    with filemem.open_store(root, create=True, write_policy="auto") as p:
        p.add({"track": "user", "scope": "user-global", "text": "first"}, ctx())
    return root


def hold(path: Path) -> Iterator[subprocess.Popen[str]]:
    """Another process holding the lock on ``path`` until the test ends."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(path)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        holder.kill()
        holder.wait()


def waits(caplog: pytest.LogCaptureFixture, what: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if what in r.getMessage()]


def test_a_write_waiting_for_the_store_lock_says_so_and_names_the_holder(
        store: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storelock, "LOCK_TIMEOUT", 2.5)
    head = (store / ".git" / "refs" / "heads" / "main").read_text()
    for holder in hold(store / ".filemem" / "lock"):
        who = f"pid {holder.pid}: -c import fcntl, os, sys, time"
        with filemem.open_store(store, write_policy="auto") as p, \
                caplog.at_level(logging.WARNING, logger="filemem"), \
                pytest.raises(errors.StoreBusy) as busy:
            p.add({"track": "user", "scope": "user-global", "text": "waits"}, ctx())
        [said] = waits(caplog, "waiting for the store lock")
        assert who in said and "up to 2 s" in said
        assert who in busy.value.message and "for more than 2 s" in busy.value.message
    assert (store / ".git" / "refs" / "heads" / "main").read_text() == head  # nothing written


def test_a_sync_waiting_for_another_sync_says_so_and_names_it(
        store: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sync, "SYNC_LOCK_TIMEOUT", 2.5)
    for holder in hold(store / ".filemem" / "sync.lock"):
        with filemem.open_store(store) as p, \
                caplog.at_level(logging.WARNING, logger="filemem"), \
                pytest.raises(errors.SyncError) as busy, sync._sync_lock(p.store):
            pass
        [said] = waits(caplog, "waiting for another `filemem sync`")
        assert f"pid {holder.pid}: -c import" in said
        assert busy.value.code == "SYNC_BUSY" and f"pid {holder.pid}" in busy.value.message


def test_the_holder_is_told_only_for_a_lock_held(store: Path) -> None:
    lock = str(store / ".filemem" / "lock")
    assert flock.holder(lock) is None  # nobody holds it
    assert flock.holder(str(store / "missing")) is None
    with filemem.open_store(store) as p, p.store.locked():
        assert flock.holder(lock) == f"pid {os.getpid()} (this process)"
