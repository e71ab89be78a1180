"""The `filemem` command: the owner's side of the store, a thin layer over the Provider.

Each module holds one group of commands and registers it on :data:`main`.
"""

from __future__ import annotations

from filemem.cli import (  # noqa: F401  (registers the commands)
    adapters,
    connect,
    connections,
    entries,
    hermes,
    owner,
    serve,
    sync,
)
from filemem.cli.app import main

__all__ = ["main"]
