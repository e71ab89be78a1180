"""bench/bare_writes.py runs end to end at a tiny size: each write, its file operations made
bare on a copy of the store, and the rest, beside the floor (no figure is judged here)."""

from __future__ import annotations

import os
from pathlib import Path

from tests.test_bench_write_parts import tiny_run

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bare_writes.py"


def test_a_tiny_run_prints_the_write_its_bare_files_and_the_rest(tmp_path: Path) -> None:
    lines = tiny_run(BENCH, tmp_path)
    header = next(line for line in lines if line.startswith("# "))
    assert "fsync floor" in header
    assert header.endswith("the bare copy's entry files after the run: the store's"), header
    at = lines.index(header)
    assert lines[at + 1].split() == ["add", "replace", "remove"]
    rows = {line[:24].strip(): line[24:].split() for line in lines[at + 2:]}
    assert list(rows) == ["filemem's write", "its files, bare", "the rest (logic)",
                          "target: 5x the floor"]
    floor = float(header.split("fsync floor ")[1].split()[0])
    for label, values in rows.items():
        figures = [float(v) for v in values[:3]]
        if label.startswith("target"):
            assert all(abs(f - 5 * floor) <= 0.005 for f in figures), values  # rounded
            continue
        assert values[3:] and values[-2:] == ["the", "floor"], (label, values)
        if label != "the rest (logic)":  # a difference: may be below 0 in a tiny run
            assert all(f > 0 for f in figures), (label, values)  # each is timed
    assert os.listdir(tmp_path) == []  # both stores are removed
