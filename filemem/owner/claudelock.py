"""Changing ``~/.claude.json`` the way Claude Code itself does: under its lock, in one
atomic write.

Claude Code rewrites ``~/.claude.json`` (its state, which holds user-scope MCP servers)
often while it runs. Each of its writes (seen with strace on 2.1.332) takes the lock
``<file>.lock``, a folder made with ``mkdir`` (the ``proper-lockfile`` convention; a lock
whose folder is older than 30 seconds is stale and may be taken over), reads the file,
writes a temp file and renames it over the file, then removes the folder. :func:`update`
does the same, so a change filemem makes is never lost to a write Claude Code makes at the
same moment, and is one rename: a process killed at any point leaves the old file or the
new one. (Claude Code's own ``claude mcp add-json`` cannot replace a server and ``claude
mcp remove`` leaves an empty ``mcpServers`` behind, so a change or a removal through them
would be two writes.)
"""

from __future__ import annotations

import contextlib
import errno
import os
import time
from collections.abc import Callable
from typing import Any, Final

from filemem import errors
from filemem.files import stoppoint
from filemem.owner import jsonconfig
from filemem.owner.jsonconfig import JsonFile

STALE: Final = 30.0  # seconds: proper-lockfile's and Claude Code's staleMs
WAIT: Final = 10.0  # seconds to wait for a lock Claude Code holds before giving up
PAUSE: Final = 0.05


def _take(lock: str) -> None:
    deadline = time.monotonic() + WAIT
    while True:
        try:
            os.mkdir(lock, 0o777)
            return
        except FileExistsError:
            try:
                age = time.time() - os.stat(lock).st_mtime
            except FileNotFoundError:
                continue  # released meanwhile
            if age > STALE:  # its holder died: take it over, as proper-lockfile does
                try:
                    os.rmdir(lock)
                    continue
                except FileNotFoundError:
                    continue
                except OSError:
                    pass  # not an empty folder: not a lock to break; wait it out
            if time.monotonic() > deadline:
                raise errors.ConnectError(
                    errors.CONFIG_UNWRITABLE,
                    f"{lock} is held (Claude Code is writing its state file, or a process "
                    "that held the lock died): nothing was changed; run the command again "
                    "(a lock older than 30 seconds is taken over)", {"path": lock}) from None
            time.sleep(PAUSE)
        except OSError as exc:
            if exc.errno in (errno.EACCES, errno.EROFS, errno.ENOSPC):
                raise jsonconfig.unwritable(lock, exc) from None
            raise


def update(path: str, change: Callable[[JsonFile], dict[str, Any] | None], *,
           mode: int, locked: bool) -> dict[str, Any] | None:
    """Read ``path``, apply ``change`` (None: nothing to write) and write the result in one
    atomic replace; with ``locked``, all of it under Claude Code's ``<path>.lock``. Returns
    what was written."""
    lock = path + ".lock"
    stoppoint.reached(f"replace {path}")  # (not under the lock: a kill there would leave it)
    if locked:
        _take(lock)
    try:
        f = jsonconfig.load(path)  # read under the lock: Claude Code's last write is in it
        doc = change(f)
        if doc is not None:
            jsonconfig.save(f, doc, mode=mode)
        return doc
    finally:
        if locked:
            with contextlib.suppress(OSError):
                os.rmdir(lock)


__all__ = ["STALE", "update"]
