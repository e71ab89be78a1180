"""bench/versus_basic_memory.py works: its filemem half against the real `filemem mcp` through
the official client, its table's shape, and (when basic-memory's venv is there) the whole
script at tiny sizes. No figure is judged here: timings belong to the script's own output."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import anyio
import pytest

import filemem

BENCH = Path(__file__).resolve().parent.parent / "bench" / "versus_basic_memory.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("versus_basic_memory", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


vs = _load()


def test_the_bench_store_takes_agent_writes_without_asking(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (tmp_path / "proj").mkdir()
    vs.fm_store(store)
    with filemem.open_store(store) as p:
        assert p.config().write_policy == "auto"
    assert vs.fm_seed(store, 7, 0) > 0
    got = anyio.run(vs.workload, vs.Filemem(store), 3, 4, 2)
    assert [len(got[k]) for k in ("add", "query", "replace", "remove")] == [3, 4, 3, 3]
    assert "recent 100" not in got  # filemem has no such MCP tool: no figure is made up
    assert 20 < got["rss"] <= got["hwm"] < 1000
    with filemem.open_store(store) as p:  # the workload really wrote, replaced and removed
        texts = [e["text"] for e in p.query({"limit": 1000})["entries"]]
    assert len(texts) == 7 and all(t.startswith("seed0 ") for t in texts)
    log = subprocess.run(["git", "-C", str(store), "log", "--format=%s"], capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert len(log) == 1 + 1 + 1 + 9  # init, the bench's config, the seed, 9 writes


def test_a_failed_call_stops_the_run(tmp_path: Path) -> None:
    store = tmp_path / "store"
    (tmp_path / "proj").mkdir()
    vs.fm_store(store)

    class Missing(vs.Filemem):
        def remove(self, i: int) -> tuple[str, dict[str, Any]]:
            return "memory_remove", {"track": "agent", "scope": "workspace", "match": "nothing"}

    with pytest.raises(BaseException) as info:  # the client's task group wraps the error
        anyio.run(vs.workload, Missing(store), 2, 1, 1)
    assert any(isinstance(e, RuntimeError) and "filemem remove failed" in str(e)
               and "ENTRY_NOT_FOUND" in str(e) for e in _leaves(info.value))


def _leaves(exc: BaseException) -> list[BaseException]:
    inner = getattr(exc, "exceptions", None)
    return [leaf for e in inner for leaf in _leaves(e)] if inner else [exc]


def test_the_table_names_every_operation_and_both_stores(capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    def side(scale: float) -> dict[str, Any]:
        keys = ["add", "query", "replace", "remove", "bulk load", "start-up, empty",
                "start-up, 10 entries", "rss after start-up, 10 entries", "rss", "hwm"]
        return {k: scale * (i + 1) for i, k in enumerate(keys)}

    figures = {"filemem": {**side(1), "auditList(100), in process": 0.1},
               "basic-memory": {**side(3), "recent 100": 4.0}}
    vs.report(figures, 10, 5, 25, 5, 1)
    out = capsys.readouterr().out.splitlines()
    rows = {line[:38].strip(): line[38:].split() for line in out
            if line and not line.startswith(("operation", "ratio"))}
    assert rows["add (x5)"] == ["1.00", "3.00", "3.0x"]
    assert rows["recent activity, 100 (x5)"] == ["-", "4.00", "-"]
    assert rows["bulk load of 10, in process (x1)"] == ["5.00", "15.0", "3.0x"]
    assert rows["peak RSS, VmHWM (MB)"] == ["10", "30", "3.0x"]
    assert out[-1].startswith("ratio = basic-memory / filemem")


@pytest.mark.skipif(not (vs.DEFAULT_VENV / "bin" / "basic-memory").exists(),
                    reason="basic-memory's venv is made by the first `python "
                           "bench/versus_basic_memory.py` (needs Python >= 3.12)")
@pytest.mark.timeout(1200)  # basic-memory starts in 5-15 s a time; the script starts it 6 times
def test_the_whole_script_runs_at_tiny_sizes(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, str(BENCH), "--quick", "--ops", "2", "--seed", "3",
                          "--json", str(tmp_path / "f.json")], capture_output=True, text=True,
                         timeout=900, env={**os.environ, "BENCH_DIR": str(tmp_path)})
    assert out.returncode == 0, out.stderr[-2000:]
    lines = out.stdout.splitlines()
    assert lines[0].startswith("filemem ") and "basic-memory 0.24.1" in lines[0]
    assert any(line.startswith("add (x2)") for line in lines)
    assert list(tmp_path.glob("versus-bm-*")) == []  # its stores are cleaned up
