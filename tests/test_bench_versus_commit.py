"""bench/versus_commit.py runs end to end at a tiny size (this checkout against itself)
and prints each kind of write's median on both sides and their ratio."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "versus_commit.py"
ROOT = BENCH.parents[1]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=600)


def test_a_tiny_run_prints_both_sides_and_their_ratio(tmp_path: Path) -> None:
    out = _run("--base", str(ROOT), "--entries", "30", "--commits", "40", "-n", "4",
               "--dir", str(tmp_path))
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("# 30 entries, 40 commits; median ms of 4 writes each")
    assert lines[1].split() == ["write", "base", "this", "this/base"]
    rows = {line.split()[0]: [float(v) for v in line.split()[1:]] for line in lines[2:]}
    assert list(rows) == ["add", "replace", "remove"]
    for base, this, ratio in rows.values():
        assert base > 0 and this > 0 and abs(ratio - this / base) < 0.01
    assert os.listdir(tmp_path) == []  # both stores are removed


def test_a_base_that_is_not_a_checkout_is_refused(tmp_path: Path) -> None:
    out = _run("--base", str(tmp_path))
    assert out.returncode == 2
    assert "holds no filemem checkout" in out.stderr
