"""A protocol provider over a bridge subprocess (JSON-RPC 2.0, one JSON object per line).

This is how the suite checks a provider written in any language: the provider runs as a
child process speaking the bridge protocol of ``filemem bridge`` on stdin/stdout. Requests
go out one at a time and must be answered in order. While a request is pending the bridge
may ask the host (us) for approval with an ``approval/request``; the suite answers it with
the case's gate, so approval round trips are part of what is checked. Standard library only.
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from typing import IO, Any

PROTOCOL_ERROR = -32000
METHOD_NOT_FOUND = -32601
HOST_ERROR = -32603  # what we answer when the gate itself fails: the bridge must fail closed


class ProtocolFailure(Exception):
    """A protocol error raised by a provider: ``code`` (e.g. ``BUDGET_EXCEEDED``), the
    English ``message`` and JSON ``details``. The same class serves Python factories."""

    def __init__(self, code: str, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details: dict[str, Any] = dict(details or {})


class MethodMissing(Exception):
    """The provider does not offer this method (JSON-RPC -32601, or no such attribute)."""

    def __init__(self, method: str) -> None:
        super().__init__(f"the provider has no method {method!r}")
        self.method = method


class BridgeError(Exception):
    """The bridge broke the wire protocol: died, hung, wrote a non-JSON line, answered out
    of order, or returned a JSON-RPC error that is not a protocol error."""


ApprovalHandler = Callable[[dict[str, Any]], str]


class BridgeClient:
    """One bridge process. ``call`` sends a request and returns its ``result``.

    ``on_approval`` receives the ``params`` of each ``approval/request``
    (``{"payload": {...}, "write": {...}}``) and returns the outcome string; if it raises,
    the bridge gets a JSON-RPC error answer (which a bridge must treat as ``unavailable``).
    """

    def __init__(self, argv: Sequence[str], on_approval: ApprovalHandler, *,
                 timeout: float = 60.0, cwd: str | None = None) -> None:
        self.argv = list(argv)
        self.on_approval = on_approval
        self.timeout = timeout
        self._ids = itertools.count(1)
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        # lives as long as the client (failure reports read it); closed by release()
        self._stderr: IO[bytes] = tempfile.TemporaryFile()  # noqa: SIM115
        try:
            self.proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self._stderr, cwd=cwd)
        except OSError as exc:
            self._stderr.close()
            raise BridgeError(f"cannot start the bridge {self.argv!r}: {exc}") from exc
        self._reader = threading.Thread(target=self._read, name="conformance-bridge-reader",
                                        daemon=True)
        self._reader.start()
        self.closed = False

    # ------------------------------------------------------------ wire

    def _read(self) -> None:
        assert self.proc.stdout is not None
        try:
            for line in self.proc.stdout:
                self._lines.put(line)
        finally:
            self._lines.put(None)

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n"
        try:
            self.proc.stdin.write(data.encode("utf-8"))
            self.proc.stdin.flush()
        except OSError as exc:
            raise BridgeError(f"cannot write to the bridge ({exc}); {self._died()}") from exc

    def stderr_tail(self, limit: int = 2000) -> str:
        """The end of what the bridge wrote to stderr (its logs), for failure reports."""
        try:
            self._stderr.flush()
            self._stderr.seek(0)
            data = self._stderr.read()
            self._stderr.seek(0, 2)
        except (OSError, ValueError):
            return ""
        return data.decode("utf-8", "replace")[-limit:]

    def _died(self) -> str:
        code = self.proc.poll()
        state = "still running" if code is None else f"exit code {code}"
        tail = self.stderr_tail(600).strip()
        return f"bridge {state}" + (f"; stderr: {tail}" if tail else "")

    def _next(self, deadline: float, method: str) -> dict[str, Any]:
        wait = deadline - time.monotonic()
        try:
            line = self._lines.get(timeout=max(wait, 0.001))
        except queue.Empty:
            raise BridgeError(f"no answer to {method} within {self.timeout:g} s; "
                              f"{self._died()}") from None
        if line is None:
            self._lines.put(None)  # stay at EOF for later calls
            raise BridgeError(f"the bridge closed stdout before answering {method}; "
                              f"{self._died()}")
        try:
            msg = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise BridgeError(f"stdout carried a line that is not UTF-8 JSON: {line[:200]!r}"
                              ) from None
        if not isinstance(msg, dict):
            raise BridgeError(f"stdout carried JSON that is not an object: {line[:200]!r}")
        return msg

    # ------------------------------------------------------------ requests

    def call(self, method: str, params: dict[str, Any] | None = None) -> Any:
        """Send one request and wait for its answer, serving approval requests meanwhile."""
        if self.closed:
            raise BridgeError(f"{method}: the bridge client is closed")
        rid = next(self._ids)
        request: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            request["params"] = params
        self._send(request)
        deadline = time.monotonic() + self.timeout
        while True:
            msg = self._next(deadline, method)
            if "method" in msg:
                self._host_request(msg)
                deadline = time.monotonic() + self.timeout  # a person may take their time
                continue
            if msg.get("jsonrpc") != "2.0":
                raise BridgeError(f"{method}: an answer without \"jsonrpc\": \"2.0\": {msg!r}")
            if msg.get("id") != rid:
                raise BridgeError(f"{method}: expected the answer to request {rid}, got one for "
                                  f"{msg.get('id')!r} (requests must be answered in order)")
            if "error" in msg:
                raise self._error(method, msg["error"])
            if "result" not in msg:
                raise BridgeError(f"{method}: an answer with neither result nor error: {msg!r}")
            return msg["result"]

    @staticmethod
    def _error(method: str, err: Any) -> Exception:
        if not isinstance(err, dict):
            return BridgeError(f"{method}: malformed error object {err!r}")
        code = err.get("code")
        if code == PROTOCOL_ERROR:
            data = err.get("data")
            if not isinstance(data, dict) or not isinstance(data.get("code"), str):
                return BridgeError(f"{method}: a -32000 error without data.code: {err!r}")
            details = data.get("details")
            if details is not None and not isinstance(details, dict):
                return BridgeError(f"{method}: data.details is not an object: {err!r}")
            return ProtocolFailure(data["code"], str(err.get("message", "")), details)
        if code == METHOD_NOT_FOUND:
            return MethodMissing(method)
        return BridgeError(f"{method}: JSON-RPC error {code}: {err.get('message')}")

    def _host_request(self, msg: dict[str, Any]) -> None:
        """A request from the bridge to the host: only ``approval/request`` is known."""
        rid = msg.get("id")
        if msg.get("method") != "approval/request":
            if rid is not None:
                self._send({"jsonrpc": "2.0", "id": rid, "error": {
                    "code": METHOD_NOT_FOUND, "message": f"unknown method {msg.get('method')!r}"}})
            return
        params = msg.get("params")
        try:
            if not isinstance(params, dict):
                raise ValueError("approval/request params must be an object")
            outcome = self.on_approval(params)
        except Exception as exc:  # the host failed: tell the bridge so it can fail closed
            self._send({"jsonrpc": "2.0", "id": rid,
                        "error": {"code": HOST_ERROR, "message": f"host gate failed: {exc}"}})
            return
        self._send({"jsonrpc": "2.0", "id": rid, "result": {"outcome": outcome}})

    # ------------------------------------------------------------ shutdown

    def close(self, timeout: float = 30.0) -> int:
        """Close stdin (the bridge then finishes and exits) and wait; the exit code."""
        if self.closed:
            return self.proc.returncode if self.proc.returncode is not None else -1
        self.closed = True
        try:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        except OSError:
            pass
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise BridgeError(f"the bridge did not exit within {timeout:g} s after stdin "
                              "closed; killed it") from None
        finally:
            self._reader.join(5)
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        return code

    def kill(self) -> None:
        """Stop the process at once (used when a case is interrupted)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.closed = True
        self._reader.join(5)  # the pipe is at EOF now that the process is gone
        for pipe in (self.proc.stdin, self.proc.stdout):
            try:
                if pipe is not None:
                    pipe.close()
            except OSError:
                pass

    def release(self) -> None:
        """Drop the stderr capture (after a failure report had its chance to read it)."""
        self._stderr.close()


__all__ = ["BridgeClient", "BridgeError", "MethodMissing", "ProtocolFailure"]
