"""Swapping two paths in one step: Linux's ``renameat2(RENAME_EXCHANGE)``.

Replacing a whole folder by another with ``rename`` takes two steps (the old one out, the
new one in), and a process killed between them leaves neither. ``RENAME_EXCHANGE`` swaps
the two names atomically, so a reader (Hermes loading its plugin folder) sees the old
folder or the new one. :func:`exchange` returns False where the kernel, the C library or
the file system does not offer it; the caller then takes the two steps and its journal
covers the gap.
"""

from __future__ import annotations

import ctypes
import errno
import os
import sys
from typing import Final

_AT_FDCWD: Final = -100
_RENAME_EXCHANGE: Final = 2
_UNSUPPORTED: Final = (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP)


def exchange(a: str, b: str) -> bool:
    """Swap ``a`` and ``b`` (both must exist) atomically; False if that is not supported
    here (nothing was changed then). OSError for any other failure."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False  # a C library without renameat2 (glibc < 2.28)
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                   ctypes.c_uint]
    fn.restype = ctypes.c_int
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in _UNSUPPORTED:
        return False
    raise OSError(err, os.strerror(err), a)


__all__ = ["exchange"]
