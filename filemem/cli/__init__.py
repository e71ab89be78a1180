"""The `filemem` command: the owner's side of the store, a thin layer over the Provider.

Each module holds one group of commands and registers it on :data:`main` when it is
imported, which :mod:`filemem.cli.app` does on a command's first use.
"""

from __future__ import annotations

from filemem.cli.app import main

__all__ = ["main"]
