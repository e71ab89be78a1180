"""A NUL character (U+0000) never gets into a store: an entry's text goes into its commits'
messages, and git refuses a commit message holding one (`git fsck`: nulInCommit; remotes
that check what they receive refuse the push). Every way in is refused, nothing written."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import filemem
from filemem import errors
from tests.conftest import assert_clean_repo, ctx, file_of, git, head, run_cli, set_text

UG = {"track": "user", "scope": "user-global"}


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    assert run_cli("init", str(root)).returncode == 0
    return root


def test_a_text_with_nul_is_refused_by_every_write(store: Path) -> None:
    before = head(store)
    out = run_cli("add", "--yes", "--scope", "user-global", "-", store=store,
                  input="nul \0 byte")
    assert out.returncode == 1
    assert "INVALID_INPUT: entry text holds a NUL character (U+0000) at index 4" in out.stderr
    with filemem.open_store(store, write_policy="auto") as p:
        tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
        for call in (lambda: p.add({**UG, "text": "a\0"}, ctx()),
                     lambda: p.replace({**UG, "match": "tea", "text": "tea\0"}, ctx()),
                     lambda: p.seed([{**UG, "text": "ok"}, {**UG, "text": "\0"}], ctx()),
                     lambda: p.add({**UG, "text": "ok"}, ctx(agent="a\0b")),
                     lambda: p.add({**UG, "text": "ok"}, ctx(cwd="/a\0b")),
                     lambda: p.add({"track": "user", "scope": "workspace", "text": "ok",
                                    "workspaceKey": "w\0", "agentKey": ""}, ctx())):
            with pytest.raises(errors.ProtocolError) as caught:
                call()
            assert caught.value.code == errors.INVALID_INPUT
        assert [e["text"] for e in p.list_entries()] == ["likes tea"]
    assert git(store, "rev-list", "--count", f"{before}..HEAD").strip() == "1"  # the tea
    request = {"jsonrpc": "2.0", "id": 1, "method": "add", "params": {
        "input": {**UG, "text": "a \u0000 b"},
        "write": {"agent": "x", "session": {"id": "s", "header": {"cwd": "/tmp"}}}}}
    bridge = subprocess.run(
        [sys.executable, "-m", "filemem.cli", "bridge", "--store", str(store), "--approval",
         "auto"], input=json.dumps(request) + "\n", capture_output=True, text=True)
    answer = json.loads(bridge.stdout.splitlines()[0])
    assert answer["error"]["data"]["code"] == "INVALID_INPUT"
    assert "NUL character" in answer["error"]["message"]
    assert file_of(store, tea["id"]).read_text(encoding="utf-8").endswith("likes tea\n")
    assert_clean_repo(store)


def test_a_hand_edit_with_nul_cannot_be_adopted_and_a_git_commit_of_one_is_named(
        store: Path) -> None:
    with filemem.open_store(store, write_policy="auto") as p:
        eid = p.add({**UG, "text": "hello there"}, ctx())["entry"]["id"]
    path = file_of(store, eid)
    set_text(path, "hello \0 there\n")
    status = run_cli("status", store=store)
    assert "cannot adopt: the entry text holds a NUL character (U+0000)" in status.stdout
    before = head(store)
    adopt = run_cli("adopt", "--yes", store=store)
    assert adopt.returncode == 1 and head(store) == before
    git(store, "commit", "-qam", "by hand")  # git itself takes it: in a blob, NUL is fine
    listed = run_cli("list", store=store)
    assert listed.returncode == 1 and "STORE_CORRUPT" in listed.stderr
    assert "NUL character" in listed.stderr and "git -C" in listed.stderr  # the way out
    git(store, "revert", "--no-edit", "HEAD")
    assert run_cli("list", store=store).returncode == 0
    assert_clean_repo(store)
