"""The layering is enforced, not just described: import-linter's contracts (in
pyproject.toml) over the package, and modules of one idea (none over 600 lines)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT

MAX_LINES = 600


def test_import_contracts_are_kept() -> None:
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) \
        or shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed (pip install -e '.[test]' brings it)")
    out = subprocess.run([exe, "--no-cache"], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "BROKEN" not in out.stdout and out.stdout.count("KEPT") >= 4, out.stdout


def test_the_contracts_catch_a_surface_reaching_into_the_store(tmp_path: Path) -> None:
    """The same contracts over a copy of the package with one forbidden import added."""
    exe = shutil.which("lint-imports", path=str(Path(sys.executable).parent)) \
        or shutil.which("lint-imports")
    if exe is None:
        pytest.skip("import-linter is not installed")
    shutil.copytree(ROOT / "filemem", tmp_path / "filemem",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    bridge = tmp_path / "filemem" / "bridge.py"
    bridge.write_text(bridge.read_text(encoding="utf-8") + "\nfrom filemem.store import core\n",
                      encoding="utf-8")
    out = subprocess.run([exe, "--no-cache"], cwd=tmp_path, capture_output=True, text=True,
                         env={"PYTHONPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert out.returncode != 0
    assert "filemem.bridge is not allowed to import filemem.store" in out.stdout


def test_modules_hold_one_idea() -> None:
    long = {str(p.relative_to(ROOT)): n for p in (ROOT / "filemem").rglob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}, f"modules over {MAX_LINES} lines: {long}"
