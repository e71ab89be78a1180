"""tests/orphans.py, which the kill tests rely on: after a SIGKILL, a process the killed one
had started (a `git fetch`, say) is waited for, so checks never race it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests import orphans

# starts a grandchild that writes a file half a second later, says so, then waits forever
PARENT = """
import subprocess, sys
subprocess.Popen([sys.executable, "-c",
                  "import sys, time; time.sleep(0.5); open(sys.argv[1], 'w').close()",
                  sys.argv[1]])
print("started", flush=True)
import time
time.sleep(600)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="process groups")
def test_a_kill_returns_once_what_the_killed_process_started_has_ended(tmp_path: Path) -> None:
    done = tmp_path / "done"
    child = orphans.start([sys.executable, "-c", PARENT, str(done)], stdout=subprocess.PIPE,
                          text=True)
    assert child.stdout is not None and child.stdout.readline() == "started\n"
    assert orphans.kill(child) == -9
    child.stdout.close()
    assert done.exists()  # the orphan ran to its end before kill() returned
