"""Shared fixtures: real stores in temporary folders, real git, real processes."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import filemem
from tests.parallel import make_scheduler, use_file_progress

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
SCHEMA_PATH = SHARED / "reference" / "dsh-memory-protocol-v1.schema.json"
if not SCHEMA_PATH.exists():  # the conformance suite carries a copy of the normative schema
    SCHEMA_PATH = ROOT / "conformance" / "dsh-memory-protocol-v1.schema.json"
BIG = {"user": {"userGlobal": 10**7, "workspace": 10**7},
       "agent": {"userGlobal": 10**7, "workspace": 10**7}}
GIT = shutil.which("git")


def pytest_configure(config: pytest.Config) -> None:
    use_file_progress(config)
    if not hasattr(config, "workerinput"):  # once, in the process that starts the workers
        compile_sources()


def compile_sources() -> None:
    """Byte-compile the project's own code before any test starts a process.

    The editable install of the README's test command leaves it uncompiled, and where
    PYTHONDONTWRITEBYTECODE is set (as on the machines this suite was written on) no Python
    process writes the compiled files itself: every `filemem`, bridge and MCP server the
    suite starts then compiled its ~80 modules from source, which cost more than its
    whole import (560-720 M instructions against 345-390 M). compileall writes them anyway,
    into the usual ``__pycache__`` folders, and skips those already up to date."""
    import compileall

    for folder in ("filemem", "adapters", "conformance", "bench"):
        compileall.compile_dir(str(ROOT / folder), quiet=1)


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: -n
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    return make_scheduler(config, log)



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


def write_in_flight(store: str | os.PathLike[str]) -> bool:
    """Whether a write's journal is left: the journal file, or the write-ahead log's last
    record not settled (a write killed between its log record and its working tree)."""
    from filemem.files import wal

    meta = os.path.join(store, ".filemem")
    return os.path.lexists(os.path.join(meta, "journal.json")) or \
        wal.Wal.at(meta).unsettled() is not None


def open_files() -> dict[str, str]:
    """This process's open files (Linux): descriptor -> what /proc says it names, a file
    deleted meanwhile with " (deleted)" after its path."""
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[name] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            continue  # closed meanwhile, or the listing's own descriptor
    return out


def no_root_powers() -> Callable[[], None] | None:
    """For a child process (``preexec_fn``): without root's power to read and write any file
    (its bounding set of capabilities loses DAC_OVERRIDE, DAC_READ_SEARCH and FOWNER, as
    ``capsh --drop`` does), so file modes apply to it; None when not root."""
    if os.geteuid() != 0:
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def drop() -> None:
        for cap in (1, 2, 3):
            if prctl(24, cap, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")
    return drop


def run_cli(*args: str, store: str | os.PathLike[str] | None = None, input: str | None = None,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run the real `filemem` command in a subprocess."""
    full_env = {**os.environ, **(env or {})}
    cmd = [sys.executable, "-m", "filemem.cli", *args]
    if store is not None:
        cmd += ["--store", str(store)]
    return subprocess.run(cmd, capture_output=True, text=True, input=input, env=full_env,
                          stdin=None if input is not None else subprocess.DEVNULL)


@pytest.fixture(scope="session", autouse=True)
def own_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Each test process (each pytest-xdist worker too) gets its own empty user data, state and
    config folders and an empty git config, and none of the person's FILEMEM_* or GIT_*
    variables: no test can touch the person's real store, a store or token another worker
    is using, or depend on the person's git identity and settings (or on GIT_DIR set by a
    git hook that runs the tests)."""
    home = tmp_path_factory.mktemp("home")
    gitconfig = home / "gitconfig"
    gitconfig.write_text("", encoding="utf-8")
    with pytest.MonkeyPatch.context() as mp:
        for name in list(os.environ):
            if name.startswith(("FILEMEM_", "GIT_")):
                mp.delenv(name)
        for var in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "XDG_CACHE_HOME"):
            (home / var.lower()).mkdir()
            mp.setenv(var, str(home / var.lower()))
        mp.setenv("GIT_CONFIG_GLOBAL", str(gitconfig))
        mp.setenv("GIT_CONFIG_NOSYSTEM", "1")
        yield home


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


def free_port() -> int:
    """A loopback TCP port nothing listens on now, for a server a test starts."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


# ---------------------------------------------------------------- two machines and a remote


@dataclass
class Machines:
    """A bare remote, machine A (which published its store) and machine B (a clone)."""

    remote: Path
    a_path: Path
    b_path: Path
    a: filemem.Provider
    b: filemem.Provider


def bare_remote(path: Path) -> Path:
    git(path.parent, "init", "-q", "--bare", str(path))
    return path


@pytest.fixture
def machines(tmp_path: Path) -> Iterator[Machines]:
    """Machine A published its store to a bare remote; machine B cloned it."""
    from filemem.owner import remotes, sync

    remote = bare_remote(tmp_path / "remote.git")
    a = filemem.open_store(tmp_path / "A", create=True, write_policy="auto")
    remotes.add_remote(a.store, "origin", str(remote))
    sync.sync(a.store)
    sync.clone(str(remote), str(tmp_path / "B"))
    b = filemem.open_store(tmp_path / "B", write_policy="auto")
    yield Machines(remote, tmp_path / "A", tmp_path / "B", a, b)
    a.close()
    b.close()


def head(store: str | os.PathLike[str]) -> str:
    """The commit HEAD points at, as git itself says."""
    return git(store, "rev-parse", "HEAD").strip()


def file_of(store: Path, entry_id: str) -> Path:
    """The working-tree file of an entry (exactly one)."""
    found = list(store.glob(f"*/*/**/{entry_id}.md"))
    assert len(found) == 1, found
    return found[0]


def rel(store: Path, path: Path) -> str:
    return path.relative_to(store).as_posix()


def set_text(path: Path, text: str) -> None:
    """Replace the text after the front-matter, as an editor would."""
    data = path.read_bytes()
    cut = data.index(b"\n---\n") + 5
    path.write_bytes(data[:cut] + text.encode("utf-8"))


def run_at_terminal(args: list[str], answer: bytes, prompt: bytes = b"Approve this write?",
                    timeout: float = 60) -> tuple[int, str]:
    """Run `filemem` with a pseudo-terminal as stdin/stdout/stderr and answer ``prompt``."""
    import pty
    import select
    import time

    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "200", "TERM": "dumb"}
    proc = subprocess.Popen([sys.executable, "-m", "filemem", *args], stdin=slave,
                            stdout=slave, stderr=slave, env=env, close_fds=True)
    os.close(slave)
    seen = b""
    answered = False
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                seen += chunk
            if not answered and prompt in seen:
                os.write(master, answer)
                answered = True
            if proc.poll() is not None and not ready:
                break
        else:
            proc.kill()
            raise AssertionError(f"timed out; output so far: {seen!r}")
        code = proc.wait(timeout=10)
    finally:
        os.close(master)
    assert answered, seen
    return code, seen.decode("utf-8", "replace").replace("\r\n", "\n")


class Recorder:
    """A gate that records each request and answers with a fixed outcome."""

    def __init__(self, outcome: Any = "allowed-once") -> None:
        self.outcome = outcome
        self.calls: list[filemem.ApprovalRequest] = []

    def __call__(self, req: filemem.ApprovalRequest) -> Any:
        self.calls.append(req)
        return self.outcome


def entry_fields(**changes: Any) -> dict[str, Any]:
    """The front-matter fields of a valid hand-written user/user-global entry file."""
    import uuid

    fields: dict[str, Any] = {
        "id": str(uuid.uuid4()), "track": "user", "scope": "user-global", "workspaceKey": "",
        "agentKey": "", "source": "me", "tags": [], "version": 1,
        "createdAt": "2026-01-01T00:00:00.000Z", "updatedAt": "2026-01-01T00:00:00.000Z",
        "sessionId": None}
    fields.update(changes)
    return fields


def entry_file_text(fields: dict[str, Any], text: str) -> str:
    """An entry file as a person might write it: one JSON value per key, then the text."""
    lines = [f"{k}: {json.dumps(v)}" for k, v in fields.items()]
    return "---\n" + "\n".join(lines) + "\n---\n" + text
