"""Where the store is when no path is given: ``--store``, ``$FILEMEM_STORE``,
``$FILEMEM_HOME``, else the platform's user data directory: ``$XDG_DATA_HOME/filemem`` where
that variable holds an absolute path (Linux, the BSDs, macOS), else
``~/.local/share/filemem`` on Linux and the BSDs, ``~/Library/Application Support/filemem``
on macOS, and ``%LOCALAPPDATA%\\filemem`` on Windows.

The POSIX rule is written out here rather than asked of platformdirs: its import (it loads
``pathlib``, ``tempfile``, ``shutil`` and compression modules) added ~38 M instructions, a
twelfth, to a cold ``filemem query`` on the default store; and the answer is the one
platformdirs 4.x gives, kept fixed whatever version is installed, so an upgrade never moves
a person's store."""

from __future__ import annotations

import os
import sys

APP = "filemem"


def default_store_path() -> str:
    for var in ("FILEMEM_STORE", "FILEMEM_HOME"):
        value = os.environ.get(var)
        if value:
            return os.path.abspath(os.path.expanduser(value))
    return user_data_dir()


def user_data_dir() -> str:
    """The platform's per-user data folder for filemem (not created here)."""
    if sys.platform == "win32":  # the known-folder lookup: platformdirs does it right
        from platformdirs import user_data_dir as platform_dir

        return platform_dir(APP, appauthor=False, ensure_exists=False)
    xdg = os.environ.get("XDG_DATA_HOME", "")
    if os.path.isabs(xdg):  # the XDG spec: a relative value is ignored
        return os.path.join(xdg, APP)
    base = "~/Library/Application Support" if sys.platform == "darwin" else "~/.local/share"
    return os.path.join(os.path.expanduser(base), APP)


def command(root: str | None, *args: str) -> str:
    """A filemem command line for a person to run, shell-quoted: ``args``, then ``--store
    ROOT`` unless ``root`` is where a command without it finds the store (None: that one),
    so that it works as printed in the same shell."""
    import shlex

    words = ["filemem", *args]
    if root is not None and os.path.realpath(root) != os.path.realpath(default_store_path()):
        words += ["--store", root]
    return shlex.join(words)


def to_make(root: str) -> bool:
    """Whether a store at ``root`` is still to be made (the folder missing or empty), where
    opening it with ``create`` makes one."""
    return not os.path.exists(root) or (os.path.isdir(root) and not os.listdir(root))


def resolve_store_path(path: str | os.PathLike[str] | None) -> str:
    if path is None or os.fspath(path) == "":
        return default_store_path()
    return os.path.abspath(os.path.expanduser(os.fspath(path)))
