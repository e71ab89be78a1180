"""The shared options before the command (`filemem --store S list`, as with `git -C`), and
a folder that is not a store answered with advice that leads somewhere. Real `filemem`."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import git, run_cli


def fm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`filemem ARGS` exactly as typed (run_cli would append --store)."""
    return run_cli(*args, env=env)


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    assert fm("init", str(path)).returncode == 0
    return path


def test_shared_options_before_the_command(store: Path, tmp_path: Path) -> None:
    s = str(store)
    out = fm("--store", s, "add", "--yes", "--scope", "user-global", "before the command")
    assert out.returncode == 0, out.stderr
    assert fm("--store", s, "--yes", "--workspace", "/w/api", "--agent", "coder",
              "--session", "S9", "add", "coder's note").returncode == 0
    listed = json.loads(fm("--store", s, "--json", "list").stdout)
    assert [(e["text"], e["workspaceKey"], e["agentKey"], e["sessionId"]) for e in listed] == [
        ("before the command", "", "", None), ("coder's note", "/w/api", "coder", "S9")]
    assert json.loads(fm(f"--store={s}", "--json", "list").stdout) == listed
    # a subcommand of a group: behind both words
    assert "No remotes" in fm("--store", s, "remote", "list").stdout
    # before the command beats the environment, as after it does
    env = {"FILEMEM_STORE": str(tmp_path / "elsewhere")}
    assert fm("--store", s, "path", env=env).stdout.strip() == s
    # given twice, the one after the command wins
    other = tmp_path / "other"
    assert fm("init", str(other)).returncode == 0
    assert fm("--store", s, "path", "--store", str(other)).stdout.strip() == str(other)
    assert "--store PATH" in fm("--help").stdout


def test_a_shared_option_the_command_does_not_take_is_a_usage_error(store: Path) -> None:
    out = fm("--json", "--store", str(store), "export")  # its output is JSON already
    assert out.returncode == 2
    assert "--json does not apply to `filemem export`" in out.stderr
    out = fm("--yes", "--store", str(store), "list")
    assert out.returncode == 2 and "--yes does not apply to `filemem list`" in out.stderr
    out = fm("--store", str(store))
    assert out.returncode == 2 and "Missing command" in out.stderr
    # an option value that looks like a command is still the value
    assert fm("--store", "list", "path").stdout.strip().endswith("/list")


def test_folders_that_are_not_stores_get_advice_that_leads_somewhere(tmp_path: Path) -> None:
    busy, repo, afile = tmp_path / "busy", tmp_path / "repo", tmp_path / "a-file"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine", encoding="utf-8")
    repo.mkdir()
    git(repo, "init", "-q")
    afile.write_text("x", encoding="utf-8")
    for path in (busy, repo, afile):
        listed = fm("--store", str(path), "list")
        assert listed.returncode == 4
        assert "filemem init NEW-FOLDER" in listed.stderr and "--store" in listed.stderr
        assert f"filemem init {path}" not in listed.stderr  # it would fail: not offered
        made = fm("init", str(path))
        assert made.returncode == 4 and made.stderr.startswith("filemem: STORE_EXISTS: ")
        # never the command that just failed: another folder
        assert "filemem init NEW-FOLDER" in made.stderr and "use another folder" not in made.stderr
        assert f"`filemem init {path}`" not in made.stderr
    assert "is a git repository that is not a filemem store" in fm("init", str(repo)).stderr
    assert not (repo / "filemem.yaml").exists() and not (busy / ".git").exists()
    # a missing or empty folder: init is the way, and it works
    for path in (tmp_path / "missing", tmp_path / "empty"):
        if path.name == "empty":
            path.mkdir()
        out = fm("--store", str(path), "list")
        assert out.returncode == 4 and f"create one with `filemem init {path}`" in out.stderr
        assert fm("init", str(path)).returncode == 0
        assert fm("--store", str(path), "list").returncode == 0
    # a folder inside a store: the store is named
    inside = tmp_path / "missing" / "user"
    inside.mkdir()
    (inside / "x").write_text("x", encoding="utf-8")
    out = fm("--store", str(inside), "list")
    assert out.returncode == 4 and f"use --store {tmp_path / 'missing'}" in out.stderr


def test_the_bridge_and_python_say_the_same(tmp_path: Path) -> None:
    import filemem

    (tmp_path / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(filemem.StoreNotFound) as info:
        filemem.open_store(tmp_path)
    assert "filemem init NEW-FOLDER" in info.value.message
    with pytest.raises(filemem.StoreExists) as made:
        filemem.init_store(tmp_path)
    assert "new or empty folder" in made.value.message
    out = subprocess.run([sys.executable, "-m", "filemem", "bridge", "--store", str(tmp_path)],
                         capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert out.returncode == 4 and "filemem init NEW-FOLDER" in out.stderr
