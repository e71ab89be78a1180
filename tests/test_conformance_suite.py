"""The distributable conformance suite (conformance/run.py), run as a user runs it.

filemem must pass it through both faces: the Python factory and the bridge. The suite must
also be able to fail: a deliberately broken provider (tags dropped, budgets never enforced)
has to produce FAIL lines and a non-zero exit. The three runs are separate processes started
together, so the slow bridge run overlaps the others.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.testing import make_provider

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT / "conformance" / "run.py"
PROTOCOL_CASES = 22
EXTRA_CASES = 20  # S (13 points of filemem's choices), G (4), P (3)
FINAL = re.compile(r"^(\d+) passed, (\d+) failed$")


class TagDroppingProvider:
    """filemem with two bugs a conformance suite must catch: tags are thrown away, and
    budgets are so large that BUDGET_EXCEEDED never comes."""

    def __init__(self, inner: filemem.Provider) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def add(self, input: Any, write: Any) -> Any:
        if isinstance(input, dict):
            input = {k: v for k, v in input.items() if k != "tags"}
        return self.inner.add(input, write)


def broken_provider(store_path: str, budgets: Any, gate: Any) -> TagDroppingProvider:
    """The factory the failing run uses (imported by the suite from this module)."""
    huge = {"user": {"userGlobal": 10**9, "workspace": 10**9},
            "agent": {"userGlobal": 10**9, "workspace": 10**9}}
    return TagDroppingProvider(make_provider(store_path, huge, gate))


def suite(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, str(RUN), *args], cwd=ROOT, text=True,
                            encoding="utf-8", stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def runs() -> Iterator[dict[str, subprocess.CompletedProcess[str]]]:
    """Every suite run this module checks, started at once and finished together."""
    bridge = f"{shlex.quote(sys.executable)} -m filemem bridge --store {{store}}"
    procs = {
        "list": suite("--list"),
        "factory": suite("--factory", "filemem.testing:make_provider"),
        "bridge": suite("--bridge", bridge),
        "broken": suite("--factory", "tests.test_conformance_suite:broken_provider",
                        "--group", "A,C"),
    }
    done = {}
    try:
        for name, proc in procs.items():
            out, err = proc.communicate(timeout=300)
            done[name] = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    yield done


def case_ids(runs: dict[str, subprocess.CompletedProcess[str]]) -> list[str]:
    listing = runs["list"]
    assert listing.returncode == 0, listing.stderr
    return [line.split()[0] for line in listing.stdout.splitlines()]


def check_passes(run: subprocess.CompletedProcess[str], ids: list[str]) -> None:
    lines = run.stdout.splitlines()
    assert lines, run.stderr
    failures = [line for line in lines if line.startswith("FAIL ")]
    assert run.returncode == 0 and not failures, "\n".join(failures) or run.stderr
    m = FINAL.match(lines[-1])
    assert m, f"last line is not 'N passed, N failed': {lines[-1]!r}"
    passed, failed = int(m[1]), int(m[2])
    skipped = sum(line.startswith("SKIP ") for line in lines)
    assert failed == 0 and passed + skipped == len(ids)
    for cid in ids:  # one line per case, in any state
        mine = [line for line in lines if re.match(rf"^(PASS|FAIL|SKIP) {cid} ", line)]
        assert len(mine) == 1, f"{cid}: {mine}"


def test_the_suite_lists_the_protocol_cases_and_more(
        runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    ids = case_ids(runs)
    protocol = [f"{g}{n}" for g, count in zip("ABCDE", (7, 7, 3, 3, 2), strict=True)
                for n in range(1, count + 1)]
    assert ids[:PROTOCOL_CASES] == protocol
    assert len(ids) >= PROTOCOL_CASES + EXTRA_CASES and len(set(ids)) == len(ids)
    assert {cid[0] for cid in ids} == set("ABCDESGP")


def test_filemem_passes_through_the_python_factory(
        runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    check_passes(runs["factory"], case_ids(runs))


def test_filemem_passes_through_the_bridge(
        runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    check_passes(runs["bridge"], case_ids(runs))


def test_the_suite_fails_a_broken_provider(
        runs: dict[str, subprocess.CompletedProcess[str]]) -> None:
    run = runs["broken"]
    lines = run.stdout.splitlines()
    assert run.returncode == 1, run.stderr
    failed = {line.split()[1] for line in lines if line.startswith("FAIL ")}
    assert {"A1", "A6", "C1", "C2"} <= failed, run.stdout
    assert not {"A2", "A3", "A4", "A5", "A7"} & failed, run.stdout  # what works passes
    m = FINAL.match(lines[-1])
    assert m and int(m[2]) == len(failed) and int(m[1]) + len(failed) == 10


def test_no_arguments_print_usage() -> None:
    out = subprocess.run([sys.executable, str(RUN)], capture_output=True, text=True,
                         cwd=ROOT)
    assert out.returncode == 2 and "usage:" in out.stderr and out.stdout == ""


def run_suite(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(RUN), *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=120)


def test_a_bridge_command_not_on_path_is_one_setup_error(tmp_path: Path) -> None:
    """`filemem` not installed where PATH looks: one clear error and exit 2, no case run
    (it used to print the same FAIL for each of the 42 cases)."""
    empty = tmp_path / "bin"
    empty.mkdir()
    out = run_suite("--bridge", "filemem bridge --store {store}",
                    env={**os.environ, "PATH": str(empty)})
    assert out.returncode == 2 and out.stdout == "", out.stdout
    assert out.stderr.count("\n") == 1, out.stderr
    assert out.stderr.startswith("run.py: --bridge: command 'filemem' not found on PATH. ")
    assert '--bridge "{python} -m filemem bridge --store {store}"' in out.stderr
    missing = run_suite("--bridge", f"{tmp_path / 'nowhere' / 'filemem'} bridge --store {{store}}")
    assert missing.returncode == 2 and missing.stdout == ""
    assert "nowhere/filemem does not exist or is not executable" in missing.stderr


@pytest.mark.parametrize(("command", "said"), [
    # exits at once, with a usage error on stderr
    ("{python} -m filemem bridge --no-such-option --store {store}",
     ["exited with code 2 before answering its first request; it printed:\n    Usage: ",
      "    Error: No such option '--no-such-option'."]),
    # an interpreter without the module
    ("{python} -I -S -c \"import sys; sys.exit('no bridge here')\" {store}",
     ["exited with code 1 before answering its first request", "    no bridge here"]),
    # never answers: waits --timeout, not once per case
    ("{python} -c \"import sys; sys.stdin.read()\" {store}",
     ["did not answer its first request (budgets) within 1 s (--timeout)",
      "it printed nothing on stderr"]),
    # answers with something that is not JSON
    ("{python} -c \"print('hello', flush=True); import sys; sys.stdin.read()\" {store}",
     ["stdout carried a line that is not UTF-8 JSON: b'hello\\n'"]),
])
def test_a_bridge_that_does_not_start_is_one_setup_error(command: str, said: list[str]) -> None:
    out = run_suite("--bridge", command, "--timeout", "1")
    assert out.returncode == 2 and out.stdout == "", out.stdout
    assert out.stderr.startswith("run.py: --bridge: the bridge did not start: "), out.stderr
    for text in said:
        assert text in out.stderr, out.stderr
    assert out.stderr.rstrip().endswith("Run the command by itself to see why: it must answer "
                                        "JSON-RPC requests on stdin/stdout, one per line "
                                        "(README.md beside run.py).")
