"""Private files whatever the umask: the real CLI, run under ``umask 000``, through init,
writes, pending approvals, sync, clone, fetches and merges, export and import, watch.

Every file filemem (or dulwich for it) creates is 0600 (0400 where git wants it read-only:
objects and packs) and every folder 0700; exports too. The bare remote is the owner's own
repository: git's own modes stay as git made them, but nothing there is world-writable.
Root ignores permissions, so these tests look at mode bits, never at access.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import git

pytestmark = pytest.mark.skipif(os.name == "nt", reason="POSIX permission bits")


def cli(*args: str, store: Path | None = None, check: bool = True,
        cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """The real `filemem` under umask 000, with no terminal (a write under `ask` is staged)."""
    cmd = [sys.executable, "-m", "filemem.cli", *args]
    if store is not None:
        cmd += ["--store", str(store)]
    out = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL,
                         preexec_fn=lambda: os.umask(0), cwd=cwd)
    if check and out.returncode != 0:
        raise AssertionError(f"filemem {' '.join(args)} failed ({out.returncode}): "
                             f"{out.stdout}{out.stderr}")
    return out


def add(store: Path, text: str, *extra: str) -> None:
    cli("add", "--yes", "--scope", "user-global", *extra, text, store=store)


def watch_briefly(store: Path) -> None:
    """`filemem watch` for a moment, while a hand edit and a commit happen."""
    proc = subprocess.Popen([sys.executable, "-m", "filemem.cli", "watch", "--json",
                             "--store", str(store)], stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: os.umask(0))
    try:
        time.sleep(1.5)
        add(store, "written while watching")
        time.sleep(1.0)
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


@dataclass
class World:
    root: Path
    a: Path  # made by `filemem init` (under a folder init made too)
    b: Path  # made by `filemem clone`
    remote: Path  # the owner's bare repository
    exports: list[Path]  # files and folders written by `filemem export --out`


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("perms")
    os.chmod(root, 0o700)
    remote = root / "remote.git"
    git(root, "init", "-q", "--bare", "-b", "main", str(remote))  # the owner's umask
    a = root / "made-by-init" / "A"
    b = root / "made-by-clone" / "B"
    cli("init", str(a))
    for n in range(3):
        add(a, f"machine A fact {n}")
    staged = cli("add", "--scope", "user-global", "staged without a terminal", store=a,
                 check=False)
    assert staged.returncode == 3 and "pending" in staged.stderr
    pending = json.loads(cli("pending", "--json", store=a).stdout)
    assert pending, "a write without a terminal under `ask` is staged"
    cli("remote", "add", "origin", str(remote), store=a)
    cli("sync", store=a)
    cli("clone", str(remote), str(b))
    # both sides write, then sync: fetches, a merge commit, a fast-forward, pushes
    for n in range(2):
        add(a, f"machine A later {n}")
        add(b, f"machine B fact {n}")
    cli("sync", store=a)
    cli("sync", store=b)  # diverged: merge, push
    cli("sync", store=a)  # fast-forward
    cli("approve", "--all", store=a)
    cli("add", "--scope", "user-global", "another staged write", store=b, check=False)
    cli("reject", "--all", store=b)
    for store in (a, b):
        cli("query", "machine", store=store)
        cli("snapshot", store=store)
        cli("list", store=store)
        cli("status", store=store)
        cli("log", store=store)
        cli("verify", store=store)
        cli("budgets", store=store)
        cli("audit", store=store)
    out = root / "exports"
    out.mkdir(mode=0o700)
    envelope = out / "envelope.json"
    cli("export", "--out", str(envelope), store=a)
    hermes = out / "hermes"
    cli("export", "--adapter", "hermes-memory-md", "--out", str(hermes), store=a)
    claude = out / "claude"
    cli("export", "--adapter", "claude-code-memory-md", "--out", str(claude), store=a)
    mem0 = out / "mem0.json"
    cli("export", "--adapter", "mem0", "--out", str(mem0), store=a)
    cli("import", "--yes", str(envelope), store=b)
    cli("import", "--yes", "--adapter", "hermes-memory-md", str(hermes), store=b)
    cli("sync", store=b)
    cli("sync", store=a)
    watch_briefly(a)
    yield World(root, a, b, remote, [out])


def modes(top: Path) -> Iterator[tuple[Path, int]]:
    """Every folder and file under ``top`` (itself included), never following a link."""
    yield top, os.lstat(top).st_mode
    for folder, dirs, files in os.walk(top):
        for name in dirs + files:
            path = Path(folder, name)
            yield path, os.lstat(path).st_mode


def not_private(top: Path) -> list[str]:
    """Files with any group/other bit, folders too, and objects and packs not 0400."""
    bad = []
    for path, mode in modes(top):
        perm = stat.S_IMODE(mode)
        rel = path.relative_to(top.parent)
        if perm & 0o077:
            bad.append(f"{rel}: {perm:04o}")
        elif stat.S_ISREG(mode) and ".git/objects/" in path.as_posix() and perm != 0o400:
            bad.append(f"{rel}: {perm:04o} (git objects and packs are 0400)")
    return bad


def test_the_stores_files_are_private(world: World) -> None:
    bad = not_private(world.a.parent)
    assert bad == [], "\n".join(bad)


def test_the_clones_files_are_private(world: World) -> None:
    bad = not_private(world.b.parent)
    assert bad == [], "\n".join(bad)


def test_the_stores_hold_packs_and_remote_refs(world: World) -> None:
    """The walk above saw what the fetches make (packs, remote-tracking refs)."""
    for store in (world.a, world.b):
        assert list((store / ".git" / "objects" / "pack").glob("*.pack"))
        assert (store / ".git" / "refs" / "remotes" / "origin" / "main").is_file()
        assert (store / ".filemem").is_dir()


def test_exports_are_private(world: World) -> None:
    for out in world.exports:
        bad = not_private(out)
        assert bad == [], "\n".join(bad)
    written = [p for top in world.exports for p, m in modes(top) if stat.S_ISREG(m)]
    assert len(written) >= 4  # envelope, hermes' files, claude's folder, mem0


def test_nothing_in_the_remote_is_world_writable(world: World) -> None:
    bad = [f"{p.relative_to(world.root)}: {stat.S_IMODE(m):04o}" for p, m in modes(world.remote)
           if stat.S_IMODE(m) & 0o002]
    assert bad == []
    assert git(world.remote, "rev-parse", "main").strip()


def test_what_a_push_adds_to_the_remote_is_private(world: World) -> None:
    """Every object there, in a pack or loose, came from a filemem push (git init makes
    none), and so does the ref. (git's receive-pack keeps a push of fewer than 100 objects
    loose.)"""
    objects = world.remote / "objects"
    pushed = [*(p for p in objects.rglob("*") if p.is_file() and p.parent.name != "info"),
              world.remote / "refs" / "heads" / "main"]
    assert len(pushed) >= 3
    bad = [f"{p.name}: {stat.S_IMODE(os.lstat(p).st_mode):04o}" for p in pushed
           if stat.S_IMODE(os.lstat(p).st_mode) & 0o077]
    assert bad == [], "\n".join(bad)


def test_export_over_an_existing_file_is_private(tmp_path: Path, world: World) -> None:
    """--force replaces a file that was world-readable with a private one."""
    os.chmod(tmp_path, 0o700)
    target = tmp_path / "mem0.json"
    target.write_text("[]")
    os.chmod(target, 0o666)
    cli("export", "--adapter", "mem0", "--force", "--out", str(target), store=world.a)
    assert stat.S_IMODE(os.lstat(target).st_mode) == 0o600
