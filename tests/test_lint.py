"""The code stays clean: ruff over everything, mypy --strict over the package."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest

from tests.conftest import ROOT


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True)


def test_ruff_is_clean() -> None:
    ruff = shutil.which("ruff", path=str(ROOT / ".venv" / "bin")) or shutil.which("ruff")
    if ruff is None:
        pytest.skip("ruff is not installed (pip install -e '.[test]' brings it)")
    out = _run(ruff, "check", "filemem", "adapters", "tests", "conformance", "bench")
    assert out.returncode == 0, out.stdout + out.stderr


def test_mypy_strict_is_clean() -> None:
    pytest.importorskip("mypy")
    out = _run(sys.executable, "-m", "mypy", "filemem")
    assert out.returncode == 0, out.stdout + out.stderr


def _parsed_ops(tree: object) -> Iterator[str]:
    """The names of every operation in a parsed regular expression, nested ones too."""
    items = getattr(tree, "data", None)
    if items is None:
        if isinstance(tree, (tuple, list)):
            for part in tree:
                yield from _parsed_ops(part)
        return
    for op, av in items:
        yield str(op)
        yield from _parsed_ops(av)


def test_no_regular_expression_needs_syntax_that_python_3_10_lacks() -> None:
    """requires-python says 3.10: a possessive quantifier or an atomic group does not
    compile there, and early 3.11 releases (Debian 12's 3.11.2) matched a possessive group
    holding a lookahead wrongly (the hidden-comment check found nothing). Every pattern of
    every filemem module is parsed and looked through."""
    import importlib
    import pkgutil
    import re

    import filemem
    from filemem.rules.lazyre import Lazy

    parse = importlib.import_module("re._parser" if hasattr(re, "_parser") else "sre_parse").parse
    seen: dict[str, list[str]] = {}

    def patterns(value: object, depth: int = 0) -> Iterator[tuple[str | bytes, int]]:
        if isinstance(value, (Lazy, re.Pattern)):
            yield value.pattern, value.flags
        elif depth < 3 and isinstance(value, dict):
            for v in value.values():
                yield from patterns(v, depth + 1)
        elif depth < 3 and isinstance(value, (tuple, list, frozenset, set)):
            for v in value:
                yield from patterns(v, depth + 1)

    for info in pkgutil.walk_packages(filemem.__path__, "filemem."):
        if info.name.endswith("__main__"):
            continue  # importing it runs the command line
        try:
            module = importlib.import_module(info.name)
        except ModuleNotFoundError:  # a module that runs inside another tool (Hermes' plugin)
            continue
        for value in list(vars(module).values()):
            for pattern, flags in patterns(value):
                ops = set(_parsed_ops(parse(pattern, flags & ~re.UNICODE)))
                bad = ops & {"POSSESSIVE_REPEAT", "ATOMIC_GROUP"}
                if bad:
                    seen.setdefault(info.name, []).append(f"{pattern!r}: {sorted(bad)}")
    assert not seen, seen
    assert parse(r"a*+", 0) and {"POSSESSIVE_REPEAT"} <= set(_parsed_ops(parse(r"a*+", 0)))
