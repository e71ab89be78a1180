"""The owner's import of another tool's memory (``filemem import --adapter``): entries
already in memory are skipped, so importing the same memory twice adds nothing.

The rule: an entry is a duplicate when an entry with exactly the same text (byte for byte)
is already in the same layer, that is the same track, scope, workspace (for the
``workspace`` scope) and agent layer, where the import would put it; or when the same
import had it before (a file that says the same thing twice). With the adapter's id, an
entry is also left out when that adapter imported the same memory before into that layer
(its round-trip metadata's ``key``: the same Claude Code file, the same mem0 id) and this is
the text it was imported with: the tool still holds the version filemem took, which was
changed in filemem since. Duplicates are reported, not written; ``keep_duplicates`` imports
them all. What is in memory is read when the import starts. The protocol's own
``seed``/``import`` (the Provider, the bridge, an envelope import) keep the protocol's
meaning: every entry given is written.
"""

from __future__ import annotations

from typing import Any

from filemem import errors
from filemem.adapters import stored_metadata
from filemem.ops.base import new_entry
from filemem.provider import Provider
from filemem.session import writer_of
from filemem.types import OwnerImportResult, SkippedEntry, SkipReason

Key = tuple[str, str, str, str, str]  # track, scope, workspace ('' for user-global), agent, text


def _key(track: str, scope: str, workspace_key: str, agent_key: str, text: str) -> Key:
    return track, scope, workspace_key if scope == "workspace" else "", agent_key, text


# the staged writes whose approval adds entries, and how their argument holds the inputs
_ADDING = {"add": False, "seed": True, "import": True}  # method -> arg is a list of inputs


def _staged(provider: Provider) -> list[tuple[str, Any, Any]]:
    """(pending id, an input it would add, its write context) for each pending approval
    that adds entries (an import or add staged because nobody could be asked)."""
    out: list[tuple[str, Any, Any]] = []
    for record in provider.store.pending.list():
        method = "import" if record.get("verb") == "import" else record.get("method")
        if method not in _ADDING:
            continue
        arg = record.get("arg")
        inputs = (arg if isinstance(arg, list) else []) if _ADDING[method] else [arg]
        out.extend((str(record.get("id")), inp, record.get("write")) for inp in inputs)
    return out


def plan(provider: Provider, inputs: list[Any], write: Any, *,
         adapter_id: str | None = None) -> tuple[list[Any], list[SkippedEntry]]:
    """(the inputs to import, those left out as duplicates by the module's rule)."""
    w = writer_of(write)  # WRITE_REQUIRES_AGENT first, as the import itself would
    state = provider.store.checked()
    present = {_key(e.track, e.scope, e.workspace_key, e.agent_key, e.text)
               for e in state.entries.values()}
    imported: set[Key] = set()  # the layer, the memory's key, the hash it was imported with
    for e in state.entries.values():
        found = stored_metadata(adapter_id, e.metadata()) if adapter_id and e.meta else None
        if found is not None and found[0]:
            imported.add(_key(e.track, e.scope, e.workspace_key, e.agent_key,
                              f"{found[0]}\0{found[1]}"))
    waiting: dict[Key, str] = {}  # text or memory key -> the pending approval adding it
    for pid, inp, staged_write in _staged(provider):
        try:
            spec = new_entry(inp, writer_of(staged_write))
        except errors.ProtocolError:
            continue  # its approval would refuse it: it adds nothing
        layer = (spec.track, spec.scope, spec.workspace_key, spec.agent_key)
        waiting.setdefault(_key(*layer, spec.text), pid)
        found = stored_metadata(adapter_id, inp.get("meta")) if adapter_id else None
        if found is not None and found[0]:
            waiting.setdefault(_key(*layer, f"{found[0]}\0{found[1]}"), pid)
    kept: list[Any] = []
    seen: set[Key] = set()
    skipped: list[SkippedEntry] = []
    for i, inp in enumerate(inputs):
        try:
            spec = new_entry(inp, w)
        except errors.ProtocolError:
            kept.append(inp)  # the import refuses it, with the protocol's message
            continue
        key = _key(spec.track, spec.scope, spec.workspace_key, spec.agent_key, spec.text)
        found = stored_metadata(adapter_id, inp.get("meta")) \
            if adapter_id and isinstance(inp, dict) else None
        memory = _key(spec.track, spec.scope, spec.workspace_key, spec.agent_key,
                      f"{found[0]}\0{found[1]}") if found is not None and found[0] else None
        waits = waiting.get(key) or (waiting.get(memory) if memory else None)
        why: SkipReason | None = "in-memory" if key in present else "repeated" if key in seen else \
            "imported-before" if memory in imported else "pending" if waits else None
        if why is None:
            seen.add(key)
            kept.append(inp)
            continue
        s: SkippedEntry = {"index": i, "track": spec.track, "scope": spec.scope,
                           "workspaceKey": key[2], "agentKey": spec.agent_key,
                           "text": spec.text, "why": why}
        if why == "pending" and waits:
            s["pendingId"] = waits
        skipped.append(s)
    return kept, skipped


def import_entries(provider: Provider, inputs: Any, write: Any, *,
                   keep_duplicates: bool = False,
                   adapter_id: str | None = None) -> OwnerImportResult:
    """Import ``inputs`` (an adapter's entries) in one approval and one commit, leaving out
    those already in memory (see the module's rule) unless ``keep_duplicates``. When all are
    left out, nothing is asked or written."""
    if keep_duplicates or not isinstance(inputs, list):
        return {**provider.import_entries(inputs, write), "skipped": []}
    kept, skipped = plan(provider, inputs, write, adapter_id=adapter_id)
    if inputs and not kept:
        return {"added": 0, "entries": [], "skipped": skipped}
    return {**provider.import_entries(kept, write), "skipped": skipped}


__all__ = ["import_entries", "plan"]
