"""bench/seed_parts.py runs end to end at a tiny size and prints every part of a seed (no
figure is judged here: speed is the bench's business, not the suite's)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "seed_parts.py"


def test_a_tiny_run_prints_every_part_and_the_total(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--entries", "40", "--seeds", "1",
                          "--dir", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0].startswith("# a seed of 1,000 into 40 entries")
    parts = {line.split()[0]: float(line.split()[1]) for line in lines[1:]}
    assert list(parts) == ["prepare", "checks", "encode", "message", "trees", "objects",
                           "wal", "ref", "files", "index", "after", "other", "total"]
    assert all(v >= 0 for k, v in parts.items() if k != "other")
    assert parts["total"] >= sum(v for k, v in parts.items() if k not in ("other", "total"))
    files = next(line for line in lines if line.startswith("files"))
    assert " floor " in files and files.endswith(" 1000 files created by one Python loop")
    assert os.listdir(tmp_path) == []  # the store is removed
