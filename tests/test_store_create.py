"""Making a store: a creation killed half way leaves its temporary folder beside the store;
the next creation removes it once its process is gone, and never one still running."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import filemem
from tests.conftest import git

pytestmark = pytest.mark.skipif(os.name == "nt", reason="a process is probed with a signal")


def building(parent: Path, name: str, pid: int, tag: str, age: float = 3600) -> Path:
    """A temporary folder as a creation killed after ``git init`` leaves it, last touched
    ``age`` seconds ago."""
    folder = parent / f".{name}.filemem-init-{pid}-{tag}"
    (folder / ".git").mkdir(parents=True)
    (folder / ".git" / "HEAD.lock").write_text("ref: refs/heads/main\n", encoding="utf-8")
    then = time.time() - age
    os.utime(folder, (then, then))
    return folder


@pytest.fixture
def live_pid() -> Iterator[int]:
    """A process of another pid that runs until the test ends."""
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)
    yield child.pid
    assert child.stdin is not None
    child.stdin.close()
    child.wait()


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_new_store_removes_abandoned_creations_and_keeps_a_running_one(
        tmp_path: Path, live_pid: int) -> None:
    dead = dead_pid()
    abandoned = building(tmp_path, "store", dead, "deadbeef")
    running = building(tmp_path, "store", live_pid, "0123abcd")
    other_store = building(tmp_path, "notes", dead, "feedf00d")  # another store's
    # a pid that means nothing here may be another machine's (a shared folder): a creation
    # touched within the last minutes may be in progress there
    recent = building(tmp_path, "store", dead, "0badcafe", age=30)

    filemem.init_store(tmp_path / "store").close()

    assert not abandoned.exists()
    assert running.is_dir() and (running / ".git" / "HEAD.lock").is_file()
    assert other_store.is_dir() and recent.is_dir()
    with filemem.open_store(tmp_path / "store") as p:
        assert p.list_entries() == []
    assert git(tmp_path / "store", "status", "--porcelain") == ""


def test_a_store_opened_with_create_sweeps_too(tmp_path: Path) -> None:
    """`filemem mcp` and the bridge make a missing store through ``create=True``."""
    abandoned = building(tmp_path, "store", dead_pid(), "a1b2c3d4")
    filemem.open_store(tmp_path / "store", create=True).close()
    assert not abandoned.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
