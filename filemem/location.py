"""Where the store is when no path is given: ``--store``, ``$FILEMEM_STORE``,
``$FILEMEM_HOME``, else the platform's user data directory (``~/.local/share/filemem`` on
Linux, ``~/Library/Application Support/filemem`` on macOS, ``%LOCALAPPDATA%\\filemem`` on
Windows)."""

from __future__ import annotations

import os


def default_store_path() -> str:
    for var in ("FILEMEM_STORE", "FILEMEM_HOME"):
        value = os.environ.get(var)
        if value:
            return os.path.abspath(os.path.expanduser(value))
    from platformdirs import user_data_dir

    return user_data_dir("filemem", appauthor=False)


def resolve_store_path(path: str | os.PathLike[str] | None) -> str:
    if path is None or os.fspath(path) == "":
        return default_store_path()
    return os.path.abspath(os.path.expanduser(os.fspath(path)))
