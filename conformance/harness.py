"""The harness the cases run on: one uniform provider face over two transports.

A case never cares whether the provider is a Python object made by a factory or a bridge
process speaking JSON-RPC: :class:`Subject` gives both the protocol's Provider face, with
JSON-shaped results (a JSON round trip, so both transports show the same data) and
protocol errors raised as :class:`ProtocolFailure`. Each case gets a fresh
:class:`Harness` with its own temporary store folder; ``h.provider()`` opens a provider on
it (several may be open at once, which is how cases create concurrency). Standard library
only: the suite is copied and run where nothing else is installed.
"""

from __future__ import annotations

import importlib
import json
import os
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping
from typing import Any

from bridge_client import BridgeClient, BridgeError, MethodMissing, ProtocolFailure

Gate = Callable[[dict[str, Any]], str]
Call = tuple[str, Any]  # (method, input) for the parallel writers of group P

SESSION_ID = "conformance-session"
CWD = "C:/conformance/ws"
PRESET = "conformance"
DEFAULT_BUDGETS: dict[str, dict[str, int]] = {
    "user": {"userGlobal": 2000, "workspace": 2000},
    "agent": {"userGlobal": 4000, "workspace": 4000},
}
OPTIONAL_METHODS = frozenset({"export", "import", "snapshot"})
HERE = os.path.dirname(os.path.abspath(__file__))


class CaseFailure(Exception):
    """A check in a case did not hold; the message says what was expected and seen."""


class Skip(Exception):
    """The case does not apply to this provider (e.g. not a git store, no git CLI)."""


class SetupError(Exception):
    """The suite cannot start: a factory that does not import, a bad bridge template."""


class GateRaised(Exception):
    """Raised on purpose by a case's gate, to see how the provider handles a broken
    approval transport; not reported as a harness problem."""


def session(session_id: str | None = SESSION_ID, cwd: str | None = CWD,
            preset: str | None = PRESET) -> dict[str, Any]:
    """A protocol session object (what a write context's ``agent.session`` holds)."""
    header: dict[str, Any] = {}
    if cwd is not None:
        header["cwd"] = cwd
    if preset is not None:
        header["agentPreset"] = preset
    return {"id": session_id, "header": header}


def write_context(session_id: str | None = SESSION_ID, cwd: str | None = CWD,
                  preset: str | None = PRESET) -> dict[str, Any]:
    """A write context; the defaults are the standard one every case writes with."""
    return {"agent": {"session": session(session_id, cwd, preset)}}


def allow(payload: dict[str, Any]) -> str:
    """The golden reference's gate: every write is approved."""
    return "allowed-once"


def reject(payload: dict[str, Any]) -> str:
    """A person saying no."""
    return "rejected"


def ensure(condition: object, message: str) -> None:
    """Like ``assert``, but never stripped by ``python -O`` and always with a reason."""
    if not condition:
        raise CaseFailure(message)


def expect_error(code: str, fn: Callable[..., Any], *args: Any) -> ProtocolFailure:
    """Call ``fn(*args)`` and require a protocol error with ``code``; returns it."""
    try:
        result = fn(*args)
    except ProtocolFailure as exc:
        if exc.code != code:
            raise CaseFailure(f"expected {code}, got {exc.code}: {exc.message}") from None
        return exc
    raise CaseFailure(f"expected {code}, but the call succeeded with "
                      f"{json.dumps(result, ensure_ascii=False)[:200]}")


def json_copy(value: Any, what: str) -> Any:
    """``value`` through JSON and back: results must be JSON, and both transports then look
    alike (tuples become lists, and so on)."""
    try:
        return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))
    except (TypeError, ValueError) as exc:
        raise CaseFailure(f"{what} is not JSON-serialisable: {exc}") from None


# ------------------------------------------------------------------ providers


class Subject:
    """The Provider face every case uses, whatever the transport.

    ``asked`` lists the approval payloads this provider's gate was called with, in order.
    """

    label = "provider"

    def __init__(self) -> None:
        self.asked: list[dict[str, Any]] = []

    def _call(self, method: str, *args: Any) -> Any:
        raise NotImplementedError

    def add(self, input: Any, write: Any) -> Any:
        return self._call("add", input, write)

    def replace(self, input: Any, write: Any) -> Any:
        return self._call("replace", input, write)

    def remove(self, input: Any, write: Any) -> Any:
        return self._call("remove", input, write)

    def consolidate(self, input: Any, write: Any) -> Any:
        return self._call("consolidate", input, write)

    def seed(self, inputs: Any, write: Any) -> Any:
        return self._call("seed", inputs, write)

    def query(self, filter: Any = None, opts: Any = None) -> Any:
        return self._call("query", filter, opts)

    def budgets(self) -> Any:
        return self._call("budgets")

    def listEntries(self) -> Any:
        return self._call("listEntries")

    def auditList(self, limit: int = 100) -> Any:
        return self._call("auditList", limit)

    def export(self) -> Any:
        return self._call("export")

    def import_envelope(self, envelope: Any, write: Any) -> Any:
        return self._call("import", envelope, write)

    def snapshot(self, session: Any) -> Any:
        return self._call("snapshot", session)

    def close(self) -> None:
        raise NotImplementedError

    def ready(self) -> None:
        """Wait until the provider can take requests (a bridge process has started)."""

    def diagnostics(self) -> str:
        """Anything that helps explain a failure (a bridge's stderr)."""
        return ""


# Python attribute names tried for each protocol method, in order
_PY_NAMES: dict[str, tuple[str, ...]] = {
    "listEntries": ("listEntries", "list_entries"),
    "auditList": ("auditList", "audit_list"),
    "import": ("import_envelope", "importEnvelope", "import_"),
}


class FactorySubject(Subject):
    """A Python provider object: errors with a string ``.code`` are protocol errors."""

    label = "factory"

    def __init__(self, obj: Any) -> None:
        super().__init__()
        self.obj = obj

    def _call(self, method: str, *args: Any) -> Any:
        fn = None
        for name in _PY_NAMES.get(method, (method,)):
            fn = getattr(self.obj, name, None)
            if callable(fn):
                break
        if not callable(fn):
            raise MethodMissing(method)
        if method == "query":
            args = (args[0] if args[0] is not None else {}, args[1] if args[1] is not None else {})
        try:
            result = fn(*args)
        except ProtocolFailure:
            raise
        except Exception as exc:
            code = getattr(exc, "code", None)
            if not isinstance(code, str) or not code:
                raise
            details = getattr(exc, "details", None)
            message = getattr(exc, "message", None)
            raise ProtocolFailure(
                code, message if isinstance(message, str) else str(exc),
                json_copy(details, f"{method}'s error details") if isinstance(details, Mapping)
                else {}) from exc
        return json_copy(result, f"the result of {method}")

    def close(self) -> None:
        fn = getattr(self.obj, "close", None)
        if callable(fn):
            fn()


class BridgeSubject(Subject):
    """A bridge process; params are shaped as ``filemem bridge`` expects them."""

    label = "bridge"

    def __init__(self, client: BridgeClient) -> None:
        super().__init__()
        self.client = client

    def _call(self, method: str, *args: Any) -> Any:
        params: dict[str, Any] | None
        if method in ("add", "replace", "remove", "consolidate"):
            params = {"input": args[0], "write": args[1]}
        elif method == "seed":
            params = {"inputs": args[0], "write": args[1]}
        elif method == "import":
            params = {"envelope": args[0], "write": args[1]}
        elif method == "query":
            params = {k: v for k, v in (("filter", args[0]), ("opts", args[1])) if v is not None}
        elif method == "auditList":
            params = {"limit": args[0]}
        elif method == "snapshot":
            params = {"session": args[0]}
        else:
            params = None
        return self.client.call(method, params)

    def ready(self) -> None:
        # a cheap request: a bridge opens (maybe creates) its store at start-up; without
        # this, two bridges opened one after the other would race to create the store
        self.client.call("budgets")

    def close(self) -> None:
        code = self.client.close()
        if code != 0:
            raise BridgeError(f"the bridge exited with code {code} after stdin closed")

    def diagnostics(self) -> str:
        return self.client.stderr_tail()


def gate_adapter(gate: Gate, asked: list[dict[str, Any]],
                 problems: list[str]) -> Callable[[Any], str]:
    """What the provider calls: takes the request (``.payload`` or ``["payload"]``),
    records the payload, and asks the case's gate."""

    def call(request: Any) -> str:
        payload = getattr(request, "payload", None)
        if payload is None and isinstance(request, Mapping):
            payload = request.get("payload")
        payload = json_copy(payload, "the approval payload")
        asked.append(payload)
        try:
            return gate(payload)
        except GateRaised:
            raise
        except Exception as exc:
            problems.append(f"the case's gate raised {type(exc).__name__}: {exc}")
            raise

    return call


# ------------------------------------------------------------------ backends


def load_factory(spec: str) -> Callable[..., Any]:
    """``module:function`` (dotted attributes allowed), importable from the current folder."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise SetupError(f"--factory wants module:function, got {spec!r}")
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.append(cwd)
    try:
        obj: Any = importlib.import_module(module_name)
    except Exception as exc:
        raise SetupError(f"cannot import {module_name!r}: {type(exc).__name__}: {exc}") from exc
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SetupError(f"{module_name!r} has no attribute {attr!r}") from None
    if not callable(obj):
        raise SetupError(f"{spec} is not callable")
    return obj  # type: ignore[no-any-return]


class Backend:
    """How providers are made: by a Python factory or by starting a bridge command."""

    description = ""

    def open(self, store: str, budgets: dict[str, Any], gate: Callable[[Any], str],
             asked: list[dict[str, Any]]) -> Subject:
        raise NotImplementedError

    def parallel(self, h: Harness, store: str, budgets: dict[str, Any],
                 jobs: list[list[Call]]) -> list[list[dict[str, Any]]]:
        """Run each job (a list of write calls) in its own OS process, all at once; per
        job, per call ``{"result": ...}`` or ``{"error": code, "message": ...}``."""
        raise NotImplementedError


class FactoryBackend(Backend):
    def __init__(self, spec: str, python: str, timeout: float = 120.0) -> None:
        self.spec = spec
        self.factory = load_factory(spec)
        self.python = python
        self.timeout = timeout
        self.description = f"factory {spec}"

    def open(self, store: str, budgets: dict[str, Any], gate: Callable[[Any], str],
             asked: list[dict[str, Any]]) -> Subject:
        obj = self.factory(store, budgets, gate)
        if obj is None:
            raise CaseFailure(f"the factory {self.spec} returned None")
        subject = FactorySubject(obj)
        subject.asked = asked
        return subject

    def parallel(self, h: Harness, store: str, budgets: dict[str, Any],
                 jobs: list[list[Call]]) -> list[list[dict[str, Any]]]:
        worker = os.path.join(HERE, "worker.py")
        procs: list[subprocess.Popen[str]] = []
        try:
            for calls in jobs:
                proc = subprocess.Popen(
                    [self.python, worker], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True, encoding="utf-8")
                procs.append(proc)
                assert proc.stdin is not None
                proc.stdin.write(json.dumps({"factory": self.spec, "store": store,
                                             "budgets": budgets, "calls": calls}) + "\n")
                proc.stdin.flush()
            for proc in procs:  # everyone has opened the store: start together
                assert proc.stdout is not None
                ready = proc.stdout.readline()
                if ready.strip() != "ready":
                    _, err = proc.communicate(timeout=self.timeout)
                    raise CaseFailure(f"a writer process failed to start: {_last_line(err)}"
                                      f"\n{err.strip()[-2000:]}")
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write("go\n")
                proc.stdin.flush()
            results = []
            for proc in procs:
                out, err = proc.communicate(timeout=self.timeout)
                if proc.returncode != 0:
                    raise CaseFailure(f"a writer process exited with {proc.returncode}: "
                                      f"{_last_line(err)}\n{err.strip()[-2000:]}")
                results.append(json.loads(out.strip().splitlines()[-1]))
            return results
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()


def _last_line(text: str) -> str:
    """The exception line of a traceback: what went wrong, for the one-line report."""
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip() if lines else "(no output on stderr)"


class BridgeBackend(Backend):
    def __init__(self, template: str, python: str, timeout: float = 60.0) -> None:
        self.template = template
        self.python = python
        self.timeout = timeout
        self.description = f"bridge {template}"
        try:
            self.words = shlex.split(template, posix=os.name != "nt")
        except ValueError as exc:
            raise SetupError(f"--bridge: cannot split {template!r}: {exc}") from exc
        if not self.words:
            raise SetupError("--bridge: empty command")
        if not any("{store}" in w for w in self.words):
            raise SetupError("--bridge: the command must contain {store}")

    def argv(self, store: str, budgets: dict[str, Any]) -> list[str]:
        """The command for one bridge: ``{store}``, ``{budgets}``, ``{python}`` filled in;
        ``--budgets <json>`` appended when the template has no ``{budgets}``."""
        budgets_json = json.dumps(budgets, separators=(",", ":"))
        argv = [w.replace("{store}", store).replace("{budgets}", budgets_json)
                .replace("{python}", self.python) for w in self.words]
        if "{budgets}" not in self.template:
            argv += ["--budgets", budgets_json]
        return argv

    def open(self, store: str, budgets: dict[str, Any], gate: Callable[[Any], str],
             asked: list[dict[str, Any]]) -> Subject:
        client = BridgeClient(self.argv(store, budgets), gate, timeout=self.timeout)
        subject = BridgeSubject(client)
        subject.asked = asked
        return subject

    def parallel(self, h: Harness, store: str, budgets: dict[str, Any],
                 jobs: list[list[Call]]) -> list[list[dict[str, Any]]]:
        # started together: when the store is new, they also race to create it
        subjects = [h.provider(budgets=budgets, store=store, wait=False) for _ in jobs]
        barrier = threading.Barrier(len(jobs))
        results: list[list[dict[str, Any]]] = [[] for _ in jobs]
        crashes: list[str] = []

        def run(i: int) -> None:
            try:
                subjects[i].ready()
                barrier.wait(self.timeout)
                results[i] = run_calls(subjects[i], jobs[i])
            except Exception as exc:
                barrier.abort()  # nobody waits for a writer that will never come
                crashes.append(f"writer {i}: {type(exc).__name__}: {exc}")

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(jobs))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if crashes:
            raise CaseFailure("; ".join(crashes))
        return results


def run_calls(subject: Subject, calls: list[Call]) -> list[dict[str, Any]]:
    """Each write call with the standard write context; protocol errors are results."""
    out: list[dict[str, Any]] = []
    for method, input in calls:
        try:
            out.append({"result": getattr(subject, method)(input, write_context())})
        except ProtocolFailure as exc:
            out.append({"error": exc.code, "message": exc.message})
    return out


# ------------------------------------------------------------------ the harness


class Harness:
    """One case's world: a temporary folder with a store, and the providers opened on it."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.root = tempfile.mkdtemp(prefix="dsh-conformance-")
        self._stores = 0
        self.store = self.new_store()
        self.opened: list[Subject] = []
        self.problems: list[str] = []  # gates that raised unexpectedly
        self.notes: list[str] = []  # parts of a case that did not apply (shown with -v)
        self.closing_diagnostics = ""  # the bridges' stderr, kept by close() for reports

    @property
    def write(self) -> dict[str, Any]:
        """The standard write context (a fresh copy: a provider may not keep ours)."""
        return write_context()

    def new_store(self) -> str:
        """A fresh, empty store folder for another store in the same case."""
        self._stores += 1
        path = os.path.join(self.root, f"store-{self._stores}")
        os.mkdir(path)
        return path

    def provider(self, budgets: dict[str, Any] | None = None, gate: Gate = allow,
                 store: str | None = None, wait: bool = True) -> Subject:
        """A provider on this case's store (or ``store``); every write asks ``gate``.
        ``wait=False`` returns before a bridge is up (to start several at once)."""
        asked: list[dict[str, Any]] = []
        adapter = gate_adapter(gate, asked, self.problems)
        subject = self.backend.open(store or self.store, budgets or DEFAULT_BUDGETS, adapter,
                                    asked)
        self.opened.append(subject)
        if wait:
            subject.ready()
        return subject

    def parallel(self, jobs: list[list[Call]], budgets: dict[str, Any] | None = None,
                 store: str | None = None) -> list[list[dict[str, Any]]]:
        return self.backend.parallel(self, store or self.store, budgets or DEFAULT_BUDGETS,
                                     jobs)

    def note(self, text: str) -> None:
        self.notes.append(text)

    def diagnostics(self) -> str:
        return "\n".join(d for d in (s.diagnostics().strip() for s in self.opened) if d)

    def close(self) -> list[str]:
        """Close every provider (a bridge must exit 0) and delete the folder; problems."""
        problems = []
        for subject in self.opened:
            try:
                subject.close()
            except Exception as exc:
                problems.append(f"closing a {subject.label}: {type(exc).__name__}: {exc}")
        self.closing_diagnostics = self.diagnostics()
        for subject in self.opened:
            if isinstance(subject, BridgeSubject):
                subject.client.release()
        self.opened = []
        if sys.version_info >= (3, 12):
            shutil.rmtree(self.root, onexc=_force_remove)
        else:
            shutil.rmtree(self.root, onerror=_force_remove)
        return problems

    def kill(self) -> None:
        """Stop every bridge now (Ctrl-C)."""
        for subject in self.opened:
            if isinstance(subject, BridgeSubject):
                subject.client.kill()


def _force_remove(func: Callable[..., Any], path: str, _exc: Any) -> None:
    """git makes object files read-only; Windows then refuses to delete them."""
    try:
        os.chmod(path, stat.S_IWRITE | stat.S_IREAD)
        func(path)
    except OSError:
        pass


__all__ = [
    "CWD",
    "DEFAULT_BUDGETS",
    "OPTIONAL_METHODS",
    "PRESET",
    "SESSION_ID",
    "Backend",
    "BridgeBackend",
    "BridgeError",
    "CaseFailure",
    "FactoryBackend",
    "GateRaised",
    "Harness",
    "MethodMissing",
    "ProtocolFailure",
    "SetupError",
    "Skip",
    "Subject",
    "allow",
    "ensure",
    "expect_error",
    "json_copy",
    "load_factory",
    "reject",
    "session",
    "write_context",
]
