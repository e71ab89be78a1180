"""The entry file: YAML front-matter with the protocol fields, the text byte for byte, and
the file's own final newline.

::

    ---
    id: 0f7c1b1e-4a5b-4c3d-9e8f-001122334455
    track: user
    scope: user-global
    workspaceKey: ""
    agentKey: ""
    source: filemem
    tags: [pref, comms]
    version: 1
    createdAt: 2026-11-30T01:49:13.123Z
    updatedAt: 2026-11-30T01:49:13.123Z
    sessionId: null
    ---
    <text, exactly as given>
    <one final newline, which belongs to the file and not to the text>

Reading takes the body after the closing ``---`` line and removes exactly one final newline
if there is one (:func:`_text_bytes`), so a text that itself ends with newlines keeps them,
and a file without a final newline (written by filemem before it wrote one, or saved by an
editor that does not add one) is read as it is. A file with CRLF line endings throughout, as
an editor on Windows saves it, is read as LF (:func:`_lf`); filemem never writes one (its
front-matter lines end in a bare LF), so a text's own CRs are kept.

filemem writes one key per line in a fixed order with plain or JSON-style double-quoted
scalars, so a change shows up in ``git diff`` as one line per changed key. A file byte for
byte as filemem writes it is read by position and proved by encoding it again
(:func:`_as_written`); the rest of that form takes a small exact parser. Anything else a
person or another tool wrote (comments, block lists, keys of their own) goes through
ruamel.yaml's round-trip parser behind the guards that every YAML filemem reads shares
(:mod:`filemem.yamlsafe`: size cap, nesting depth, no aliases or anchors, no tags, no merge
keys, no duplicate keys). A replace of such a file splices the changed keys' lines and
keeps every other line as it was.
"""

from __future__ import annotations

import functools
import json
import re
from datetime import datetime, timezone
from typing import Any, Final, NamedTuple

from filemem import yamlsafe
from filemem.errors import ProtocolError
from filemem.files import metakeys
from filemem.jsstr import ascii_lower, json_str
from filemem.model import (
    SCOPES,
    TRACKS,
    UUID_RE,
    Entry,
    iso_ms,
    normalize_tags,
    parse_iso_ms,
    unstorable,
)

FIELDS: Final = (
    "id", "track", "scope", "workspaceKey", "agentKey", "source", "tags", "version",
    "createdAt", "updatedAt", "sessionId",
)
FRONT_MATTER_MAX: Final = yamlsafe.MAX_BYTES
_DELIM: Final = b"---"
_PLAIN_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_.@+/-]*\Z")
_PLAIN_SPECIAL: Final = frozenset(
    {"y", "n", "yes", "no", "on", "off", "true", "false", "null", "nan", "inf"}
)
_TS_RE: Final = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z\Z")
_INT_RE: Final = re.compile(r"(?:0|[1-9][0-9]{0,15})\Z")
_LINE_RE: Final = re.compile(r"([A-Za-z][A-Za-z0-9_]*): (.*)\Z")
_LIST_ITEM_RE: Final = re.compile(r'\s*("(?:[^"\\]|\\.)*"|[A-Za-z_][A-Za-z0-9_.@+/-]*)\s*(,|\Z)')


class CodecError(ValueError):
    """An entry file that cannot be read as an entry; the message says why."""


class Decoded(NamedTuple):
    entry: Entry
    extras: tuple[str, ...]  # front-matter keys that are not protocol fields, in file order
    canonical: bool  # exactly what filemem itself writes


# ---------------------------------------------------------------- writing


def _quote(value: str) -> str:
    """A YAML scalar for ``value`` that every YAML 1.1/1.2 parser reads back as that string."""
    if _plain_ok(value):
        return value
    return metakeys.yaml_escaped(json_str(value))


# the values many files share (workspace and agent keys, sources, tags) are quoted once and
# remembered; an id is new in every file, so it is quoted without the cache (8,192 ids would
# only fill it: ~1 MB held by a long-running server, and every shared value pushed out)
quote = functools.lru_cache(maxsize=8192)(_quote)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(quote(v) for v in value) + "]"
    return quote(str(value))


def field_values(entry: Entry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "track": entry.track,
        "scope": entry.scope,
        "workspaceKey": entry.workspace_key,
        "agentKey": entry.agent_key,
        "source": entry.source,
        "tags": list(entry.tags),
        "version": entry.version,
        "createdAt": iso_ms(entry.created_at),
        "updatedAt": iso_ms(entry.updated_at),
        "sessionId": entry.session_id,
    }


def _fields_text(entry: Entry) -> str:
    """The protocol fields' lines, in FIELDS order, each ending in a newline (timestamps
    plain: they are ISO-8601). One f-string: a view-cache check encodes every entry again,
    and a line list to join cost a third more; the layer's four lines come from a memo,
    and an entry never changed has one timestamp to write twice."""
    created = iso_ms(entry.created_at)
    updated = created if entry.updated_at == entry.created_at else iso_ms(entry.updated_at)
    return (f"id: {_quote(entry.id)}\n"
            f"{_layer_lines(entry.track, entry.scope, entry.workspace_key, entry.agent_key)}"
            f"source: {quote(entry.source)}\n"
            f"tags: [{', '.join(map(quote, entry.tags))}]\nversion: {entry.version}\n"
            f"createdAt: {created}\nupdatedAt: {updated}\n"
            f"sessionId: {_scalar(entry.session_id)}\n")


@functools.lru_cache(maxsize=1024)
def _layer_lines(track: str, scope: str, workspace_key: str, agent_key: str) -> str:
    return (f"track: {track}\nscope: {scope}\nworkspaceKey: {quote(workspace_key)}\n"
            f"agentKey: {quote(agent_key)}\n")


def _field_lines(entry: Entry) -> list[str]:
    """One line per protocol field, in FIELDS order."""
    return _fields_text(entry).split("\n")[:-1]


def encode(entry: Entry, previous: bytes | None = None) -> bytes:
    """The file bytes for ``entry``. With ``previous`` (the file being replaced), keys and
    lines that are not protocol fields are kept as they were."""
    if previous is not None:
        split = _split(_lf(previous))
        if split is not None and not _canonical_fields(split[0]):
            spliced = _splice(split[0], entry)
            if spliced is not None:
                return b"---\n" + spliced.encode("utf-8") + b"---\n" + \
                    entry.text.encode("utf-8") + b"\n"  # the file's own final newline
    meta = "".join(line + "\n" for line in metakeys.lines(entry)) if entry.meta else ""
    return f"---\n{_fields_text(entry)}{meta}---\n{entry.text}\n".encode()  # a final newline


def encodings(entry: Entry) -> tuple[bytes, ...]:
    """Every file in filemem's own front-matter form that reads as ``entry``: the one filemem
    writes, and (for a text not ending in a newline) the same without the final newline, as
    filemem wrote it before files had one."""
    data = encode(entry)
    return (data,) if entry.text.endswith("\n") else (data, data[:-1])


def legacy_text(data: bytes) -> str | None:
    """The text a filemem from before final newlines meant by ``data``, where that differs
    from what it reads as now: it wrote the text with nothing after it, so a text ending in
    a newline was the whole body. None where both readings agree (or nothing decodes)."""
    split = _split(data)
    if split is None or not split[1].endswith(b"\n") or _lf(data) is not data:
        return None
    try:
        return split[1].decode("utf-8")
    except UnicodeDecodeError:
        return None


# ---------------------------------------------------------------- reading


def _lf(data: bytes) -> bytes:
    """``data`` with CRLF line endings as LF if every line ending in it is CRLF (a file an
    editor saved with Windows line endings); else ``data`` itself."""
    lines = data.count(b"\n")
    if lines and data.count(b"\r\n") == lines:
        return data.replace(b"\r\n", b"\n")
    return data


def _text_bytes(body: bytes) -> bytes:
    """The text of a body: all of it but the file's own final newline, if it has one."""
    return body[:-1] if body.endswith(b"\n") else body


def _split(data: bytes) -> tuple[str, bytes] | None:
    """(front-matter text, body bytes), or None if there is no front-matter block."""
    start = 3 if data.startswith(b"\xef\xbb\xbf") else 0
    if not data.startswith(_DELIM, start):
        return None
    pos = start + 3
    if data.startswith(b"\r\n", pos):
        pos += 2
    elif data.startswith(b"\n", pos):
        pos += 1
    else:
        return None
    head_start = pos
    while True:
        nl = data.find(b"\n", pos)
        line_end = len(data) if nl < 0 else nl
        line = data[pos:line_end]
        if line in (b"---", b"---\r"):
            body_start = len(data) if nl < 0 else nl + 1
            head = data[head_start:pos]
            if len(head) > FRONT_MATTER_MAX:
                raise CodecError(f"front-matter is larger than {FRONT_MATTER_MAX} bytes")
            try:
                return head.decode("utf-8"), data[body_start:]
            except UnicodeDecodeError as exc:
                raise CodecError(f"front-matter is not valid UTF-8 ({exc.reason})") from None
        if nl < 0:
            raise CodecError("front-matter is not closed by a '---' line")
        pos = nl + 1
        if pos - head_start > FRONT_MATTER_MAX:
            raise CodecError(f"front-matter is larger than {FRONT_MATTER_MAX} bytes")


def _parse_canonical_value(key: str, raw: str) -> Any:
    """The value of one canonical line, or raise ValueError if it is not in canonical form."""
    if raw.startswith('"'):
        value = json.loads(raw)
        if not isinstance(value, str):
            raise ValueError
        return value
    if raw == "null":
        return None
    if raw.startswith("["):
        if not raw.endswith("]"):
            raise ValueError
        inner = raw[1:-1]
        items: list[str] = []
        pos = 0
        while inner.strip() and pos < len(inner):
            m = _LIST_ITEM_RE.match(inner, pos)
            if not m:
                raise ValueError
            token = m.group(1)
            items.append(json.loads(token) if token.startswith('"') else _plain(token))
            pos = m.end()
            if m.group(2) == "" and pos < len(inner):
                raise ValueError
        return items
    if key == "version" and _INT_RE.match(raw):
        return int(raw)
    if key in ("createdAt", "updatedAt") and _TS_RE.match(raw):
        return raw
    return _plain(raw)


def _plain_ok(value: str) -> bool:
    """Whether ``value`` reads back as itself, a string, when written as a plain scalar.
    A UUID qualifies too: 8 hex digits and a dash are never a number or a date in YAML."""
    return bool(UUID_RE.match(value)  # an id, in nearly every call that is not memoised
                or (_PLAIN_RE.match(value) and value.lower() not in _PLAIN_SPECIAL))


def _plain(raw: str) -> str:
    if not _plain_ok(raw):
        raise ValueError
    return raw


def _canonical_fields(head: str) -> dict[str, Any] | None:
    """Parse filemem's own one-key-per-line form; None if the text is anything else."""
    lines = head.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < len(FIELDS):
        return None
    values: dict[str, Any] = {}
    for line, key in zip(lines, FIELDS, strict=False):
        m = _LINE_RE.match(line)
        if not m or m.group(1) != key:
            return None
        try:
            values[key] = _parse_canonical_value(key, m.group(2))
        except ValueError:
            return None
    meta = metakeys.parse_lines(lines[len(FIELDS):])  # x-<name> keys, one line each
    if meta is None:
        return None
    values["meta"] = meta
    return values


def _load_yaml(head: str) -> Any:
    """A front-matter through the shared guarded reader (round-trip types), or CodecError."""
    try:
        return yamlsafe.load(head, what="front-matter", typ="rt")
    except yamlsafe.YamlError as exc:
        where = f" (front-matter line {exc.line})" if exc.line is not None else ""
        raise CodecError(exc.message + where) from None


def _yaml_fields(head: str) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Parse any front-matter behind the guards: (protocol fields, extra keys). An
    ``x-<name>`` key whose value is a JSON object is also the entry's metadata
    (``values["meta"]``); any other extra key is only kept as it is."""
    data = _load_yaml(head)
    if not isinstance(data, dict):
        raise CodecError("front-matter is not a YAML mapping of keys to values")
    values: dict[str, Any] = {}
    extras: list[str] = []
    for key, value in data.items():
        if not isinstance(key, str):
            raise CodecError(f"front-matter key {key!r} is not a string")
        if key == "<<":
            raise CodecError("front-matter uses a YAML merge key, which entry files may not")
        if key in FIELDS:
            values[key] = _plainify(value)
        else:
            extras.append(key)
    values["meta"] = metakeys.from_yaml(data)
    return values, tuple(extras)


def _plainify(value: Any) -> Any:
    """ruamel's round-trip types as plain Python values."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [_plainify(v) for v in value]
    return value


def _timestamp(key: str, value: Any) -> int:
    if isinstance(value, datetime):
        import calendar  # a hand-written unquoted timestamp only (a cold read never needs it)

        utc = value.astimezone(timezone.utc) if value.tzinfo else value
        return calendar.timegm(utc.timetuple()) * 1000 + utc.microsecond // 1000
    if isinstance(value, str):
        try:
            return parse_iso_ms(value)
        except ValueError:
            pass
    raise CodecError(f"{key} must be an ISO-8601 timestamp with a time zone (got {value!r})")


def _string(key: str, value: Any, *, allow_empty: bool = True) -> str:
    if not isinstance(value, str) or (not allow_empty and not value):
        raise CodecError(f"{key} must be a {'' if allow_empty else 'non-empty '}string "
                         f"(got {value!r})")
    return value


def _entry(values: dict[str, Any], text_bytes: bytes) -> Entry:
    # a wrong track or scope first: a hand-written file often gives only those (the rest is
    # filled in when it is adopted), and that is what its writer has to mend
    track, scope = values.get("track", "user"), values.get("scope", "workspace")
    if track not in TRACKS:
        raise CodecError(f"track must be one of user|agent (got {track!r})")
    if scope not in SCOPES:
        raise CodecError(f"scope must be one of user-global|workspace (got {scope!r})")
    missing = [k for k in FIELDS if k not in values]
    if missing:
        raise CodecError(f"front-matter is missing {', '.join(missing)}")
    eid = values["id"]
    if not isinstance(eid, str) or not UUID_RE.match(eid):
        raise CodecError(f"id must be a UUID v4 (got {eid!r})")
    workspace_key = _string("workspaceKey", values["workspaceKey"])
    agent_key = _string("agentKey", values["agentKey"])
    if scope == "user-global" and workspace_key:
        raise CodecError("a user-global entry must have workspaceKey \"\"")
    source = _string("source", values["source"], allow_empty=False)
    raw_tags = values["tags"]
    try:
        tags = normalize_tags(raw_tags)
    except ProtocolError as exc:
        raise CodecError(f"tags: {exc.message}") from None
    if list(raw_tags) != tags:
        raise CodecError(f"tags must be trimmed and unique (got {raw_tags!r})")
    version = values["version"]
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise CodecError(f"version must be an integer >= 1 (got {version!r})")
    created = _timestamp("createdAt", values["createdAt"])
    updated = _timestamp("updatedAt", values["updatedAt"])
    if updated < created:
        raise CodecError("updatedAt is earlier than createdAt")
    session_id = values["sessionId"]
    if session_id is not None and not isinstance(session_id, str):
        raise CodecError(f"sessionId must be null or a string (got {session_id!r})")
    try:
        text = text_bytes.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise CodecError(f"the entry text is not valid UTF-8 ({exc.reason})") from None
    if not text:
        raise CodecError("the entry text (after the front-matter) is empty")
    problem = unstorable(text)
    if problem is not None:
        raise CodecError(f"the entry text {problem}")
    return Entry(
        id=eid, track=track, scope=scope, workspace_key=workspace_key, agent_key=agent_key,
        text=text, source=source, tags=tuple(tags), version=version, created_at=created,
        updated_at=updated, session_id=session_id, meta=values.get("meta", ()),
        fold=ascii_lower(text),
    )


_PREFIXES: Final = tuple(f"{key}: " for key in FIELDS)


def _as_written(data: bytes) -> Entry | None:
    """The entry of a file that is byte for byte what :func:`encode` writes for it, or None.

    Read by position (each line's value after its key, no checks of its form), validated
    as every entry is (:func:`_entry`), then proved by encoding it again: a file that gives
    other bytes (another form, a value read wrongly this way, metadata keys, no final
    newline) is read by :func:`decode`'s parsers instead, with their errors. A third
    quicker than those on the files filemem writes, which ``verify`` reads once a commit."""
    if not data.startswith(b"---\n") or not data.endswith(b"\n"):
        return None
    end = data.find(b"\n---\n", 3)
    if end < 0:
        return None
    try:
        lines = data[4:end].decode("utf-8").split("\n")
        if len(lines) != len(FIELDS):
            return None
        values: dict[str, Any] = {}
        for line, key, prefix in zip(lines, FIELDS, _PREFIXES, strict=True):
            if not line.startswith(prefix):
                return None
            raw = line[len(prefix):]
            values[key] = _parse_canonical_value(key, raw) \
                if raw.startswith(('"', "[")) or raw == "null" else \
                int(raw) if key == "version" else raw
        entry = _entry(values, _text_bytes(data[end + 5:]))
    except (UnicodeDecodeError, ValueError):  # CodecError among them: the parsers say why
        return None
    return entry if encode(entry) == data else None


def decode(data: bytes) -> Decoded:
    """Read an entry file. Raises CodecError saying what is wrong with it."""
    written = _as_written(data)
    if written is not None:
        return Decoded(written, (), True)
    split = _split(_lf(data))
    if split is None:
        raise CodecError("the file does not start with a '---' front-matter block")
    head, body = split
    text = _text_bytes(body)
    values = _canonical_fields(head)
    if values is not None:
        return Decoded(_entry(values, text), (), True)
    values, extras = _yaml_fields(head)
    return Decoded(_entry(values, text), extras, False)


def decode_partial(data: bytes) -> tuple[dict[str, Any], bytes]:
    """The protocol fields a hand-written file gives (maybe none) and its text's bytes, read
    as :func:`decode` reads (CRLF throughout as LF, the final newline not part of the text).

    A file without a front-matter block is all text (after a UTF-8 byte order mark, which an
    editor may put first). The same guards as :func:`decode`.
    """
    data = _lf(data)
    split = _split(data)
    if split is None:
        return {}, _text_bytes(data.removeprefix(b"\xef\xbb\xbf"))
    head, body = split
    values = _canonical_fields(head)
    if values is None:
        values, _extras = _yaml_fields(head)
    return values, _text_bytes(body)


def complete(values: dict[str, Any], text: bytes, defaults: dict[str, Any]) -> Entry:
    """An entry from a file's own fields (and its text's bytes, from :func:`decode_partial`),
    with ``defaults`` for the fields it leaves out (timestamps as ISO strings, like a
    front-matter has them). CodecError if invalid."""
    return _entry({**defaults, **values}, text)


# ---------------------------------------------------------------- splicing


def _splice(head: str, entry: Entry) -> str | None:
    """Rewrite the protocol keys' lines of a hand-made front-matter, keeping every other line.

    Returns None when the result would not read back as intended (the caller then writes
    the canonical form, still keeping the extra keys' values via a full re-dump).
    """
    wanted = dict(zip(FIELDS, _field_lines(entry), strict=True))
    try:
        old_values, _ = _yaml_fields(head)
    except CodecError:
        old_values = {}
    new_values = field_values(entry)
    for key in FIELDS:  # a key whose value is unchanged keeps its line(s) as written
        if key in old_values and _same(key, old_values[key], new_values[key]):
            del wanted[key]
    lines = head.split("\n")
    trailing = lines[-1] == ""
    if trailing:
        lines.pop()
    out: list[str] = []
    i = 0
    seen: set[str] = set()
    while i < len(lines):
        line = lines[i]
        line_key = line.split(":", 1)[0] if ":" in line and not line[:1].isspace() else None
        if line_key is not None and line_key in wanted:
            # drop the key's continuation lines (indented lines or a column-0 block list)
            j = i + 1
            while j < len(lines) and lines[j] and (lines[j][0].isspace() or
                                                    lines[j].startswith("- ") or lines[j] == "-"):
                j += 1
            out.append(wanted[line_key])
            seen.add(line_key)
            i = j
            continue
        out.append(line)
        i += 1
    out.extend(wanted[k] for k in FIELDS if k in wanted and k not in seen)
    result = "\n".join(out) + "\n"
    try:
        values, _ = _yaml_fields(result)
        if _entry(values, entry.text.encode("utf-8")) != entry:
            return _redump(head, entry)
    except CodecError:
        return _redump(head, entry)
    return result


def _same(key: str, old: Any, new: Any) -> bool:
    if key in ("createdAt", "updatedAt"):
        try:
            return _timestamp(key, old) == parse_iso_ms(new)
        except CodecError:
            return False
    if key == "tags":
        return isinstance(old, list) and list(old) == list(new)
    return type(old) is type(new) and old == new


def _redump(head: str, entry: Entry) -> str | None:
    """Fallback: update the keys through ruamel's round-trip dumper."""
    import io

    from ruamel.yaml import YAML
    from ruamel.yaml.comments import CommentedSeq

    try:
        data = _load_yaml(head)
    except CodecError:
        return None
    if not isinstance(data, dict):
        return None
    yaml = YAML(typ="rt")
    yaml.width = 1 << 16
    for key, text in entry.meta:
        data[key] = json.loads(text)
    for key, value in field_values(entry).items():
        if isinstance(value, list):
            seq = CommentedSeq(value)
            seq.fa.set_flow_style()
            data[key] = seq
        else:
            data[key] = value
    buf = io.StringIO()
    yaml.dump(data, buf)
    return buf.getvalue()
