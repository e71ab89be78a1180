"""The code stays clean: ruff over everything, mypy --strict over the package."""

from __future__ import annotations

import shutil
import subprocess
import sys

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
