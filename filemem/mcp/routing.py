"""Approval routing for the write tools: the resolvers that run before a write's body
(roots, session, plan, ask) and the body that runs the write with the approver the plan
calls for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

import anyio.to_thread
from mcp.server.mcpserver import Context, Elicit, ElicitationResult, ListRoots, Resolve
from mcp_types import CallToolResult, ListRootsResult

from filemem import errors
from filemem.approval import ApprovalRequest
from filemem.mcp.gates import APPROVER, Approval, Approver, AskInCall, Bound, Refuse, outcome
from filemem.mcp.results import failure, ok_result, shape
from filemem.mcp.sessions import (
    Known,
    Session,
    can_elicit,
    is_modern,
    offers_roots,
    roots_workspace,
    service_of,
)

# ---------------------------------------------------------------- resolvers

# Resolvers run before a tool body (the SDK's ``Resolve``). Under 2026-07-28 they may run
# once per round of an input-required round trip; a plain return value is recomputed each
# round, a request (``ListRoots``, ``Elicit``) is asked once and its answer kept.


async def resolve_roots(ctx: Context[Any, Any]) -> Known | ListRoots:
    """The client's roots, when it offers them: asked directly in the handshake era (with
    a time limit), through one input-required round under 2026-07-28, then cached for the
    session (a handshake-era client's ``roots/list_changed`` clears the cache)."""
    memory = service_of(ctx)
    if not offers_roots(ctx):
        return Known(None)
    if not is_modern(ctx.protocol_version):
        return Known(await memory.legacy_roots(ctx))
    known, workspace = memory.cached_roots(memory.session_key(ctx))
    return Known(workspace) if known else ListRoots()


async def resolve_session(ctx: Context[Any, Any],
                          roots: Annotated[Known | ListRootsResult, Resolve(resolve_roots)]
                          ) -> Session:
    memory = service_of(ctx)
    key = memory.session_key(ctx)
    if isinstance(roots, ListRootsResult):
        workspace = roots_workspace(roots)
        memory.remember_roots(key, workspace)
    else:
        workspace = roots.workspace
    return memory.session(key, workspace)


@dataclass(frozen=True)
class Plan:
    """What the approval resolver decided for one write, carried to the tool body."""

    session: Session
    route: Literal["in-call", "shown", "by-policy", "nobody"]
    request: ApprovalRequest | None = None  # the request the person is shown ("shown")
    error: errors.ProtocolError | None = None  # refused before anyone was asked
    failure: BaseException | None = None  # something else went wrong before asking


async def plan_write(ctx: Context[Any, Any], session: Session, method: str,
                     inp: dict[str, Any]) -> Plan:
    """Decide how this write will be approved, and under 2026-07-28 learn its exact
    payload by running the pipeline up to the approval step (`Provider.plan`)."""
    memory = service_of(ctx)
    if not can_elicit(ctx):
        return Plan(session, "nobody")
    if not is_modern(ctx.protocol_version):
        return Plan(session, "in-call")

    def probe() -> ApprovalRequest | None:
        """The request as the person must see it, or None if the policy decides alone."""
        request = memory.provider().plan(method, inp, session.write())
        return request if request.policy == "ask" else None

    try:
        request = await anyio.to_thread.run_sync(probe)
    except errors.ProtocolError as exc:
        return Plan(session, "in-call", error=exc)
    except Exception as exc:
        return Plan(session, "in-call", failure=exc)
    if request is None:
        return Plan(session, "by-policy")
    return Plan(session, "shown", request=request)


def ask(ctx: Context[Any, Any], plan: Plan) -> Elicit[Approval] | None:
    """Under 2026-07-28, the question for a write that must be asked; else nothing."""
    if plan.route != "shown" or plan.request is None:
        return None
    return Elicit(service_of(ctx).message(plan.request, plan.session), Approval)


# ---------------------------------------------------------------- tool bodies


async def write(ctx: Context[Any, Any], method: str, inp: dict[str, Any], plan: Plan,
                answer: ElicitationResult[Approval]) -> CallToolResult:
    """Run one write on the real provider with the approver its plan calls for."""
    memory = service_of(ctx)
    if plan.error is not None:
        return failure(method, plan.error)
    if plan.failure is not None:
        return failure(method, plan.failure)
    session = plan.session
    approver: Approver
    if plan.route == "in-call":
        approver = AskInCall(ctx, lambda request: memory.message(request, session))
    elif plan.route == "shown" and plan.request is not None:
        approver = Bound(plan.request.payload, outcome(answer))
    elif plan.route == "by-policy":
        approver = Refuse("the write policy changed to ask after this call started, and "
                           "this client cannot be asked again within the call")
    else:
        client = ctx.session.client_params
        name = client.client_info.name if client is not None else "this MCP client"
        approver = Refuse(f"{name} cannot show approval prompts (it declared no MCP "
                           "elicitation capability)")

    def run() -> dict[str, Any]:
        token = APPROVER.set(approver)  # the worker's copied context: no other call sees it
        try:
            result: dict[str, Any] = getattr(memory.provider(), method)(inp, session.write())
        finally:
            APPROVER.reset(token)
        return result

    try:
        result = await anyio.to_thread.run_sync(run)
    except Exception as exc:
        return failure(method, exc)
    return ok_result(shape(method, result))


