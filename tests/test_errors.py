"""One error tree, and each surface's one table: a busy store is reported as busy (its own
code, message and exit status), never as "no store"."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

import filemem
from filemem import errors
from filemem.cli import main
from filemem.store import core as store_mod
from filemem.store import storelock
from tests.conftest import ctx, run_cli

UG = {"track": "user", "scope": "user-global"}


@pytest.fixture()
def store_path(tmp_path: Path) -> Path:
    path = tmp_path / "mem"
    filemem.init_store(path).close()
    return path


def test_every_error_filemem_raises_on_purpose_has_one_root() -> None:
    for cls in (errors.ProtocolError, errors.StoreNotFound, errors.StoreExists,
                errors.StoreBusy, errors.StoreFull, errors.SyncError):
        assert issubclass(cls, errors.FilememError)
    assert errors.StoreBusy("x").code == errors.STORE_BUSY
    assert errors.StoreNotFound("x").code == errors.NO_STORE
    assert filemem.FilememError is errors.FilememError


def test_git_index_lock_is_busy_not_no_store(store_path: Path) -> None:
    (store_path / ".git" / "index.lock").write_bytes(b"git's")
    out = run_cli("add", "--yes", "--json", "--track", "user", "--scope", "user-global",
                  "while git holds the index", store=store_path)
    assert out.returncode == 5, out.stderr
    error = json.loads(out.stdout)["error"]
    assert error["code"] == "STORE_BUSY"
    assert "busy" in error["message"] and "index.lock" in error["message"]
    out = run_cli("add", "--yes", "--track", "user", "--scope", "user-global",
                  "while git holds the index", store=store_path)
    assert out.returncode == 5
    assert out.stderr.startswith("filemem: STORE_BUSY: the store is busy")
    assert "NO_STORE" not in out.stderr
    assert run_cli("list", "--json", store=store_path).stdout.strip() == "[]"


def test_store_lock_held_too_long_is_busy(store_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(storelock, "LOCK_TIMEOUT", 0.2)
    holder = store_mod.Store(store_path)  # another "process": its own lock file handle
    with holder.locked():
        result = CliRunner().invoke(main, ["add", "--yes", "--json", "--store", str(store_path),
                                           "--track", "user", "--scope", "user-global",
                                           "while another writer holds the lock"])
    holder.close()
    assert result.exit_code == 5, result.output
    error = json.loads(result.stdout)["error"]
    assert error["code"] == "STORE_BUSY"
    # the holder named where the system tells (/proc/locks): here, this very process
    assert (f"held by pid {os.getpid()} (this process)" if os.path.exists("/proc/locks")
            else "held by another filemem process") in error["message"]
    with filemem.open_store(store_path) as provider:
        assert provider.list_entries() == []


def test_no_store_keeps_its_own_code(tmp_path: Path) -> None:
    out = run_cli("list", "--json", store=tmp_path / "nothing-here")
    assert out.returncode == 4
    assert json.loads(out.stdout)["error"]["code"] == "NO_STORE"


def test_bridge_reports_busy_as_a_store_error(store_path: Path) -> None:
    from filemem.bridge import STORE_ERROR, Bridge

    (store_path / ".git" / "index.lock").write_bytes(b"git's")
    out = io.BytesIO()
    with filemem.open_store(store_path, write_policy="auto") as provider:
        Bridge(provider, io.BytesIO(), out).handle(
            {"jsonrpc": "2.0", "id": 1, "method": "add",
             "params": {"input": {**UG, "text": "busy"}, "write": ctx()}})
    error = json.loads(out.getvalue().decode("utf-8").splitlines()[0])["error"]
    assert error["code"] == STORE_ERROR
    assert error["data"]["code"] == "STORE_BUSY"


def test_mcp_tool_error_for_a_busy_store() -> None:
    from filemem.mcp.results import failure as _failure

    result = _failure("add", errors.StoreBusy("the store is busy: test"))
    assert result.is_error
    structured = result.structured_content
    assert structured is not None
    assert structured["error"]["code"] == "STORE_BUSY"
    assert "Retry" in structured["error"]["hint"]
