"""bench/write_parts.py runs end to end at a tiny size and prints each part of a write for
add, replace and remove, beside the floor (no figure is judged here)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "bench" / "write_parts.py"
PARTS = ["prepare", "trees", "objects", "pack", "wal", "ref", "mirror", "settle", "after", "other",
         "total"]


def tiny_run(bench: Path, tmp_path: Path) -> list[str]:
    """A bench of the workload's writes (bench/versus_reference.py's ``writes_parser``) run
    at a tiny size with its stores in ``tmp_path``: the lines it printed."""
    out = subprocess.run([sys.executable, str(bench), "--entries", "40", "--commits", "45",
                          "-n", "4", "--dir", str(tmp_path)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(bench.parents[1])})
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_a_tiny_run_prints_every_part(tmp_path: Path) -> None:
    lines = tiny_run(BENCH, tmp_path)
    header = next(line for line in lines if line.startswith("# "))
    assert "fsync floor" in header and "boot id known" in header
    assert lines[lines.index(header) + 1].split() == ["part", "add", "replace", "remove"]
    rows = {line.split()[0]: line.split()[1:] for line in lines[lines.index(header) + 2:]}
    assert list(rows) == PARTS
    for part, values in rows.items():
        assert len(values) == 3 and all(float(v) >= 0 for v in values), (part, values)
    assert float(rows["objects"][0]) > 0  # each part is timed
    if "boot id known: True" in header:  # the write-ahead log is on; the pack is written
        assert float(rows["wal"][0]) > 0  # inside its append, and counted once
        assert float(rows["pack"][0]) > 0
    assert os.listdir(tmp_path) == []  # the store is removed
