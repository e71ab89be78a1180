"""`filemem bridge`: JSON-RPC 2.0 over stdio, tested as a host sees it.

Every test starts the real command in a subprocess and talks to it through pipes. Every line
the bridge prints is parsed and checked against the documented message schemas in
schemas/bridge/, and a read timeout turns a hung bridge into a failed test.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

import filemem
from tests.conftest import BIG, ROOT, assert_clean_repo, git, run_cli

TIMEOUT = 20.0  # seconds one message may take before the test fails instead of hanging
SCHEMA_DIR = ROOT / "schemas" / "bridge"
SCHEMA_BASE = "https://filemem.invalid/schemas/bridge/"
W: dict[str, Any] = {"agent": {"session": {"id": "s1", "header": {"cwd": "/work/proj",
                                                                   "agentPreset": "coder"}}}}
SESSION = W["agent"]["session"]
UW = {"track": "user", "scope": "workspace"}
UG = {"track": "user", "scope": "user-global"}
AW = {"track": "agent", "scope": "workspace"}
ENTRY_KEYS = {"id", "track", "scope", "workspaceKey", "agentKey", "text", "source", "tags",
              "version", "createdAt", "updatedAt", "lastRecalled", "recallCount", "sessionId"}
USAGE_KEYS = {"track", "scope", "used", "limit"}
AUDIT_KEYS = {"seq", "ts", "action", "track", "scope", "entryId", "text", "outcome", "source",
              "sessionId"}
METHODS = ["add", "auditList", "budgets", "consolidate", "describe", "export", "import",
           "listEntries", "query", "remove", "replace", "seed", "snapshot"]
ASK_LABEL = "(via approval, writePolicy ask; answered by bridge host)"
_ABSENT: Any = object()


def _registry() -> Registry:
    docs = [json.loads(p.read_text(encoding="utf-8")) for p in SCHEMA_DIR.glob("*.schema.json")]
    return Registry().with_resources((d["$id"], Resource.from_contents(d)) for d in docs)


REGISTRY = _registry()


def schema(ref: str) -> Draft202012Validator:
    """A validator for ``<file>#<pointer>`` in schemas/bridge/."""
    return Draft202012Validator({"$ref": SCHEMA_BASE + ref}, registry=REGISTRY)


RESPONSE = schema("response.schema.json")
ERROR_RESPONSE = schema("error-response.schema.json")
APPROVAL_REQUEST = schema("approval-request.schema.json")
REQUEST = schema("request.schema.json")
APPROVAL_RESPONSE = schema("approval-response.schema.json")


def check_message(msg: Any) -> None:
    """Whatever the bridge prints is one of its three documented message kinds."""
    assert isinstance(msg, dict), msg
    if msg.get("method") == "approval/request":
        APPROVAL_REQUEST.validate(msg)
    elif "error" in msg:
        ERROR_RESPONSE.validate(msg)
    else:
        RESPONSE.validate(msg)


class BridgeProc:
    """A host's view of one `filemem bridge` process."""

    def __init__(self, store: Path, *args: str) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "filemem", "bridge", "--store", str(store), *args],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
        self.raw: list[bytes] = []  # every stdout line, for the "nothing but JSON" check
        self.approvals: list[dict[str, Any]] = []
        self._lines: queue.Queue[bytes | None] = queue.Queue()
        self._err = bytearray()
        self._ids = itertools.count(1)
        self._threads = [threading.Thread(target=self._pump_out, daemon=True),
                         threading.Thread(target=self._pump_err, daemon=True)]
        for t in self._threads:
            t.start()

    def _pump_out(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.raw.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def _pump_err(self) -> None:
        assert self.proc.stderr is not None
        fd = self.proc.stderr.fileno()
        while chunk := os.read(fd, 65536):
            self._err += chunk

    @property
    def stderr(self) -> str:
        return self._err.decode("utf-8", "replace")

    # ------------------------------------------------------------ sending

    def write(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, msg: Any) -> None:
        self.write(json.dumps(msg).encode("utf-8") + b"\n")

    def request(self, method: str, params: Any = _ABSENT, *, rid: Any = None,
                validate: bool = True) -> Any:
        rid = next(self._ids) if rid is None else rid
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not _ABSENT:
            msg["params"] = params
        if validate:
            REQUEST.validate(msg)  # the documented request schema accepts what we send
        self.send(msg)
        return rid

    def reply(self, approval: dict[str, Any], outcome: str) -> None:
        msg = {"jsonrpc": "2.0", "id": approval["id"], "result": {"outcome": outcome}}
        APPROVAL_RESPONSE.validate(msg)
        self.send(msg)

    # ------------------------------------------------------------ receiving

    def recv(self, timeout: float = TIMEOUT) -> dict[str, Any]:
        try:
            line = self._lines.get(timeout=timeout)
        except queue.Empty:
            pytest.fail(f"the bridge sent nothing for {timeout}s; stderr:\n{self.stderr}")
        if line is None:
            pytest.fail(f"the bridge closed stdout (exit {self.proc.poll()}); "
                        f"stderr:\n{self.stderr}")
        assert line.endswith(b"\n")
        msg = json.loads(line.decode("utf-8"))
        check_message(msg)
        return msg  # type: ignore[no-any-return]

    def answer(self, rid: Any) -> dict[str, Any]:
        """The next message, which must be the answer to ``rid``."""
        msg = self.recv()
        assert "method" not in msg and msg["id"] == rid, msg
        return msg

    def approval(self) -> dict[str, Any]:
        msg = self.recv()
        assert msg.get("method") == "approval/request", msg
        self.approvals.append(msg)
        return msg

    def call(self, method: str, params: Any = _ABSENT, approve: str | None = None,
             validate: bool = True) -> dict[str, Any]:
        """Send a request, answer approval requests with ``approve`` (none may come when it is
        None) and return the response message."""
        rid = self.request(method, params, validate=validate)
        while True:
            msg = self.recv()
            if msg.get("method") == "approval/request":
                assert approve is not None, f"unexpected approval request: {msg}"
                self.approvals.append(msg)
                self.reply(msg, approve)
                continue
            assert msg["id"] == rid, msg
            if "result" in msg:
                schema(f"response.schema.json#/$defs/{method}Result").validate(msg["result"])
            return msg

    def result(self, method: str, params: Any = _ABSENT, approve: str | None = None) -> Any:
        msg = self.call(method, params, approve)
        assert "result" in msg, msg
        return msg["result"]

    def error(self, method: str, params: Any = _ABSENT, approve: str | None = None,
              validate: bool = False) -> dict[str, Any]:
        msg = self.call(method, params, approve, validate=validate)
        assert "error" in msg, msg
        return msg["error"]  # type: ignore[no-any-return]

    # ------------------------------------------------------------ ending

    def finish(self) -> int:
        """Close stdin (EOF) and wait for the bridge to exit; every line must be JSON."""
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            rc = self.proc.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the bridge did not exit after EOF; stderr:\n{self.stderr}")
        for t in self._threads:
            t.join(TIMEOUT)
        assert_only_json(self.raw)
        return rc

    def rest(self) -> list[dict[str, Any]]:
        """Every message left after the bridge closed stdout."""
        out = []
        while (line := self._lines.get(timeout=TIMEOUT)) is not None:
            msg = json.loads(line)
            check_message(msg)
            out.append(msg)
        return out

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(TIMEOUT)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()


def assert_only_json(lines: list[bytes]) -> None:
    """stdout is the protocol channel: each line is one complete JSON-RPC 2.0 object."""
    for line in lines:
        assert line.endswith(b"\n") and line.count(b"\n") == 1, line
        msg = json.loads(line.decode("utf-8"))
        assert isinstance(msg, dict) and msg.get("jsonrpc") == "2.0", line
        check_message(msg)


@pytest.fixture
def bridge(store_path: Path) -> Iterator[Callable[..., BridgeProc]]:
    """Start bridges on the test store (or ``store=``); all are killed after the test."""
    started: list[BridgeProc] = []

    def start(*args: str, store: Path | None = None) -> BridgeProc:
        b = BridgeProc(store_path if store is None else store, *args)
        started.append(b)
        return b

    yield start
    for b in started:
        b.kill()
    for b in started:
        assert_only_json(b.raw)


def entry_input(text: str, layer: dict[str, str] = UW, **extra: Any) -> dict[str, Any]:
    return {**layer, "text": text, **extra}


def add(b: BridgeProc, text: str, layer: dict[str, str] = UW, approve: str | None = None,
        **extra: Any) -> dict[str, Any]:
    return b.result("add", {"input": entry_input(text, layer, **extra), "write": W},  # type: ignore[no-any-return]
                    approve)


def commits(store: Path) -> int:
    return int(git(store, "rev-list", "--count", "HEAD"))


def assert_linear(store: Path) -> None:
    assert git(store, "rev-list", "--merges", "--count", "HEAD").strip() == "0"
    for line in git(store, "rev-list", "--parents", "HEAD").splitlines():
        assert len(line.split()) <= 2, line


# ---------------------------------------------------------------- methods and shapes


def test_describe_and_the_store_is_created_if_missing(bridge: Callable[..., BridgeProc],
                                                      tmp_path: Path) -> None:
    store = tmp_path / "not" / "yet" / "store"
    b = bridge(store=store)
    d = b.result("describe")
    assert d == {"protocol": "dsh-memory-protocol/v1", "provider": "filemem",
                 "version": d["version"], "store": str(store), "methods": METHODS}
    assert b.finish() == 0
    assert (store / "filemem.yaml").is_file()
    assert commits(store) == 1
    assert_clean_repo(store)


def test_every_method_once_with_protocol_shapes(bridge: Callable[..., BridgeProc],
                                                store_path: Path) -> None:
    b = bridge("--approval", "auto")
    r = add(b, "prefers tabs", tags=["style"])
    assert set(r) == {"entry", "usage"}
    assert set(r["entry"]) == ENTRY_KEYS and set(r["usage"]) == USAGE_KEYS
    e = r["entry"]
    assert (e["text"], e["tags"], e["version"], e["workspaceKey"], e["agentKey"],
            e["sessionId"], e["recallCount"], e["lastRecalled"]) == \
        ("prefers tabs", ["style"], 1, "/work/proj", "coder", "s1", 0, None)
    assert r["usage"] == {**UW, "used": 12, "limit": 2000}

    r = b.result("replace", {"input": {**UW, "match": "TABS", "text": "prefers spaces"},
                             "write": W})
    assert set(r) == {"previous", "entry", "usage"}
    assert r["previous"]["text"] == "prefers tabs" and r["entry"]["text"] == "prefers spaces"
    assert r["entry"]["id"] == e["id"] and r["entry"]["version"] == 2
    assert r["entry"]["tags"] == ["style"]

    s = b.result("seed", {"inputs": [entry_input("fact one", AW),
                                     entry_input("fact two", AW, source="mem0"),
                                     entry_input("global fact", UG)], "write": W})
    assert set(s) == {"added", "entries"} and s["added"] == 3
    assert [x["text"] for x in s["entries"]] == ["fact one", "fact two", "global fact"]
    assert s["entries"][1]["source"] == "mem0" and s["entries"][2]["workspaceKey"] == ""

    c = b.result("consolidate", {"input": {**AW, "matches": ["one", "two"],
                                           "text": "facts one and two"}, "write": W})
    assert set(c) == {"removed", "entry", "usage"}
    assert [x["text"] for x in c["removed"]] == ["fact one", "fact two"]
    assert c["entry"]["version"] == 1 and c["usage"] == {**AW, "used": 17, "limit": 4000}

    q = b.result("query", {"filter": {"text": "fact"}, "opts": {"session": SESSION}})
    assert set(q) == {"entries", "total", "truncated"}
    assert sorted(x["text"] for x in q["entries"]) == ["facts one and two", "global fact"]
    assert (q["total"], q["truncated"]) == (2, False)
    assert b.result("query", {"filter": {"text": "fact", "limit": 1}})["truncated"] is True
    assert b.result("query")["total"] == 3  # no params: every entry
    assert b.result("query", {})["total"] == 3

    rm = b.result("remove", {"input": {**UG, "match": "global"}, "write": W})
    assert set(rm) == {"entry", "usage"} and rm["entry"]["text"] == "global fact"
    assert rm["usage"] == {**UG, "used": 0, "limit": 2000}

    rows = b.result("budgets")
    assert [(x["track"], x["scope"]) for x in rows] == [
        ("user", "user-global"), ("user", "workspace"), ("agent", "user-global"),
        ("agent", "workspace")]
    assert [x["used"] for x in rows] == [0, 14, 0, 17]

    listed = b.result("listEntries")
    assert [x["text"] for x in listed] == ["prefers spaces", "facts one and two"]
    assert all(set(x) == ENTRY_KEYS for x in listed)
    assert listed[0]["recallCount"] == 2  # two unfiltered queries bumped it; listing not

    audit = b.result("auditList", {"limit": 3})
    assert len(audit) == 3 and all(set(x) == AUDIT_KEYS for x in audit)
    assert audit[0]["action"] == "remove"
    assert audit[0]["outcome"] == "allowed-once (via approval, writePolicy auto)"
    assert len(b.result("auditList")) > 3  # limit defaults to 100

    env = b.result("export")
    assert (env["plugin"], env["schema"]) == ("dsh-memento", "memory-export-v1")
    assert [x["text"] for x in env["entries"]] == ["prefers spaces", "facts one and two"]

    imp = b.result("import", {"envelope": env, "write": W})
    assert imp["added"] == 2
    assert {x["id"] for x in imp["entries"]}.isdisjoint({x["id"] for x in listed})

    snap = b.result("snapshot", {"session": SESSION})
    assert isinstance(snap, str) and "prefers spaces" in snap
    assert b.result("snapshot", {"session": SESSION}) == snap  # frozen per session
    # the host names the tools its model changes memory with; else the protocol's operations
    assert snap.startswith("[filemem: frozen memory snapshot") and "dsh-memento" not in snap
    assert "use the memory tools (add, replace, remove, consolidate).]" in snap.splitlines()[0]
    hosted = b.result("snapshot", {"session": {**SESSION, "id": "hosted"},
                                   "tools": ["remember", "forget"]})
    assert hosted.splitlines()[0].endswith("use the remember or forget tool.]")
    bad = b.error("snapshot", {"session": {**SESSION, "id": "bad"}, "tools": ["a b"]})
    assert bad["data"]["code"] == "INVALID_INPUT"
    assert b.finish() == 0
    assert_clean_repo(store_path)


def test_texts_with_line_separators_stay_on_one_line(bridge: Callable[..., BridgeProc]) -> None:
    b = bridge("--approval", "auto")
    text = "a\u2028b\u2029c\nd \U0001f600 é"
    assert add(b, text)["entry"]["text"] == text
    assert b.result("listEntries")[0]["text"] == text
    assert b.finish() == 0
    assert all(b"\xe2\x80\xa8" not in line for line in b.raw)


# ---------------------------------------------------------------- protocol errors


def test_protocol_errors_carry_code_and_details(bridge: Callable[..., BridgeProc],
                                                store_path: Path) -> None:
    budgets = {"user": {"userGlobal": 100, "workspace": 20},
               "agent": {"userGlobal": 100, "workspace": 100}}
    b = bridge("--approval", "host", "--budgets", json.dumps(budgets))
    add(b, "tea: green", approve="allowed-once")
    add(b, "tea: black", approve="allowed-once")
    before = commits(store_path)

    def protocol_error(method: str, params: Any) -> tuple[str, dict[str, Any], str]:
        err = b.error(method, params)  # no approval may be asked for any of these
        assert err["code"] == -32000 and set(err) == {"code", "message", "data"}
        assert set(err["data"]) == {"code", "details"}
        return err["data"]["code"], err["data"]["details"], err["message"]

    code, details, message = protocol_error("add", {"input": {**UW, "track": "nope",
                                                              "text": "x"}, "write": W})
    assert (code, details) == ("INVALID_INPUT", {}) and "track" in message
    assert protocol_error("add", {"input": {**UW, "text": ""}, "write": W})[0] == "INVALID_INPUT"
    assert protocol_error("query", {"filter": 5})[0] == "INVALID_INPUT"

    for write in (_ABSENT, {}, {"agent": None}, None, "s1"):
        params: dict[str, Any] = {"input": {"track": "bad"}}
        if write is not _ABSENT:
            params["write"] = write
        code, details, message = protocol_error("remove", params)  # agent check comes first
        assert (code, details) == ("WRITE_REQUIRES_AGENT", {})
        assert message.startswith("memory write requires an owning agent session")

    code, details, message = protocol_error("add", {"input": entry_input("12345"), "write": W})
    assert code == "BUDGET_EXCEEDED"
    assert details == {**UW, "used": 20, "limit": 20, "needed": 25}
    assert message.startswith("memory budget exceeded: user/workspace at 20/20 chars")

    code, details, _ = protocol_error("remove", {"input": {**UW, "match": "coffee"}, "write": W})
    assert (code, details) == ("ENTRY_NOT_FOUND", {**UW, "match": "coffee",
                                                   "workspaceKey": "/work/proj",
                                                   "agentKey": "coder", "elsewhere": []})

    code, details, message = protocol_error(
        "replace", {"input": {**UW, "match": "TEA", "text": "tea"}, "write": W})
    assert code == "AMBIGUOUS_MATCH" and "ambiguous" in message
    assert details["candidates"] == 2 and details["match"] == "TEA"
    assert sorted(details["sample"]) == ["tea: black", "tea: green"]

    code, details, _ = protocol_error("consolidate", {"input": {**UW, "matches": ["green"] * 2,
                                                                "text": "x"}, "write": W})
    assert (code, details) == ("INVALID_INPUT", {})
    assert len(b.approvals) == 2  # only the two adds were asked
    assert commits(store_path) == before  # failures before approval leave no trace
    assert b.finish() == 0


# ---------------------------------------------------------------- approval round trips


def test_approval_allowed_once_writes(bridge: Callable[..., BridgeProc],
                                      store_path: Path) -> None:
    b = bridge()  # --approval host is the default; the store's policy is ask
    rid = b.request("add", {"input": entry_input("prefers tabs"), "write": W})
    ask = b.approval()
    assert isinstance(ask["id"], str) and ask["id"] != rid
    assert ask["params"] == {"payload": {"action": "add", **UW, "text": "prefers tabs",
                                         "source": "filemem"}, "write": W}
    b.reply(ask, "allowed-once")
    entry = b.answer(rid)["result"]["entry"]
    assert [x["id"] for x in b.result("listEntries")] == [entry["id"]]
    row = b.result("auditList", {"limit": 1})[0]
    assert (row["action"], row["entryId"]) == ("add", entry["id"])
    assert row["outcome"] == f"allowed-once {ASK_LABEL}"
    assert b.finish() == 0
    assert commits(store_path) == 2
    assert_clean_repo(store_path)


@pytest.mark.parametrize("outcome", ["rejected", "cancelled", "allowed-always"])
def test_approval_denied_is_write_denied_with_a_denied_row(
        bridge: Callable[..., BridgeProc], store_path: Path, outcome: str) -> None:
    b = bridge()
    err = b.error("add", {"input": entry_input("prefers tabs"), "write": W}, approve=outcome)
    assert err["data"] == {"code": "WRITE_DENIED", "details": {"outcome": outcome}}
    assert err["message"] == (f"memory write not approved (approval outcome: {outcome}); "
                              "nothing was written")
    assert b.result("listEntries") == []
    row = b.result("auditList", {"limit": 1})[0]
    assert (row["action"], row["text"], row["entryId"]) == ("add-denied", "prefers tabs", None)
    assert row["outcome"] == f"{outcome} {ASK_LABEL}"
    assert b.finish() == 0
    assert_clean_repo(store_path)


def assert_staged(err: dict[str, Any], store: Path) -> str:
    """The host could not answer: the approval outcome is ``unavailable``, so under ``ask`` the
    provider stages the write as a pending approval for the owner's CLI: WRITE_DENIED
    with outcome ``pending`` and the pending id; nothing is written."""
    assert err["code"] == -32000 and err["data"]["code"] == "WRITE_DENIED"
    details = err["data"]["details"]
    assert set(details) == {"outcome", "pendingId"} and details["outcome"] == "pending"
    pid = details["pendingId"]
    assert isinstance(pid, str) and pid in err["message"]
    assert (store / ".filemem" / "pending" / f"{pid}.json").is_file()
    return pid


def test_a_host_error_or_no_outcome_is_unavailable(bridge: Callable[..., BridgeProc],
                                                    store_path: Path) -> None:
    b = bridge()
    bad_answers: list[dict[str, Any]] = [
        {"error": {"code": -32001, "message": "no person at the keyboard"}},
        {"result": {}},
        {"result": {"outcome": ""}},
        {"result": "allowed-once"},
    ]
    pids = []
    for answer in bad_answers:
        rid = b.request("add", {"input": entry_input("prefers tabs"), "write": W})
        ask = b.approval()
        b.send({"jsonrpc": "2.0", "id": ask["id"], **answer})
        pids.append(assert_staged(b.answer(rid)["error"], store_path))
    assert len(set(pids)) == 4
    assert b.result("listEntries") == []
    rows = b.result("auditList", {"limit": 4})
    assert [r["action"] for r in rows] == ["add-pending"] * 4
    assert all(r["outcome"].startswith("pending (via approval, writePolicy ask") for r in rows)
    assert b.finish() == 0
    assert_clean_repo(store_path)


def test_host_closing_stdin_while_asked_is_unavailable_and_exit_0(
        bridge: Callable[..., BridgeProc], store_path: Path) -> None:
    b = bridge()
    rid = b.request("add", {"input": entry_input("prefers tabs"), "write": W})
    b.request("listEntries")  # already sent: it is still answered after the EOF
    b.approval()
    assert b.proc.stdin is not None
    b.proc.stdin.close()  # the host goes away while the bridge waits for the answer
    assert b.proc.wait(TIMEOUT) == 0
    denied, listed = b.rest()
    assert denied["id"] == rid
    pid = assert_staged(denied["error"], store_path)
    assert listed["result"] == []
    assert_only_json(b.raw)
    # nothing was written; the attempt is on record
    assert git(store_path, "ls-files", "user", "agent") == ""
    c = bridge("--approval", "auto")
    assert c.result("listEntries") == []
    row = c.result("auditList", {"limit": 1})[0]
    assert row["action"] == "add-pending" and pid in row["outcome"]
    assert c.finish() == 0
    assert_clean_repo(store_path)


def test_a_host_gone_entirely_while_asked(store_path: Path) -> None:
    """The host dies: stdin and stdout close together. The write is staged, the request
    read after it is dropped (nobody can hear its answer), and the bridge exits 0."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "filemem", "bridge", "--store", str(store_path)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    try:
        for rid in (1, 2):
            proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": "add", "params": {
                "input": entry_input(f"fact {rid}"), "write": W}}).encode() + b"\n")
        proc.stdin.flush()
        ask = json.loads(proc.stdout.readline())
        assert ask["method"] == "approval/request" and ask["params"]["payload"]["text"] == "fact 1"
        proc.stdout.close()
        proc.stdin.close()
        assert proc.wait(TIMEOUT) == 0
        assert b"closed stdout" in proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stderr.close()
    assert git(store_path, "ls-files", "user", "agent") == ""
    staged = list((store_path / ".filemem" / "pending").iterdir())
    assert len(staged) == 1  # "fact 1" only
    subjects = git(store_path, "log", "--format=%s").splitlines()
    assert len(subjects) == 2 and subjects[0].startswith("add-pending")
    assert staged[0].stem in subjects[0] and "fact 1" in subjects[0]
    assert_clean_repo(store_path)


def test_approval_payloads_show_everything_that_would_be_written(
        bridge: Callable[..., BridgeProc]) -> None:
    b = bridge()

    def asked(method: str, params: dict[str, Any]) -> dict[str, Any]:
        n = len(b.approvals)
        b.result(method, {**params, "write": W}, approve="allowed-once")
        assert len(b.approvals) == n + 1
        ask = b.approvals[-1]["params"]
        assert ask["write"] == W
        return ask["payload"]  # type: ignore[no-any-return]

    assert asked("add", {"input": entry_input("green tea", source="claude")}) == {
        "action": "add", **UW, "text": "green tea", "source": "claude"}
    assert asked("replace", {"input": {**UW, "match": "green", "text": "black tea"}}) == {
        "action": "replace", **UW, "text": "from:\ngreen tea\n\nto:\nblack tea",
        "source": "filemem"}
    assert asked("seed", {"inputs": [entry_input("first", AW, source="mem0"),
                                     entry_input("second", UG)]}) == {
        "action": "seed", "track": "batch", "scope": "batch",
        "text": "agent/workspace: first\nuser/user-global: second", "count": 2}
    long = "x" * 301
    add(b, long, AW, approve="allowed-once")
    assert asked("consolidate", {"input": {**AW, "matches": ["first", "xxx"],
                                           "text": "merged"}}) == {
        "action": "consolidate", **AW,
        "text": f"remove: first\nfirst\nremove: xxx\n{'x' * 300}\u2026\nnew text: merged",
        "source": "filemem"}
    assert asked("remove", {"input": {**UW, "match": "black"}}) == {
        "action": "remove", **UW, "text": "black tea", "source": "claude"}  # the entry's own
    env = b.result("export")
    assert asked("import", {"envelope": env}) == {
        "action": "seed", "track": "batch", "scope": "batch",
        "text": "user/user-global: second\nagent/workspace: merged", "count": 2}
    assert b.finish() == 0


def test_requests_sent_during_an_approval_wait_their_turn(
        bridge: Callable[..., BridgeProc]) -> None:
    b = bridge()
    first = b.request("add", {"input": entry_input("prefers tabs"), "write": W})
    second = b.request("describe")
    third = b.request("listEntries")
    ask = b.approval()  # before any answer: requests are answered in order
    b.send({"jsonrpc": "2.0", "id": "filemem-approval-999", "result": {"outcome": "rejected"}})
    b.reply(ask, "allowed-once")  # an answer for no pending request was ignored
    assert "result" in b.answer(first)
    assert b.answer(second)["result"]["provider"] == "filemem"
    assert [x["text"] for x in b.answer(third)["result"]] == ["prefers tabs"]
    assert b.finish() == 0
    assert "an answer to no pending request" in b.stderr


@pytest.mark.parametrize("mode", ["auto", "off"])
def test_approval_auto_and_off_never_ask(bridge: Callable[..., BridgeProc], mode: str) -> None:
    b = bridge("--approval", mode)
    msg = b.call("add", {"input": entry_input("prefers tabs"), "write": W})  # fails if asked
    row = b.result("auditList", {"limit": 1})[0]
    if mode == "auto":
        assert msg["result"]["entry"]["text"] == "prefers tabs"
        assert (row["action"], row["outcome"]) == (
            "add", "allowed-once (via approval, writePolicy auto)")
    else:
        assert msg["error"]["data"] == {"code": "WRITE_DENIED",
                                        "details": {"outcome": "rejected"}}
        assert (row["action"], row["outcome"]) == (
            "add-denied", "rejected (via approval, writePolicy off)")
        assert b.result("listEntries") == []
    assert b.approvals == []
    assert b.finish() == 0


# ---------------------------------------------------------------- --budgets


def test_budgets_option_overrides_the_store_config_for_this_process(
        bridge: Callable[..., BridgeProc], store_path: Path) -> None:
    budgets = {"user": {"userGlobal": 50, "workspace": 30},
               "agent": {"userGlobal": 70, "workspace": 90}}
    b = bridge("--approval", "auto", "--budgets", json.dumps(budgets))
    assert [x["limit"] for x in b.result("budgets")] == [50, 30, 70, 90]
    err = b.error("add", {"input": entry_input("y" * 31), "write": W})
    assert err["data"] == {"code": "BUDGET_EXCEEDED",
                           "details": {**UW, "used": 0, "limit": 30, "needed": 31}}
    assert add(b, "y" * 30)["usage"] == {**UW, "used": 30, "limit": 30}
    assert b.finish() == 0
    other = bridge("--approval", "auto")  # the store's own config is untouched
    assert [x["limit"] for x in other.result("budgets")] == [2000, 2000, 4000, 4000]
    assert other.finish() == 0
    assert_clean_repo(store_path)


@pytest.mark.parametrize("value", ["{nope", "[1", "{\"user\": }"])
def test_bad_budgets_json_exits_2(store_path: Path, value: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "filemem", "bridge", "--store", str(store_path),
         "--budgets", value], input=b"", capture_output=True, cwd=ROOT, timeout=TIMEOUT)
    assert out.returncode == 2, out
    assert out.stdout == b""
    assert b"--budgets" in out.stderr and b"not JSON" in out.stderr
    assert not store_path.exists()


def test_a_folder_that_is_not_a_store_is_refused_in_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a store", encoding="utf-8")
    out = subprocess.run(
        [sys.executable, "-m", "filemem", "bridge", "--store", str(tmp_path)], input=b"",
        capture_output=True, cwd=ROOT, timeout=TIMEOUT)
    assert out.stdout == b""
    assert b"not a filemem store" in out.stderr and b"Traceback" not in out.stderr
    assert out.returncode == 4


# ---------------------------------------------------------------- malformed lines

PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS = -32700, -32600, -32601, -32602
MALFORMED: list[tuple[str, bytes, int, Any]] = [
    ("not JSON", b"this is not json", PARSE_ERROR, None),
    ("truncated JSON", b'{"jsonrpc": "2.0", "id": 1, "method": "describe"', PARSE_ERROR, None),
    ("invalid UTF-8", b'{"jsonrpc": "2.0", "id": 1, "method": "\xff\xfe"}', PARSE_ERROR, None),
    ("deeply nested", b"[" * 100_000 + b"]" * 100_000, PARSE_ERROR, None),
    ("an array", b'[{"jsonrpc": "2.0", "id": 1, "method": "describe"}]', INVALID_REQUEST, None),
    ("an empty array", b"[]", INVALID_REQUEST, None),
    ("a number", b"42", INVALID_REQUEST, None),
    ("a string", b'"describe"', INVALID_REQUEST, None),
    ("null", b"null", INVALID_REQUEST, None),
    ("missing jsonrpc", b'{"id": 1, "method": "describe"}', INVALID_REQUEST, 1),
    ("jsonrpc 1.0", b'{"jsonrpc": "1.0", "id": 1, "method": "describe"}', INVALID_REQUEST, 1),
    ("method not a string", b'{"jsonrpc": "2.0", "id": 1, "method": 7}', INVALID_REQUEST, 1),
    ("id an object", b'{"jsonrpc": "2.0", "id": {}, "method": "describe"}', INVALID_REQUEST,
     None),
    ("id true", b'{"jsonrpc": "2.0", "id": true, "method": "describe"}', INVALID_REQUEST, None),
    ("unknown method", b'{"jsonrpc": "2.0", "id": "u", "method": "frobnicate"}',
     METHOD_NOT_FOUND, "u"),
    ("approval/request from the host",
     b'{"jsonrpc": "2.0", "id": 1, "method": "approval/request", "params": {}}',
     METHOD_NOT_FOUND, 1),
    ("params a string", b'{"jsonrpc": "2.0", "id": 1, "method": "query", "params": "x"}',
     INVALID_PARAMS, 1),
    ("params a list", b'{"jsonrpc": "2.0", "id": 1, "method": "auditList", "params": [5]}',
     INVALID_PARAMS, 1),
    ("params a number", b'{"jsonrpc": "2.0", "id": 1, "method": "add", "params": 3}',
     INVALID_PARAMS, 1),
    ("missing input", b'{"jsonrpc": "2.0", "id": 1, "method": "add", "params": {"write": {}}}',
     INVALID_PARAMS, 1),
    ("unknown param", b'{"jsonrpc": "2.0", "id": 1, "method": "budgets", "params": {"x": 1}}',
     INVALID_PARAMS, 1),
    ("missing session", b'{"jsonrpc": "2.0", "id": 1, "method": "snapshot", "params": {}}',
     INVALID_PARAMS, 1),
]


@pytest.mark.parametrize(("line", "code", "rid"), [m[1:] for m in MALFORMED],
                         ids=[m[0] for m in MALFORMED])
def test_a_malformed_line_is_answered_and_the_bridge_keeps_serving(
        bridge: Callable[..., BridgeProc], line: bytes, code: int, rid: Any) -> None:
    b = bridge("--approval", "auto")
    b.write(line + b"\n")
    msg = b.recv()
    assert msg["id"] == rid and set(msg["error"]) == {"code", "message"}, msg
    assert msg["error"]["code"] == code and msg["error"]["message"]
    assert b.result("describe")["provider"] == "filemem"
    assert b.finish() == 0


def test_lone_surrogates_are_escaped_not_fatal(bridge: Callable[..., BridgeProc]) -> None:
    b = bridge("--approval", "auto")
    b.write(b'{"jsonrpc": "2.0", "id": "\\ud800", "method": "describe"}\n')
    assert b.recv()["id"] == "\ud800"
    b.write(b'{"jsonrpc": "2.0", "id": 2, "method": "remove", "params": {"input": {"track": '
            b'"user", "scope": "workspace", "match": "\\udfff"}, "write": ' +
            json.dumps(W).encode() + b"}}\n")
    err = b.answer(2)["error"]
    assert err["data"]["code"] in ("INVALID_INPUT", "ENTRY_NOT_FOUND")
    assert b.result("describe")["provider"] == "filemem"
    assert b.finish() == 0


def test_notifications_and_blank_lines_get_no_answer(bridge: Callable[..., BridgeProc]) -> None:
    b = bridge("--approval", "auto")
    b.send({"jsonrpc": "2.0", "method": "describe"})
    b.send({"jsonrpc": "2.0", "method": "frobnicate"})
    b.send({"jsonrpc": "2.0", "method": "query", "params": "x"})
    b.send({"jsonrpc": "2.0", "method": "add", "params": {"input": {"track": "bad"}}})
    b.send({"jsonrpc": "2.0", "method": "add",
            "params": {"input": entry_input("told, not asked"), "write": W}})
    b.write(b"\n   \n\r\n")
    rid = b.request("listEntries")
    msg = b.recv()  # the first answer is the request's: the notifications got none
    assert msg["id"] == rid
    assert [x["text"] for x in msg["result"]] == ["told, not asked"]  # but they ran
    assert b.finish() == 0
    assert len(b.raw) == 1


# ---------------------------------------------------------------- the channel


def test_stdout_carries_only_protocol_messages(bridge: Callable[..., BridgeProc]) -> None:
    b = bridge()
    rid = b.request("add", {"input": entry_input("prefers tabs"), "write": W})
    ask = b.approval()
    b.send({"jsonrpc": "2.0", "id": "nobody-asked", "result": {"outcome": "allowed-once"}})
    b.write(b"not json\n")
    b.reply(ask, "allowed-once")
    assert "result" in b.answer(rid)
    assert b.recv()["error"]["code"] == PARSE_ERROR
    assert b.finish() == 0
    assert "nobody-asked" in b.stderr  # the log went to stderr
    assert_only_json(b.raw)
    assert len(b.raw) == 3


def test_pipelined_requests_are_answered_in_order(bridge: Callable[..., BridgeProc]) -> None:
    b = bridge("--approval", "auto")
    lines, expect = [], []
    for i in range(1, 31):
        kind = i % 5
        if kind == 0:
            msg: dict[str, Any] = {"method": "add", "params": {"input": entry_input(f"n{i}"),
                                                               "write": W}}
        elif kind == 1:
            msg = {"method": "describe"}
        elif kind == 2:
            msg = {"method": "frobnicate"}
        elif kind == 3:
            msg = {"method": "add", "params": {"input": entry_input("x"), "write": None}}
        else:
            msg = {"method": "query", "params": {"filter": {"text": "n"}}}
        lines.append(json.dumps({"jsonrpc": "2.0", "id": i, **msg}).encode())
        expect.append(kind)
    b.write(b"\n".join(lines) + b"\n")  # all at once, before reading anything
    for i, kind in enumerate(expect, 1):
        msg = b.recv()
        assert msg["id"] == i
        if kind == 2:
            assert msg["error"]["code"] == METHOD_NOT_FOUND
        elif kind == 3:
            assert msg["error"]["data"]["code"] == "WRITE_REQUIRES_AGENT"
        elif kind == 4:
            assert msg["result"]["total"] == i // 5  # every add before it is visible
        else:
            assert "result" in msg
    assert b.finish() == 0


def test_eof_finishes_every_request_already_sent(bridge: Callable[..., BridgeProc],
                                                 store_path: Path) -> None:
    b = bridge("--approval", "auto")
    for i in range(10):
        b.request("add", {"input": entry_input(f"fact {i}"), "write": W}, rid=i)
    assert b.finish() == 0  # stdin closed straight away
    answers = b.rest()
    assert [m["id"] for m in answers] == list(range(10))
    assert all("result" in m for m in answers)
    assert commits(store_path) == 11
    assert_clean_repo(store_path)


# ---------------------------------------------------------------- scale and concurrency


def test_a_1000_entry_seed_is_one_result_and_one_commit(bridge: Callable[..., BridgeProc],
                                                        store_path: Path) -> None:
    b = bridge("--budgets", json.dumps(BIG))
    inputs = [entry_input(f"fact number {i}", AW if i % 2 else UG) for i in range(1000)]
    started = time.monotonic()
    r = b.result("seed", {"inputs": inputs, "write": W}, approve="allowed-once")
    elapsed = time.monotonic() - started
    payload = b.approvals[0]["params"]["payload"]
    assert payload["count"] == 1000 and len(payload["text"].split("\n")) == 1000
    assert r["added"] == 1000 and len(r["entries"]) == 1000
    assert [e["text"] for e in r["entries"]] == [i["text"] for i in inputs]
    assert len({e["id"] for e in r["entries"]}) == 1000
    assert len(b.result("listEntries")) == 1000
    assert b.finish() == 0
    assert commits(store_path) == 2
    assert_clean_repo(store_path)
    assert elapsed < 15, f"a 1000-entry seed took {elapsed:.1f}s"


def test_two_bridges_writing_to_one_store_at_once(bridge: Callable[..., BridgeProc],
                                                  store_path: Path) -> None:
    args = ("--approval", "auto", "--budgets", json.dumps(BIG))
    first = bridge(*args)
    first.result("describe")  # the store exists before the second bridge opens it
    second = bridge(*args)
    for who, b in (("a", first), ("b", second)):
        batch = [json.dumps({"jsonrpc": "2.0", "id": k, "method": "add", "params": {
            "input": entry_input(f"fact {k} from {who}", AW), "write": W}}) for k in range(50)]
        b.write("\n".join(batch).encode() + b"\n")
    for b in (first, second):
        answers = [b.recv() for _ in range(50)]
        assert [m["id"] for m in answers] == list(range(50))
        assert all("result" in m for m in answers), [m for m in answers if "error" in m]
    listed = first.result("listEntries")
    assert len(listed) == 100 and len({e["id"] for e in listed}) == 100
    assert second.result("budgets")[3]["used"] == sum(len(e["text"]) for e in listed)
    assert first.finish() == 0 and second.finish() == 0
    assert commits(store_path) == 101
    assert_linear(store_path)
    assert_clean_repo(store_path)


def test_a_bridge_sees_head_moved_by_other_processes(bridge: Callable[..., BridgeProc],
                                                     store_path: Path) -> None:
    watcher = bridge("--approval", "auto")
    assert watcher.result("listEntries") == []
    writer = bridge("--approval", "auto")
    made = add(writer, "written by another bridge")["entry"]
    assert [e["id"] for e in watcher.result("listEntries")] == [made["id"]]
    assert watcher.result("query", {"filter": {"text": "another"}})["total"] == 1

    # a person edits the config and commits with git: the next request uses it
    config = store_path / "filemem.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("workspace: 2000",
                                                                 "workspace: 1234"),
                      encoding="utf-8")
    git(store_path, "commit", "-qam", "smaller user/workspace budget")
    assert watcher.result("budgets")[1]["limit"] == 1234

    # a person deletes the entry's file with git: gone for the bridge at once
    path = git(store_path, "ls-files", "user").strip()
    assert path.endswith(made["id"] + ".md")
    git(store_path, "rm", "-q", path)
    git(store_path, "commit", "-qm", "forget that")
    assert watcher.result("listEntries") == []
    err = watcher.error("remove", {"input": {**UW, "match": "another"}, "write": W})
    assert err["data"]["code"] == "ENTRY_NOT_FOUND"
    add(watcher, "after the person's commits")
    assert writer.finish() == 0 and watcher.finish() == 0
    assert_linear(store_path)
    assert_clean_repo(store_path)


def test_bridges_started_together_on_a_missing_store(tmp_path: Path) -> None:
    for attempt in range(3):
        store = tmp_path / f"store{attempt}"
        procs = [subprocess.Popen(
            [sys.executable, "-m", "filemem", "bridge", "--store", str(store), "--approval",
             "auto"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            cwd=ROOT) for _ in range(4)]
        results = [p.communicate(b'{"jsonrpc": "2.0", "id": 1, "method": "describe"}\n',
                                 timeout=TIMEOUT) for p in procs]
        for p, (out, err) in zip(procs, results, strict=True):
            assert p.returncode == 0, err.decode()
            assert json.loads(out)["result"]["store"] == str(store)
        assert commits(store) == 1


def _trust_source(store: Path, name: str) -> None:
    """The owner's filemem.yaml says writes from source NAME need no approval."""
    filemem.init_store(store).close()
    config = store / "filemem.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace(
        "writePolicies: {}", f'writePolicies: {{"source:{name}": auto}}'), encoding="utf-8")
    out = run_cli("adopt", "--yes", store=store)
    assert out.returncode == 0, out.stderr


def test_a_host_cannot_pick_a_looser_policy_by_naming_a_source(
        bridge: Callable[..., BridgeProc], store_path: Path) -> None:
    """A `source:X: auto` override applies to what the owner started the bridge for, not to
    a host (or the model behind it) that writes `input.source: X`."""
    _trust_source(store_path, "trusted-tool")
    b = bridge()  # no --source: the host's input.source is recorded, it picks no policy
    rid = b.request("add", {"input": entry_input("claims to be trusted",
                                                 source="trusted-tool"), "write": W})
    ask = b.approval()  # the store's own policy (ask) applies: the person is asked
    assert ask["params"]["payload"]["source"] == "trusted-tool"
    b.reply(ask, "rejected")
    assert b.answer(rid)["error"]["data"]["details"] == {"outcome": "rejected"}
    assert b.result("listEntries") == []
    assert b.finish() == 0
    owner_started = bridge("--source", "trusted-tool")  # the owner vouches for this host
    entry = add(owner_started, "from the trusted tool", source="trusted-tool")["entry"]
    assert [e["id"] for e in owner_started.result("listEntries")] == [entry["id"]]
    row = owner_started.result("auditList", {"limit": 1})[0]
    assert row["outcome"] == ("allowed-once (via approval, writePolicy auto for "
                              "source:trusted-tool)")
    assert owner_started.approvals == []
    assert owner_started.finish() == 0
