"""The suite on several cores: a real ``pytest -n 2`` run of a few small test files with
this suite's conftest, checking what tests/parallel.py and conftest.py promise.

- tests that share a module-scoped fixture run in one worker and build it once;
- each worker has its own data, state and config folders and git config, whatever the
  person running the tests has in FILEMEM_* and GIT_* (GIT_DIR from a git hook included);
- the output is a line per finished file with its counts, not a dot per test.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

SHARED = '''
import os
import pytest

@pytest.fixture(scope="module")
def built(tmp_path_factory):
    # the workers' folders share a parent: a second worker building this fixture fails here
    root = tmp_path_factory.getbasetemp().parent
    with open(root / "shared-fixture-built", "x") as f:
        f.write(os.environ["PYTEST_XDIST_WORKER"])
    return os.environ["PYTEST_XDIST_WORKER"]

@pytest.mark.parametrize("n", range(6))
def test_uses_the_fixture(built, n):
    assert built == os.environ["PYTEST_XDIST_WORKER"]
'''

ISOLATED = '''
import os
import subprocess
import sys
import pytest

@pytest.mark.parametrize("n", range(6))
def test_own_folders(tmp_path_factory, tmp_path, n):
    assert not [k for k in os.environ if k.startswith("FILEMEM_")]
    # every folder is inside this worker's own temporary folder
    mine = str(tmp_path_factory.getbasetemp()) + os.sep
    for var in ("XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL"):
        assert os.environ[var].startswith(mine), (var, os.environ[var], mine)
    store = subprocess.run([sys.executable, "-m", "filemem.cli", "path"],
                           capture_output=True, text=True, check=True).stdout.strip()
    assert store == os.path.join(os.environ["XDG_DATA_HOME"], "filemem")
    # git works in a fresh folder (no GIT_DIR) and has no identity of the person's
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    who = subprocess.run(["git", "-C", str(tmp_path), "config", "user.email"],
                         capture_output=True, text=True)
    assert who.returncode == 1 and who.stdout == ""
'''

FAILING = '''
def test_good():
    pass

def test_bad():
    assert 1 == 2

def test_skipped():
    import pytest
    pytest.skip("not here")
'''


def test_two_workers(tmp_path: Path) -> None:
    files = tmp_path / "files"
    files.mkdir()
    (files / "test_shared.py").write_text(SHARED, encoding="utf-8")
    (files / "test_isolated.py").write_text(ISOLATED, encoding="utf-8")
    (files / "test_failing.py").write_text(FAILING, encoding="utf-8")
    base = tmp_path / "base"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FILEMEM_STORE": str(tmp_path / "mine"),
           "FILEMEM_HOME": str(tmp_path / "mine"), "GIT_DIR": str(tmp_path / "nowhere"),
           "GIT_AUTHOR_EMAIL": "person@example.org"}
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-c", str(ROOT / "pyproject.toml"),
         "--rootdir", str(files), "-p", "tests.conftest", "-p", "no:cacheprovider",
         "-n", "2", "--basetemp", str(base), str(files)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=240)
    assert out.returncode == 1, out.stdout + out.stderr  # test_bad fails, nothing else
    assert "1 failed, 13 passed, 1 skipped" in out.stdout, out.stdout
    # the module fixture was built once, by one worker
    assert (base / "shared-fixture-built").read_text() in {"gw0", "gw1"}
    assert not (tmp_path / "mine").exists()
    # one line per file with its counts; no dots
    lines = out.stdout.splitlines()
    for name, said in (("test_shared.py", "6 passed"), ("test_isolated.py", "6 passed"),
                       ("test_failing.py", "1 passed, 1 failed, 1 skipped")):
        mine = [line for line in lines
                if re.fullmatch(rf"\[ *\d+%\] \d+:\d\d  {name}: {said}", line)]
        assert len(mine) == 1, (name, out.stdout)
    assert not [line for line in lines if re.fullmatch(r"\.+.*", line)], out.stdout
    assert any(re.fullmatch(r"\[100%\] \d+:\d\d  test_\w+\.py: .*", line) for line in lines)


def test_ci_runs_the_readme_test_command() -> None:
    """.ci/run runs the README's test command verbatim (the second command at the top)."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sh\n(.*?)\n```", readme, flags=re.S)
    command = blocks[1]
    assert "pytest -n auto" in command
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert ci[ci.index("# The README's test command, verbatim:") + 1] == command


def test_the_files_started_first_exist() -> None:
    from tests.parallel import START_FIRST

    assert all((ROOT / name).is_file() for name in START_FIRST), START_FIRST
