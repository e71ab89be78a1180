"""What a cold command and the MCP server import, checked structurally (never timed): a read
from the CLI (on a store named or found at the default location) loads neither the other
commands' modules nor dulwich, ruamel, portalocker, platformdirs, pydantic, the MCP SDK, the
standard library's thread pool, logging, subprocess, shutil, pathlib, tempfile and
dataclasses, nor filemem's write side (operations, approval, transaction, packing); the
command table that makes the CLI lazy matches what its modules register; and the start-up
benchmarks run and print figures beside their targets."""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest

import filemem
from filemem import location
from filemem.cli.app import COMMANDS, main
from tests.conftest import BIG, ROOT, ctx, git

HEAVY = ("dulwich", "ruamel", "portalocker", "pydantic", "mcp", "mcp_types", "jsonschema",
         "anyio", "importlib.metadata", "concurrent.futures", "logging", "subprocess", "shutil",
         "pathlib", "tempfile", "platformdirs",  # the default store's folder: location.py
         # the read path's classes are NamedTuples or plain classes: making a dataclass runs
         # exec() for each generated method, about a millisecond a class
         "dataclasses",
         "filemem.owner", "filemem.adapters", "filemem.mcp",
         "filemem.cli.connect", "filemem.cli.sync", "filemem.cli.owner",
         "filemem.cli.serve", "filemem.cli.adapters", "filemem.cli.hermes",
         # the write side: the operations, the approval step, the transaction, packing
         "filemem.ops", "filemem.approval", "filemem.store.transaction",
         "filemem.files.manyfiles", "filemem.files.packing", "filemem.store.redactstage")

# runs the CLI, then prints the modules it loaded (even when click exits)
WRAPPER = """
import json, sys
try:
    from filemem.cli import main
    main(sys.argv[1:], prog_name="filemem")
finally:
    sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
"""


def test_the_command_table_matches_what_the_modules_register() -> None:
    every = sorted({m for modules in COMMANDS.values() for m in modules})
    for module in every:
        importlib.import_module(f"filemem.cli.{module}")
    assert set(main.commands) == set(COMMANDS)
    for name, cmd in main.commands.items():
        defined = {cmd.callback.__module__} if cmd.callback else set()
        stack = [cmd]
        while stack:
            group = stack.pop()
            if isinstance(group, click.Group):
                for sub in group.commands.values():
                    if sub.callback is not None:
                        defined.add(sub.callback.__module__)
                    stack.append(sub)
        assert defined == {f"filemem.cli.{m}" for m in COMMANDS[name]}, name


@pytest.fixture(scope="module")
def packed_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the default store of a user whose XDG_DATA_HOME is "data"
    data = tmp_path_factory.mktemp("cold") / "data"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_DATA_HOME", str(data))
        path = Path(location.user_data_dir())
    assert path.parent == data
    with filemem.open_store(path, create=True, budgets=BIG, write_policy="auto") as p:
        p.seed([{"track": "user", "scope": "user-global", "text": f"fact {i}"}
                for i in range(30)], ctx())
        p.add({"track": "user", "scope": "user-global", "text": "one loose fact"}, ctx())
    git(path, "repack", "-adq")  # packed by git itself, deltas and all
    return path


@pytest.mark.parametrize("found_by", ["FILEMEM_STORE", "the default location"])
@pytest.mark.parametrize("args", [["query", "fact"], ["list"], ["snapshot"],
                                  ["query", "--json", "fact"], ["list", "--json"]])
def test_a_cold_read_imports_only_what_it_needs(packed_store: Path, args: list[str],
                                                found_by: str) -> None:
    env = {**os.environ, "FILEMEM_STORE": str(packed_store)} if found_by == "FILEMEM_STORE" \
        else {**os.environ, "XDG_DATA_HOME": str(packed_store.parent)}
    for _ in range(2):  # the second run has a fresh view cache, as most reads do
        out = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True,
                             text=True, env=env)
        assert out.returncode == 0, out.stderr
    assert "fact" in out.stdout
    loaded = json.loads(out.stderr.rsplit("MODULES ", 1)[1])
    # the store's checks only for a snapshot (it withholds an entry a blocking check matches)
    unneeded = HEAVY if args[0] == "snapshot" else (*HEAVY, "filemem.rules.findings")
    heavy = [m for m in loaded if any(m == h or m.startswith(h + ".") for h in unneeded)]
    assert heavy == []


def test_a_cold_write_imports_no_lock_library_and_no_owner_side(tmp_path: Path) -> None:
    """`filemem add --yes` takes the store lock and the audit counter through fcntl
    (portalocker's import loads importlib.metadata: a fifth of a cold add)."""
    store = tmp_path / "store"
    with filemem.open_store(store, create=True, budgets=BIG, write_policy="auto") as p:
        p.add({"track": "user", "scope": "user-global", "text": "a first fact"}, ctx())
    env = {**os.environ, "FILEMEM_STORE": str(store)}
    out = subprocess.run([sys.executable, "-c", WRAPPER, "add", "--yes", "--track", "user",
                          "--scope", "user-global", "a cold write"],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "Added" in out.stdout
    loaded = json.loads(out.stderr.rsplit("MODULES ", 1)[1])
    unneeded = ("portalocker", "importlib.metadata", "email", "dulwich", "ruamel", "mcp",
                "pydantic", "logging", "dataclasses", "filemem.owner", "filemem.adapters")
    assert [m for m in loaded if any(m == u or m.startswith(u + ".") for u in unneeded)] == []
    assert "a cold write" in git(store, "log", "-1", "--format=%B")


ELSEWHERE = ("filemem.owner.sync", "filemem.owner.remotes", "filemem.owner.redact",
             "filemem.owner.imports", "filemem.adapters", "filemem.owner.watch")


@pytest.mark.parametrize("args,unneeded", [
    (["verify"], ELSEWHERE),
    (["status"], (*ELSEWHERE, "filemem.owner.history", "filemem.owner.merge")),
    (["log"], ELSEWHERE),
])
def test_an_owner_command_imports_only_its_own_part_of_the_owner_side(
        packed_store: Path, args: list[str], unneeded: tuple[str, ...]) -> None:
    env = {**os.environ, "FILEMEM_STORE": str(packed_store)}
    out = subprocess.run([sys.executable, "-c", WRAPPER, *args], capture_output=True,
                         text=True, env=env)
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stderr.rsplit("MODULES ", 1)[1]))
    assert "filemem.owner" in loaded
    assert sorted(loaded & set(unneeded)) == []


def test_claude_codes_session_start_hook_imports_only_what_a_snapshot_needs(
        packed_store: Path) -> None:
    """Claude Code runs it at every session start: not the modules that edit its files
    (`connect`), nor the adapters and imports its auto-memory offer uses."""
    env = {**os.environ, "FILEMEM_STORE": str(packed_store)}
    hook_input = json.dumps({"session_id": "s-1", "cwd": str(packed_store),
                             "hook_event_name": "SessionStart", "source": "startup"})
    out = subprocess.run([sys.executable, "-c", WRAPPER, "hook", "claude-code", "session-start"],
                         input=hook_input, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert "mcp__filemem__memory_add" in json.loads(out.stdout.splitlines()[0])[
        "hookSpecificOutput"]["additionalContext"]
    loaded = json.loads(out.stderr.rsplit("MODULES ", 1)[1])
    unneeded = ("filemem.owner.claude_code", "filemem.owner.jsonconfig", "filemem.owner.imports",
                "filemem.adapters", "filemem.ops", "subprocess", "dataclasses", "pathlib",
                "dulwich", "ruamel", "mcp", "logging")
    assert [m for m in loaded if any(m == u or m.startswith(u + ".") for u in unneeded)] == []


def test_the_mcp_server_reads_without_dulwich_or_ruamel(packed_store: Path) -> None:
    code = ("import sys, filemem.mcp.server, filemem\n"
            f"p = filemem.open_store({str(packed_store)!r}, validate=False)\n"
            "p.budgets(); p.list_entries()\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'dulwich', 'ruamel'}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def _bench(name: str, *args: str) -> str:
    out = subprocess.run([sys.executable, str(ROOT / "bench" / name), *args],
                         capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_the_cold_cli_benchmark_prints_each_command_beside_its_peers() -> None:
    out = _bench("cold_cli.py", "--runs", "1", "--entries", "20")
    for row in ("python -c pass", 'python -c "import filemem"', "filemem query fact",
                "filemem list", "filemem snapshot", "filemem add --yes"):
        assert row in out
    assert out.count("target 150 ms: ") == 3 and "no target: for comparison" in out


def test_the_mcp_startup_benchmark_prints_both_servers_and_the_targets() -> None:
    out = _bench("mcp_startup.py", "--runs", "1", "--entries", "20")
    assert out.count("bare MCP SDK server:") == 2 and out.count("filemem mcp:") == 2
    assert out.count("target <= +300 ms: ") == 2
    assert "target <= 100 MB: " in out or sys.platform != "linux"
