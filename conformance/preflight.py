"""Before any case: can the suite start a bridge at all?

Every case opens a bridge and asks it ``budgets`` first, so a command that is not installed,
exits at once or never answers would fail every case the same way. Instead the suite starts
one bridge on a scratch store first; when it gives no answer, that is one setup error (exit
status 2) saying what happened and what to do. Standard library only.
"""

from __future__ import annotations

import os
import shutil
import subprocess

from harness import (
    BridgeBackend,
    BridgeError,
    BridgeSubject,
    Harness,
    MethodMissing,
    ProtocolFailure,
    SetupError,
)


def check_bridge(backend: BridgeBackend) -> None:
    """Raise SetupError unless one bridge starts and answers ``budgets``."""
    exe = backend.argv("", {})[0]
    if shutil.which(exe) is None:
        if os.path.dirname(exe):
            raise SetupError(f"--bridge: {exe} does not exist or is not executable; check "
                             "the path in the command")
        raise SetupError(
            f"--bridge: command {exe!r} not found on PATH. Install it, or give its full path, "
            "or run it with an interpreter that has it; for filemem: "
            "--bridge \"/path/to/venv/bin/filemem bridge --store {store}\" or "
            "--bridge \"{python} -m filemem bridge --store {store}\" "
            "--python /path/to/venv/bin/python")
    h = Harness(backend)
    try:
        h.provider()
    except MethodMissing as exc:
        h.kill()
        raise SetupError(f"--bridge: the bridge has no {exc.method} method, which every case "
                         "calls first") from None
    except (BridgeError, ProtocolFailure) as exc:
        why = _not_started(backend, h, exc)
        h.kill()
        raise SetupError(why) from None
    finally:
        h.close()


def _not_started(backend: BridgeBackend, h: Harness, exc: Exception) -> str:
    """Why the first bridge gave no answer, with what it printed, and what to do."""
    command = backend.template
    subject = h.opened[-1] if h.opened else None
    client = subject.client if isinstance(subject, BridgeSubject) else None
    text = str(exc)
    code: int | None = None
    if client is not None and ("closed stdout" in text or text.startswith("cannot write")):
        try:
            code = client.proc.wait(30)  # it closed stdout: let it finish exiting
        except subprocess.TimeoutExpired:
            code = None
    if isinstance(exc, BridgeError) and text.startswith("no answer"):
        what = (f"`{command}` did not answer its first request (budgets) within "
                f"{backend.timeout:g} s (--timeout)")
    elif code is not None:
        what = f"`{command}` exited with code {code} before answering its first request"
    else:
        what = f"`{command}` did not answer its first request: {text}"
    said = client.stderr_tail(1500).strip() if client is not None else ""
    shown = ("; it printed:\n" + "\n".join("    " + line for line in said.splitlines())
             if said else "; it printed nothing on stderr")
    return (f"--bridge: the bridge did not start: {what}{shown}\nRun the command by itself to "
            "see why: it must answer JSON-RPC requests on stdin/stdout, one per line "
            "(README.md beside run.py).")
