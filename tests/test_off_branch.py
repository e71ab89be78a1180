"""A store whose HEAD is not on its branch `main`: on another branch (`git switch -c`) or
detached (`git checkout <commit>`) outside a rebase or bisect. filemem reads, writes and
syncs `main` only, so every surface refuses (STORE_CORRUPT) with nothing written or pushed,
and the message says where HEAD is and the way back, not that the store is damaged."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import filemem
from filemem import errors
from filemem.owner import Owner
from tests.conftest import run_cli
from tests.test_git_commands import UG, UG_ARGS, g, head, published
from tests.test_store_health import _bridge


def refs(path: Path) -> str:
    return g(path, "for-each-ref", "--format=%(refname) %(objectname)").stdout


def assert_off_branch(out: subprocess.CompletedProcess[str], store: Path, where: str) -> None:
    assert out.returncode == 1, (out.stdout, out.stderr)
    assert "Traceback" not in out.stderr, out.stderr
    assert out.stderr.startswith(f"filemem: STORE_CORRUPT: the store {store} is not on its "
                                 f"git branch main ({where})"), out.stderr
    assert "damaged" not in out.stderr, out.stderr
    assert f"`git -C {store} switch main`" in out.stderr, out.stderr


def test_a_store_on_another_branch_refuses_writes_reads_and_sync(tmp_path: Path) -> None:
    remote, a = published(tmp_path)
    g(a, "switch", "-q", "-c", "feature")
    g(a, "commit", "-q", "--allow-empty", "-m", "a commit of the person's on feature")
    local, shared = refs(a), refs(remote)
    for args in (["add", "--yes", *UG_ARGS, "on feature branch"], ["sync"], ["list"],
                 ["status"]):
        out = run_cli(*args, store=a)
        assert_off_branch(out, a, "HEAD is on the branch feature")
        assert f"`git -C {a} merge feature`" in out.stderr, out.stderr
    out = run_cli("add", "--yes", "--json", *UG_ARGS, "on feature branch", store=a)
    assert out.returncode == 1
    assert json.loads(out.stdout)["error"]["details"]["branch"] == "feature"
    # the Python API, opened unchecked so the write itself meets the branch
    with filemem.open_store(a, write_policy="auto", validate=False) as provider:
        with pytest.raises(errors.ProtocolError) as caught:
            provider.add({**UG, "text": "from python"},
                         filemem.write_context(session_id="s", cwd="/w"))
        assert caught.value.code == errors.STORE_CORRUPT
        assert caught.value.details["branch"] == "feature"
        with pytest.raises(errors.ProtocolError):
            Owner(provider).sync()
    answer = _bridge(a, "add", {"input": {**UG, "text": "from the host"},
                                "write": filemem.write_context(session_id="h", cwd="/w")})
    assert answer["error"]["data"]["code"] == "STORE_CORRUPT", answer
    assert answer["error"]["data"]["details"]["branch"] == "feature"
    # nothing was committed on any branch, nothing pushed, nothing left in the files
    assert refs(a) == local and refs(remote) == shared
    assert g(a, "status", "--porcelain").stdout == ""

    # the way out the message gives: back on main, the branch's commit merged, synced
    g(a, "switch", "-q", "main")
    g(a, "merge", "-q", "--no-edit", "feature")
    out = run_cli("add", "--yes", *UG_ARGS, "back on main", store=a)
    assert out.returncode == 0, out.stderr
    out = run_cli("sync", store=a)
    assert out.returncode == 0, out.stderr
    assert head(remote, "main") == head(a, "main")
    log = g(remote, "log", "--format=%s", "main").stdout
    assert "a commit of the person's on feature" in log and "back on main" in log
    out = run_cli("list", store=a)
    assert out.returncode == 0 and "back on main" in out.stdout, out.stderr


def test_a_detached_head_is_named_as_such_not_as_damage(tmp_path: Path) -> None:
    _remote, a = published(tmp_path)
    old = head(a, "HEAD~1")
    g(a, "checkout", "-q", old)
    for args in (["list"], ["add", "--yes", *UG_ARGS, "detached"], ["sync"]):
        out = run_cli(*args, store=a)
        assert_off_branch(out, a, f"HEAD is detached at commit {old}")
        assert f"`git -C {a} merge {old}`" in out.stderr, out.stderr
    g(a, "switch", "-q", "main")
    assert run_cli("add", "--yes", *UG_ARGS, "back on main", store=a).returncode == 0
