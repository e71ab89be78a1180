"""Entry points for checking filemem with the distributable conformance suite.

``python conformance/run.py --factory filemem.testing:make_provider`` builds a provider
per case with this function.
"""

from __future__ import annotations

import os
from typing import Any

from filemem.approval import Gate
from filemem.provider import Provider


def make_provider(store_path: str | os.PathLike[str], budgets: Any = None,
                  gate: Gate | None = None) -> Provider:
    """A provider on a fresh store at ``store_path`` (created if missing).

    With a ``gate`` every write asks it (policy ``ask``), as the protocol's golden reference
    does; without one every write is allowed (policy ``auto``). Pending staging is off, as
    in the reference: a gate that answers ``unavailable`` gets WRITE_DENIED ``unavailable``.
    """
    import filemem

    return filemem.open_store(store_path, create=True, budgets=budgets, gate=gate,
                              write_policy="ask" if gate is not None else "auto",
                              write_policies={}, stage_pending=False)
