"""The ``memory-export-v1`` envelope (filemem choices 7 and 8): export is a
schema-valid, read-only full view; import validates the whole envelope, keeps tags and empty
keys, and writes one commit behind one approval."""

from __future__ import annotations

import copy
import json
import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

import filemem
from filemem.model import parse_iso_ms
from tests.conftest import BIG, Recorder, ctx, git

MakeProvider = Callable[..., filemem.Provider]
UG = {"track": "user", "scope": "user-global"}
UW = {"track": "user", "scope": "workspace"}
AG = {"track": "agent", "scope": "user-global"}
AW = {"track": "agent", "scope": "workspace"}
ENTRY_KEYS = ["id", "track", "scope", "workspaceKey", "agentKey", "text", "source", "tags",
              "version", "createdAt", "updatedAt", "lastRecalled", "recallCount", "sessionId"]
ISO_MS = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$")


def validator(schema: dict[str, Any], name: str) -> Draft202012Validator:
    registry: Registry[Any] = Registry().with_resource(schema["$id"],
                                                       Resource.from_contents(schema))
    return Draft202012Validator({"$ref": f"{schema['$id']}#/$defs/{name}"}, registry=registry,
                                format_checker=Draft202012Validator.FORMAT_CHECKER)


def schema_errors(schema: dict[str, Any], doc: Any) -> list[str]:
    return [e.message for e in validator(schema, "exportEnvelope").iter_errors(doc)]


def head(path: Path) -> str:
    return git(path, "rev-parse", "HEAD").strip()


def commit_count(path: Path) -> int:
    return int(git(path, "rev-list", "--count", "HEAD").strip())


def fill(p: filemem.Provider) -> None:
    """Entries of every kind: layers, agents, workspaces, tags, sources, versions, recalls."""
    p.add({**UG, "text": "Prefers concise replies", "tags": ["pref", "comms"]},
          ctx("s-a", "/w/a"))
    p.add({**UW, "text": "Uses tabs here"}, ctx("s-a", "/w/a", "coder"))
    p.add({**AG, "text": "Linux box", "source": "claude"}, ctx("s-b", "/w/b", "coder"))
    p.add({**AW, "text": "shared workspace fact", "agentKey": "", "workspaceKey": ""},
          ctx("s-b", "/w/b", "coder"))
    p.add({**AW, "text": "v1", "tags": ["t"]}, ctx("s-c", "/w/c", "reviewer"))
    p.replace({**AW, "match": "v1", "text": "v3 multi\nline"}, ctx("s-c", "/w/c", "reviewer"))
    p.query({"text": "concise"})


@pytest.fixture
def filled(provider: filemem.Provider) -> filemem.Provider:
    fill(provider)
    return provider


@pytest.fixture
def target(tmp_path: Path) -> Any:
    """A second, empty store to import into, asking a recording gate."""
    gate = Recorder()
    p = filemem.open_store(tmp_path / "target", create=True, write_policy="ask", gate=gate,
                           budgets=BIG)
    yield p, gate, tmp_path / "target"
    p.close()


# ---------------------------------------------------------------- export


def test_export_is_a_valid_envelope(filled: filemem.Provider,
                                    protocol_schema: dict[str, Any]) -> None:
    before = int(time.time() * 1000)
    doc = filled.export()
    assert schema_errors(protocol_schema, doc) == []
    assert list(doc) == ["plugin", "schema", "exportedAt", "budgets", "entries"]
    assert (doc["plugin"], doc["schema"]) == ("dsh-memento", "memory-export-v1")
    assert ISO_MS.match(doc["exportedAt"])
    assert before - 1000 <= parse_iso_ms(doc["exportedAt"]) <= int(time.time() * 1000) + 1000
    assert doc["budgets"] == filled.budgets()
    assert len(doc["budgets"]) == 4
    assert doc["entries"] == filled.list_entries()
    assert len(doc["entries"]) == 5  # every agent, every workspace
    for e in doc["entries"]:
        assert list(e) == ENTRY_KEYS
    assert sorted(e["sessionId"] for e in doc["entries"]) == ["s-a", "s-a", "s-b", "s-b", "s-c"]
    assert json.loads(json.dumps(doc, ensure_ascii=False)) == doc


def test_export_of_an_empty_store(provider: filemem.Provider,
                                  protocol_schema: dict[str, Any]) -> None:
    doc = provider.export()
    assert doc["entries"] == []
    assert schema_errors(protocol_schema, doc) == []


def test_schema_check_can_fail(filled: filemem.Provider,
                               protocol_schema: dict[str, Any]) -> None:
    doc = filled.export()
    for e in doc["entries"]:
        del e["sessionId"]  # the reference's export shape
    assert schema_errors(protocol_schema, doc) != []


def test_export_is_read_only(filled: filemem.Provider, store_path: Path) -> None:
    h = head(store_path)
    rows = filled.audit_list(1000)
    entries = filled.list_entries()
    for _ in range(3):
        doc = filled.export()
    assert head(store_path) == h
    assert filled.audit_list(1000) == rows
    assert filled.list_entries() == entries
    assert doc["entries"] == entries
    counts = {e["text"]: e["recallCount"] for e in doc["entries"]}
    assert counts["Prefers concise replies"] == 1 and sum(counts.values()) == 1
    assert git(store_path, "status", "--porcelain") == ""


# ---------------------------------------------------------------- import


def test_import_round_trip(filled: filemem.Provider, target: Any) -> None:
    p, gate, path = target
    doc = json.loads(json.dumps(filled.export()))
    n = commit_count(path)
    out = p.import_envelope(doc, ctx("importer", "/w/importer", "imp-agent"))
    assert out["added"] == 5
    got = out["entries"]  # input order (a listing orders same-millisecond entries by id)
    assert sorted(got, key=lambda e: e["id"]) == sorted(p.list_entries(), key=lambda e: e["id"])
    old_ids = {e["id"] for e in doc["entries"]}
    assert not old_ids & {e["id"] for e in got}
    assert len({e["id"] for e in got}) == 5
    keep = ("track", "scope", "workspaceKey", "agentKey", "text", "source", "tags")
    assert [{k: e[k] for k in keep} for e in got] == \
        [{k: e[k] for k in keep} for e in doc["entries"]]
    for e in got:
        assert (e["version"], e["recallCount"], e["lastRecalled"], e["sessionId"]) == \
            (1, 0, None, "importer")
    shared = next(e for e in got if e["text"] == "shared workspace fact")
    assert (shared["workspaceKey"], shared["agentKey"]) == ("", "")
    assert next(e for e in got if e["text"] == "Uses tabs here")["agentKey"] == "coder"
    # one approval, one commit, a seed row and an add row per entry
    assert len(gate.calls) == 1
    assert gate.calls[0].payload["action"] == "seed" and gate.calls[0].payload["count"] == 5
    assert commit_count(path) == n + 1
    rows = p.audit_list(6)
    assert [r["action"] for r in rows] == ["add"] * 5 + ["seed"]
    assert {r["entryId"] for r in rows[:5]} == {e["id"] for e in got}
    assert git(path, "status", "--porcelain") == ""


def test_import_into_the_same_store(filled: filemem.Provider) -> None:
    doc = filled.export()
    filled.import_envelope(doc, ctx())
    texts = [e["text"] for e in filled.list_entries()]
    assert len(texts) == 10
    assert sorted(texts) == sorted([e["text"] for e in doc["entries"]] * 2)


def test_import_of_a_reference_style_export(target: Any) -> None:
    p, gate, _ = target
    doc = {
        "plugin": "dsh-memento", "schema": "memory-export-v1",
        "exportedAt": "2026-01-02T03:04:05.678Z",
        "budgets": [{"track": "user", "scope": "user-global", "used": 12, "limit": 2000},
                    {"track": "user", "scope": "workspace", "used": 0, "limit": 2000},
                    {"track": "agent", "scope": "user-global", "used": 0, "limit": 4000},
                    {"track": "agent", "scope": "workspace", "used": 5, "limit": 4000}],
        "entries": [
            {"id": "0F7C1B1E-4A5B-4C3D-9E8F-001122334455", "track": "user",
             "scope": "user-global", "workspaceKey": "/home/u/proj", "agentKey": "",
             "text": "偏好中文回复 always", "source": "dsh-memento", "tags": ["pref"],
             "version": 3, "createdAt": 1700000000000, "updatedAt": 1700000001000,
             "lastRecalled": 1700000002000, "recallCount": 7},
            {"id": "1f7c1b1e-4a5b-4c3d-9e8f-001122334455", "track": "agent",
             "scope": "workspace", "workspaceKey": "/home/u/proj", "agentKey": "coder",
             "text": "tests", "source": "memory-tool", "tags": [], "version": 1,
             "createdAt": 1700000000000, "updatedAt": 1700000000000, "lastRecalled": None,
             "recallCount": 0},
        ],
    }
    out = p.import_envelope(doc, ctx("imp", "/w/x"))
    ug, aw = out["entries"]
    assert (ug["text"], ug["tags"], ug["version"], ug["recallCount"]) == \
        ("偏好中文回复 always", ["pref"], 1, 0)
    assert ug["workspaceKey"] == ""  # filemem choice 1, whatever the reference stored
    assert (aw["workspaceKey"], aw["agentKey"], aw["source"]) == \
        ("/home/u/proj", "coder", "memory-tool")
    assert ug["id"] != doc["entries"][0]["id"].lower()
    assert len(gate.calls) == 1


def test_import_of_exactly_1000_entries(target: Any) -> None:
    p, gate, _ = target
    src = filemem.open_store(Path(p.path).parent / "src", create=True, write_policy="auto",
                             budgets=BIG)
    try:
        src.seed([{**AW, "text": f"fact {i}"} for i in range(1000)], ctx())
        doc = src.export()
    finally:
        src.close()
    assert p.import_envelope(doc, ctx())["added"] == 1000
    assert len(p.list_entries()) == 1000 and len(gate.calls) == 1
    assert gate.calls[0].payload["count"] == 1000


def test_import_over_budget_is_refused_before_asking(make_provider: MakeProvider,
                                                     filled: filemem.Provider) -> None:
    doc = filled.export()
    gate = Recorder()
    p = make_provider(write_policy="ask", gate=gate, budgets={"user": {"userGlobal": 30}})
    before = p.list_entries()
    with pytest.raises(filemem.ProtocolError) as info:
        p.import_envelope(doc, ctx())
    assert info.value.code == "BUDGET_EXCEEDED"
    assert info.value.details["track"] == "user" and info.value.details["scope"] == "user-global"
    assert gate.calls == [] and p.list_entries() == before


def test_import_needs_an_agent(filled: filemem.Provider) -> None:
    with pytest.raises(filemem.ProtocolError) as info:
        filled.import_envelope(filled.export(), {})
    assert info.value.code == "WRITE_REQUIRES_AGENT"


def test_denied_import_writes_nothing(filled: filemem.Provider, make_provider: MakeProvider,
                                      store_path: Path) -> None:
    doc = filled.export()
    p = make_provider(write_policy="ask", gate=Recorder("rejected"))
    before = p.list_entries()
    with pytest.raises(filemem.ProtocolError) as info:
        p.import_envelope(doc, ctx())
    assert info.value.code == "WRITE_DENIED"
    assert p.list_entries() == before
    row = p.audit_list(1)[0]
    assert (row["action"], row["track"], row["scope"]) == ("seed-denied", "batch", "batch")
    assert "user/user-global: Prefers concise replies" in row["text"].splitlines()


# ---------------------------------------------------------------- import validation


def _base() -> dict[str, Any]:
    return {
        "plugin": "dsh-memento", "schema": "memory-export-v1",
        "exportedAt": "2026-01-02T03:04:05.678Z",
        "budgets": [{"track": "user", "scope": "user-global", "used": 1, "limit": 2000}],
        "entries": [{"id": "0f7c1b1e-4a5b-4c3d-9e8f-001122334455", "track": "user",
                     "scope": "user-global", "workspaceKey": "", "agentKey": "", "text": "ok",
                     "source": "dsh-memento", "tags": [], "version": 1,
                     "createdAt": 1700000000000, "updatedAt": 1700000000000,
                     "lastRecalled": None, "recallCount": 0, "sessionId": None}],
    }


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], Any]:
    """A mutation of the base document: set (or, with ``...``, delete) a nested key."""
    def mutate(doc: dict[str, Any]) -> Any:
        node: Any = doc
        keys: list[Any] = [int(k) if k.isdigit() else k for k in path.split(".")]
        for k in keys[:-1]:
            node = node[k]
        if value is ...:
            del node[keys[-1]]
        else:
            node[keys[-1]] = copy.deepcopy(value)
        return doc
    return mutate


ENTRY = _base()["entries"][0]
BAD_DOCS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "not an object": lambda d: [d],
    "null": lambda d: None,
    "wrong plugin": _set("plugin", "mem0"),
    "no plugin": _set("plugin", ...),
    "schema v2": _set("schema", "memory-export-v2"),
    "no schema": _set("schema", ...),
    "no exportedAt": _set("exportedAt", ...),
    "exportedAt not a date": _set("exportedAt", "yesterday"),
    "exportedAt a number": _set("exportedAt", 1700000000000),
    "exportedAt impossible": _set("exportedAt", "2026-13-45T00:00:00.000Z"),
    "no budgets": _set("budgets", ...),
    "budgets an object": _set("budgets", {"user": 1}),
    "budget row bad track": _set("budgets.0.track", "team"),
    "budget row negative": _set("budgets.0.used", -1),
    "budget row string limit": _set("budgets.0.limit", "2000"),
    "budget row not an object": _set("budgets.0", "user/user-global"),
    "no entries": _set("entries", ...),
    "entries an object": _set("entries", {"0": ENTRY}),
    "empty entries": _set("entries", []),
    "1001 entries": lambda d: {**d, "entries": [dict(ENTRY) for _ in range(1001)]},
    "entry not an object": _set("entries.0", "ok"),
    "entry bad id": _set("entries.0.id", "not-a-uuid"),
    "entry v1 uuid": _set("entries.0.id", "0f7c1b1e-4a5b-1c3d-9e8f-001122334455"),
    "entry bad track": _set("entries.0.track", "team"),
    "entry empty text": _set("entries.0.text", ""),
    "entry no text": _set("entries.0.text", ...),
    "entry version 0": _set("entries.0.version", 0),
    "entry updated before created": _set("entries.0.updatedAt", 1699999999999),
    "entry tags not a list": _set("entries.0.tags", "pref"),
    "entry tag too long": _set("entries.0.tags", ["x" * 33]),
    "entry no workspaceKey": _set("entries.0.workspaceKey", ...),
    "entry string recallCount": _set("entries.0.recallCount", "0"),
    "entry sessionId number": _set("entries.0.sessionId", 5),
}


@pytest.mark.parametrize("case", list(BAD_DOCS))
def test_invalid_envelopes_are_refused(make_provider: MakeProvider, store_path: Path,
                                       case: str) -> None:
    gate = Recorder()
    p = make_provider(write_policy="ask", gate=gate)
    doc = BAD_DOCS[case](_base())
    h = head(store_path)
    with pytest.raises(filemem.ProtocolError) as info:
        p.import_envelope(doc, ctx())
    assert info.value.code == "INVALID_INPUT", info.value
    assert info.value.details == {}
    assert info.value.message.startswith("import: ")
    assert gate.calls == [] and p.list_entries() == []
    assert head(store_path) == h


def test_the_base_document_itself_imports(make_provider: MakeProvider) -> None:
    p = make_provider()
    out = p.import_envelope(_base(), ctx())
    assert [e["text"] for e in out["entries"]] == ["ok"]
    doc = _base()
    doc["budgets"] = []  # the row count is not checked (as the reference's validator)
    doc["entries"][0]["tags"] = [" a ", "a"]
    assert p.import_envelope(doc, ctx())["entries"][0]["tags"] == ["a"]


def test_an_empty_source_imports_as_the_default_label(make_provider: MakeProvider) -> None:
    """Choice 12: '' is "no source" (the reference can store it and export it)."""
    p = make_provider()
    doc = _base()
    doc["entries"][0]["source"] = ""
    assert p.import_envelope(doc, ctx())["entries"][0]["source"] == "filemem"


def test_an_invalid_entry_anywhere_rejects_the_batch(make_provider: MakeProvider) -> None:
    p = make_provider(budgets=BIG)
    doc = _base()
    doc["entries"] = [dict(ENTRY, text=f"e{i}") for i in range(50)]
    doc["entries"][37] = dict(ENTRY, track="team")
    with pytest.raises(filemem.ProtocolError) as info:
        p.import_envelope(doc, ctx())
    assert info.value.code == "INVALID_INPUT"
    assert "37" in info.value.message
    assert p.list_entries() == []
