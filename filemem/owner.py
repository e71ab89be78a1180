"""The owner's powers over pending approvals: list, approve, reject.

These exist only for the owner (the ``filemem`` CLI and the owner's own Python programs):
no agent tool, MCP tool or bridge method reaches them.
"""

from __future__ import annotations

from typing import Any

from .approval import ApprovalRequest
from .auditlog import row
from .model import DEFAULT_SOURCE
from .pending import Record
from .provider import Provider
from .session import writer_of


class OwnerApproval:
    """The approval transport of ``filemem approve``: the owner already said yes."""

    def __init__(self, pending_id: str) -> None:
        self.name = f"the owner's `filemem approve` of pending {pending_id}"

    def __call__(self, request: ApprovalRequest) -> str:
        return "allowed-once"


def pending(provider: Provider) -> list[Record]:
    """Every pending approval, oldest first, with its full payload."""
    return provider.store.pending.list()


def approve(provider: Provider, pending_id: str) -> dict[str, Any]:
    """Run a pending write through the full pipeline again and commit it.

    PROPOSAL_NOT_FOUND for an id that is not pending. If the write fails (its target
    changed since it was staged, the budget filled up) it stays pending and the error is
    raised; `filemem reject` drops it.
    """
    store = provider.store.pending
    record = store.claim(pending_id)
    try:
        result = provider._run_pending(record, OwnerApproval(record["id"]))
    except BaseException:
        store.release(record["id"])
        raise
    store.drop(record["id"])
    return {"id": record["id"], "result": result}


def reject(provider: Provider, pending_id: str, reason: str | None = None) -> Record:
    """Drop a pending write; leaves an ``<action>-denied`` audit row saying the owner
    rejected it."""
    store = provider.store.pending
    record = store.claim(pending_id)
    payload = record["payload"]
    w = writer_of(record["write"])
    note = f": {reason}" if reason else ""
    r = row(f"{payload['action']}-denied", track=payload["track"], scope=payload["scope"],
            text=payload["text"], source=payload.get("source") or DEFAULT_SOURCE,
            session_id=w.session_id,
            outcome=f"rejected (via the owner's `filemem reject` of pending {record['id']}{note})")
    try:
        provider.store.record([r], body=payload["text"],
                              subject=f"{payload['action']}-denied {payload['track']}/"
                                      f"{payload['scope']} (pending {record['id']} rejected): "
                                      f"{payload['text']}")
    except BaseException:
        store.release(record["id"])
        raise
    store.drop(record["id"])
    return record


__all__ = ["OwnerApproval", "approve", "pending", "reject"]
