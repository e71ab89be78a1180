"""The real Hermes Agent (``hermes-agent`` from PyPI, pinned), for the tests of `filemem
connect hermes`.

Hermes is not in the test extra: it pins dozens of packages of its own (openai, pydantic,
ruamel.yaml, fastapi, ...), needs Python 3.11+, and puts top-level modules such as ``cli``,
``tools`` and ``agent`` on the path; and the point of the tests is that the plugin works
from Hermes' own environment, which is not filemem's. So it is installed once, with pip,
into its own virtual environment ``tests/.hermes-venv`` (about 230 MB, 1-2 minutes), under
a file lock so parallel test workers install it once, and reused while the pin is the same.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERMES_AGENT = "hermes-agent==0.19.0"  # the version the plugin is tested against
VENV = Path(__file__).resolve().parent / ".hermes-venv"
_MARK = VENV / ".filemem-installed"


@dataclass(frozen=True)
class Hermes:
    """Hermes' virtual environment: its Python and its `hermes` command."""

    python: Path
    hermes: Path

    def run(self, code: str, *, env: dict[str, str], cwd: str | os.PathLike[str],
            timeout: float = 180) -> subprocess.CompletedProcess[str]:
        """Run Python ``code`` in Hermes' environment (not filemem's)."""
        clean = {k: v for k, v in env.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        return subprocess.run([str(self.python), "-c", code], env=clean, cwd=cwd,
                              capture_output=True, text=True, timeout=timeout,
                              stdin=subprocess.DEVNULL)


def _skip_or_fail(why: str) -> None:
    if os.environ.get("CI"):
        raise AssertionError(why)
    pytest.skip(why)


def hermes_agent() -> Hermes:
    """The pinned Hermes Agent, installed on first use; skips only outside CI."""
    if sys.version_info < (3, 11):
        pytest.skip("hermes-agent needs Python 3.11 or newer")
    python = VENV / "bin" / "python"
    tools = Hermes(python, VENV / "bin" / "hermes")
    VENV.parent.mkdir(parents=True, exist_ok=True)
    with open(VENV.parent / ".hermes-venv.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if _MARK.exists() and _MARK.read_text() == HERMES_AGENT and python.exists():
            return tools
        out = subprocess.run([sys.executable, "-m", "venv", "--clear", str(VENV)],
                             capture_output=True, text=True, timeout=300)
        if out.returncode != 0:
            _skip_or_fail(f"cannot make a venv for Hermes: {out.stderr[-500:]}")
        out = subprocess.run([str(python), "-m", "pip", "install", "-q",
                              "--disable-pip-version-check", HERMES_AGENT],
                             capture_output=True, text=True, timeout=900)
        if out.returncode != 0:
            _skip_or_fail(f"pip install {HERMES_AGENT} failed (no registry?): "
                          f"{out.stderr[-500:]}")
        _MARK.write_text(HERMES_AGENT)
    return tools
