"""bench/versus_reference.py runs end to end at tiny sizes and prints every figure beside its
target (no figure is judged here: speed is the bench's business, not the suite's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.nodejs import node_tools

BENCH = Path(__file__).resolve().parents[1] / "bench" / "versus_reference.py"
REFERENCE = os.environ.get("FILEMEM_REFERENCE", "")  # a dsh-memento 0.4.4 checkout, if any


def test_without_the_reference_it_says_how_to_get_it(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--reference", str(tmp_path)],
                         capture_output=True, text=True)
    assert out.returncode != 0
    assert "https://github.com/PerryLink/dsh-memento" in out.stderr
    assert "0.4.4" in out.stderr


def test_a_tiny_run_prints_each_figure_beside_its_target(tmp_path: Path) -> None:
    if not (Path(REFERENCE) / "lib" / "store.mjs").is_file():
        pytest.skip("set FILEMEM_REFERENCE to a dsh-memento 0.4.4 checkout to run this")
    node = node_tools().node
    figures = tmp_path / "out.json"
    out = subprocess.run(
        [sys.executable, str(BENCH), "--reference", REFERENCE, "--entries", "40",
         "--commits", "45", "-n", "4", "--seeds", "1", "--dir", str(tmp_path), "-q",
         "--json", str(figures)],
        capture_output=True, text=True, env={**os.environ, "NODE": str(node)})
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "git status after the run: clean" in lines[0]
    for label in ("add", "replace", "remove", "query", "seed of 1,000", "auditList(100)"):
        row = next(line for line in lines if line.startswith(label))
        assert ": met" in row or "MISSED" in row, row
    assert any(line.startswith("fsync floor") for line in lines)
    assert any(line.startswith("bridge round trip ") for line in lines)
    assert any(line.startswith("bridge round trip, spaced") for line in lines)
    files = next(line for line in lines if " files created " in line)  # beside the seeds
    assert files.split(" files created")[0].replace(",", "").isdigit(), files
    data = json.loads(figures.read_text())
    assert data["clean"] is True and data["floor"] > 0 and data["round_trip"] > 0
    assert data["round_trip_spaced"] > 0 and data["files_floor"] > 0
    assert [r["op"] for r in data["rows"]] == ["add", "replace", "remove", "query", "seed",
                                               "auditList"]
    assert os.listdir(tmp_path) == ["out.json"]  # the stores are removed
