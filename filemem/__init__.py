"""filemem: a local-first memory store for coding agents.

It implements dsh-memory-protocol/v1 over a git repository of plain Markdown files: one
file per entry, one commit per approved write. ::

    import filemem

    store = filemem.open_store("~/memory", create=True, write_policy="auto")
    ctx = filemem.write_context(session_id="s1", cwd="/code/api", agent="coder")
    store.add({"track": "user", "scope": "user-global", "text": "Prefers short answers"}, ctx)
    store.query({"text": "short"})
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from filemem.config import Config
from filemem.errors import (
    CODES,
    ConnectError,
    FilememError,
    GitOperationInProgress,
    ProtocolError,
    StoreBusy,
    StoreExists,
    StoreFull,
    StoreNotFound,
    StoreReadOnly,
    SyncError,
)
from filemem.location import default_store_path, resolve_store_path, to_make
from filemem.model import PROTOCOL, Entry
from filemem.provider import TRUST_INPUT, Provider, TrustInput, write_context
from filemem.store.core import Store

if TYPE_CHECKING:
    from filemem.approval import ApprovalRequest, Decision, Gate
    from filemem.owner import Owner

__version__ = "0.1.0"


def open_store(path: str | os.PathLike[str] | None = None, *, create: bool = False,
               gate: Gate | None = None, budgets: Any = None, write_policy: str | None = None,
               write_policies: Any = None, stage_pending: bool = True,
               validate: bool = True,
               policy_source: str | TrustInput | None = TRUST_INPUT,
               reveal_matches: bool = False) -> Provider:
    """Open the store at ``path`` (default: see :func:`default_store_path`) as a Provider.

    ``create=True`` makes the store if the folder is missing or empty. ``gate`` is called
    with an :class:`ApprovalRequest` when the policy says ``ask`` and must return an outcome
    (``"allowed-once"`` lets the write through). ``budgets``, ``write_policy`` and
    ``write_policies`` override the store's ``filemem.yaml`` for this process only. Under
    ``ask`` with no gate to ask, a write is staged as a pending approval for the owner
    (``filemem pending``) unless ``stage_pending=False``, which refuses it (``unavailable``).
    ``validate=False`` opens a store with invalid files at HEAD (for repairing it); reads
    still raise STORE_CORRUPT. ``policy_source`` is the source that ``source:<name>``
    write policies are matched against: by default each write's own ``input.source`` (the
    caller is your own program); a server for other programs passes the name you gave it
    (or None), so a caller cannot pick a looser policy by naming a source.
    An ``ENTRY_NOT_FOUND`` names the other layers where the match is, among those the
    writer's session can see; ``reveal_matches=True`` (the owner's own tools, such as the
    ``filemem`` command) names them anywhere in the store: another workspace, another agent.
    """
    Config().with_overrides(budgets=budgets, write_policy=write_policy,
                            write_policies=write_policies)  # bad overrides: fail before creating
    root = resolve_store_path(path)
    store = Store.create(root) if create and to_make(root) else Store(root)
    if validate:
        store.checked()  # fail now on a corrupt or too-new store
    return Provider(store, gate=gate, budgets=budgets, write_policy=write_policy,
                    write_policies=write_policies, stage_pending=stage_pending,
                    policy_source=policy_source, reveal_matches=reveal_matches)


def init_store(path: str | os.PathLike[str] | None = None) -> Provider:
    """Create a new store (the folder must be missing or empty) and open it."""
    return Provider(Store.create(resolve_store_path(path)))


def open_owner(path: str | os.PathLike[str] | None = None, *, validate: bool = False) -> Owner:
    """The owner's side of the store at ``path`` (see :class:`filemem.owner.Owner`): pending
    approvals, hand edits, history, sync, watch. Opened even with invalid files at HEAD
    unless ``validate=True``, since these are the tools that repair them."""
    from filemem.owner import Owner

    return Owner(open_store(path, validate=validate))


# imported on first use: an agent's reads never load the owner side or the approval step
_LATER: dict[str, str] = {"Owner": "filemem.owner", "ApprovalRequest": "filemem.approval",
                          "Decision": "filemem.approval", "Gate": "filemem.approval"}


def __getattr__(name: str) -> Any:
    if name in _LATER:
        import importlib

        return getattr(importlib.import_module(_LATER[name]), name)
    raise AttributeError(f"module 'filemem' has no attribute {name!r}")


__all__ = [
    "CODES",
    "PROTOCOL",
    "ApprovalRequest",
    "ConnectError",
    "Decision",
    "Entry",
    "FilememError",
    "Gate",
    "GitOperationInProgress",
    "Owner",
    "ProtocolError",
    "Provider",
    "StoreBusy",
    "StoreExists",
    "StoreFull",
    "StoreNotFound",
    "StoreReadOnly",
    "SyncError",
    "default_store_path",
    "init_store",
    "open_owner",
    "open_store",
    "write_context",
]
