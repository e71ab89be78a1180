"""Whether a folder path inside the store has no symbolic link on the way, in one call.

A write checks each folder on the way to the files it changes (filemem never writes
through a link): one ``lstat`` per folder, four for an entry's layer folder, twice a write.
Linux 5.6 and later answer for the whole path at once: ``openat2`` with
``RESOLVE_NO_SYMLINKS`` refuses (ELOOP) to go through any link on the way. Python has no
binding for it, so it is called through ``ctypes``, whose import (~3 ms, ~150 walks) a
process pays only once it has made :data:`WALK_FIRST` checks by walking (a ``filemem add``
makes two; an MCP server or a bridge goes on writing). Where it is missing (another system,
an older kernel, a sandbox that forbids it) or the answer is not a plain yes (a link, a
folder not there), the caller walks the path itself.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Final

_SYS_OPENAT2: Final = 437  # the same number on every Linux architecture
_RESOLVE_NO_SYMLINKS: Final = 0x04
_RESOLVE_BENEATH: Final = 0x08

WALK_FIRST: Final = 64  # checks a process makes by walking before it binds openat2

_call: Callable[[str, str], bool] | None = None
_tried = False
_walked = 0


def _bind() -> Callable[[str, str], bool] | None:
    """The check, bound to ``openat2`` through ctypes; None where it cannot be."""
    if not sys.platform.startswith("linux") or not hasattr(os, "O_PATH"):
        return None
    try:
        import ctypes
        import errno

        libc = ctypes.CDLL(None, use_errno=True)
        syscall = libc.syscall
    except (OSError, AttributeError, ImportError):
        return None
    syscall.restype = ctypes.c_long

    class OpenHow(ctypes.Structure):
        _fields_ = (("flags", ctypes.c_uint64), ("mode", ctypes.c_uint64),
                    ("resolve", ctypes.c_uint64))

    how = OpenHow(os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC, 0,
                  _RESOLVE_NO_SYMLINKS | _RESOLVE_BENEATH)
    how_ref, how_size = ctypes.byref(how), ctypes.sizeof(how)

    def real_folders(root: str, folder: str) -> bool:
        root_fd = os.open(root, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            fd = syscall(_SYS_OPENAT2, root_fd, os.fsencode(folder), how_ref, how_size)
        finally:
            os.close(root_fd)
        if fd >= 0:
            os.close(fd)
            return True
        if ctypes.get_errno() in (errno.ENOSYS, errno.EPERM, errno.E2BIG):
            raise NotImplementedError  # no openat2 here: never again in this process
        return False

    try:  # once, on a folder that is always there: is the call there at all?
        real_folders("/", ".")
    except (NotImplementedError, OSError):
        return None
    return real_folders


def real_folders(root: str, folder: str) -> bool:
    """True if ``folder`` (relative to the folder ``root``, "/"-separated, not empty) is
    a folder reached without any symbolic link on the way; False if that cannot be told
    here in one call (a link on the way, a folder missing, no ``openat2``)."""
    global _call, _tried, _walked
    if not _tried:
        if _walked < WALK_FIRST:
            _walked += 1  # a race between threads only binds a little later
            return False
        _call, _tried = _bind(), True
    if _call is None:
        return False
    try:
        return _call(root, folder)
    except NotImplementedError:
        _call = None
        return False
    except OSError:  # the root itself is gone or not a folder: the caller finds out
        return False
