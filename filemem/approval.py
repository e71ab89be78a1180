"""The approval gate: write policies, who is asked, and the outcome label the audit records.

The gate lives in the provider: every write goes through :func:`decide`, whatever surface
it came from. The policy is configuration (``filemem.yaml``); nothing a model sends can
change it. Under ``ask`` the question goes to a transport: a per-call ``write["gate"]``
(the "write gate"), else the gate the provider was opened with (a Python callback, the CLI's
terminal prompt, the bridge host, MCP elicitation). With no transport, nobody can approve and
the write fails closed (``unavailable``).

Approve what you see: the payload carries the full change (the new text; for a replace the
``from:`` and ``to:`` texts; for a remove the removed text; for a consolidate every target
and the new text; for a seed every entry).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

from filemem import shown
from filemem.config import Config
from filemem.rules import findings as checks
from filemem.rules.findings import Finding
from filemem.types import Payload

ALLOWED: Final = "allowed-once"
REQUEST_MARKER: Final = "[dsh-memento]"


class ApprovalRequest(NamedTuple):
    """What a person is asked to approve."""

    payload: Payload  # action, track, scope, text, source (not for seed), count (seed)
    reason: str  # the protocol's one-string form: "[dsh-memento] add user/workspace ..."
    write: dict[str, Any]  # the write context (agent session) the request came with
    policy: str
    policy_key: str | None  # the writePolicies key that chose the policy, if any
    title: str = ""  # the operation's first line for a person: "Add a memory entry to ..."
    findings: tuple[Finding, ...] = ()  # what the store's checks found (none blocking)

    @property
    def action(self) -> str:
        return str(self.payload["action"])

    @property
    def text(self) -> str:
        return str(self.payload["text"])


Gate = Callable[[ApprovalRequest], str]


class Decision(NamedTuple):
    outcome: str
    label: str  # the audit row's outcome: names what decided
    detail: str | None = None
    policy: str = "ask"  # the policy that applied
    policy_key: str | None = None  # the writePolicies key that chose it (None: writePolicy)

    @property
    def allowed(self) -> bool:
        return self.outcome == ALLOWED


def reason(payload: Payload) -> str:
    count = f" ({payload['count']} entries)" if payload.get("count") is not None else ""
    source = f" [source:{payload['source']}]" if payload.get("source") is not None else ""
    return (f"{REQUEST_MARKER} {payload['action']}{count} {payload['track']}/{payload['scope']}"
            f"{source}\n{payload['text']}")


def resolve_policy(config: Config, payload: Payload, source: str | None
                   ) -> tuple[str, str | None]:
    """``source:<name>`` first, then ``<track>/<scope>``, then the global policy. ``source``
    is the one the transport vouches for (see :class:`~filemem.provider.Provider`), never
    simply what the caller wrote in its input: a policy must not be chosen by the party it
    governs."""
    if source is not None:
        key = f"source:{source}"
        if key in config.write_policies:
            return config.write_policies[key], key
    key = f"{payload['track']}/{payload['scope']}"
    if key in config.write_policies:
        return config.write_policies[key], key
    return config.write_policy, None


def gate_name(gate: Any) -> str:
    return str(getattr(gate, "name", None) or "python gate")


def decide(config: Config, payload: Payload, title: str, write: dict[str, Any], *,
           policy_source: str | None, call_gate: Gate | None,
           provider_gate: Gate | None, findings: Sequence[Finding] = ()) -> Decision:
    """Apply the policy (``source:`` overrides matched against ``policy_source``) and, under
    ``ask``, ask the transport: the call's own write gate first, else the provider's.
    Never raises."""
    policy, key = resolve_policy(config, payload, policy_source)
    which = f"writePolicy {policy}" + (f" for {key}" if key else "")
    if policy == "auto":
        return Decision(ALLOWED, f"{ALLOWED} (via approval, {which})", policy=policy)
    if policy == "off":
        return Decision("rejected", f"rejected (via approval, {which})", policy=policy,
                        policy_key=key)
    request = ApprovalRequest(payload, reason(payload), write, policy, key, title,
                              tuple(findings))
    if call_gate is not None:
        via, gate = f"via write gate, {which}", call_gate
        failed = via
    elif provider_gate is not None:
        via = f"via approval, {which}; answered by {gate_name(provider_gate)}"
        failed = f"via approval, {which}; asking through {gate_name(provider_gate)} failed"
        gate = provider_gate
    else:
        return Decision("unavailable", f"unavailable (via approval, {which}; no approver)",
                        "no person can be asked to approve this write")
    try:
        outcome = gate(request)
    except Exception as exc:  # a broken transport fails closed, and says why
        return Decision("unavailable", f"unavailable ({failed})", f"approval ask failed: {exc}")
    if not isinstance(outcome, str) or not outcome:
        outcome = "unavailable"
    return Decision(outcome, f"{outcome} ({via})")


def describe(request: ApprovalRequest) -> str:
    """The request as a person reads it in a prompt: everything that would be written, the
    text framed by :func:`filemem.shown.block` (control characters as visible escapes, every
    line of it behind a bar, so it cannot imitate the lines around it), then a warning line
    if it holds hidden characters and one line per finding of the store's checks."""
    p = request.payload
    action = p["action"]
    who = request.write.get("agent") if isinstance(request.write, dict) else None
    session = who.get("session") if isinstance(who, dict) else None
    session_id = session.get("id") if isinstance(session, dict) else None
    lines = [shown.visible(request.title or f"{action} in {p['track']}/{p['scope']}:")]
    facts = []
    if p.get("source") is not None:
        facts.append(f"source {p['source']}")
    if session_id is not None:
        facts.append(f"session {session_id}")
    facts.append(f"policy {request.policy}" + (f" ({request.policy_key})"
                                               if request.policy_key else ""))
    lines.append("  " + shown.visible(", ".join(facts)))
    lines += shown.block(str(p["text"]))
    warning = shown.warning(str(p["text"]))
    if warning:
        lines.append(warning)
    lines += [shown.visible(line) for line in checks.describe(request.findings)]
    return "\n".join(lines)
