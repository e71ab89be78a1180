"""The protocol core: the dsh-memory-protocol/v1 Provider face over a filemem store.

Every write follows one pipeline (DESIGN.md §4)::

    agent check -> validate -> resolve target(s) in the writer's visible set -> budget
    pre-check -> approval (no lock held) -> store lock -> re-resolve, refuse unless it is the
    approved target (same id and version) -> budget re-check -> one commit

A denied write leaves an ``<action>-denied`` row; a write that fails after approval leaves
an ``<action>-failed`` row; both are commits that change no entry, so ``git log`` is the
whole audit trail. This module knows entries and rules, not files or git.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, TypeVar

from . import approval, budgets, envelope, errors, matching, snapshot
from . import query as query_mod
from .approval import ApprovalRequest, Decision, Gate
from .auditlog import one_line, row
from .config import Config
from .jsstr import excerpt, utf16_len
from .model import (
    DEFAULT_SOURCE,
    MAX_CONSOLIDATE,
    Entry,
    agent_key_of,
    check_batch,
    check_unicode,
    new_id,
    normalize_tags,
    now_ms,
    validate_layer,
    validate_optional_str,
    validate_text,
    visible,
    workspace_key_of,
)
from .store import State, Store, Transaction
from .types import AuditRow

T = TypeVar("T")
CONSOLIDATE_EXCERPT = 300
AUDIT_LIMIT_DEFAULT = 100
AUDIT_LIMIT_MAX = 10_000


@dataclass(frozen=True)
class Writer:
    """Who is writing: the session's keys, derived from the write context."""

    write: dict[str, Any]
    session_id: str | None
    workspace_key: str
    agent_key: str


@dataclass(frozen=True)
class Replayable:
    """How to run a write again: what a pending approval stores (JSON-safe)."""

    method: str
    arg: Any
    targets: list[Entry] = field(default_factory=list)
    match: str = ""
    verb: str = ""


@dataclass(frozen=True)
class Prepared:
    """A write checked up to its approval step: what to ask, and what to do once allowed."""

    payload: dict[str, Any]
    apply: Callable[[Transaction, Decision], dict[str, Any]]
    op: Replayable


@dataclass(frozen=True)
class Replay:
    """An owner approving a pending write: who approves, what the targets were."""

    pending_id: str
    approver: Gate
    targets: list[tuple[str, int]]


_REPLAY: ContextVar[Replay | None] = ContextVar("filemem_replay", default=None)


@dataclass(frozen=True)
class NewEntry:
    track: str
    scope: str
    text: str
    tags: tuple[str, ...]
    source: str
    workspace_key: str
    agent_key: str

    @property
    def size(self) -> int:
        return utf16_len(self.text)


def session_keys(session: Any) -> tuple[str | None, str, str]:
    """(session id, workspace key, agent key) of a protocol session object."""
    if not isinstance(session, dict):
        return None, "", ""
    sid = session.get("id")
    header = session.get("header")
    header = header if isinstance(header, dict) else {}
    cwd, preset = header.get("cwd"), header.get("agentPreset")
    for value, what in ((sid, "session id"), (cwd, "session cwd"), (preset, "agentPreset")):
        if isinstance(value, str):
            check_unicode(value, what)
    return (sid if isinstance(sid, str) else None, workspace_key_of(cwd), agent_key_of(preset))


def writer_of(write: Any) -> Writer:
    """The write context's owning agent; WRITE_REQUIRES_AGENT before anything else."""
    if not isinstance(write, dict) or write.get("agent") is None:
        raise errors.write_requires_agent()
    agent = write["agent"]
    session = agent.get("session") if isinstance(agent, dict) else None
    sid, wk, ak = session_keys(session)
    return Writer(write, sid, wk, ak)


def _input(value: Any, what: str = "memory write input") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise errors.invalid_input(f"{what} must be an object")
    return value


def _layer(inp: dict[str, Any]) -> tuple[str, str]:
    return validate_layer(inp.get("track"), inp.get("scope"), track_missing="track" not in inp,
                          scope_missing="scope" not in inp)


def _match(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise errors.invalid_input("replace/remove match must be a non-empty string")
    return value


def _source(inp: dict[str, Any]) -> str:
    """``input.source``, with ``''`` treated as missing (the default label is used)."""
    return validate_optional_str(inp.get("source"), "source") or DEFAULT_SOURCE


def _target_keys(inp: dict[str, Any], w: Writer, scope: str) -> tuple[str | None, str]:
    """Keys that scope match resolution: a non-empty explicit key, else the session's."""
    wk = inp.get("workspaceKey")
    ak = inp.get("agentKey")
    workspace = wk if isinstance(wk, str) and wk else w.workspace_key
    agent = ak if isinstance(ak, str) and ak else w.agent_key
    return (workspace if scope == "workspace" else None), agent


def _created_at(state: State, count: int = 1) -> int:
    """The createdAt of the first of ``count`` new entries (the rest take the next
    milliseconds): now, or just after the newest entry if that is later, so that a write
    never sorts before an earlier one (a seed's last entries can be ahead of the clock)."""
    return max(now_ms() - count + 1, state.newest_created() + 1)


class Provider:
    """A dsh-memory-protocol/v1 provider backed by a filemem store.

    Method names follow Python style; ``listEntries`` and ``auditList`` are also available
    under the protocol's own names. Inputs and results are protocol-shaped dicts.
    """

    def __init__(self, store: Store, *, gate: Gate | None = None, budgets: Any = None,
                 write_policy: str | None = None, write_policies: Any = None,
                 stage_pending: bool = True) -> None:
        self.store = store
        self.gate = gate
        self.stage_pending = stage_pending
        self._overrides = {"budgets": budgets, "write_policy": write_policy,
                           "write_policies": write_policies}
        Config().with_overrides(**self._overrides)  # validate now: fail at open, not at use
        self._config_for: tuple[Config, Config] | None = None
        self._snapshots: dict[str, str] = {}

    # ------------------------------------------------------------ plumbing

    @property
    def path(self) -> str:
        return self.store.root

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Provider:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def config(self, state: State | None = None) -> Config:
        """The store's committed configuration with this process's overrides applied."""
        base = (state or self.store.checked()).config
        assert base is not None
        cached = self._config_for
        if cached is None or cached[0] is not base:
            cached = (base, base.with_overrides(**self._overrides))
            self._config_for = cached
        return cached[1]

    def _protocol(self, e: Entry) -> dict[str, Any]:
        count, last = self.store.recall.get(e.id)
        return e.to_protocol(count, last)

    def _new_entry(self, inp: Any, w: Writer) -> NewEntry:
        inp = _input(inp)
        track, scope = _layer(inp)
        text = validate_text(inp.get("text"))
        tags = normalize_tags(inp.get("tags"))
        source = _source(inp)
        wk = validate_optional_str(inp.get("workspaceKey"), "workspaceKey")
        ak = validate_optional_str(inp.get("agentKey"), "agentKey")
        return NewEntry(
            track, scope, text, tuple(tags), source,
            "" if scope == "user-global" else (w.workspace_key if wk is None else wk),
            w.agent_key if ak is None else ak,
        )

    def _make(self, spec: NewEntry, w: Writer, ts: int) -> Entry:
        return Entry(id=new_id(), track=spec.track, scope=spec.scope,
                     workspace_key=spec.workspace_key, agent_key=spec.agent_key,
                     text=spec.text, source=spec.source, tags=spec.tags, version=1,
                     created_at=ts, updated_at=ts, session_id=w.session_id)

    def _usage(self, state: State, track: str, scope: str) -> dict[str, Any]:
        return budgets.row(state.usage, self.config(state), track, scope)

    def _ensure_writable(self, state: State, targets: list[Entry],
                         new: list[NewEntry] = ()) -> None:  # type: ignore[assignment]
        """Refuse before asking what the commit would refuse after: a target with a
        person's uncommitted edit, a symlinked folder, git's index locked."""
        self.store.precheck(state, targets, [(s.track, s.scope, s.workspace_key, s.agent_key)
                                             for s in new])

    def _reresolve(self, state: State, track: str, scope: str, match: str,
                   keys: tuple[str | None, str], approved: Entry) -> Entry:
        """After approval: the same visible set must still resolve to the approved entry."""
        found = matching.candidates(state.layer(track, scope), match, *keys)
        if len(found) > 1:
            raise errors.ambiguous_match(track, scope, match,
                                         [excerpt(e.text, matching.SAMPLE_CHARS) for e in found])
        if not found or found[0].id != approved.id or found[0].version != approved.version:
            raise errors.entry_not_found(track, scope, match, changed=True)
        return found[0]

    def _approve_and_commit(self, payload: dict[str, Any], w: Writer,
                            apply: Callable[[Transaction, Decision], T], op: Replayable) -> T:
        """Ask (no lock held), then run ``apply`` under the lock; audit every outcome.

        Under ``ask`` with nobody to ask, the write is staged as a pending approval."""
        replay = _REPLAY.get()
        gate = self.gate
        if replay is not None:  # the owner approves a staged write: same targets, or refuse
            if [(t.id, t.version) for t in op.targets] != replay.targets:
                raise errors.ProtocolError(
                    errors.ENTRY_NOT_FOUND,
                    f"the target of pending approval {replay.pending_id} in {payload['track']}/"
                    f"{payload['scope']} changed since it was staged; nothing was changed",
                    {"track": payload["track"], "scope": payload["scope"], "match": op.match})
            gate = replay.approver
        decision = approval.decide(self.config(), payload, w.write, gate)
        if not decision.allowed:
            action = payload["action"]
            if (decision.outcome == "unavailable" and decision.policy == "ask"
                    and self.stage_pending and replay is None):
                pid = self._stage(payload, w, op, decision)
                why = f" ({decision.detail})" if decision.detail else ""
                raise errors.write_denied(
                    "pending", f"nobody could be asked{why}, so the write was staged as "
                    f"pending approval {pid}; the owner can run `filemem approve {pid}`",
                    pendingId=pid)
            self._record(f"{action}-denied", payload, w, decision.label,
                         f"{action}-denied {payload['track']}/{payload['scope']} "
                         f"({decision.outcome}): {payload['text']}")
            raise errors.write_denied(decision.outcome, decision.detail)
        def attempt(txn: Transaction) -> T:
            try:
                return apply(txn, decision)
            except errors.ProtocolError as exc:
                label = f"{decision.label}; then failed: {exc.code}"
                self._record_in(txn, f"{payload['action']}-failed", payload, w, label,
                                f"{payload['action']}-failed {payload['track']}/"
                                f"{payload['scope']} ({exc.code}): {payload['text']}",
                                exc.message)
                raise

        return self.store.retrying(attempt)

    def _stage(self, payload: dict[str, Any], w: Writer, op: Replayable,
               decision: Decision) -> str:
        """Save the write for the owner and leave an ``<action>-pending`` row."""
        write = {k: v for k, v in w.write.items() if k != "gate"}
        pid = self.store.pending.stage({
            "createdAt": now_ms(), "action": payload["action"], "payload": payload,
            "method": op.method, "arg": op.arg, "verb": op.verb, "write": write,
            "targets": [[t.id, t.version] for t in op.targets],
        })
        why = f"; {decision.detail}" if decision.detail else ""
        label = f"pending ({decision.label.split(' (', 1)[1][:-1]}{why}; staged as {pid})"
        self._record(f"{payload['action']}-pending", payload, w, label,
                     f"{payload['action']}-pending {payload['track']}/{payload['scope']} "
                     f"(staged as {pid}): {payload['text']}")
        return pid

    def _run_pending(self, record: dict[str, Any], approver: Gate) -> dict[str, Any]:
        """Run a staged write again through the full pipeline, approved by ``approver``
        (re-resolve, budget re-check; refused if a target changed since it was staged).
        For the owner's CLI (:mod:`filemem.owner`); never exposed to agents."""
        token = _REPLAY.set(Replay(str(record["id"]), approver,
                                   [(str(i), int(v)) for i, v in record.get("targets", [])]))
        try:
            if record["method"] == "seed":
                w = writer_of(record["write"])
                prep = self._prepare_seed(record["arg"], w, record.get("verb") or "seed")
                return self._approve_and_commit(prep.payload, w, prep.apply, prep.op)
            if record["method"] not in ("add", "replace", "remove", "consolidate"):
                raise errors.invalid_input(f"unknown pending write {record['method']!r}")
            result: dict[str, Any] = getattr(self, record["method"])(record["arg"],
                                                                     record["write"])
            return result
        finally:
            _REPLAY.reset(token)

    def _record(self, action: str, payload: dict[str, Any], w: Writer, label: str,
                subject: str) -> None:
        self.store.record([self._row(action, payload, w, label)], subject=subject,
                          body=payload["text"])

    @staticmethod
    def _row(action: str, payload: dict[str, Any], w: Writer, label: str) -> AuditRow:
        return row(action, track=payload["track"], scope=payload["scope"], text=payload["text"],
                   outcome=label, source=payload.get("source") or DEFAULT_SOURCE,
                   session_id=w.session_id)

    def _record_in(self, txn: Transaction, action: str, payload: dict[str, Any], w: Writer,
                   label: str, subject: str, note: str | None = None) -> None:
        """An audit-only commit in ``txn``: no entry changes, one row saying what failed."""
        body = payload["text"] + (f"\n\n{note}" if note else "")
        txn.commit(rows=[self._row(action, payload, w, label)], subject=subject, body=body)

    # ------------------------------------------------------------ writes

    def add(self, input: Any, write: Any) -> dict[str, Any]:
        return self._write(self._prepare_add, input, write)

    def replace(self, input: Any, write: Any) -> dict[str, Any]:
        return self._write(self._prepare_replace, input, write)

    def remove(self, input: Any, write: Any) -> dict[str, Any]:
        return self._write(self._prepare_remove, input, write)

    def consolidate(self, input: Any, write: Any) -> dict[str, Any]:
        return self._write(self._prepare_consolidate, input, write)

    def seed(self, inputs: Any, write: Any) -> dict[str, Any]:
        return self._write(self._prepare_seed, inputs, write)

    def import_entries(self, inputs: Any, write: Any) -> dict[str, Any]:
        """:meth:`seed` for entries converted from another tool's memory (an adapter's
        output): the same rules, recorded and described as an import."""
        w = writer_of(write)
        prep = self._prepare_seed(inputs, w, "import")
        return self._approve_and_commit(prep.payload, w, prep.apply, prep.op)

    def import_envelope(self, envelope_doc: Any, write: Any) -> dict[str, Any]:
        """Import a ``memory-export-v1`` envelope: one approval, one commit, new ids."""
        w = writer_of(write)
        entries = envelope.validate(envelope_doc)
        prep = self._prepare_seed(envelope.seed_inputs(entries), w, "import")
        return self._approve_and_commit(prep.payload, w, prep.apply, prep.op)

    def plan(self, method: str, input: Any, write: Any) -> ApprovalRequest:
        """A dry run up to the approval step: what a person would be asked to approve for
        this write (and under which policy), or the ProtocolError it would fail with first.
        Nothing is written or recorded. For surfaces that must show the question before
        the call that writes (MCP's input-required round trip)."""
        preparers: dict[str, Callable[[Any, Writer], Prepared]] = {
            "add": self._prepare_add, "replace": self._prepare_replace,
            "remove": self._prepare_remove, "consolidate": self._prepare_consolidate,
            "seed": self._prepare_seed}
        prepare = preparers.get(method)
        if prepare is None:
            raise errors.invalid_input(f"unknown memory write {method!r}")
        w = writer_of(write)
        prep = prepare(input, w)
        policy, key = approval.resolve_policy(self.config(), prep.payload)
        return ApprovalRequest(prep.payload, approval.reason(prep.payload), w.write, policy, key)

    def _write(self, prepare: Callable[[Any, Writer], Prepared], arg: Any,
               write: Any) -> dict[str, Any]:
        w = writer_of(write)  # WRITE_REQUIRES_AGENT before anything else
        prep = prepare(arg, w)
        return self._approve_and_commit(prep.payload, w, prep.apply, prep.op)

    def _prepare_add(self, input: Any, w: Writer) -> Prepared:
        spec = self._new_entry(input, w)
        state = self.store.checked()
        budgets.check(state.usage, self.config(state), spec.track, spec.scope, spec.size)
        self._ensure_writable(state, [], [spec])
        payload = {"action": "add", "track": spec.track, "scope": spec.scope,
                   "text": spec.text, "source": spec.source}

        def apply(txn: Transaction, decision: Decision) -> dict[str, Any]:
            st = txn.state
            budgets.check(st.usage, self.config(st), spec.track, spec.scope, spec.size)
            entry = self._make(spec, w, _created_at(st))
            txn.commit(puts=[entry], rows=[row(
                "add", track=entry.track, scope=entry.scope, entry_id=entry.id, text=entry.text,
                outcome=decision.label, source=entry.source, session_id=w.session_id)],
                subject=f"add {entry.track}/{entry.scope}: {entry.text}", body=entry.text)
            return {"entry": self._protocol(entry),
                    "usage": self._usage(txn.state, entry.track, entry.scope)}

        return Prepared(payload, apply, Replayable("add", input))

    def _prepare_replace(self, input: Any, w: Writer) -> Prepared:
        inp = _input(input)
        track, scope = _layer(inp)
        text = validate_text(inp.get("text"))
        raw_tags = inp.get("tags")
        tags = None if raw_tags is None else tuple(normalize_tags(raw_tags))
        source = _source(inp)
        match = _match(inp.get("match"))
        keys = _target_keys(inp, w, scope)
        state = self.store.checked()
        target = matching.resolve(state.layer(track, scope), track, scope, match, *keys)
        budgets.check(state.usage, self.config(state), track, scope,
                      utf16_len(text) - target.size)
        self._ensure_writable(state, [target])
        payload = {"action": "replace", "track": track, "scope": scope,
                   "text": f"from:\n{target.text}\n\nto:\n{text}", "source": source}

        def apply(txn: Transaction, decision: Decision) -> dict[str, Any]:
            st = txn.state
            current = self._reresolve(st, track, scope, match, keys, target)
            budgets.check(st.usage, self.config(st), track, scope,
                          utf16_len(text) - current.size)
            new = current.revised(
                text=text, tags=current.tags if tags is None else tags,
                version=current.version + 1, updated_at=max(now_ms(), current.updated_at),
                session_id=w.session_id)
            previous = self._protocol(current)
            txn.commit(puts=[new], rows=[row(
                "replace", track=track, scope=scope, entry_id=new.id, text=text,
                outcome=decision.label, source=new.source, session_id=w.session_id)],
                subject=f"replace {track}/{scope}: {text}",
                body=f"from:\n{current.text}\n\nto:\n{text}")
            return {"previous": previous, "entry": self._protocol(new),
                    "usage": self._usage(txn.state, track, scope)}

        return Prepared(payload, apply, Replayable("replace", input, [target], match))

    def _prepare_remove(self, input: Any, w: Writer) -> Prepared:
        inp = _input(input)
        track, scope = _layer(inp)
        match = _match(inp.get("match"))
        keys = _target_keys(inp, w, scope)
        state = self.store.checked()
        target = matching.resolve(state.layer(track, scope), track, scope, match, *keys)
        self._ensure_writable(state, [target])
        payload = {"action": "remove", "track": track, "scope": scope, "text": target.text,
                   "source": target.source}

        def apply(txn: Transaction, decision: Decision) -> dict[str, Any]:
            current = self._reresolve(txn.state, track, scope, match, keys, target)
            removed = self._protocol(current)
            txn.commit(deletes=[current], rows=[row(
                "remove", track=track, scope=scope, entry_id=current.id, text=current.text,
                outcome=decision.label, source=current.source, session_id=w.session_id)],
                subject=f"remove {track}/{scope}: {current.text}", body=current.text)
            return {"entry": removed, "usage": self._usage(txn.state, track, scope)}

        return Prepared(payload, apply, Replayable("remove", input, [target], match))

    def _prepare_consolidate(self, input: Any, w: Writer) -> Prepared:
        inp = _input(input)
        track, scope = _layer(inp)
        text = validate_text(inp.get("text"))
        tags = tuple(normalize_tags(inp.get("tags")))
        matches = inp.get("matches")
        if not isinstance(matches, list) or not 1 <= len(matches) <= MAX_CONSOLIDATE or any(
                not isinstance(m, str) or not m for m in matches):
            raise errors.invalid_input(
                f"consolidate matches must be an array of 1..{MAX_CONSOLIDATE} non-empty strings")
        spec = self._new_entry({**inp, "tags": list(tags)}, w)
        keys = _target_keys(inp, w, scope)
        state = self.store.checked()
        targets = [matching.resolve(state.layer(track, scope), track, scope, m, *keys)
                   for m in matches]
        seen: dict[str, int] = {}
        for i, t in enumerate(targets):
            if t.id in seen:
                raise errors.invalid_input(
                    f"consolidate matches {seen[t.id] + 1} and {i + 1} find the same entry; "
                    "give each entry exactly one match")
            seen[t.id] = i
        budgets.check(state.usage, self.config(state), track, scope,
                      utf16_len(text) - sum(t.size for t in targets))
        self._ensure_writable(state, targets, [spec])
        plan = "\n".join([part for m, t in zip(matches, targets, strict=False)
                          for part in (f"remove: {m}", excerpt(t.text, CONSOLIDATE_EXCERPT))]
                         + [f"new text: {text}"])
        payload = {"action": "consolidate", "track": track, "scope": scope, "text": plan,
                   "source": spec.source}

        def apply(txn: Transaction, decision: Decision) -> dict[str, Any]:
            st = txn.state
            current = [self._reresolve(st, track, scope, m, keys, t)
                       for m, t in zip(matches, targets, strict=False)]
            budgets.check(st.usage, self.config(st), track, scope,
                          utf16_len(text) - sum(t.size for t in current))
            entry = self._make(spec, w, _created_at(st))
            removed = [self._protocol(t) for t in current]
            rows = [row("consolidate-remove", track=track, scope=scope, entry_id=t.id,
                        text=t.text, outcome=decision.label, source=t.source,
                        session_id=w.session_id) for t in current]
            rows.append(row("consolidate-add", track=track, scope=scope, entry_id=entry.id,
                            text=entry.text, outcome=decision.label, source=entry.source,
                            session_id=w.session_id))
            body = "\n\n".join([f"removed:\n{t.text}" for t in current] + [f"new:\n{text}"])
            txn.commit(puts=[entry], deletes=current, rows=rows, body=body,
                       subject=f"consolidate {track}/{scope}: {len(current)} entries into "
                               f"{one_line(text, 40)}")
            return {"removed": removed, "entry": self._protocol(entry),
                    "usage": self._usage(txn.state, track, scope)}

        return Prepared(payload, apply, Replayable(
            "consolidate", input, targets, ", ".join(matches)))

    def _prepare_seed(self, inputs: Any, w: Writer, verb: str = "seed") -> Prepared:
        if not isinstance(inputs, list) or not inputs:
            raise errors.invalid_input("seed requires a non-empty entry list")
        check_batch(len(inputs), verb)
        specs = [self._new_entry(i, w) for i in inputs]
        additions: dict[tuple[str, str], int] = {}
        for s in specs:
            additions[(s.track, s.scope)] = additions.get((s.track, s.scope), 0) + s.size
        state = self.store.checked()
        budgets.check_groups(state.usage, self.config(state), additions)
        self._ensure_writable(state, [], specs)
        summary = "\n".join(f"{s.track}/{s.scope}: {s.text}" for s in specs)
        payload = {"action": "seed", "track": "batch", "scope": "batch", "text": summary,
                   "count": len(specs)}

        def apply(txn: Transaction, decision: Decision) -> dict[str, Any]:
            st = txn.state
            budgets.check_groups(st.usage, self.config(st), additions)
            # consecutive milliseconds: listings (createdAt, id) keep the batch's order
            ts = _created_at(st, len(specs))
            made = [self._make(s, w, ts + i) for i, s in enumerate(specs)]
            rows: list[AuditRow] = [row("seed", text=summary, outcome=decision.label,
                                        source=DEFAULT_SOURCE, session_id=w.session_id)]
            rows += [row("add", track=e.track, scope=e.scope, entry_id=e.id, text=e.text,
                         outcome=decision.label, source=e.source, session_id=w.session_id)
                     for e in made]
            txn.commit(puts=made, rows=rows, subject=f"{verb} {len(made)} entries",
                       body=summary)
            return {"added": len(made), "entries": [self._protocol(e) for e in made]}

        return Prepared(payload, apply, Replayable("seed", inputs, verb=verb))

    # ------------------------------------------------------------ reads

    def query(self, filter: Any = None, opts: Any = None) -> dict[str, Any]:
        """Search entries; bumps the recall counters of the returned page."""
        filt = _input(filter or {}, "query filter")
        opts = _input(opts or {}, "query options")
        state = self.store.checked()
        cfg = self.config(state)
        recall = self.store.recall
        recall.refresh()
        workspace_key: str | None = None
        agent_key: str | None = None
        if isinstance(opts.get("session"), dict):
            _, workspace_key, agent_key = session_keys(opts["session"])
        if isinstance(opts.get("workspaceKey"), str):
            workspace_key = opts["workspaceKey"]
        if isinstance(opts.get("agentKey"), str):
            agent_key = opts["agentKey"]
        track, scope = filt.get("track"), filt.get("scope")
        pool = state.layer(track, scope) if isinstance(track, str) and isinstance(scope, str) \
            else state.entries.values()
        page, total = query_mod.run(
            pool, track=track, scope=scope, text=filt.get("text"),
            workspace_key=workspace_key, agent_key=agent_key,
            limit=query_mod.page_limit(filt.get("limit"), cfg.max_entries_per_query),
            recall_count=recall.count,
        )
        result = [self._protocol(e) for e in page]
        recall.bump([e.id for e in page], now_ms())
        if "sessionId" in opts:
            sid = opts["sessionId"]
            text = filt.get("text")
            self.store.append_ledger([row(
                "recalled", track=track if isinstance(track, str) else None,
                scope=scope if isinstance(scope, str) else None,
                text=text if isinstance(text, str) else None, outcome="ok",
                source=DEFAULT_SOURCE, session_id=sid if isinstance(sid, str) else None)])
        return {"entries": result, "total": total, "truncated": total > len(page)}

    def budgets(self) -> list[dict[str, Any]]:
        state = self.store.checked()
        return budgets.report(state.usage, self.config(state))

    def list_entries(self) -> list[dict[str, Any]]:
        """Every entry by (createdAt, id); no recall bump."""
        state = self.store.checked()
        self.store.recall.refresh()
        return [self._protocol(e) for e in state.ordered()]

    listEntries = list_entries

    def audit_list(self, limit: Any = AUDIT_LIMIT_DEFAULT) -> list[AuditRow]:
        """The newest audit rows first: commits (writes, denials) and the read-side ledger."""
        n = query_mod.positive_int(limit) or AUDIT_LIMIT_DEFAULT
        return self.store.audit(min(n, AUDIT_LIMIT_MAX))

    auditList = audit_list

    def export(self) -> dict[str, Any]:
        """The ``memory-export-v1`` envelope of every entry (read-only, nothing recorded)."""
        state = self.store.checked()
        self.store.recall.refresh()
        return envelope.build([self._protocol(e) for e in state.ordered()],
                              budgets.report(state.usage, self.config(state)))

    def snapshot(self, session: Any, *, language: str | None = None) -> str:
        """The frozen snapshot for a session: rendered once per session id, recorded as a
        ``snapshot`` audit row byte-identical to the returned text."""
        if not isinstance(session, dict):
            return ""
        sid, workspace_key, agent_key = session_keys(session)
        if sid is not None and sid in self._snapshots:
            return self._snapshots[sid]
        state = self.store.checked()
        shown = [e for e in state.ordered() if visible(e, workspace_key, agent_key)]
        text = snapshot.render(shown, state.usage, self.config(state), language)
        self.store.append_ledger([row("snapshot", text=text, outcome="ok", source=DEFAULT_SOURCE,
                                      session_id=sid)])
        if sid is not None:
            self._snapshots[sid] = text
        return text


def write_context(*, session_id: str | None = None, cwd: str | None = None,
                  agent: str | None = None, gate: Gate | None = None) -> dict[str, Any]:
    """Build a protocol write context: ``{"agent": {"session": {"id", "header": {...}}}}``."""
    header: dict[str, Any] = {}
    if cwd is not None:
        header["cwd"] = cwd
    if agent is not None:
        header["agentPreset"] = agent
    ctx: dict[str, Any] = {"agent": {"session": {"id": session_id, "header": header}}}
    if gate is not None:
        ctx["gate"] = gate
    return ctx


__all__ = ["Provider", "Writer", "session_keys", "write_context", "writer_of"]
