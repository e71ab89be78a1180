"""The names the store gives its own files, and the mode they are made with."""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from typing import Final

from filemem import errors
from filemem.files import atomic
from filemem.files.atomic import LinkRefused

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


@contextlib.contextmanager
def refusing_links() -> Iterator[None]:
    """A symbolic link met in ``.filemem/`` (LinkRefused) as STORE_CORRUPT naming it."""
    try:
        yield
    except LinkRefused as exc:
        raise linked(str(exc.filename)) from None


def open_private(path: str, flags: int) -> int:
    """A file of ``.filemem/`` opened (made the owner's only, as a lock file is), never
    through a symbolic link: one is STORE_CORRUPT naming it."""
    with private_files(), refusing_links():
        return atomic.open_nofollow(path, flags)


_READ_ONLY: Final = (errno.EROFS, errno.EACCES, errno.EPERM)


def read_only(exc: OSError) -> bool:
    """An OSError that says the store cannot be written here (a read-only mount, files
    owned by someone else)."""
    return exc.errno in _READ_ONLY
