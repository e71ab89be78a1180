"""How the suite runs on several cores (pytest-xdist, ``-n auto``).

- Scheduling: each test goes to whichever worker is free (as ``--dist load``), except that
  the tests of a file with a module- or class-scoped fixture (one store, one set of suite
  runs) all go to one worker, in file order, so the fixture is built once and its tests see
  it in the order they were written; so do the files in START_FIRST, and these multi-test
  units are started before the rest. (xdist's own ``loadgroup`` would do the grouping, but
  with pytest 9.2 its groups are silently ignored: pytest-xdist issue #1386.)
- Output: with ``-n`` and the default verbosity, a line per test file as its last test
  finishes (the percentage of tests done, the time so far, the file and its counts) instead
  of a letter per test; failures are then listed at the end as usual.
"""

from __future__ import annotations

import ast
import time
from collections import Counter
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

OUTCOMES = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
SHARED_SCOPES = ("module", "class", "package", "session")
# Files that hold the longest single tests (kill loops, 15-45 s each): kept in one worker
# like the files above, which xdist starts first (larger units first), so no worker is left
# running one of them alone at the end.
START_FIRST = ("tests/test_sync_kills.py", "tests/test_crash.py")


def shares_fixtures(path: Path) -> bool:
    """Whether a test file defines a fixture whose scope is wider than one test
    (``@pytest.fixture(scope="module")`` and the like)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8"))
    except (OSError, SyntaxError, ValueError):
        return True  # unreadable here: keep its tests together, the safe side
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and any(
                k.arg == "scope" and isinstance(k.value, ast.Constant)
                and k.value.value in SHARED_SCOPES for k in node.keywords):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "fixture":
                return True
    return False


def make_scheduler(config: pytest.Config, log: Any) -> Any:
    """For ``-n`` with the default ``--dist load``: the scheduling described above."""
    if config.getvalue("dist") != "load":
        return None  # another --dist asked for by name: xdist's own
    from xdist.scheduler import LoadScopeScheduling

    root = Path(config.rootpath)
    shared: dict[str, bool] = {}  # test file -> whether its tests stay together

    class SharedFixtureFilesTogether(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            name = _file(nodeid)
            if name not in shared:
                shared[name] = name in START_FIRST or shares_fixtures(root / name)
            return name if shared[name] else nodeid

    return SharedFixtureFilesTogether(config, log)


def _file(nodeid: str) -> str:
    return nodeid.split("::")[0]


class FileProgress:
    """One line per finished test file, printed by the controller of an ``-n`` run."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.start = time.monotonic()
        self.total: Counter[str] = Counter()  # tests per file
        self.finished: Counter[str] = Counter()
        self.outcomes: dict[str, Counter[str]] = {}
        self.done = 0

    @pytest.hookimpl
    def pytest_xdist_node_collection_finished(self, node: Any, ids: list[str]) -> None:
        if not self.total:  # every worker collects the same tests
            self.total.update(_file(i) for i in ids)

    @pytest.hookimpl(wrapper=True)
    def pytest_report_teststatus(self, report: pytest.TestReport, config: pytest.Config
                                 ) -> Generator[None, tuple[str, Any, Any], tuple[str, str, str]]:
        # no letter per test: its file's line counts it (and the summary lists failures)
        category, _letter, _word = yield
        return category, "", ""

    @pytest.hookimpl
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        counts = self.outcomes.setdefault(_file(report.nodeid), Counter())
        if report.failed:
            counts["failed" if report.when == "call" else "error"] += 1
        elif report.skipped:
            counts["xfailed" if hasattr(report, "wasxfail") else "skipped"] += 1
        elif report.when == "call":
            counts["xpassed" if hasattr(report, "wasxfail") else "passed"] += 1

    @pytest.hookimpl
    def pytest_runtest_logfinish(self, nodeid: str, location: Any) -> None:
        name = _file(nodeid)
        self.finished[name] += 1
        self.done += 1
        if self.finished[name] != self.total[name]:
            return
        reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is None:
            return
        counts = self.outcomes.get(name, Counter())
        said = ", ".join(f"{counts[what]} {what}" for what in OUTCOMES if counts[what])
        elapsed = int(time.monotonic() - self.start)
        percent = 100 * self.done // max(sum(self.total.values()), 1)
        reporter.write_line(f"[{percent:3d}%] {elapsed // 60}:{elapsed % 60:02d}  {name}: "
                            f"{said}")


def use_file_progress(config: pytest.Config) -> None:
    """Register the per-file lines on the controller of an ``-n`` run at default verbosity."""
    distributing = bool(getattr(config.option, "numprocesses", None))
    is_worker = hasattr(config, "workerinput")
    if distributing and not is_worker and config.get_verbosity() == 0:
        config.pluginmanager.register(FileProgress(config), "filemem-file-progress")
