"""A store in a state filemem did not make: a damaged repository (STORE_CORRUPT naming the
object and the way out, never a traceback), a read-only store (reads answer, writes fail
with STORE_READ_ONLY), a branch lock left by git (STORE_BUSY naming it), and readers that
never wait for a writer holding the store lock."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem import errors
from filemem.bridge import PROTOCOL_ERROR, STORE_ERROR, Bridge
from filemem.cli.common import EXIT_BUSY, EXIT_READ_ONLY
from filemem.store.auditlog import row
from filemem.store.core import Store
from tests.conftest import ctx, git, run_cli

UG = ["--track", "user", "--scope", "user-global"]
COMMANDS = [["list"], ["query", "entry"], ["snapshot"], ["budgets"], ["export"],
            ["add", "--yes", *UG, "one more"], ["verify"], ["status"]]


def _store(path: Path) -> Path:
    filemem.init_store(path).close()
    for text in ("entry one", "entry two"):
        assert run_cli("add", "--yes", *UG, text, store=path).returncode == 0
    return path


def _bridge(store: Path, method: str, params: dict[str, Any]) -> dict[str, Any]:
    out = io.BytesIO()  # opened unvalidated: the request, not the open, meets the damage
    with filemem.open_store(store, write_policy="auto", validate=False) as provider:
        Bridge(provider, io.BytesIO(), out).handle(
            {"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    return dict(json.loads(out.getvalue().decode("utf-8").splitlines()[0]))


# ---------------------------------------------------------------- 12: a damaged repository


def _loosen(store: Path) -> None:
    """Every object as a loose file (as git itself leaves a young repository), so that one
    can be damaged alone: each pack moved out and unpacked with git."""
    pack_dir = store / ".git" / "objects" / "pack"
    for pack in sorted(pack_dir.glob("*.pack")):
        moved = store.parent / pack.name
        pack.rename(moved)
        pack.with_suffix(".idx").unlink()
        with moved.open("rb") as f:
            subprocess.run(["git", "-C", str(store), "unpack-objects", "-q"], stdin=f,
                           check=True)
        moved.unlink()


def _damage(store: Path, kind: str) -> tuple[str, str | None]:
    """Damage the store as a disk or a person might; (object sha, store path it holds)."""
    head = git(store, "rev-parse", "HEAD").strip()
    if kind == "detached":
        git(store, "checkout", "-q", "--detach")
        return head, None
    if kind == "commit":
        sha, path = head, None
    elif kind == "tree":
        sha, path = git(store, "rev-parse", "HEAD:user").strip(), "user/"
    else:
        line = next(ln for ln in git(store, "ls-tree", "-r", "HEAD").splitlines()
                    if "user-global" in ln)
        meta, path = line.split("\t")
        sha = meta.split()[2]
    _loosen(store)
    obj = store / ".git" / "objects" / sha[:2] / sha[2:]
    assert obj.exists()
    obj.chmod(0o600)
    if kind == "garbage":
        obj.write_bytes(b"this is not a git object\n")
    else:
        obj.unlink()
    shutil.rmtree(store / ".filemem" / "cache")  # no view cached from before the damage
    return sha, path


@pytest.mark.parametrize("kind", ["blob", "tree", "commit", "garbage", "detached"])
def test_a_damaged_repository_is_store_corrupt_naming_object_and_way_out(
        tmp_path: Path, kind: str) -> None:
    store = _store(tmp_path / "mem")
    sha, path = _damage(store, kind)
    for args in COMMANDS:
        out = run_cli(*args, store=store)
        assert out.returncode == 1, (args, out.stderr)
        assert "Traceback" not in out.stderr, (args, out.stderr)
        assert out.stderr.startswith("filemem: STORE_CORRUPT: "), (args, out.stderr)
        assert sha in out.stderr, (args, out.stderr)
        if kind == "detached":
            assert "git -C" in out.stderr and "switch main" in out.stderr
        else:
            assert "git -C" in out.stderr and "fsck" in out.stderr, out.stderr
            assert "filemem clone" in out.stderr, out.stderr
        if path is not None and args[0] != "verify":  # verify walks history by object
            assert path in out.stderr, (args, out.stderr)
    # the Python API: a ProtocolError with the protocol's code
    with pytest.raises(errors.ProtocolError) as caught, filemem.open_store(store) as provider:
        provider.list_entries()
    assert caught.value.code == errors.STORE_CORRUPT
    assert caught.value.details.get("object") == sha
    # the bridge: -32000 with data.code, not -32603
    answer = _bridge(store, "listEntries", {})
    assert answer["error"]["code"] == PROTOCOL_ERROR, answer
    assert answer["error"]["data"]["code"] == "STORE_CORRUPT"
    assert sha in answer["error"]["message"]


# ---------------------------------------------------------------- 13: a read-only store


@pytest.fixture()
def read_only_store(tmp_path: Path) -> Iterator[Path]:
    mnt = tmp_path / "ro"
    mnt.mkdir()
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("needs root to mount a tmpfs")
    if subprocess.run(["mount", "-t", "tmpfs", "none", str(mnt)],
                      capture_output=True).returncode != 0:
        pytest.skip("mounting a tmpfs is not permitted here")
    try:
        bare = mnt / "remote.git"
        git(tmp_path, "init", "-q", "--bare", "-b", "main", str(bare))
        store = _store(mnt / "mem")
        assert run_cli("remote", "add", "origin", str(bare), store=store).returncode == 0
        assert run_cli("sync", store=store).returncode == 0
        assert subprocess.run(["mount", "-o", "remount,ro", str(mnt)],
                              capture_output=True).returncode == 0
        yield store
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_reads_answer_on_a_read_only_store_and_writes_fail_with_one_line(
        read_only_store: Path) -> None:
    store = read_only_store
    with pytest.raises(OSError):
        (store / ".filemem" / "probe").write_text("x")  # root really cannot write here
    for args in (["list"], ["budgets"], ["export"], ["log"], ["verify"], ["status"],
                 ["audit"]):
        out = run_cli(*args, store=store)
        assert out.returncode == 0, (args, out.stderr)
        assert out.stderr == "", (args, out.stderr)
    out = run_cli("query", "entry", "--session", "s1", "--json", store=store)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["total"] == 2  # stdout is untouched JSON
    note = out.stderr.strip().splitlines()
    assert len(note) == 1 and "read-only" in note[0], out.stderr
    out = run_cli("snapshot", "--session", "s2", "--json", store=store)
    assert out.returncode == 0, out.stderr
    assert "entry one" in json.loads(out.stdout)["text"]
    assert len(out.stderr.strip().splitlines()) == 1 and "read-only" in out.stderr
    with filemem.open_store(store) as provider:  # the API too
        assert provider.query({"text": "entry"})["total"] == 2
        assert "entry two" in provider.snapshot({"id": "s3", "header": {"cwd": "/w"}})
        with pytest.raises(errors.StoreReadOnly):
            provider.add({"track": "user", "scope": "user-global", "text": "no"}, ctx())
    for args in (["add", "--yes", *UG, "cannot"], ["sync"]):
        out = run_cli(*args, store=store)
        assert out.returncode == EXIT_READ_ONLY, (args, out.stderr)
        assert "Traceback" not in out.stderr
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("filemem: STORE_READ_ONLY: "), lines
    answer = _bridge(store, "add", {"input": {"track": "user", "scope": "user-global",
                                              "text": "no"}, "write": ctx()})
    assert answer["error"]["code"] == STORE_ERROR
    assert answer["error"]["data"]["code"] == "STORE_READ_ONLY"


# ---------------------------------------------------------------- 14: git's branch lock


def test_a_stale_branch_lock_is_store_busy_naming_the_file(tmp_path: Path) -> None:
    store = _store(tmp_path / "mem")
    lock = store / ".git" / "refs" / "heads" / "main.lock"
    lock.write_bytes(b"")
    before = git(store, "rev-parse", "HEAD").strip()
    out = run_cli("add", "--yes", *UG, "while git holds the branch", store=store)
    assert out.returncode == EXIT_BUSY, out.stderr
    assert out.stderr.startswith("filemem: STORE_BUSY: "), out.stderr
    assert str(lock) in out.stderr and "delete the file" in out.stderr
    assert "Traceback" not in out.stderr
    answer = _bridge(store, "add", {"input": {"track": "user", "scope": "user-global",
                                              "text": "busy"}, "write": ctx()})
    assert answer["error"]["code"] == STORE_ERROR, answer
    assert answer["error"]["data"]["code"] == "STORE_BUSY"
    assert str(lock) in answer["error"]["message"]
    assert git(store, "rev-parse", "HEAD").strip() == before
    lock.unlink()
    assert run_cli("add", "--yes", *UG, "after git", store=store).returncode == 0


# ---------------------------------------------------------------- 15: readers never wait


_HOLDER = """
import sys, time
from filemem.store.core import Store
s = Store(sys.argv[1])
with s.locked():
    s.journal.begin(s.git.head(), s.git.head(), {})  # a write stopped mid-commit
    print("held", flush=True)
    time.sleep(120)
"""


def test_reads_answer_while_another_process_holds_the_store_lock(tmp_path: Path) -> None:
    store = _store(tmp_path / "mem")
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(store)],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        for args in (["list"], ["query", "entry", "--session", "s1"],
                     ["snapshot", "--session", "s2"], ["budgets"], ["audit"]):
            start = time.monotonic()
            out = subprocess.run([sys.executable, "-m", "filemem.cli", *args, "--store",
                                  str(store)], capture_output=True, text=True,
                                 stdin=subprocess.DEVNULL, timeout=45)  # a guard only
            assert out.returncode == 0, (args, out.stderr, time.monotonic() - start)
    finally:
        holder.kill()
        holder.wait()
    with filemem.open_store(store, write_policy="auto") as provider:
        rows = provider.audit_list(100)
        provider.add({"track": "user", "scope": "user-global", "text": "later"}, ctx())
        after = provider.audit_list(100)
    actions = [r["action"] for r in rows]
    assert "recalled" in actions and "snapshot" in actions
    seqs = [r["seq"] for r in after]
    assert len(set(seqs)) == len(seqs) and seqs == sorted(seqs, reverse=True)
    assert after[0]["action"] == "add" and after[0]["seq"] > rows[0]["seq"]


def test_ledger_rows_numbered_during_a_commit_come_after_its_rows(tmp_path: Path) -> None:
    store = Store(_store(tmp_path / "mem"))
    try:
        head = store.git.head()
        commit_rows = [row("add", text="in progress"), row("add", text="same commit")]
        for r in commit_rows:
            r["ts"] = 1  # the commit's clock lags behind: seq still follows the counter
        store.number(commit_rows, head)  # a commit took its seqs; its ref has not moved yet
        (ledger_row,) = store.append_ledger([row("snapshot", text="meanwhile")])
        assert ledger_row["seq"] > commit_rows[-1]["seq"] > commit_rows[0]["seq"]
        later = [row("add", text="next commit")]
        store.number(later, head)
        assert later[0]["seq"] > ledger_row["seq"]
    finally:
        store.close()
