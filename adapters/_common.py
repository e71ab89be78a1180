"""Helpers the shipped adapters share: payload errors that say where, tag checks, payload
shapes and a guarded front-matter reader.

The adapters are pure converters (no file or network access, no model calls), so everything
here works on strings and plain values that the caller already read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from filemem import yamlsafe
from filemem.errors import ADAPTER_PAYLOAD, ProtocolError
from filemem.jsstr import js_json, js_trim, utf16_len
from filemem.model import MAX_TAG_LENGTH, MAX_TAGS, iso_ms

_CONTROL_RE: Final = re.compile("[\x00-\x1f\x7f]")
_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")
_ISO_RE: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)\Z")


def payload_error(adapter_id: str, message: str, **where: Any) -> ProtocolError:
    """ADAPTER_PAYLOAD naming the adapter; ``where`` (file, line, item) goes into details so
    programs can point at the spot too."""
    details: dict[str, Any] = {"adapterId": adapter_id}
    details.update({k: v for k, v in where.items() if v is not None})
    return ProtocolError(ADAPTER_PAYLOAD, f'adapter "{adapter_id}": {message}', details)


def iso_time(value: Any) -> str | None:
    """A protocol timestamp (epoch milliseconds, or an ISO-8601 string from an envelope) as
    ISO-8601, or None if it is neither."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return iso_ms(value)
    if isinstance(value, str) and _ISO_RE.match(value):
        return value
    return None


def at(file: str | None, line: int | None = None) -> str:
    """``"MEMORY.md line 3: "`` style prefix for messages about text formats."""
    parts = [p for p in (file, f"line {line}" if line is not None else None) if p]
    return " ".join(parts) + ": " if parts else ""


def tag_problem(tag: str) -> str | None:
    """Why ``tag`` cannot be stored as a protocol tag (after trimming), or None if it can.

    The rules are the protocol's (``normalizeTags``); checking them here lets an adapter
    say which line or item carries the bad tag, instead of the batch failing in ``seed``
    with no location.
    """
    t = js_trim(tag)
    if not t:
        return "an empty tag"
    if _CONTROL_RE.search(t):
        return f"the tag {js_json(t)} contains control characters"
    if _SURROGATE_RE.search(t):
        return f"the tag {js_json(t)} is not valid Unicode"
    n = utf16_len(t)
    if n > MAX_TAG_LENGTH:
        return f"the tag {js_json(t)} is {n} characters long; a tag holds at most {MAX_TAG_LENGTH}"
    return None


def add_tag(tags: list[str], tag: str) -> None:
    """Append a (trimmed) tag unless it is already there; the caller checked it."""
    t = js_trim(tag)
    if t and t not in tags:
        tags.append(t)


def too_many_tags(tags: list[str]) -> str | None:
    if len(tags) > MAX_TAGS:
        return f"{len(tags)} tags; an entry holds at most {MAX_TAGS}"
    return None


def text_payload(adapter_id: str, payload: Any, shapes: str) -> tuple[str, str | None, str | None]:
    """(text, file name, path) of a text payload: a string, or ``{"text", "file"?, "path"?}``
    (what the CLI passes for one file)."""
    if isinstance(payload, str):
        return payload, None, None
    if isinstance(payload, Mapping) and isinstance(payload.get("text"), str):
        file = payload.get("file")
        path = payload.get("path")
        return (payload["text"], file if isinstance(file, str) and file else None,
                path if isinstance(path, str) and path else None)
    raise payload_error(adapter_id, f"payload must be {shapes}")


def files_payload(adapter_id: str, payload: Any) -> tuple[dict[str, str], str | None] | None:
    """(files, directory path) of a directory payload ``{"files": {name: text}, "path"?}``,
    or None if the payload is not one."""
    if not isinstance(payload, Mapping) or "files" not in payload:
        return None
    files = payload["files"]
    if not isinstance(files, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise payload_error(adapter_id, 'payload "files" must map file names to their text')
    path = payload.get("path")
    return dict(files), path if isinstance(path, str) and path else None


def front_matter(adapter_id: str, text: str, file: str | None
                 ) -> tuple[dict[str, Any], str, int] | None:
    """Split a ``---`` front-matter block off ``text``: (keys, body, line the body starts on),
    or None when the text has no front-matter.

    The YAML is read by filemem's guarded reader (size cap, nesting depth, no anchors,
    aliases, tags, merge keys or duplicate keys, as for entry files), because these files
    come from another program and may be hostile.
    """
    start = 1 if text.startswith("\ufeff") else 0
    lines = text[start:].split("\n")
    if not lines or lines[0].rstrip("\r") != "---":
        return None
    close = next((i for i in range(1, len(lines)) if lines[i].rstrip("\r") == "---"), None)
    if close is None:
        raise payload_error(adapter_id, f"{at(file, 1)}the front-matter is not closed by a "
                            "'---' line", file=file, line=1)
    head = "\n".join(line.rstrip("\r") for line in lines[1:close])
    try:
        data = yamlsafe.load(head, what="the front-matter")
    except yamlsafe.YamlError as exc:
        line = exc.line + 1 if exc.line is not None else 1  # the file's line 1 is the ---
        raise payload_error(adapter_id, f"{at(file, line)}{exc.message}", file=file,
                            line=line) from None
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise payload_error(adapter_id, f"{at(file, 2)}the front-matter is not a mapping of "
                            "keys to values", file=file, line=2)
    body = "\n".join(lines[close + 1:])
    return data, body, close + 2
