"""Shared fixtures: real stores in temporary folders, real git, real processes."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import filemem

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SCHEMA_PATH = SHARED / "reference" / "dsh-memory-protocol-v1.schema.json"
if not SCHEMA_PATH.exists():  # the conformance suite carries a copy of the normative schema
    SCHEMA_PATH = ROOT / "conformance" / "dsh-memory-protocol-v1.schema.json"
BIG = {"user": {"userGlobal": 10**7, "workspace": 10**7},
       "agent": {"userGlobal": 10**7, "workspace": 10**7}}
GIT = shutil.which("git")


def ctx(session_id: str | None = "s1", cwd: str | None = "/work/proj",
        agent: str | None = None, gate: Any = None) -> dict[str, Any]:
    """A protocol write context for a session in ``cwd`` with agent preset ``agent``."""
    return filemem.write_context(session_id=session_id, cwd=cwd, agent=agent, gate=gate)


def git(path: str | os.PathLike[str], *args: str, check: bool = True) -> str:
    """Run the git CLI in a store (tests use it to check what a person would see)."""
    if GIT is None:
        pytest.skip("git CLI not installed")
    env = {**os.environ, "GIT_AUTHOR_NAME": "Test Person", "GIT_AUTHOR_EMAIL": "p@example.org",
           "GIT_COMMITTER_NAME": "Test Person", "GIT_COMMITTER_EMAIL": "p@example.org"}
    out = subprocess.run([GIT, "-C", str(path), *args], capture_output=True, text=True,
                         env=env)
    if check and out.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {out.stderr}")
    return out.stdout


def assert_clean_repo(path: str | os.PathLike[str]) -> None:
    """`git status` shows nothing and `git fsck` passes."""
    assert git(path, "status", "--porcelain") == ""
    git(path, "fsck", "--strict")


def run_cli(*args: str, store: str | os.PathLike[str] | None = None, input: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real `filemem` command in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    cmd = [sys.executable, "-m", "filemem.cli", *args]
    if store is not None:
        cmd += ["--store", str(store)]
    return subprocess.run(cmd, capture_output=True, text=True, input=input, env=full_env,
                          stdin=None if input is not None else subprocess.DEVNULL)


@pytest.fixture
def store_path(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def make_provider(store_path: Path) -> Iterator[Callable[..., filemem.Provider]]:
    """Open (creating on first use) the test store with per-process overrides."""
    opened: list[filemem.Provider] = []

    def make(**kwargs: Any) -> filemem.Provider:
        kwargs.setdefault("write_policy", "auto")
        p = filemem.open_store(store_path, create=True, **kwargs)
        opened.append(p)
        return p

    yield make
    for p in opened:
        p.close()


@pytest.fixture
def provider(make_provider: Callable[..., filemem.Provider]) -> filemem.Provider:
    return make_provider()


@pytest.fixture(scope="session")
def protocol_schema() -> dict[str, Any]:
    if not SCHEMA_PATH.exists():
        pytest.skip(f"the protocol schema is not at {SCHEMA_PATH}")
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
