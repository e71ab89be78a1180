"""How a person approves a write from an MCP client.

The elicitation form they answer, and the provider's gate: it hands each approval request to
the approver of the tool call that made it - one that asks now (handshake era), one that
answers only for the payload the person was shown (2026-07-28), or one that refuses, so the
provider stages the write as a pending approval.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any, Final, Literal

import anyio.from_thread
from mcp.server.mcpserver import AcceptedElicitation, CancelledElicitation, Context
from pydantic import BaseModel, Field

from filemem import approval
from filemem.approval import ApprovalRequest
from filemem.types import Payload

GATE_NAME: Final = "MCP elicitation"

# ---------------------------------------------------------------- what the human answers


# the elicitation form: one explicit choice, no default, so a stray accept approves
# nothing by accident. The docstring is the form's description, which a client may show
class Approval(BaseModel):
    """Approve or decline this memory write."""

    decision: Literal["approve", "decline"] = Field(
        title="Write this to memory?",
        description="approve: write exactly what is shown; decline: refuse, nothing is written",
    )


def outcome(answer: Any) -> str:
    """An elicitation answer in the protocol's outcome vocabulary."""
    if isinstance(answer, AcceptedElicitation):
        data = answer.data
        if isinstance(data, Approval) and data.decision == "approve":
            return approval.ALLOWED
        return "rejected"
    if isinstance(answer, CancelledElicitation):
        return "cancelled"
    return "rejected"  # declined


# ---------------------------------------------------------------- the approval gate

Approver = Callable[[ApprovalRequest], str]
APPROVER: contextvars.ContextVar[Approver | None] = contextvars.ContextVar(
    "filemem_mcp_approver", default=None)


class ElicitationGate:
    """The provider's gate: hands each request to the approver of the tool call that made
    it (set per call, in the worker thread), so concurrent calls never answer each other."""

    name = GATE_NAME

    def __call__(self, request: ApprovalRequest) -> str:
        approver = APPROVER.get()
        if approver is None:
            raise RuntimeError("no MCP tool call is waiting for this approval")
        return approver(request)


class Refuse:
    """An approver that cannot answer: the gate fails closed and the provider stages the
    write as a pending approval, recording why."""

    def __init__(self, why: str) -> None:
        self.why = why

    def __call__(self, request: ApprovalRequest) -> str:
        raise RuntimeError(self.why)


class Bound:
    """2026-07-28: answers with the person's decision, but only for the payload they saw."""

    def __init__(self, shown: Payload, outcome: str) -> None:
        self.shown = shown
        self.outcome = outcome

    def __call__(self, request: ApprovalRequest) -> str:
        if request.payload != self.shown:
            raise RuntimeError("the memory changed after the person answered, so what would "
                               "be written is no longer what they were shown")
        return self.outcome


class AskInCall:
    """2025-11-25 and older: ask the person now, from the provider's worker thread, with
    the very request the pipeline is about to act on."""

    def __init__(self, ctx: Context[Any, Any], message: Callable[[ApprovalRequest], str]):
        self.ctx = ctx
        self.message = message

    def __call__(self, request: ApprovalRequest) -> str:
        answer = anyio.from_thread.run(self.ctx.elicit, self.message(request), Approval)
        return outcome(answer)


