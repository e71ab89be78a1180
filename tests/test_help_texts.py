"""What filemem says points only to what an installed package has: no --help text and no
message sends a person to a file of this repository (schemas/, tests/, bench/,
conformance/), which `pip install filemem` does not bring."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import click

from filemem.cli import main
from tests.conftest import run_cli

ROOT = Path(__file__).resolve().parents[1]
REPO_ONLY = re.compile(r"(?<![\w.])(schemas|tests|bench|conformance)/|\.\./shared")


def commands(group: click.Command, path: tuple[str, ...] = ()) -> Iterator[
        tuple[tuple[str, ...], click.Command]]:
    yield path, group
    if isinstance(group, click.Group):
        for name, sub in group.commands.items():
            yield from commands(sub, (*path, name))


def test_no_help_text_cites_a_repository_file() -> None:
    seen = 0
    for path, cmd in commands(main):
        ctx = click.Context(cmd, info_name=" ".join(("filemem", *path)))
        text = cmd.get_help(ctx)
        assert not REPO_ONLY.search(text), (path, REPO_ONLY.search(text))
        seen += 1
    assert seen > 20  # every command and group was walked


def test_bridge_help_says_what_a_host_needs() -> None:
    """`filemem bridge --help` is enough to write a host: the methods and their params, the
    error answers, the approval round trip and how to let a write through."""
    out = run_cli("bridge", "--help")
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    for needed in ('add, replace, remove, consolidate {"input": {...}, "write": {...}}',
                   'seed {"inputs": [...], "write": {...}}',
                   'import {"envelope": {...}, "write": {...}}', "auditList", "snapshot",
                   "budgets, listEntries, export", "describe", '"agentPreset"',
                   '"code": -32000', "-32601", "-32602", '"method": "approval/request"',
                   '{"result": {"outcome": "allowed-once"}}', "filemem pending"):
        assert needed in text, needed
    assert "schemas" not in text


def string_constants(path: Path) -> Iterator[tuple[int, str]]:
    """The string literals of a module that are not docstrings (messages, help, hints)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                and id(node) not in docs):
            yield node.lineno, node.value


def test_no_message_cites_a_repository_file() -> None:
    found = [f"{path.relative_to(ROOT)}:{line}: {text[:80]!r}"
             for path in sorted((ROOT / "filemem").rglob("*.py"))
             for line, text in string_constants(path) if REPO_ONLY.search(text)]
    assert not found, found
