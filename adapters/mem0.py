"""``mem0``: memories exported from mem0 (the open-source library and the hosted platform).

Accepted shapes: the bare list of the old ``get_all``, ``{"results": [...]}`` of the current
library, the platform's paginated ``{"count", "next", "previous", "results"}`` (one page is
imported as it is; fetch every page to import everything) and ``{"facts": [...]}`` (the
reference adapter's shape). Each item needs a non-empty ``memory`` string.

Mapping, chosen so nothing an item says about itself is lost:

- ``memory`` → the text, exactly as it is;
- ``metadata.category``, each string of ``metadata.tags`` and of ``categories`` → tags;
- ``user_id`` → the tag ``user:<id>``, ``agent_id`` → the tag ``agent:<id>`` (an id too
  long for a 32-character tag is an error naming the item, not silently dropped);
- the entry's layer, keys and source go in ``metadata.filemem`` on export and come back from
  there on import; items without it become ``user``/``user-global`` with source ``mem0``.

The rest of an item (``id``, ``hash``, times, ``run_id``, ``actor_id``, ``role``,
``expiration_date``, ``replaced_by``, other metadata keys) is not an entry field: it is kept
as the adapter's metadata in the entry's file (filemem gives the entry its own id and times).
Export gives an entry whose text and tags are unchanged back as the item it came from, key
for key; a changed one keeps its mem0 id, ``created_at``, ``run_id``, ``actor_id``, ``role``
and other metadata keys, with a fresh ``memory``, ``hash``, ``updated_at`` and tags.
A chat transcript (``{"messages": [...]}`` or a list of ``{role, content}``) is refused:
turning a conversation into memories takes a model, which an adapter does not run.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from filemem.errors import ProtocolError

from ._common import add_tag, iso_time, payload_error, tag_problem, too_many_tags

ID: Final = "mem0"
RESULTS_FORMAT: Final = "mem0-results"
FACTS_FORMAT: Final = "mem0-facts"
_LAYER_KEYS: Final = ("track", "scope", "workspaceKey", "agentKey", "source")
KEPT_MAX: Final = 24_000  # bytes of JSON of an item's other fields kept for export
_TRANSCRIPT: Final = ("a chat transcript, not memories: mem0 turns a conversation into "
                      "memories with a model, which an adapter does not run; export the "
                      "memories themselves (get_all) and import those")


def memory_hash(text: str) -> str:
    """mem0's ``hash``: the MD5 of the memory text (UTF-8)."""
    return hashlib.md5(text.encode("utf-8")).hexdigest()


class Mem0:
    """The ``mem0`` adapter (pure: JSON values in, JSON values out)."""

    id = ID
    name = "mem0 memories"
    description = (
        "mem0 get_all output: a bare list, {\"results\": [...]}, the platform's paginated "
        "{count, next, previous, results} or {\"facts\": [...]}; categories and metadata.tags "
        "become tags, user_id/agent_id the tags user:<id>/agent:<id>. Export writes "
        "{\"results\": [...]} with hash = MD5 of the text and the entry's layer in "
        "metadata.filemem; an item whose text and tags did not change in filemem comes back "
        "as it was (id, times, run/actor ids, role, every metadata key). Cannot carry: "
        "filemem's session ids and recall counts; a memory changed in filemem gets a fresh "
        "hash, updated_at and tags. Chat transcripts are refused."
    )
    version = "1.1.0"
    import_formats = (RESULTS_FORMAT, FACTS_FORMAT)
    export_format = RESULTS_FORMAT

    # ------------------------------------------------------------ import

    def adapt(self, payload: Any) -> list[dict[str, Any]]:
        items, label = self._items(payload)
        return [self._entry(f"{label}[{i}]" if label else f"item {i}", i, item)
                for i, item in enumerate(items)]

    @staticmethod
    def _items(payload: Any) -> tuple[list[Any], str]:
        if isinstance(payload, list):
            return payload, ""
        if isinstance(payload, Mapping):
            for key in ("results", "facts"):
                if key in payload:
                    if not isinstance(payload[key], list):
                        raise payload_error(ID, f'"{key}" must be a list of memories')
                    return payload[key], key
            if "messages" in payload:
                raise payload_error(ID, f'the payload is {_TRANSCRIPT}')
            if isinstance(payload.get("text"), str) and set(payload) <= {"text", "file", "path"}:
                raise payload_error(  # what `filemem import` makes of a .md or .txt file
                    ID, "the file was read as text (a name ending in .md, .markdown or .txt "
                    "is read as text, not JSON): mem0's memories are JSON; give the file a "
                    ".json name (or none) and import it again")
        raise payload_error(
            ID, 'payload must be a list of memories, {"results": [...]} (mem0 get_all, also '
            'the platform\'s paginated {count, next, previous, results}) or {"facts": [...]}')

    @staticmethod
    def _entry(where: str, index: int, item: Any) -> dict[str, Any]:
        def bad(message: str) -> ProtocolError:
            return payload_error(ID, f"{where}: {message}", item=index)

        if isinstance(item, str):  # {"facts": ["..."]}: what mem0's extraction step returns
            raise bad('is a plain string: this is mem0\'s extraction output, not its stored '
                      'memories; export those (get_all: a list of {"memory": ...} objects, or '
                      '{"results": [...]}) and import that')
        if not isinstance(item, Mapping):
            raise bad('must be an object with a non-empty "memory" string')
        text = item.get("memory")
        if not isinstance(text, str) or not text:
            if "role" in item and "content" in item:
                raise bad(f"is a chat message ({{role, content}}); the payload is {_TRANSCRIPT}")
            raise bad('must be an object with a non-empty "memory" string')
        metadata = item.get("metadata")
        metadata = metadata if isinstance(metadata, Mapping) else {}
        candidates: list[tuple[str, str]] = []
        category = metadata.get("category")
        if isinstance(category, str) and category.strip():
            candidates.append(("metadata.category", category))
        for field, values in (("metadata.tags", metadata.get("tags")),
                              ("categories", item.get("categories"))):
            if isinstance(values, list):
                candidates += [(field, v) for v in values if isinstance(v, str) and v.strip()]
        for field, prefix in (("user_id", "user:"), ("agent_id", "agent:")):
            value = item.get(field)
            if isinstance(value, str) and value:
                candidates.append((field, prefix + value))
        tags: list[str] = []
        for field, tag in candidates:
            problem = tag_problem(tag)
            if problem:
                raise bad(f"{field} cannot be kept as a tag: {problem}; shorten or remove it "
                          "and import again")
            add_tag(tags, tag)
        problem = too_many_tags(tags)
        if problem:
            raise bad(problem)
        own = metadata.get("filemem")
        own = own if isinstance(own, Mapping) else {}
        for key in _LAYER_KEYS:
            if key in own and not isinstance(own[key], str):
                raise bad(f"metadata.filemem.{key} must be a string")
        track = own.get("track", "user")
        scope = own.get("scope", "user-global")
        if track not in ("user", "agent") or scope not in ("user-global", "workspace"):
            raise bad(f"metadata.filemem has track {track!r} / scope {scope!r}; expected "
                      "user|agent and user-global|workspace")
        entry: dict[str, Any] = {"track": track, "scope": scope, "text": text,
                                 "source": own.get("source") or ID, "tags": tags}
        for key in ("workspaceKey", "agentKey"):
            if key in own:
                entry[key] = own[key]
        kept = {k: (None if k == "memory" else v) for k, v in item.items()}
        size = len(json.dumps(kept, ensure_ascii=False, default=str).encode("utf-8"))
        if size > KEPT_MAX:
            raise bad(f"its other fields take {size:,} bytes of JSON; filemem keeps at most "
                      f"{KEPT_MAX:,} to give them back on export: remove some metadata keys "
                      "and import again")
        mem0_id = item.get("id")
        entry["adapterMetadata"] = {"data": {"item": kept}}
        if isinstance(mem0_id, str) and mem0_id:
            entry["adapterMetadata"]["key"] = mem0_id
        return entry

    # ------------------------------------------------------------ export

    def export(self, entries: Any) -> dict[str, Any]:
        if not isinstance(entries, (list, tuple)):
            raise payload_error(ID, "export takes a list of entries")
        results = []
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or not isinstance(e.get("text"), str) \
                    or not isinstance(e.get("track"), str) or not isinstance(e.get("scope"), str):
                raise payload_error(ID, f"entry {i} is not an entry with a track, scope and text",
                                    item=i)
            tags = [t for t in e.get("tags") or [] if isinstance(t, str)]
            kept = self._kept(e, i)
            if kept is not None:
                results.append(kept)
                continue
            item: dict[str, Any] = {}
            if isinstance(e.get("id"), str):
                item["id"] = e["id"]
            item["memory"] = e["text"]
            item["hash"] = memory_hash(e["text"])
            item["metadata"] = {
                "tags": tags,
                "filemem": {k: e[k] for k in _LAYER_KEYS if isinstance(e.get(k), str)},
            }
            for key, field in (("createdAt", "created_at"), ("updatedAt", "updated_at")):
                when = iso_time(e.get(key))
                if when is not None:
                    item[field] = when
            for prefix, field in (("user:", "user_id"), ("agent:", "agent_id")):
                value = next((t[len(prefix):] for t in tags
                              if t.startswith(prefix) and len(t) > len(prefix)), None)
                if value is not None:
                    item[field] = value
            results.append(item)
        return {"results": results}

    def _kept(self, e: dict[str, Any], index: int) -> dict[str, Any] | None:
        """The mem0 item the entry came from: as it was while its text, tags and layer are
        the ones import made of it; with a fresh text, hash, time and tags (the rest kept)
        once they changed; None if the entry has no item kept."""
        meta = e.get("adapterMetadata")
        data = meta.get("data") if isinstance(meta, dict) else None
        stored = data.get("item") if isinstance(data, dict) else None
        if not isinstance(stored, dict) or "memory" not in stored:
            return None
        item = dict(stored, memory=e["text"])
        for key, value in (("id", e.get("id")), ("hash", memory_hash(e["text"])),
                           ("created_at", iso_time(e.get("createdAt"))),
                           ("updated_at", iso_time(e.get("updatedAt")))):
            if key not in item and isinstance(value, str):
                item[key] = value  # the fields of a results item an item came without
        try:
            came = self._entry("", index, item)
        except ProtocolError:
            return None  # a hand edit left an item import would refuse: write it fresh
        tags = [t for t in e.get("tags") or [] if isinstance(t, str)]
        layer = {k: e[k] for k in _LAYER_KEYS if isinstance(e.get(k), str)}
        default = {"workspaceKey": "", "agentKey": "", **{k: came[k] for k in _LAYER_KEYS
                                                          if k in came}}
        if meta.get("textUnchanged") is not True or came["tags"] != tags:
            for key in ("categories", "user_id", "agent_id"):
                item.pop(key, None)
            item["hash"] = memory_hash(e["text"])
            when = iso_time(e.get("updatedAt"))
            if when is not None:
                item["updated_at"] = when
            for prefix, field in (("user:", "user_id"), ("agent:", "agent_id")):
                value = next((t[len(prefix):] for t in tags
                              if t.startswith(prefix) and len(t) > len(prefix)), None)
                if value is not None:
                    item[field] = value
            old = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
            item["metadata"] = {**{k: v for k, v in old.items() if k != "category"},
                                "tags": tags, "filemem": layer}
        elif any(default.get(k, "") != v for k, v in layer.items()):
            old = item.get("metadata") if isinstance(item.get("metadata"), dict) else {}
            item["metadata"] = {**old, "filemem": layer}  # so it imports back where it is
        return item
