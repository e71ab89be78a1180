"""``filemem bridge``: the Provider face as JSON-RPC 2.0 over stdio, one JSON object per line.

Hosts written in other languages use this. Requests are answered in order. Under the ask
policy every write sends the host an ``approval/request`` (the approve-what-you-see payload)
and waits for ``{"result": {"outcome": ...}}``; an error answer or a closed stdin means
``unavailable``. stdout carries protocol messages only: everything else goes to stderr.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import IO, Any, Final

from filemem import __version__, errors
from filemem.approval import ApprovalRequest
from filemem.model import PROTOCOL
from filemem.ops import OPERATIONS
from filemem.provider import Provider

PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INVALID_PARAMS: Final = -32602
INTERNAL_ERROR: Final = -32603
PROTOCOL_ERROR: Final = -32000
STORE_ERROR: Final = -32001  # busy, missing, cannot be created: not a protocol code
log = logging.getLogger("filemem.bridge")
_ID_JSON: Final = json.JSONEncoder(ensure_ascii=False).encode  # an id as json.dumps has it


class ParamsError(Exception):
    """Params that do not fit the method (JSON-RPC -32602)."""


def _params(params: Any, required: tuple[str, ...] = (), optional: tuple[str, ...] = ()
            ) -> dict[str, Any]:
    if params is None:
        params = {}
    if isinstance(params, list) and not params and not required:
        params = {}
    if not isinstance(params, dict):
        raise ParamsError("params must be an object")
    unknown = sorted(set(params) - set(required) - set(optional))
    if unknown:
        raise ParamsError(f"unknown params: {', '.join(unknown)}")
    missing = [k for k in required if k not in params]
    if missing:
        raise ParamsError(f"missing params: {', '.join(missing)}")
    return params


def _write_method(name: str, input_key: str) -> Callable[[Provider, Any], Any]:
    def call(p: Provider, params: Any) -> Any:
        # a missing `write` is the protocol's WRITE_REQUIRES_AGENT, not a params error
        args = _params(params, (input_key,), ("write",))
        return getattr(p, name)(args[input_key], args.get("write"))
    return call


def _query(p: Provider, params: Any) -> Any:
    args = _params(params, (), ("filter", "opts"))
    return p.query(args.get("filter"), args.get("opts"))


def _no_params(name: str) -> Callable[[Provider, Any], Any]:
    def call(p: Provider, params: Any) -> Any:
        _params(params)
        return getattr(p, name)()
    return call


class Encoded:
    """A result that is already JSON text (``json.dumps(result, ensure_ascii=False,
    separators=(",", ":"))``): sent as it is, not decoded and encoded again."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _audit_list(p: Provider, params: Any) -> Any:
    args = _params(params, (), ("limit",))
    # each row's JSON is made once and kept, not made again for every call
    return Encoded(p.audit_list_json(args.get("limit", 100)))


def _snapshot(p: Provider, params: Any) -> Any:
    args = _params(params, ("session",), ("language", "tools"))
    return p.snapshot(args["session"], language=args.get("language"), tools=args.get("tools"))


def _describe(p: Provider, params: Any) -> Any:
    _params(params)
    return {"protocol": PROTOCOL, "provider": "filemem", "version": __version__,
            "store": p.path, "methods": sorted(METHODS)}


METHODS: Final[dict[str, Callable[[Provider, Any], Any]]] = {
    **{op.name: _write_method(op.name, op.bridge_param)
       for op in OPERATIONS.values() if op.bridge_param is not None},
    "import": _write_method("import_envelope", "envelope"),  # the export envelope
    "query": _query,
    "budgets": _no_params("budgets"),
    "listEntries": _no_params("list_entries"),
    "auditList": _audit_list,
    "export": _no_params("export"),
    "snapshot": _snapshot,
    "describe": _describe,
}


def _utf8_line(line: str) -> bytes | None:
    """A message's JSON text and its newline as UTF-8, or None if it holds a lone surrogate."""
    # U+2028/2029 are legal in JSON but split lines in some readers
    line = line.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    try:
        return line.encode("utf-8")
    except UnicodeEncodeError:
        return None


class Bridge:
    """One bridge session: a reader thread takes lines off ``stdin``; the calling thread
    answers requests in order and asks the host for approvals through the same pipe."""

    def __init__(self, provider: Provider, stdin: IO[bytes], stdout: IO[bytes]) -> None:
        self.provider = provider
        self.stdin = stdin
        self.stdout = stdout
        self._out_lock = threading.Lock()
        self._requests: queue.Queue[Any] = queue.Queue()
        self._waiting: dict[str, queue.Queue[Any]] = {}
        self._waiting_lock = threading.Lock()
        self._closed = threading.Event()
        self._ids = itertools.count(1)

    # ------------------------------------------------------------ wire

    def send(self, message: dict[str, Any]) -> None:
        data = _utf8_line(json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n")
        if data is None:  # a lone surrogate echoed from the host: \ud800 escapes
            data = json.dumps(message, separators=(",", ":")).encode("ascii") + b"\n"
        self._write(data)

    def _send_result(self, rid: Any, result: Encoded) -> None:
        """The bytes :meth:`send` makes of ``{"jsonrpc": "2.0", "id": rid, "result": ...}``,
        around a result already encoded."""
        data = _utf8_line("".join(('{"jsonrpc":"2.0","id":', _ID_JSON(rid), ',"result":',
                                   result.text, "}\n")))
        if data is None:
            self.send({"jsonrpc": "2.0", "id": rid, "result": json.loads(result.text)})
        else:
            self._write(data)

    def _write(self, data: bytes) -> None:
        with self._out_lock:
            self.stdout.write(data)
            self.stdout.flush()

    def _error(self, rid: Any, code: int, message: str, data: Any = None) -> None:
        err: dict[str, Any] = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        self.send({"jsonrpc": "2.0", "id": rid, "error": err})

    def _read(self) -> None:
        """Reader thread: route host answers to waiting approvals, queue everything else."""
        try:
            for raw in self.stdin:
                if not raw.strip():
                    continue
                try:
                    msg = json.loads(raw.decode("utf-8"))
                except (UnicodeDecodeError, ValueError, RecursionError) as exc:
                    self._requests.put(("parse-error", str(exc)))
                    continue
                if isinstance(msg, dict) and "method" not in msg and \
                        ("result" in msg or "error" in msg):
                    with self._waiting_lock:
                        waiter = self._waiting.pop(str(msg.get("id")), None)
                    if waiter is not None:
                        waiter.put(msg)
                    else:
                        log.warning("filemem bridge: an answer to no pending request: %s",
                                    raw[:200])
                    continue
                self._requests.put(("message", msg))
        finally:
            with self._waiting_lock:
                self._closed.set()
                waiters = list(self._waiting.values())
                self._waiting.clear()
            for waiter in waiters:
                waiter.put(None)
            self._requests.put(None)

    # ------------------------------------------------------------ approval

    def ask_host(self, request: ApprovalRequest) -> str:
        """The approval transport: an ``approval/request`` to the host, answered in kind."""
        rid = f"filemem-approval-{next(self._ids)}"
        waiter: queue.Queue[Any] = queue.Queue(maxsize=1)
        with self._waiting_lock:  # checked under the lock the reader closes with: no lost EOF
            if self._closed.is_set():
                raise RuntimeError("the host closed the connection")
            self._waiting[rid] = waiter
        write = {k: v for k, v in request.write.items() if k != "gate"}
        params: dict[str, Any] = {"payload": request.payload, "write": write}
        if request.findings:  # what the store's checks found: show it with the text
            params["findings"] = [dict(f) for f in request.findings]
        self.send({"jsonrpc": "2.0", "id": rid, "method": "approval/request",
                   "params": params})
        answer = waiter.get()
        if answer is None:
            raise RuntimeError("the host closed the connection before answering")
        if "error" in answer:
            err = answer["error"]
            message = err.get("message") if isinstance(err, dict) else err
            raise RuntimeError(f"the host answered with an error: {message}")
        result = answer.get("result")
        outcome = result.get("outcome") if isinstance(result, dict) else None
        if not isinstance(outcome, str) or not outcome:
            raise RuntimeError("the host's answer has no outcome string")
        return outcome

    ask_host.name = "bridge host"  # type: ignore[attr-defined]

    # ------------------------------------------------------------ requests

    def handle(self, msg: Any) -> None:
        if not isinstance(msg, dict):
            self._error(None, INVALID_REQUEST, "a request must be a JSON object "
                        "(batches are not supported)")
            return
        rid = msg.get("id")
        notification = "id" not in msg
        method = msg.get("method")
        if msg.get("jsonrpc") != "2.0" or not isinstance(method, str) or \
                not isinstance(rid, (str, int, type(None))) or isinstance(rid, bool):
            if not notification:
                usable = isinstance(rid, (str, int)) and not isinstance(rid, bool)
                self._error(rid if usable else None, INVALID_REQUEST,
                            'not a JSON-RPC 2.0 request (needs "jsonrpc": "2.0" and a '
                            'string "method")')
            return
        fn = METHODS.get(method)
        if fn is None:
            if not notification:
                self._error(rid, METHOD_NOT_FOUND, f"unknown method {method!r}; methods: "
                            + ", ".join(sorted(METHODS)))
            return
        try:
            result = fn(self.provider, msg.get("params"))
        except ParamsError as exc:
            if not notification:
                self._error(rid, INVALID_PARAMS, f"{method}: {exc}")
            return
        except errors.FilememError as exc:
            if not notification:
                code = PROTOCOL_ERROR if isinstance(exc, errors.ProtocolError) else STORE_ERROR
                self._error(rid, code, exc.message, {"code": exc.code, "details": exc.details})
            return
        except Exception as exc:  # never let one request kill the bridge
            log.exception("filemem bridge: %s failed", method)
            if not notification:
                self._error(rid, INTERNAL_ERROR, f"{method} failed: {exc}")
            return
        if notification:
            return
        if isinstance(result, Encoded):
            self._send_result(rid, result)
        else:
            self.send({"jsonrpc": "2.0", "id": rid, "result": result})

    def serve(self) -> int:
        reader = threading.Thread(target=self._read, name="filemem-bridge-reader",
                                  daemon=True)
        reader.start()
        while True:
            item = self._requests.get()
            if item is None:
                break
            kind, value = item
            try:
                if kind == "parse-error":
                    self._error(None, PARSE_ERROR, f"parse error: {value}")
                else:
                    self.handle(value)
            except BrokenPipeError:  # the host is gone: nobody is left to answer
                log.warning("filemem bridge: the host closed stdout; stopping")
                return 0
        return 0


def run(store: str | None, *, budgets: Any = None, approval: str = "host",
        source: str | None = None) -> int:
    """Serve one host on this process's stdin/stdout until it closes stdin."""
    import filemem

    # stdout is the protocol channel: point fd 1 (and sys.stdout) at stderr so that nothing
    # else, even a C library, can write to it, and keep a private handle for messages
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    overrides: dict[str, Any] = {}
    if approval in ("auto", "off"):
        overrides = {"write_policy": approval, "write_policies": {}}
    # `source:<name>` policies see the source the owner started the bridge with, never the
    # host's input.source (which may be whatever a model asked for)
    # not validated at start: a store with an invalid file committed (or too new) is answered
    # request by request with that error (its file, commit and way out), as a host can show
    provider = filemem.open_store(store, create=True, budgets=budgets, policy_source=source,
                                  validate=False, **overrides)
    bridge = Bridge(provider, sys.stdin.buffer, out)
    if approval == "host":
        provider.gate = bridge.ask_host
    try:
        return bridge.serve()
    finally:
        provider.close()
        with contextlib.suppress(BrokenPipeError):  # an answer the host did not stay for
            out.close()
