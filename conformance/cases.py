"""Every conformance case, as a small function over a :class:`harness.Harness`.

Groups (the case id's letter):

* A entry model, B write semantics, C budgets, D audit reconstruction, E export envelope:
  the protocol's 22 cases (dsh-memory-protocol/v1's own conformance list), so any
  provider claiming the protocol can be checked against the same list.
* S: filemem's stricter choices, one case per point of filemem's README section "Where
  filemem differs from the reference, on purpose" that the Provider face can show; ``S<n>``
  checks point ``n`` (13 concerns adapters and 15 the owner's pending approvals, neither on
  the Provider face, so there is no S13 or S15).
* G: store-level checks for a provider whose store is a git repository (skipped otherwise).
* P: several OS processes writing to one store at once.

Each case gets a fresh store and asserts with :func:`harness.ensure`, so every check can
fail and says what it expected. To add a case, write a function taking ``h`` and decorate
it with ``@case("X9", "what it checks")``; ids are stable (never reuse one).
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import store_checks
from harness import (
    CWD,
    PRESET,
    SESSION_ID,
    CaseFailure,
    GateRaised,
    Harness,
    MethodMissing,
    ProtocolFailure,
    Subject,
    ensure,
    expect_error,
    reject,
    session,
    write_context,
)
from schema_lite import Validator

ENTRY_FIELDS = ("id", "track", "scope", "workspaceKey", "agentKey", "text", "source", "tags",
                "version", "createdAt", "updatedAt", "lastRecalled", "recallCount", "sessionId")
UUID_V4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$",
                     re.IGNORECASE)
LAYERS = (("user", "user-global"), ("user", "workspace"), ("agent", "user-global"),
          ("agent", "workspace"))
# an outcome label names what decided: "<outcome> (via approval, writePolicy <p>...)" or
# "<outcome> (via write gate...)", the reference's prefixes
LABEL = r" \(via (approval, writePolicy (ask|auto|off)\b|write gate\b)[^\n]*\)$"
SMALL = {"user": {"userGlobal": 100, "workspace": 100},
         "agent": {"userGlobal": 100, "workspace": 100}}
BIG = {"user": {"userGlobal": 1_000_000, "workspace": 1_000_000},
       "agent": {"userGlobal": 1_000_000, "workspace": 1_000_000}}
SCHEMA = Validator()


@dataclass(frozen=True)
class Case:
    id: str
    title: str
    fn: Callable[[Harness], None]

    @property
    def group(self) -> str:
        return self.id[0]


CASES: list[Case] = []


def case(case_id: str, title: str) -> Callable[[Callable[[Harness], None]],
                                                 Callable[[Harness], None]]:
    """Register a case; the id's letter is its group."""

    def register(fn: Callable[[Harness], None]) -> Callable[[Harness], None]:
        if any(c.id == case_id for c in CASES):
            raise ValueError(f"duplicate case id {case_id}")
        CASES.append(Case(case_id, title, fn))
        return fn

    return register


# ------------------------------------------------------------------ helpers


def ug(text: str, **extra: Any) -> dict[str, Any]:
    """An input in user/user-global."""
    return {"track": "user", "scope": "user-global", "text": text, **extra}


def layer(track: str, scope: str, text: str, **extra: Any) -> dict[str, Any]:
    return {"track": track, "scope": scope, "text": text, **extra}


def utf16_len(text: str) -> int:
    """The protocol's counting unit (JavaScript string length)."""
    return len(text.encode("utf-16-le")) // 2


def show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)[:300]


def check_entry(e: Any, what: str) -> None:
    """validateMemoryEntry (the protocol's entry check) plus the JSON Schema's ``entry``: all 14
    fields."""
    ensure(isinstance(e, dict), f"{what} is not an object: {show(e)}")
    ensure(sorted(e) == sorted(ENTRY_FIELDS),
           f"{what} has fields {sorted(e)}, expected exactly {sorted(ENTRY_FIELDS)}")
    problems = SCHEMA.errors(e, "entry")
    ensure(not problems, f"{what} does not fit the schema's entry: {'; '.join(problems)}")
    ensure(e["updatedAt"] >= e["createdAt"], f"{what}: updatedAt < createdAt: {show(e)}")


def texts(entries: list[dict[str, Any]]) -> list[str]:
    return [e["text"] for e in entries]


def unchanged(p: Subject, before: list[dict[str, Any]], what: str) -> None:
    after = p.listEntries()
    ensure(after == before, f"{what} changed the store: before {show(before)}, "
                            f"after {show(after)}")


def not_asked(p: Subject, what: str) -> None:
    ensure(not p.asked, f"{what}: approval was asked ({show(p.asked)}) although the write "
                        "must fail before anyone is asked")


def max_seq(p: Subject) -> int:
    rows = p.auditList(1)
    return rows[0]["seq"] if rows else -1


def rows_since(p: Subject, seq: int) -> list[dict[str, Any]]:
    """Audit rows newer than ``seq``, oldest first."""
    rows = [r for r in p.auditList(1000) if r["seq"] > seq]
    return sorted(rows, key=lambda r: r["seq"])


def by_text(entries: list[dict[str, Any]], text: str) -> dict[str, Any]:
    found = [e for e in entries if e["text"] == text]
    ensure(len(found) == 1, f"expected one entry with text {text!r}, found {len(found)}")
    return found[0]


def envelope(entries: list[dict[str, Any]], budgets: list[dict[str, Any]] | None = None
             ) -> dict[str, Any]:
    """A ``memory-export-v1`` document the suite builds itself."""
    now = datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    rows = budgets if budgets is not None else [
        {"track": t, "scope": s, "used": 0, "limit": 2000} for t, s in LAYERS]
    return {"plugin": "dsh-memento", "schema": "memory-export-v1", "exportedAt": now,
            "budgets": rows, "entries": entries}


def foreign_entry(text: str, **fields: Any) -> dict[str, Any]:
    """A valid 14-field entry as another provider would export it."""
    e: dict[str, Any] = {
        "id": "0b5b5f0e-8e0e-4b8a-9d3c-2f1e4d5c6b7a", "track": "user", "scope": "user-global",
        "workspaceKey": "", "agentKey": "", "text": text, "source": "elsewhere", "tags": [],
        "version": 3, "createdAt": 1_700_000_000_000, "updatedAt": 1_700_000_100_000,
        "lastRecalled": None, "recallCount": 7, "sessionId": "old-session",
    }
    e.update(fields)
    return e


# ================================================================== A: entry model


@case("A1", "add returns a complete v1 entry")
def a1(h: Harness) -> None:
    p = h.provider()
    text = "用户偏好：中文回复"
    r = p.add(ug(text, tags=["pref", "comms"]), h.write)
    ensure(isinstance(r, dict) and "entry" in r and "usage" in r,
           f"add must return {{entry, usage}}, got {show(r)}")
    e = r["entry"]
    check_entry(e, "the added entry")
    ensure(UUID_V4.match(e["id"]), f"id is not a UUID v4: {e['id']!r}")
    ensure((e["track"], e["scope"]) == ("user", "user-global"), f"wrong layer: {show(e)}")
    ensure(e["text"] == text, f"text changed: {e['text']!r}")
    ensure(e["tags"] == ["pref", "comms"], f"tags must keep their order: {e['tags']}")
    ensure(e["version"] == 1, f"version must be 1, got {e['version']}")
    ensure(e["lastRecalled"] is None and e["recallCount"] == 0,
           f"a new entry has no recall: {show(e)}")
    ensure(e["sessionId"] == SESSION_ID, f"sessionId must be the writer's: {e['sessionId']!r}")
    usage = r["usage"]
    ensure(usage == {"track": "user", "scope": "user-global", "used": utf16_len(text),
                     "limit": 2000}, f"usage after the write is wrong: {show(usage)}")
    ensure(p.listEntries() == [e], f"listEntries must show the entry as returned: "
                                   f"{show(p.listEntries())}")


@case("A2", "an unknown track is INVALID_INPUT and stores nothing")
def a2(h: Harness) -> None:
    p = h.provider()
    expect_error("INVALID_INPUT", p.add, layer("team", "user-global", "x"), h.write)
    ensure(p.listEntries() == [], "a refused add stored an entry")
    not_asked(p, "add with track team")


@case("A3", "an unknown scope is INVALID_INPUT and stores nothing")
def a3(h: Harness) -> None:
    p = h.provider()
    expect_error("INVALID_INPUT", p.add, layer("user", "global", "x"), h.write)
    ensure(p.listEntries() == [], "a refused add stored an entry")
    not_asked(p, "add with scope global")


@case("A4", "empty text is INVALID_INPUT and stores nothing")
def a4(h: Harness) -> None:
    p = h.provider()
    expect_error("INVALID_INPUT", p.add, ug(""), h.write)
    expect_error("INVALID_INPUT", p.add, {"track": "user", "scope": "user-global", "text": 42},
                 h.write)
    ensure(p.listEntries() == [], "a refused add stored an entry")
    not_asked(p, "add with empty text")


@case("A5", "a write without an agent is WRITE_REQUIRES_AGENT, checked first")
def a5(h: Harness) -> None:
    p = h.provider()
    expect_error("WRITE_REQUIRES_AGENT", p.add, ug("x"), {})
    expect_error("WRITE_REQUIRES_AGENT", p.add, ug("x"), {"agent": None})
    # the agent check runs before input validation
    expect_error("WRITE_REQUIRES_AGENT", p.remove, {"track": "x"}, {})
    expect_error("WRITE_REQUIRES_AGENT", p.seed, [ug("x")], {})
    ensure(p.listEntries() == [], "a write without an agent stored an entry")
    not_asked(p, "a write without an agent")


@case("A6", "tags are trimmed and de-duplicated; bad tags are INVALID_INPUT")
def a6(h: Harness) -> None:
    p = h.provider()
    e = p.add(ug("带标签", tags=["a ", "a", "b"]), h.write)["entry"]
    ensure(e["tags"] == ["a", "b"], f"tags ['a ', 'a', 'b'] must become ['a', 'b'], got "
                                    f"{e['tags']}")
    bad = {"a 33-char tag": ["x" * 33], "17 distinct tags": [f"t{i}" for i in range(17)],
           "a tag with NUL": ["bad\u0000tag"]}
    for what, tags in bad.items():
        try:
            p.add(ug(f"y {what}", tags=tags), h.write)
        except ProtocolFailure as exc:
            ensure(exc.code == "INVALID_INPUT", f"{what}: expected INVALID_INPUT, got {exc.code}")
        else:
            raise CaseFailure(f"{what} was accepted")
    ensure(texts(p.listEntries()) == ["带标签"], "a refused add stored an entry")


@case("A7", "query matches substrings: CJK as is, ASCII case-blind")
def a7(h: Harness) -> None:
    p = h.provider()
    p.add(ug("项目约定：测试先于实现"), h.write)
    p.add(layer("agent", "user-global", "Project convention: TDD"), h.write)
    for needle, want in (("测试先于实现", "项目约定：测试先于实现"),
                         ("project", "Project convention: TDD"),
                         ("PROJECT", "Project convention: TDD")):
        r = p.query({"text": needle})
        ensure(r.get("total") == 1, f"query {needle!r}: total {r.get('total')}, expected 1")
        ensure(texts(r["entries"]) == [want], f"query {needle!r} found {texts(r['entries'])}")
        ensure(r.get("truncated") is False, f"query {needle!r}: truncated must be false")


# ================================================================== B: write semantics


@case("B1", "replace keeps the id, bumps the version, swaps the text")
def b1(h: Harness) -> None:
    p = h.provider()
    first = p.add(ug("旧记忆：喜欢咖啡"), h.write)["entry"]
    r = p.replace(ug("喜欢茶", match="喜欢咖啡"), h.write)
    prev, e = r["previous"], r["entry"]
    ensure(prev["id"] == first["id"] == e["id"], f"replace changed the id: {show(r)}")
    ensure(prev["version"] == first["version"], f"previous.version must be the old one: "
                                                f"{prev['version']}")
    ensure(prev["text"] == "旧记忆：喜欢咖啡", f"previous.text is {prev['text']!r}")
    ensure(e["version"] == first["version"] + 1, f"version must go up by one: {e['version']}")
    ensure(e["text"] == "喜欢茶", f"new text is {e['text']!r}")
    check_entry(e, "the replaced entry")
    listed = p.listEntries()
    ensure(len(listed) == 1 and listed[0]["text"] == "喜欢茶" and listed[0]["version"] == 2,
           f"the store must hold the one updated entry: {show(listed)}")


@case("B2", "an ambiguous replace is AMBIGUOUS_MATCH with candidates 2; nothing changes")
def b2(h: Harness) -> None:
    p = h.provider()
    p.add(ug("咖啡机型号 A"), h.write)
    p.add(ug("咖啡机型号 B"), h.write)
    before = p.listEntries()
    p.asked.clear()
    err = expect_error("AMBIGUOUS_MATCH", p.replace, ug("x", match="咖啡机"), h.write)
    ensure(err.details.get("candidates") == 2,
           f"details.candidates must be 2, got {show(err.details)}")
    unchanged(p, before, "an ambiguous replace")
    not_asked(p, "an ambiguous replace")


@case("B3", "replace or remove with no hit is ENTRY_NOT_FOUND")
def b3(h: Harness) -> None:
    p = h.provider()
    p.add(ug("存在的条目"), h.write)
    before = p.listEntries()
    p.asked.clear()
    expect_error("ENTRY_NOT_FOUND", p.replace, ug("x", match="不存在的"), h.write)
    expect_error("ENTRY_NOT_FOUND", p.remove, {"track": "user", "scope": "user-global",
                                               "match": "不存在的"}, h.write)
    unchanged(p, before, "a replace/remove with no hit")
    not_asked(p, "a replace/remove with no hit")


@case("B4", "repeating a successful remove is ENTRY_NOT_FOUND")
def b4(h: Harness) -> None:
    p = h.provider()
    p.add(ug("待删除的临时事实"), h.write)
    target = {"track": "user", "scope": "user-global", "match": "临时事实"}
    r = p.remove(target, h.write)
    ensure(r["entry"]["text"] == "待删除的临时事实", f"remove returned {show(r)}")
    ensure(p.listEntries() == [], "the entry is still there after remove")
    expect_error("ENTRY_NOT_FOUND", p.remove, target, h.write)


@case("B5", "consolidate removes every target and adds one version-1 entry")
def b5(h: Harness) -> None:
    p = h.provider()
    one = p.add(layer("agent", "user-global", "约定一：早会 9 点"), h.write)["entry"]
    two = p.add(layer("agent", "user-global", "约定二：晚检 6 点"), h.write)["entry"]
    r = p.consolidate({"track": "agent", "scope": "user-global", "matches": ["约定一", "约定二"],
                       "text": "约定：早会 9 点，晚检 6 点"}, h.write)
    ensure([e["id"] for e in r["removed"]] == [one["id"], two["id"]],
           f"removed must list the targets in match order: {show(r['removed'])}")
    e = r["entry"]
    check_entry(e, "the consolidated entry")
    ensure(e["version"] == 1 and e["id"] not in (one["id"], two["id"]),
           f"the new entry needs a fresh id and version 1: {show(e)}")
    ensure(texts(p.listEntries()) == ["约定：早会 9 点，晚检 6 点"],
           f"after consolidate the store holds {texts(p.listEntries())}")
    before = p.listEntries()
    expect_error("ENTRY_NOT_FOUND", p.consolidate, {
        "track": "agent", "scope": "user-global", "matches": ["约定一"], "text": "x"}, h.write)
    unchanged(p, before, "a consolidate with a gone target")


@case("B6", "seed adds a batch: added 2, version 1, distinct ids, one approval")
def b6(h: Harness) -> None:
    p = h.provider()
    r = p.seed([ug("种子一"), layer("agent", "workspace", "种子二")], h.write)
    ensure(r.get("added") == 2, f"added must be 2: {show(r)}")
    entries = r["entries"]
    ensure(texts(entries) == ["种子一", "种子二"], f"entries in input order: {texts(entries)}")
    for e in entries:
        check_entry(e, "a seeded entry")
        ensure(e["version"] == 1, f"a seeded entry has version {e['version']}")
    ensure(len({e["id"] for e in entries}) == 2, "seeded entries share an id")
    ensure(sorted(texts(p.listEntries())) == ["种子一", "种子二"], "the store lacks the seed")
    ensure(len(p.asked) == 1 and p.asked[0].get("count") == 2,
           f"one approval for the whole batch, with count 2: {show(p.asked)}")


@case("B7", "replace's approval payload shows the full old and new text, asked once")
def b7(h: Harness) -> None:
    p = h.provider()
    p.add(ug("旧文本需要被替换"), h.write)
    p.asked.clear()
    p.replace(ug("新文本已经替换", match="旧文本"), h.write)
    ensure(len(p.asked) == 1, f"replace must ask exactly once, asked {len(p.asked)} times")
    payload = p.asked[0]
    ensure(payload.get("action") == "replace" and payload.get("track") == "user" and
           payload.get("scope") == "user-global", f"payload names the change: {show(payload)}")
    text = payload.get("text")
    ensure(isinstance(text, str) and "旧文本需要被替换" in text and "新文本已经替换" in text,
           f"the payload text must hold the full old and new texts: {show(payload)}")


# ================================================================== C: budgets


@case("C1", "add over budget is BUDGET_EXCEEDED (limit 100, needed >= 150); nothing stored")
def c1(h: Harness) -> None:
    p = h.provider(budgets=SMALL)
    err = expect_error("BUDGET_EXCEEDED", p.add, ug("x" * 150), h.write)
    d = err.details
    ensure(d.get("limit") == 100, f"details.limit must be 100: {show(d)}")
    ensure(isinstance(d.get("needed"), int) and d["needed"] >= 150,
           f"details.needed must be >= 150: {show(d)}")
    ensure(d.get("used") == 0 and d.get("track") == "user" and d.get("scope") == "user-global",
           f"details must name the layer and its usage: {show(d)}")
    ensure(p.listEntries() == [], "an over-budget add stored an entry")
    not_asked(p, "an add over budget")


@case("C2", "a seed with one entry over budget is rejected whole")
def c2(h: Harness) -> None:
    p = h.provider(budgets=SMALL)
    expect_error("BUDGET_EXCEEDED", p.seed, [ug("小条目"), ug("y" * 120)], h.write)
    ensure(p.listEntries() == [], f"a refused seed stored {texts(p.listEntries())}")


@case("C3", "budgets() reports the configured limit and used = text length")
def c3(h: Harness) -> None:
    limits = {"user": {"userGlobal": 100, "workspace": 200},
              "agent": {"userGlobal": 300, "workspace": 400}}
    p = h.provider(budgets=limits)
    text = "十个字符的条目xx"
    p.add(ug(text), h.write)
    rows = p.budgets()
    row = next((r for r in rows if r.get("track") == "user" and r.get("scope") == "user-global"),
               None)
    ensure(row is not None, f"no user/user-global row in {show(rows)}")
    assert row is not None
    ensure(row.get("limit") == 100 and row.get("used") == utf16_len(text),
           f"user/user-global must be used {utf16_len(text)} of 100: {show(row)}")
    for r in rows:
        key = "userGlobal" if r["scope"] == "user-global" else "workspace"
        ensure(r.get("limit") == limits[r["track"]][key], f"wrong limit in {show(r)}")


# ================================================================== D: audit


@case("D1", "an allowed add leaves an add row with text, entryId and an outcome")
def d1(h: Harness) -> None:
    p = h.provider()
    e = p.add(ug("审计可见的条目"), h.write)["entry"]
    rows = p.auditList(10)
    row = next((r for r in rows if r.get("action") == "add"), None)
    ensure(row is not None, f"no add row in {show(rows)}")
    assert row is not None
    problems = SCHEMA.errors(row, "auditRow")
    ensure(not problems, f"the add row does not fit the schema: {'; '.join(problems)}")
    ensure(row["text"] == "审计可见的条目" and row["entryId"] == e["id"],
           f"the add row must carry the text and entry id: {show(row)}")
    ensure(isinstance(row["outcome"], str) and row["outcome"],
           f"the add row needs a non-empty outcome: {show(row)}")
    ensure(row["sessionId"] == SESSION_ID, f"the add row names the writer: {show(row)}")


@case("D2", "a rejected write is WRITE_DENIED, stores nothing, leaves an add-denied row")
def d2(h: Harness) -> None:
    p = h.provider(gate=reject)
    err = expect_error("WRITE_DENIED", p.add, ug("不会被写进去"), h.write)
    ensure(err.details.get("outcome") == "rejected", f"details.outcome: {show(err.details)}")
    ensure(p.listEntries() == [], "a rejected add stored an entry")
    ensure(len(p.asked) == 1, f"the gate must be asked once, was asked {len(p.asked)} times")
    rows = [r for r in p.auditList(10) if r.get("action") == "add-denied"]
    ensure(rows, "a denied write must leave an add-denied row")
    ensure(rows[0].get("text") == "不会被写进去", f"the denied row keeps the text: {show(rows[0])}")


@case("D3", "a query with opts.sessionId leaves a recalled row, even with no hits")
def d3(h: Harness) -> None:
    p = h.provider()
    r = p.query({"text": "任何词"}, {"sessionId": SESSION_ID})
    ensure(r.get("total") == 0 and r.get("entries") == [], f"an empty store found {show(r)}")
    rows = [x for x in p.auditList(10) if x.get("action") == "recalled"]
    ensure(rows, "no recalled row after a query with a sessionId")
    ensure(rows[0].get("sessionId") == SESSION_ID and rows[0].get("text") == "任何词",
           f"the recalled row names the session and the query: {show(rows[0])}")


# ================================================================== E: export envelope


@case("E1", "entries and budgets fit a memory-export-v1 envelope")
def e1(h: Harness) -> None:
    p = h.provider()
    e = p.add(ug("导出往返条目", tags=["export"]), h.write)["entry"]
    doc = envelope([e], p.budgets())
    problems = SCHEMA.errors(doc, "exportEnvelope")
    ensure(not problems, f"the envelope is not valid: {'; '.join(problems)}")
    ensure(len(doc["budgets"]) == 4, f"4 budget rows expected: {show(doc['budgets'])}")
    ensure(e["tags"] == ["export"] and e["version"] == 1, f"entry: {show(e)}")


@case("E2", "entries stay valid: version >= 1, updatedAt >= createdAt, through replace")
def e2(h: Harness) -> None:
    p = h.provider()
    e = p.add(ug("合法条目"), h.write)["entry"]
    check_entry(e, "the added entry")
    r = p.replace(ug("改写后的条目", match="合法条目"), h.write)["entry"]
    check_entry(r, "the replaced entry")
    ensure(r["version"] == e["version"] + 1, f"version {e['version']} -> {r['version']}")
    ensure(r["updatedAt"] >= e["updatedAt"] and r["createdAt"] == e["createdAt"],
           f"timestamps after replace: {show(e)} -> {show(r)}")


# ================================================================== S: filemem's choices


@case("S1", "a user-global entry has workspaceKey ''")
def s1(h: Harness) -> None:
    p = h.provider()
    added = p.add(ug("global one"), h.write)["entry"]
    agent = p.add(layer("agent", "user-global", "global two"), h.write)["entry"]
    seeded = p.seed([ug("global three"), layer("user", "workspace", "local one")],
                    h.write)["entries"]
    merged = p.consolidate({"track": "user", "scope": "user-global", "matches": ["global one"],
                            "text": "global four"}, h.write)["entry"]
    for e in (agent, seeded[0], merged, added):
        ensure(e["workspaceKey"] == "", f"user-global entry {e['text']!r} has workspaceKey "
                                        f"{e['workspaceKey']!r}")
    ensure(seeded[1]["workspaceKey"] != "", "a workspace entry needs the writer's workspace key")
    for e in p.listEntries():
        ensure((e["scope"] == "user-global") == (e["workspaceKey"] == ""),
               f"stored entry {e['text']!r}: scope {e['scope']}, workspaceKey "
               f"{e['workspaceKey']!r}")


@case("S2", "a session's query sees only its visible set; no context sees everything")
def s2(h: Harness) -> None:
    p = h.provider()
    writes = [
        ("/conformance/a", None, "agent", "workspace", "alpha shared here"),
        ("/conformance/a", "coder", "agent", "workspace", "alpha coder here"),
        ("/conformance/a", "reviewer", "agent", "workspace", "alpha reviewer here"),
        ("/conformance/b", "coder", "agent", "workspace", "alpha coder elsewhere"),
        ("/conformance/b", None, "agent", "user-global", "alpha shared global"),
        ("/conformance/b", "reviewer", "agent", "user-global", "alpha reviewer global"),
    ]
    for cwd, preset, track, scope, text in writes:
        p.add(layer(track, scope, text), write_context("writer", cwd, preset))
    me = session("reader", "/conformance/a", "coder")
    r = p.query({"text": "alpha"}, {"session": me, "sessionId": "reader", "agentKey": "coder"})
    want = ["alpha coder here", "alpha shared global", "alpha shared here"]
    ensure(sorted(texts(r["entries"])) == want and r["total"] == 3,
           f"a coder session in /conformance/a must see exactly {want}, got "
           f"{sorted(texts(r['entries']))} (total {r['total']})")
    everything = sorted(w[4] for w in writes)
    r = p.query({"text": "alpha"})
    ensure(sorted(texts(r["entries"])) == everything,
           f"a query without a session sees every entry, got {sorted(texts(r['entries']))}")
    ensure(sorted(texts(p.listEntries())) == everything, "listEntries must show every entry")


@case("S3", "after approval a write lands only on the approved entry, never an invisible one")
def s3(h: Harness) -> None:
    p = h.provider()
    other = h.provider()
    p.add(ug("target alpha as approved"), h.write)

    def rewrite_meanwhile(payload: dict[str, Any]) -> str:
        other.replace(ug("target alpha rewritten meanwhile", match="target alpha"), h.write)
        return "allowed-once"

    racer = h.provider(gate=rewrite_meanwhile)
    err = expect_error("ENTRY_NOT_FOUND", racer.replace,
                       ug("the approved change", match="target alpha"), h.write)
    ensure(err.details.get("match") == "target alpha", f"details: {show(err.details)}")
    listed = p.listEntries()
    ensure(texts(listed) == ["target alpha rewritten meanwhile"] and listed[0]["version"] == 2,
           f"only the concurrent rewrite may have landed: {show(listed)}")

    # an entry another agent cannot see never makes its write ambiguous or leaks its text
    stranger = write_context("stranger", CWD, "someone-else")
    p.add(layer("agent", "workspace", "beta visible to me"), h.write)
    p.add(layer("agent", "workspace", "beta secret of someone else"), stranger)
    p.add(layer("agent", "workspace", "gamma secret of someone else"), stranger)
    r = p.replace(layer("agent", "workspace", "beta replaced by me", match="beta"), h.write)
    ensure(r["previous"]["text"] == "beta visible to me",
           f"the visible entry is the target: {show(r['previous'])}")
    err = expect_error("ENTRY_NOT_FOUND", p.remove,
                       {"track": "agent", "scope": "workspace", "match": "gamma"}, h.write)
    ensure("secret" not in err.message and "secret" not in json.dumps(err.details),
           f"the error shows an invisible entry's text: {err.message} {show(err.details)}")

    def invisible_meanwhile(payload: dict[str, Any]) -> str:
        other.add(layer("agent", "workspace", "delta secret added meanwhile"), stranger)
        return "allowed-once"

    p.add(layer("agent", "workspace", "delta mine"), h.write)
    racer2 = h.provider(gate=invisible_meanwhile)
    r = racer2.replace(layer("agent", "workspace", "delta mine, updated", match="delta"), h.write)
    ensure(r["entry"]["text"] == "delta mine, updated",
           f"an invisible entry added during approval must not block the write: {show(r)}")


@case("S4", "seed and import check the budget before asking, and again after")
def s4(h: Harness) -> None:
    limits = {"user": {"userGlobal": 50, "workspace": 50},
              "agent": {"userGlobal": 50, "workspace": 50}}
    p = h.provider(budgets=limits)
    seq = max_seq(p)
    err = expect_error("BUDGET_EXCEEDED", p.seed, [ug("a" * 10), ug("b" * 60)], h.write)
    ensure(err.details.get("limit") == 50, f"details: {show(err.details)}")
    not_asked(p, "an over-budget seed")
    ensure(p.listEntries() == [], "an over-budget seed stored entries")
    ensure(rows_since(p, seq) == [], f"a seed refused before asking left rows: "
                                     f"{show(rows_since(p, seq))}")
    try:
        expect_error("BUDGET_EXCEEDED", p.import_envelope,
                     envelope([foreign_entry("c" * 60)]), h.write)
        not_asked(p, "an over-budget import")
        ensure(p.listEntries() == [], "an over-budget import stored entries")
    except MethodMissing:
        h.note("no import: the import half of S4 was not checked")

    # ... and again after approval: the budget filled up while the person decided
    other = h.provider(budgets=limits)

    def fill_meanwhile(payload: dict[str, Any]) -> str:
        other.add(ug("f" * 30), h.write)
        return "allowed-once"

    late = h.provider(budgets=limits, gate=fill_meanwhile)
    expect_error("BUDGET_EXCEEDED", late.seed, [ug("s" * 30)], h.write)
    ensure(len(late.asked) == 1, f"the seed fit before approval, so it is asked: {late.asked}")
    ensure(texts(p.listEntries()) == ["f" * 30], f"only the concurrent add may land: "
                                                 f"{texts(p.listEntries())}")


@case("S5", "budgets() has 4 rows; one pool per track x scope across workspaces and agents")
def s5(h: Harness) -> None:
    limits = {"user": {"userGlobal": 100, "workspace": 40},
              "agent": {"userGlobal": 300, "workspace": 400}}
    p = h.provider(budgets=limits)
    rows = p.budgets()
    ensure([(r.get("track"), r.get("scope")) for r in rows] == list(LAYERS),
           f"budgets() must be 4 rows in the order {LAYERS}: {show(rows)}")
    for r in rows:
        ensure(sorted(r) == ["limit", "scope", "track", "used"], f"row fields: {show(r)}")
    one = write_context("s-one", "/conformance/w1", "a1")
    p.add(layer("user", "workspace", "ten chars!"), one)
    p.add(layer("user", "workspace", "😀" * 10), write_context("s-two", "/conformance/w2", "a2"))
    used = {(r["track"], r["scope"]): r["used"] for r in p.budgets()}
    ensure(used[("user", "workspace")] == 30,
           f"user/workspace is one pool counted in UTF-16 units: 10 + 20 = 30, got "
           f"{used[('user', 'workspace')]}")
    err = expect_error("BUDGET_EXCEEDED", p.add, layer("user", "workspace", "x" * 15),
                       write_context("s-three", "/conformance/w3", "a3"))
    ensure((err.details.get("used"), err.details.get("limit"), err.details.get("needed")) ==
           (30, 40, 45), f"enforcement uses the whole pool: {show(err.details)}")
    try:
        text = p.snapshot(session("s-one", "/conformance/w1", "a1"))
        ensure(isinstance(text, str) and "30/40" in text,
               f"the snapshot heading must show the enforced usage 30/40: {text!r}")
    except MethodMissing:
        h.note("no snapshot: its heading was not checked")


@case("S6", "audit outcome labels name the decision and the policy or transport")
def s6(h: Harness) -> None:
    p = h.provider()
    seq = max_seq(p)
    p.add(ug("labelled add"), h.write)
    p.seed([ug("labelled seed one"), ug("labelled seed two")], h.write)
    denied = h.provider(gate=reject)
    expect_error("WRITE_DENIED", denied.add, ug("labelled denial"), h.write)
    rows = rows_since(p, seq)
    by_action: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_action.setdefault(r["action"], []).append(r)
    ensure(len(by_action.get("add", [])) == 3 and len(by_action.get("seed", [])) == 1 and
           len(by_action.get("add-denied", [])) == 1,
           f"expected 3 add, 1 seed, 1 add-denied rows: {[r['action'] for r in rows]}")
    for r in by_action["add"] + by_action["seed"]:
        ensure(isinstance(r["outcome"], str) and re.match("^allowed-once" + LABEL, r["outcome"]),
               f"an allowed write's label must be 'allowed-once (via approval, writePolicy "
               f"...)' or '(via write gate...)': {r['outcome']!r}")
    seed_labels = {r["outcome"] for r in rows if r["action"] == "seed" or
                   (r["action"] == "add" and r["text"].startswith("labelled seed"))}
    ensure(len(seed_labels) == 1, f"a seed's rows share one label: {seed_labels}")
    label = by_action["add-denied"][0]["outcome"]
    ensure(isinstance(label, str) and re.match("^rejected" + LABEL, label),
           f"a denial's label must say rejected and what decided: {label!r}")


@case("S7", "export includes sessionId and fits the JSON Schema's exportEnvelope")
def s7(h: Harness) -> None:
    p = h.provider()
    p.add(ug("exported with a session", tags=["t1", "t2"]), h.write)
    p.add(layer("agent", "workspace", "exported from elsewhere"),
          write_context("s-other", "/conformance/other", "other"))
    doc = p.export()
    problems = SCHEMA.errors(doc, "exportEnvelope")
    ensure(not problems, f"export() is not a valid envelope: {'; '.join(problems[:5])}")
    ensure(list(doc) == ["plugin", "schema", "exportedAt", "budgets", "entries"],
           f"envelope key order: {list(doc)}")
    ensure(doc["entries"] == p.listEntries(), "export must hold every entry, as listEntries")
    ensure(doc["budgets"] == p.budgets(), "export's budgets must equal budgets()")
    sessions = [e.get("sessionId") for e in doc["entries"]]
    ensure(sessions == [SESSION_ID, "s-other"], f"each entry keeps its sessionId: {sessions}")
    for e in doc["entries"]:
        ensure(list(e) == list(ENTRY_FIELDS), f"entry key order: {list(e)}")


@case("S8", "import validates the whole envelope (INVALID_INPUT) and keeps tags and keys")
def s8(h: Harness) -> None:
    p = h.provider()
    good = foreign_entry("imported fact")
    bad: dict[str, Any] = {
        "an array": [good],
        "schema memory-export-v2": {**envelope([good]), "schema": "memory-export-v2"},
        "another plugin": {**envelope([good]), "plugin": "someone-else"},
        "no exportedAt": {k: v for k, v in envelope([good]).items() if k != "exportedAt"},
        "exportedAt not a date": {**envelope([good]), "exportedAt": "yesterday"},
        "budgets not an array": {**envelope([good]), "budgets": "lots"},
        "a bad budget row": {**envelope([good]), "budgets": [{"track": "team"}]},
        "entries not an array": {**envelope([good]), "entries": {"0": good}},
        "no entries": envelope([]),
        "1001 entries": envelope([foreign_entry(f"e{i}") for i in range(1001)]),
        "an entry without text": envelope([{k: v for k, v in good.items() if k != "text"}]),
        "an entry with track team": envelope([{**good, "track": "team"}]),
        "an entry with tags not an array": envelope([{**good, "tags": "x"}]),
        "an entry with a bad id": envelope([{**good, "id": "not-a-uuid"}]),
    }
    for what, doc in bad.items():
        try:
            p.import_envelope(doc, h.write)
        except ProtocolFailure as exc:
            ensure(exc.code == "INVALID_INPUT",
                   f"import of {what}: expected INVALID_INPUT, got {exc.code}: {exc.message}")
        else:
            raise CaseFailure(f"import of {what} was accepted")
    ensure(p.listEntries() == [], f"a refused import stored {texts(p.listEntries())}")
    not_asked(p, "an invalid import")

    seq = max_seq(p)
    doc = envelope([
        foreign_entry("shared fact with tags", tags=["keep", "these"]),
        foreign_entry("workspace fact", id="1c6e2b8a-7f3d-4e5a-8b9c-0d1e2f3a4b5c",
                      track="agent", scope="workspace", workspaceKey="/elsewhere/ws",
                      agentKey="", tags=[]),
    ])
    r = p.import_envelope(doc, h.write)
    ensure(r.get("added") == 2, f"import must report added 2: {show(r)}")
    listed = p.listEntries()
    one, two = by_text(listed, "shared fact with tags"), by_text(listed, "workspace fact")
    ensure(one["tags"] == ["keep", "these"], f"import must keep tags: {one['tags']}")
    ensure(one["agentKey"] == "" and two["agentKey"] == "",
           f"an empty agentKey stays shared, not the importer's {PRESET!r}: {show(listed)}")
    ensure(two["workspaceKey"] == "/elsewhere/ws", f"workspaceKey kept: {show(two)}")
    ensure(one["source"] == "elsewhere", f"source kept: {show(one)}")
    for e in listed:
        ensure(e["id"] not in (d["id"] for d in doc["entries"]), "import must make new ids")
        ensure(e["version"] == 1 and e["recallCount"] == 0 and e["sessionId"] == SESSION_ID,
               f"an imported entry starts fresh with the importer's session: {show(e)}")
    ensure(len(p.asked) == 1, f"one approval for the import, asked {len(p.asked)}")
    actions = [x["action"] for x in rows_since(p, seq)]
    ensure(sorted(actions) == ["add", "add", "seed"],
           f"an import is audited as a seed and one add per entry: {actions}")


@case("S9", "replace with tags [] clears the tags; omitting tags keeps them")
def s9(h: Harness) -> None:
    p = h.provider()
    p.add(ug("tagged entry", tags=["a", "b"]), h.write)
    e = p.replace(ug("tagged entry v2", match="tagged entry"), h.write)["entry"]
    ensure(e["tags"] == ["a", "b"], f"omitted tags must be kept: {e['tags']}")
    e = p.replace(ug("tagged entry v3", match="tagged entry", tags=["c"]), h.write)["entry"]
    ensure(e["tags"] == ["c"], f"given tags replace the old ones: {e['tags']}")
    e = p.replace(ug("tagged entry v4", match="tagged entry", tags=[]), h.write)["entry"]
    ensure(e["tags"] == [], f"tags [] must clear the tags: {e['tags']}")
    ensure(p.listEntries()[0]["tags"] == [], "the stored entry still has tags")


@case("S10", "consolidate matches that hit one entry are INVALID_INPUT before asking")
def s10(h: Harness) -> None:
    p = h.provider()
    p.add(ug("dup target one"), h.write)
    p.add(ug("another entry"), h.write)
    before = p.listEntries()
    seq = max_seq(p)
    p.asked.clear()
    expect_error("INVALID_INPUT", p.consolidate, {
        "track": "user", "scope": "user-global", "matches": ["dup target", "target one"],
        "text": "merged"}, h.write)
    not_asked(p, "a consolidate with duplicate targets")
    unchanged(p, before, "a consolidate with duplicate targets")
    ensure(rows_since(p, seq) == [], "a consolidate refused before asking left audit rows")


@case("S11", "every approval asked leaves a trace: the write, a denied or a failed row")
def s11(h: Harness) -> None:
    # user/user-global holds 40. Each write below fits when it is asked and stops fitting
    # while the gate runs: add 20 (0 used) while 25 are added; seed 15 (25 used) while the
    # 25 become 30. The remove target lives in agent/user-global, out of the way.
    small = {"user": {"userGlobal": 40, "workspace": 40},
             "agent": {"userGlobal": 40, "workspace": 40}}
    base = h.provider(budgets=small)
    base.add(layer("agent", "user-global", "to be removed meanwhile"), h.write)
    target = {"track": "agent", "scope": "user-global", "match": "removed"}

    def denies(outcome: str) -> Callable[[dict[str, Any]], str]:
        return lambda payload: outcome

    def broken(payload: dict[str, Any]) -> str:
        raise GateRaised("the approval transport broke")

    def meanwhile(action: Callable[[], Any]) -> Callable[[dict[str, Any]], str]:
        def gate(payload: dict[str, Any]) -> str:
            action()
            return "allowed-once"
        return gate

    scenarios: list[tuple[str, Callable[[dict[str, Any]], str], str, Callable[[Subject], Any],
                          str]] = [
        ("a rejected add", denies("rejected"), "add",
         lambda p: p.add(ug("rejected text"), h.write), "WRITE_DENIED"),
        ("a cancelled remove", denies("cancelled"), "remove",
         lambda p: p.remove(target, h.write), "WRITE_DENIED"),
        ("an add whose gate raised", broken, "add",
         lambda p: p.add(ug("broken gate text"), h.write), "WRITE_DENIED"),
        ("an add whose budget filled during approval",
         meanwhile(lambda: base.add(ug("g" * 25), h.write)), "add",
         lambda p: p.add(ug("h" * 20), h.write), "BUDGET_EXCEEDED"),
        ("a remove whose target went during approval",
         meanwhile(lambda: base.remove({**target, "match": "removed meanwhile"}, h.write)),
         "remove", lambda p: p.remove(target, h.write), "ENTRY_NOT_FOUND"),
        ("a seed whose budget filled during approval",
         meanwhile(lambda: base.replace(ug("k" * 30, match="g" * 25), h.write)), "seed",
         lambda p: p.seed([ug("s" * 15)], h.write), "BUDGET_EXCEEDED"),
    ]
    for what, gate, action, attempt, code in scenarios:
        p = h.provider(budgets=small, gate=gate)
        seq = max_seq(base)
        err = expect_error(code, attempt, p)
        ensure(len(p.asked) == 1, f"{what}: the gate must be asked once, was asked "
                                  f"{len(p.asked)} times")
        if gate is broken:  # the reference says "unavailable"; staging it is fine too
            outcome = err.details.get("outcome")
            ensure(isinstance(outcome, str) and outcome and outcome != "allowed-once",
                   f"{what}: a broken transport is a denial: {show(err.details)}")
            h.note(f"a broken approval transport gave outcome {outcome!r}")
        mine = [r for r in rows_since(base, seq) if r["sessionId"] == SESSION_ID and
                str(r["action"]).startswith(action + "-")]
        ensure(len(mine) == 1, f"{what}: expected one {action}-denied or {action}-failed row, "
                               f"got {show(rows_since(base, seq))}")


@case("S12", "source '' is treated as missing")
def s12(h: Harness) -> None:
    p = h.provider()
    default = p.add(ug("no source given"), h.write)["entry"]["source"]
    ensure(isinstance(default, str) and default, f"the default source is {default!r}")
    p.asked.clear()
    e = p.add(ug("empty source given", source=""), h.write)["entry"]
    ensure(e["source"] == default, f"source '' must give the default {default!r}, got "
                                   f"{e['source']!r}")
    ensure(p.asked and p.asked[0].get("source") == default,
           f"the approval payload must show the default source: {show(p.asked)}")
    seeded = p.seed([ug("seeded with empty source", source="")], h.write)["entries"][0]
    ensure(seeded["source"] == default, f"seed: source '' gave {seeded['source']!r}")
    rows = [r for r in p.auditList(10)
            if r["action"] == "add" and r["text"] == "empty source given"]
    ensure(rows and rows[0]["source"] == default, f"the add row's source: {show(rows)}")


@case("S14", "listing (listEntries, export, budgets, snapshot) never bumps recall; query does")
def s14(h: Harness) -> None:
    p = h.provider()
    p.add(ug("recall me"), h.write)
    p.add(ug("leave me alone"), h.write)
    for _ in range(2):
        p.listEntries()
        p.budgets()
    try:
        p.export()
    except MethodMissing:
        h.note("no export: not checked for recall bumps")
    try:
        p.snapshot(session())
    except MethodMissing:
        h.note("no snapshot: not checked for recall bumps")
    for e in p.listEntries():
        ensure(e["recallCount"] == 0 and e["lastRecalled"] is None,
               f"listing bumped recall: {show(e)}")
    r = p.query({"text": "recall me"})
    ensure(texts(r["entries"]) == ["recall me"], f"query found {texts(r['entries'])}")
    ensure(r["entries"][0]["recallCount"] == 0,
           f"query returns the values from before its own bump: {show(r['entries'][0])}")
    hit, other = by_text(p.listEntries(), "recall me"), by_text(p.listEntries(), "leave me alone")
    ensure(hit["recallCount"] == 1 and isinstance(hit["lastRecalled"], int),
           f"query must bump the entries it returns: {show(hit)}")
    ensure(other["recallCount"] == 0 and other["lastRecalled"] is None,
           f"query must not bump entries it did not return: {show(other)}")


# ================================================================== G: git store


def git_workload(h: Harness) -> Subject:
    """A bit of everything: each kind of write, a denial, reads."""
    p = h.provider()
    p.add(ug("git one"), h.write)
    p.add(layer("agent", "workspace", "git two\nwith a second line"), h.write)
    p.replace(ug("git one, replaced", match="git one"), h.write)
    p.seed([ug("git three"), layer("agent", "user-global", "git four")], h.write)
    p.consolidate({"track": "user", "scope": "user-global",
                   "matches": ["git one", "git three"], "text": "git merged"}, h.write)
    p.remove({"track": "agent", "scope": "user-global", "match": "git four"}, h.write)
    expect_error("WRITE_DENIED", h.provider(gate=reject).add, ug("git denied"), h.write)
    p.query({"text": "git"}, {"sessionId": SESSION_ID})
    with contextlib.suppress(MethodMissing):
        p.snapshot(session())
    store_checks.require_git_store(h.store)
    return p


@case("G1", "git status is clean after writes")
def g1(h: Harness) -> None:
    git_workload(h)
    out = store_checks.git(h.store, "status", "--porcelain")
    ensure(out.returncode == 0, f"git status failed: {out.stderr.strip()}")
    ensure(out.stdout == "", f"git status shows changes after provider writes:\n{out.stdout}")


@case("G2", "git fsck passes")
def g2(h: Harness) -> None:
    git_workload(h)
    out = store_checks.git(h.store, "fsck", "--no-progress")
    ensure(out.returncode == 0, f"git fsck failed: {(out.stdout + out.stderr).strip()[:800]}")


@case("G3", "every commit carries Audit-* trailers matching auditList's write rows")
def g3(h: Harness) -> None:
    p = git_workload(h)
    committed: list[dict[str, Any]] = []
    for c in store_checks.commits(h.store):
        try:
            committed += store_checks.parse_trailers(c.message)
        except store_checks.TrailerError as exc:
            raise CaseFailure(f"commit {c.sha[:12]} ({c.subject!r}): {exc}") from None
    rows = p.auditList(1000)
    seqs = [r["seq"] for r in rows]
    ensure(seqs == sorted(seqs, reverse=True) and len(set(seqs)) == len(seqs),
           f"auditList must be newest first with unique seqs: {seqs}")
    written = sorted((r for r in rows if r["action"] not in store_checks.LEDGER_ACTIONS),
                     key=lambda r: r["seq"])
    committed.sort(key=lambda r: r["seq"])
    ensure(committed == written, "the commits' trailers and auditList's write rows differ:\n"
                                 f"  commits:   {show(committed)}\n  auditList: {show(written)}")
    ensure({"add", "replace", "seed", "consolidate-add", "consolidate-remove", "remove",
            "add-denied"} <= {r["action"] for r in committed},
           f"the workload's actions are missing from the commits: "
           f"{sorted({r['action'] for r in committed})}")


@case("G4", "one commit per approved write, none for reads or refused writes")
def g4(h: Harness) -> None:
    p = h.provider()
    p.add(ug("first"), h.write)
    store_checks.require_git_store(h.store)
    steps: list[tuple[str, Callable[[], Any], int]] = [
        ("add", lambda: p.add(ug("second"), h.write), 1),
        ("replace", lambda: p.replace(ug("second, again", match="second"), h.write), 1),
        ("seed of 3", lambda: p.seed([ug("s1"), ug("s2"), ug("s3")], h.write), 1),
        ("consolidate of 2", lambda: p.consolidate({
            "track": "user", "scope": "user-global", "matches": ["s1", "s2"], "text": "s12"},
            h.write), 1),
        ("remove", lambda: p.remove({"track": "user", "scope": "user-global", "match": "s3"},
                                    h.write), 1),
        ("query", lambda: p.query({"text": "s"}, {"sessionId": SESSION_ID}), 0),
        ("listEntries, budgets, auditList",
         lambda: (p.listEntries(), p.budgets(), p.auditList(5)), 0),
        ("an invalid add", lambda: _swallow(p.add, layer("team", "user-global", "x"), h.write), 0),
    ]
    for what, step, want in steps:
        before = store_checks.commit_count(h.store)
        step()
        got = store_checks.commit_count(h.store) - before
        ensure(got == want, f"{what} made {got} commits, expected {want}")


def _swallow(fn: Callable[..., Any], *args: Any) -> None:
    with contextlib.suppress(ProtocolFailure):
        fn(*args)


# ================================================================== P: processes


@case("P1", "4 processes x 25 adds at once: 100 entries, distinct ids, 100 add rows")
def p1(h: Harness) -> None:
    h.provider(budgets=BIG).budgets()  # the store exists before the writers start
    jobs = [[("add", layer("agent", "workspace", f"writer {w} entry {i}")) for i in range(25)]
            for w in range(4)]
    results = h.parallel(jobs, budgets=BIG)
    failed = [r for job in results for r in job if "error" in r]
    ensure(not failed, f"{len(failed)} adds failed, e.g. {show(failed[:3])}")
    ids = [r["result"]["entry"]["id"] for job in results for r in job]
    ensure(len(set(ids)) == 100, f"100 adds gave {len(set(ids))} distinct ids")
    check = h.provider(budgets=BIG)
    listed = check.listEntries()
    ensure(sorted(e["id"] for e in listed) == sorted(ids),
           f"the store holds {len(listed)} entries, not the 100 written")
    want = sorted(f"writer {w} entry {i}" for w in range(4) for i in range(25))
    ensure(sorted(texts(listed)) == want, "the stored texts differ from the written ones")
    adds = [r for r in check.auditList(1000) if r["action"] == "add"]
    ensure(len(adds) == 100 and sorted(r["entryId"] for r in adds) == sorted(ids),
           f"auditList has {len(adds)} add rows, expected one per entry (100)")


@case("P2", "4 processes racing replaces on one entry: no lost update")
def p2(h: Harness) -> None:
    first = h.provider(budgets=BIG)
    first.add(ug("shared counter start"), h.write)
    jobs = [[("replace", ug(f"shared counter {w}-{i}", match="shared counter"))
             for i in range(8)] for w in range(4)]
    results = h.parallel(jobs, budgets=BIG)
    wins = [r["result"] for job in results for r in job if "result" in r]
    losses = [r for job in results for r in job if "error" in r]
    ensure(all(r["error"] == "ENTRY_NOT_FOUND" for r in losses),
           f"a replace that lost the race must be ENTRY_NOT_FOUND: {show(losses[:3])}")
    ensure(wins, "every replace failed")
    versions = sorted(w["entry"]["version"] for w in wins)
    ensure(versions == list(range(2, len(wins) + 2)),
           f"each successful replace must make its own version: {versions}")
    final = first.listEntries()
    ensure(len(final) == 1, f"the store must still hold one entry: {show(final)}")
    last = max(wins, key=lambda w: w["entry"]["version"])["entry"]
    ensure(final[0]["version"] == len(wins) + 1 and final[0]["text"] == last["text"],
           f"the entry must be the last successful replace {show(last)}, is {show(final[0])}")
    rows = [r for r in first.auditList(1000) if r["action"] == "replace"]
    ensure(len(rows) == len(wins), f"{len(wins)} replaces succeeded but auditList has "
                                   f"{len(rows)} replace rows")


@case("P3", "4 processes opening one new store at once: all of them work")
def p3(h: Harness) -> None:
    # two agents started together on a new machine: both create the (empty) store folder
    jobs = [[("add", layer("agent", "workspace", f"opener {w}"))] for w in range(4)]
    results = h.parallel(jobs, budgets=BIG)
    failed = [r for job in results for r in job if "error" in r]
    ensure(not failed, f"adds failed after a concurrent first open: {show(failed)}")
    listed = h.provider(budgets=BIG).listEntries()
    ensure(sorted(texts(listed)) == [f"opener {w}" for w in range(4)],
           f"the store holds {texts(listed)}")


__all__ = ["CASES", "Case", "case"]
