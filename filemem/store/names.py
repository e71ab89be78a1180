"""The names the store gives its own files, and the mode they are made with."""

from __future__ import annotations

import errno
import os
from typing import Final

from filemem import errors

META_DIR: Final = ".filemem"  # local state, never committed
CONFIG_FILE: Final = "filemem.yaml"
IDENT: Final = "filemem <filemem@localhost>"  # author and committer of filemem's commits


class private_files:  # used as a function: ``with private_files():``
    """Files and folders made inside are private to the owner (0600/0700 on POSIX). A
    class, not a generator: a write enters it three times."""

    __slots__ = ("_old",)

    def __enter__(self) -> None:
        self._old = os.umask(0o077)

    def __exit__(self, *exc: object) -> None:
        os.umask(self._old)


def linked(path: str) -> errors.ProtocolError:
    """STORE_CORRUPT for a symbolic link where filemem would read or write a file."""
    return errors.store_corrupt(
        path, "is a symbolic link; filemem does not read or write through links in the "
        "store or its .filemem/ folder (replace it with a real file or folder, or delete it)")


_READ_ONLY: Final = (errno.EROFS, errno.EACCES, errno.EPERM)


def read_only(exc: OSError) -> bool:
    """An OSError that says the store cannot be written here (a read-only mount, files
    owned by someone else)."""
    return exc.errno in _READ_ONLY
