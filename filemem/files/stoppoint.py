"""Numbered points where a command that changes several files can be killed, for tests.

`filemem connect` and `filemem disconnect` change files that belong to other programs, one
step at a time, and promise that a process killed between any two steps leaves a state the
next run recognises. To test that with real kills, each step calls :func:`reached` just
before it changes anything. When ``$FILEMEM_TEST_STOP_AT`` holds ``N``, the process
announces the N-th point on stderr (``filemem: stop point N: what``) and stops itself
with SIGSTOP; the test, waiting for that with ``waitpid(WUNTRACED)`` (no clock involved),
then sends it a real SIGKILL. Unset (always, outside tests), a point costs one lookup.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Final

ENV: Final = "FILEMEM_TEST_STOP_AT"
_count = 0


def reached(what: str) -> None:
    """One more point: stop here if it is the one ``$FILEMEM_TEST_STOP_AT`` names."""
    global _count
    wanted = os.environ.get(ENV)
    if not wanted:
        return
    _count += 1
    if wanted.strip() != str(_count) or not hasattr(signal, "SIGSTOP"):
        return
    sys.stderr.write(f"filemem: stop point {_count}: {what}\n")
    sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGSTOP)


__all__ = ["ENV", "reached"]
