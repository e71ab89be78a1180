"""The protocol core: the dsh-memory-protocol/v1 Provider face over a filemem store.

Every write follows one pipeline, whatever the operation (each is described once, in
:mod:`filemem.ops`)::

    agent check -> validate -> resolve target(s) in the writer's visible set -> budget
    pre-check -> the store's checks on the new texts (a blocking finding: INVALID_INPUT,
    nobody asked; see :mod:`filemem.rules.findings`) -> approval (no lock held, the findings
    shown) -> store lock -> re-resolve, refuse unless it is the approved target (same id and
    version) -> budget re-check -> one commit

A denied write leaves an ``<action>-denied`` row; a write that fails after approval leaves
an ``<action>-failed`` row; both are commits that change no entry, so ``git log`` is the
whole audit trail. This module knows entries and rules, not files or git.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TypeVar, cast

from filemem import errors, location
from filemem.config import Config
from filemem.model import DEFAULT_SOURCE, Entry, check_storable, now_ms, validate_object, visible
from filemem.rules import budgets, envelope
from filemem.rules import query as query_mod
from filemem.session import Writer, session_keys, write_context, writer_of
from filemem.store.auditlog import row
from filemem.store.core import Store
from filemem.store.state import State
from filemem.types import (
    AddResult,
    AuditRow,
    ConsolidateResult,
    Payload,
    ProtocolEntry,
    QueryResult,
    ReplaceResult,
    SeedResult,
    Usage,
)

if TYPE_CHECKING:
    from filemem.approval import ApprovalRequest, Decision, Gate
    from filemem.ops import Core, Operation, Prepared
    from filemem.rules.findings import Finding
    from filemem.store.transaction import Transaction

T = TypeVar("T")


class TrustInput:
    """``policy_source=TRUST_INPUT``: the caller is the owner's own program, so its
    ``input.source`` picks ``source:<name>`` policies."""


TRUST_INPUT: Final = TrustInput()
AUDIT_LIMIT_DEFAULT = 100
AUDIT_LIMIT_MAX = 10_000


class Replay(NamedTuple):
    """An owner approving a pending write: who approves, what the targets were."""

    pending_id: str
    approver: Gate
    targets: list[tuple[str, int]]


_REPLAY: ContextVar[Replay | None] = ContextVar("filemem_replay", default=None)


class Provider:
    """A dsh-memory-protocol/v1 provider backed by a filemem store.

    Method names follow Python style; ``listEntries`` and ``auditList`` are also available
    under the protocol's own names. Inputs and results are protocol-shaped dicts.
    """

    def __init__(self, store: Store, *, gate: Gate | None = None, budgets: Any = None,
                 write_policy: str | None = None, write_policies: Any = None,
                 stage_pending: bool = True,
                 policy_source: str | TrustInput | None = TRUST_INPUT,
                 reveal_matches: bool = False) -> None:
        self.store = store
        self.gate = gate
        self.stage_pending = stage_pending
        # which source `source:<name>` policies see: TRUST_INPUT (the caller is the owner's
        # own program), or the name the owner started a transport with (None: no source)
        self.policy_source = policy_source
        self._overrides = {"budgets": budgets, "write_policy": write_policy,
                           "write_policies": write_policies}
        Config().with_overrides(**self._overrides)  # validate now: fail at open, not at use
        self._config_for: tuple[Config, Config] | None = None
        self._snapshots: dict[str, str] = {}
        # ENTRY_NOT_FOUND names where else a match is: in the layers the writer sees, or,
        # for the owner's own tools, anywhere (another workspace, another agent's layer)
        self._reveal = reveal_matches

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

    def _policy_source(self, payload: Payload) -> str | None:
        """The source ``writePolicies`` overrides are matched against: the write's own when
        the caller is the owner's program, else only what the transport was started with."""
        if isinstance(self.policy_source, TrustInput):
            return payload.get("source")
        return self.policy_source

    def _protocol(self, e: Entry) -> ProtocolEntry:
        return self.store.recall.protocol(e)

    # ------------------------------------------------------------ the write pipeline
    # The write side (the operations, approval, the checks) is imported on a process's first
    # write or plan: a cold `filemem query` or `list` is ~5% quicker without it.

    @functools.cached_property
    def _core(self) -> Core:
        from filemem.ops import Core

        return Core(self.store, self.config, self._reveal)

    def _write(self, name: str, arg: Any, write: Any) -> Any:
        from filemem.ops import operation

        w = writer_of(write)  # WRITE_REQUIRES_AGENT before anything else
        op = operation(name)
        return self._approve_and_commit(op, op.prepare(self._core, arg, w), w, arg)

    def _approve_and_commit(self, op: Operation, prep: Prepared, w: Writer, arg: Any) -> Any:
        """Ask (no lock held), then run ``prep.apply`` under the lock; audit every outcome.

        Under ``ask`` with nobody to ask, the write is staged as a pending approval."""
        from filemem import approval

        payload = prep.payload
        config = self.config(prep.state)  # one view of HEAD for the checks and the policy
        found = self._checked(prep, config)  # a blocking finding refuses before anyone is asked
        replay = _REPLAY.get()
        gate = self.gate
        if replay is not None:  # the owner approves a staged write: same targets, or refuse
            if [(t.id, t.version) for t in prep.targets] != replay.targets:
                raise errors.ProtocolError(
                    errors.ENTRY_NOT_FOUND,
                    f"the target of pending approval {replay.pending_id} in {payload['track']}/"
                    f"{payload['scope']} changed since it was staged; nothing was changed",
                    {"track": payload["track"], "scope": payload["scope"], "match": prep.match})
            gate = replay.approver
            w = Writer(w.write, w.session_id, w.workspace_key, w.agent_key)  # no write gate
        decision = approval.decide(config, payload, op.title(payload), w.write,
                                   policy_source=self._policy_source(payload),
                                   call_gate=w.gate, provider_gate=gate, findings=found)
        if replay is not None and decision.allowed and \
                approval.gate_name(replay.approver) not in decision.label:
            # allowed by the policy alone (writePolicy auto): the row still names the
            # pending approval it settles, so a killed approve is never run twice
            decision = decision._replace(label=f"{decision.label[:-1]}; approved by "
                                               f"{approval.gate_name(replay.approver)})")
        if not decision.allowed:
            action = payload["action"]
            if (decision.outcome == "unavailable" and decision.policy == "ask"
                    and self.stage_pending and replay is None):
                pid = self._stage(op, prep, w, arg, decision)
                why = f" ({decision.detail})" if decision.detail else ""
                raise errors.write_denied(
                    "pending", f"nobody could be asked{why}, so the write was staged as "
                    f"pending approval {pid}; the owner can run "
                    f"`{location.command(self.store.root, 'approve', pid)}`",
                    pendingId=pid)
            self._record(f"{action}-denied", payload, w, decision.label,
                         f"{action}-denied {payload['track']}/{payload['scope']} "
                         f"({decision.outcome}): {payload['text']}")
            if decision.policy == "off":
                raise errors.PolicyRefused(decision.policy_key)
            raise errors.write_denied(decision.outcome, decision.detail)

        def attempt(txn: Transaction) -> Any:
            try:
                return prep.apply(txn, decision)
            except errors.ProtocolError as exc:
                label = f"{decision.label}; then failed: {exc.code}"
                self._record_in(txn, f"{payload['action']}-failed", payload, w, label,
                                f"{payload['action']}-failed {payload['track']}/"
                                f"{payload['scope']} ({exc.code}): {payload['text']}",
                                exc.message)
                raise

        return self.store.retrying(attempt)

    def _checked(self, prep: Prepared, config: Config) -> list[Finding]:
        """The store's checks over the texts the write would store: INVALID_INPUT
        (``details.reason: checks``) for a blocking finding, else what to show the person."""
        from filemem.rules import findings as checks

        found = checks.scan_all(prep.texts, config)
        refusal = checks.refused(found)
        if refusal is not None:
            raise refusal
        return found

    def _stage(self, op: Operation, prep: Prepared, w: Writer, arg: Any,
               decision: Decision) -> str:
        """Save the write for the owner and leave an ``<action>-pending`` row."""
        payload = prep.payload
        pid = self.store.stage({
            "createdAt": now_ms(), "action": payload["action"], "payload": payload,
            "method": op.name, "arg": arg, "write": w.write,
            "targets": [[t.id, t.version] for t in prep.targets],
        })
        why = f"; {decision.detail}" if decision.detail else ""
        label = f"pending ({decision.label.split(' (', 1)[1][:-1]}{why}; staged as {pid})"
        self._record(f"{payload['action']}-pending", payload, w, label,
                     f"{payload['action']}-pending {payload['track']}/{payload['scope']} "
                     f"(staged as {pid}): {payload['text']}")
        return pid

    def _run_pending(self, record: dict[str, Any], approver: Gate) -> Any:
        """Run a staged write again through the full pipeline, approved by ``approver``
        (re-resolve, budget re-check; refused if a target changed since it was staged).
        For the owner (:mod:`filemem.owner`); never exposed to agents."""
        token = _REPLAY.set(Replay(str(record["id"]), approver,
                                   [(str(i), int(v)) for i, v in record.get("targets", [])]))
        try:
            # records staged before `import` was an operation of its own: seed + verb
            name = "import" if record.get("verb") == "import" else str(record["method"])
            return self._write(name, record["arg"], record["write"])
        finally:
            _REPLAY.reset(token)

    def _record(self, action: str, payload: Payload, w: Writer, label: str,
                subject: str) -> None:
        self.store.record([self._row(action, payload, w, label)], subject=subject,
                          body=payload["text"])

    @staticmethod
    def _row(action: str, payload: Payload, w: Writer, label: str) -> AuditRow:
        return row(action, track=payload["track"], scope=payload["scope"], text=payload["text"],
                   outcome=label, source=payload.get("source") or DEFAULT_SOURCE,
                   session_id=w.session_id)

    def _record_in(self, txn: Transaction, action: str, payload: Payload, w: Writer,
                   label: str, subject: str, note: str | None = None) -> None:
        """An audit-only commit in ``txn``: no entry changes, one row saying what failed."""
        body = payload["text"] + (f"\n\n{note}" if note else "")
        txn.commit(rows=[self._row(action, payload, w, label)], subject=subject, body=body)

    # ------------------------------------------------------------ writes

    def add(self, input: Any, write: Any) -> AddResult:
        return cast(AddResult, self._write("add", input, write))

    def replace(self, input: Any, write: Any) -> ReplaceResult:
        return cast(ReplaceResult, self._write("replace", input, write))

    def remove(self, input: Any, write: Any) -> AddResult:
        return cast(AddResult, self._write("remove", input, write))

    def consolidate(self, input: Any, write: Any) -> ConsolidateResult:
        return cast(ConsolidateResult, self._write("consolidate", input, write))

    def seed(self, inputs: Any, write: Any) -> SeedResult:
        return cast(SeedResult, self._write("seed", inputs, write))

    def import_entries(self, inputs: Any, write: Any) -> SeedResult:
        """:meth:`seed` for entries converted from another tool's memory (an adapter's
        output): the same rules, recorded and described as an import."""
        return cast(SeedResult, self._write("import", inputs, write))

    def import_envelope(self, envelope_doc: Any, write: Any) -> SeedResult:
        """Import a ``memory-export-v1`` envelope: one approval, one commit, new ids."""
        writer_of(write)  # WRITE_REQUIRES_AGENT before the document is looked at
        entries = envelope.validate(envelope_doc)
        return self.import_entries(envelope.seed_inputs(entries), write)

    def plan(self, method: str, input: Any, write: Any) -> ApprovalRequest:
        """A dry run up to the approval step: what a person would be asked to approve for
        this write (and under which policy), or the ProtocolError it would fail with first.
        Nothing is written or recorded. For surfaces that must show the question before
        the call that writes (MCP's input-required round trip)."""
        from filemem import approval
        from filemem.approval import ApprovalRequest
        from filemem.ops import operation

        op = operation(method)
        w = writer_of(write)
        prep = op.prepare(self._core, input, w)
        config = self.config()
        found = self._checked(prep, config)
        policy, key = approval.resolve_policy(config, prep.payload,
                                              self._policy_source(prep.payload))
        return ApprovalRequest(prep.payload, approval.reason(prep.payload), w.write, policy,
                               key, op.title(prep.payload), tuple(found))

    # ------------------------------------------------------------ reads

    def query(self, filter: Any = None, opts: Any = None) -> QueryResult:
        """Search entries; bumps the recall counters of the returned page."""
        filt = validate_object(filter or {}, "query filter")
        opts = validate_object(opts or {}, "query options")
        for what, value in (("filter.text", filt.get("text")), ("filter.track", filt.get("track")),
                            ("filter.scope", filt.get("scope")),
                            ("opts.sessionId", opts.get("sessionId"))):
            if isinstance(value, str):  # before the recall bump: a row with it cannot be kept
                check_storable(value, what)
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
        pool: Iterable[Entry]
        if isinstance(track, str) and isinstance(scope, str):
            pool, index = state.layer(track, scope), None
        else:
            pool, index = state.entries.values(), state.text_index()
        page, total = query_mod.run(
            pool, track=track, scope=scope, text=filt.get("text"),
            workspace_key=workspace_key, agent_key=agent_key,
            limit=query_mod.page_limit(filt.get("limit"), cfg.max_entries_per_query),
            recall_count=recall.count, index=index,
        )
        result = [self._protocol(e) for e in page]
        self.store.bump_recall([e.id for e in page], now_ms())
        if "sessionId" in opts:
            sid = opts["sessionId"]
            text = filt.get("text")
            self.store.append_ledger([row(
                "recalled", track=track if isinstance(track, str) else None,
                scope=scope if isinstance(scope, str) else None,
                text=text if isinstance(text, str) else None, outcome="ok",
                source=DEFAULT_SOURCE, session_id=sid if isinstance(sid, str) else None)])
        return {"entries": result, "total": total, "truncated": total > len(page)}

    def budgets(self) -> list[Usage]:
        state = self.store.checked()
        return budgets.report(state.usage, self.config(state))

    def list_entries(self) -> list[ProtocolEntry]:
        """Every entry by (createdAt, id); no recall bump."""
        state = self.store.checked()
        self.store.recall.refresh()
        return [self._protocol(e) for e in state.ordered()]

    listEntries = list_entries

    def entry_metadata(self) -> dict[str, dict[str, Any]]:
        """Not the protocol's: the ``x-<name>`` keys other tools' data is kept under in
        entry files (an adapter's round-trip metadata, see ``filemem.adapters``), by entry
        id, for the entries that have any. Read-only, like :meth:`list_entries`."""
        state = self.store.checked()
        return {e.id: e.metadata() for e in state.ordered() if e.meta}

    def audit_list(self, limit: Any = AUDIT_LIMIT_DEFAULT) -> list[AuditRow]:
        """The newest audit rows first: commits (writes, denials) and the read-side ledger."""
        n = query_mod.positive_int(limit) or AUDIT_LIMIT_DEFAULT
        return self.store.audit(min(n, AUDIT_LIMIT_MAX))

    auditList = audit_list

    def audit_list_json(self, limit: Any = AUDIT_LIMIT_DEFAULT) -> str:
        """:meth:`audit_list` as JSON text: exactly ``json.dumps(rows, ensure_ascii=False,
        separators=(",", ":"))``, joined from each row's encoding, made once per row (rows
        never change; a redaction makes new ones), for surfaces that send the list as JSON."""
        n = query_mod.positive_int(limit) or AUDIT_LIMIT_DEFAULT
        return self.store.trail.newest_json(min(n, AUDIT_LIMIT_MAX))

    def export(self) -> dict[str, Any]:
        """The ``memory-export-v1`` envelope of every entry (read-only, nothing recorded)."""
        state = self.store.checked()
        self.store.recall.refresh()
        return envelope.build([self._protocol(e) for e in state.ordered()],
                              budgets.report(state.usage, self.config(state)))

    def snapshot(self, session: Any, *, language: str | None = None,
                 say_empty: bool = False, tools: Any = None) -> str:
        """The frozen snapshot for a session: rendered once per session id, recorded as a
        ``snapshot`` audit row byte-identical to the returned text. Its header names
        ``tools``, the tools the reader changes memory with (1..8 names; by default the
        protocol's write operations). With nothing visible it is ``''`` (the protocol's
        face), or with ``say_empty`` (what filemem's own surfaces show a person or a
        model) a sentence saying there are no memories yet."""
        from filemem.rules import snapshot

        names = snapshot.tool_names(tools)  # INVALID_INPUT before anything is rendered
        if not isinstance(session, dict):
            return ""
        sid, workspace_key, agent_key = session_keys(session)
        if sid is not None and sid in self._snapshots:
            return self._snapshots[sid]
        state = self.store.checked()
        shown = [e for e in state.ordered() if visible(e, workspace_key, agent_key)]
        text = snapshot.render(shown, state.usage, self.config(state), language, names,
                               say_empty=say_empty)
        self.store.append_ledger([row("snapshot", text=text, outcome="ok", source=DEFAULT_SOURCE,
                                      session_id=sid)])
        if sid is not None:
            self._snapshots[sid] = text
        return text



__all__ = ["Provider", "Writer", "session_keys", "write_context", "writer_of"]
