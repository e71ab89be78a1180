"""Importing another tool's memory again (``filemem import --adapter``): memories the same
adapter imported before are left out, by what its round-trip metadata says about them.

An adapter names each memory in the other tool (``adapterMetadata.key``: a Claude Code
memory's file, a mem0 id) and filemem keeps that name, and the hash of the text it came
with, in the entry's file. An imported entry is left out when an entry in the layer it would
go to (track, scope, workspace, agent) has this adapter's metadata with the same name and
either the same text, or the text this one has as the text it was imported with: the tool
still holds the version filemem imported, and the entry was changed in filemem since. So
importing a folder filemem exported, or the same live folder twice, adds nothing.
"""

from __future__ import annotations

from typing import Any

from filemem import errors
from filemem.adapters import stored_metadata
from filemem.ops.base import new_entry
from filemem.provider import Provider
from filemem.session import writer_of

Layer = tuple[str, str, str, str, str]  # track, scope, workspace ('' for user-global), agent, key


def _layer(track: str, scope: str, workspace_key: str, agent_key: str, key: str) -> Layer:
    return track, scope, workspace_key if scope == "workspace" else "", agent_key, key


def imported_before(provider: Provider, adapter_id: str, inputs: Any, write: Any
                    ) -> list[dict[str, Any]]:
    """The inputs (an adapter's entries, as :func:`filemem.adapters.adapt` gives them) that
    are already in memory by the rule above: ``{"index", "track", "scope", "workspaceKey",
    "agentKey", "text", "why": "imported-before"}`` each, in input order."""
    if not isinstance(inputs, list):
        return []
    w = writer_of(write)
    known: dict[Layer, list[tuple[str, str]]] = {}
    for e in provider.store.checked().entries.values():
        found = stored_metadata(adapter_id, e.metadata()) if e.meta else None
        if found is not None and found[0]:
            layer = _layer(e.track, e.scope, e.workspace_key, e.agent_key, found[0])
            known.setdefault(layer, []).append((e.text, found[1]))
    skipped: list[dict[str, Any]] = []
    for i, inp in enumerate(inputs):
        found = stored_metadata(adapter_id, inp.get("meta")) if isinstance(inp, dict) else None
        if found is None or not found[0]:
            continue
        try:
            spec = new_entry(inp, w)
        except errors.ProtocolError:
            continue  # the import refuses it, with the protocol's message
        layer = _layer(spec.track, spec.scope, spec.workspace_key, spec.agent_key, found[0])
        if any(spec.text == text or found[1] == sha for text, sha in known.get(layer, [])):
            skipped.append({"index": i, "track": spec.track, "scope": spec.scope,
                            "workspaceKey": layer[2], "agentKey": spec.agent_key,
                            "text": spec.text, "why": "imported-before"})
    return skipped


__all__ = ["imported_before"]
