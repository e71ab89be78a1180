"""The helpers the benches share (bench/bench.py): the top-folder flag that gives each store
a block group of its own, and the instruction counts that load does not move."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))

import bench


def test_spread_sets_ext4s_top_folder_flag_or_says_it_could_not(tmp_path: Path) -> None:
    folder = tmp_path / "stores"
    folder.mkdir()
    took = bench.spread(str(folder))
    if bench.file_system(str(folder)).startswith("ext4"):
        assert took is True  # ext4 has the flag, and the folder is ours
    lsattr = shutil.which("lsattr")
    if lsattr is None:
        pytest.skip("lsattr (e2fsprogs) is not installed")
    out = subprocess.run([lsattr, "-d", str(folder)], capture_output=True, text=True)
    if out.returncode != 0:  # a file system without such flags (tmpfs, overlayfs)
        assert took is False
        return
    flags = out.stdout.split()[0]
    assert ("T" in flags) == took
    assert list(folder.iterdir()) == []  # nothing made in it


def test_spread_on_a_missing_folder_raises() -> None:
    with pytest.raises(FileNotFoundError):
        bench.spread("/nonexistent/filemem-bench")


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instructions_counts_more_for_more_work() -> None:
    idle = bench.instructions([sys.executable, "-S", "-c", "pass"])
    busy = bench.instructions([sys.executable, "-S", "-c", "for i in range(300000): pass"])
    assert idle is not None and busy is not None
    assert idle > 1_000_000  # an interpreter's start is millions of instructions
    assert busy > idle + 3_000_000  # 300,000 loop turns are ten or more instructions each


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed")
def test_instructions_of_a_failing_command_raise() -> None:
    with pytest.raises(RuntimeError, match="failed"):
        bench.instructions([sys.executable, "-S", "-c", "raise SystemExit(3)"])


def test_instructions_without_valgrind_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench.shutil, "which", lambda name: None)
    assert bench.instructions([sys.executable, "-c", "pass"]) is None
