"""The protocol's entry model (the 14 fields of a dsh-memory-protocol/v1 entry) and its
validation rules.

Lengths are JavaScript string lengths (UTF-16 code units), trimming uses JavaScript's
whitespace set, and messages match the reference provider, because other providers and
their users compare them.
"""

from __future__ import annotations

import functools
import json
import ntpath
import os
import posixpath
import re
import time
from datetime import datetime, timezone
from typing import Any, ClassVar, Final, TypeGuard

from filemem import errors
from filemem.jsstr import ascii_lower, js_json, js_trim, utf16_len, utf16_prefix
from filemem.types import ProtocolEntry

PROTOCOL: Final = "dsh-memory-protocol/v1"
TRACKS: Final = ("user", "agent")
SCOPES: Final = ("user-global", "workspace")
LAYERS: Final = tuple((t, s) for t in TRACKS for s in SCOPES)
DEFAULT_SOURCE: Final = "filemem"  # the provenance label of a write that names none (the
# reference implementation writes its own name, "dsh-memento", there)
MAX_TAGS: Final = 16
MAX_TAG_LENGTH: Final = 32
MAX_QUERY_LIMIT: Final = 1000
MAX_IMPORT: Final = 1000
MAX_CONSOLIDATE: Final = 20
# Another tool's data kept in an entry's file (an adapter's round-trip metadata): front-matter
# keys ``x-<name>``, each a JSON object, at most META_MAX bytes of JSON in all, nested at
# most META_DEPTH levels (the file's YAML reader allows 32).
META_KEY_RE: Final = re.compile(r"x-[a-z0-9][a-z0-9-]{0,62}\Z")
META_MAX: Final = 32 * 1024
META_DEPTH: Final = 16
ON_WINDOWS: Final = os.name == "nt"

UUID_RE: Final = re.compile(
    r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}\Z", re.IGNORECASE
)

_CONTROL_RE: Final = re.compile("[\x00-\x1f\x7f]")
_SURROGATE_RE: Final = re.compile("[\ud800-\udfff]")


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def iso_ms(ms: int) -> str:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds: ``2026-11-30T01:49:13.123Z``."""
    return f"{_iso_second(ms // 1000)}.{ms % 1000:03d}Z"


@functools.lru_cache(maxsize=1024)
def _iso_second(s: int) -> str:  # a seed's 1,000 consecutive milliseconds share one or two
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(s))


_ISO_RE: Final = re.compile(
    r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?"
    r"(?:([Zz])|([+-])(\d{2}):?(\d{2}))\Z"
)


def parse_iso_ms(text: str) -> int:
    """Parse an ISO-8601 timestamp with a zone into epoch milliseconds (ValueError if not)."""
    m = _ISO_RE.match(text)
    if not m:
        raise ValueError(f"not an ISO-8601 timestamp with a time zone: {text!r}")
    y, mo, d, h, mi, s, frac, z, sign, oh, om = m.groups()
    dt = datetime(int(y), int(mo), int(d), int(h), int(mi), int(s), tzinfo=timezone.utc)
    ms = int(dt.timestamp()) * 1000 + int((frac or "0").ljust(3, "0")[:3])
    if not z:
        offset = (int(oh) * 60 + int(om)) * 60_000
        ms -= offset if sign == "+" else -offset
    return ms


def new_id() -> str:
    """A random UUID, version 4, as ``str(uuid.uuid4())`` gives (without importing uuid,
    which loads ``platform`` on every cold command)."""
    return new_ids(1)[0]


def new_ids(count: int) -> list[str]:
    """``count`` ids as :func:`new_id` makes them (random UUIDs, version 4), from one read
    of the system's random source instead of one each (a seed makes 1,000)."""
    raw = bytearray(os.urandom(16 * count))
    raw[6::16] = bytes(b & 0x0F | 0x40 for b in raw[6::16])  # version 4
    raw[8::16] = bytes(b & 0x3F | 0x80 for b in raw[8::16])  # the RFC 4122 variant
    h = raw.hex()
    return [f"{h[k:k + 8]}-{h[k + 8:k + 12]}-{h[k + 12:k + 16]}-{h[k + 16:k + 20]}-"
            f"{h[k + 20:k + 32]}" for k in range(0, 32 * count, 32)]


def unstorable(value: str) -> str | None:
    """Why a store cannot keep ``value``, or None: a lone surrogate (not UTF-8: no file or
    commit holds one) or NUL (a commit message holding one is refused by `git fsck` and by
    remotes that check what they receive, and an entry's text goes into its commits')."""
    at = value.find("\0")
    if at >= 0:
        return (f"holds a NUL character (U+0000) at index {at}, which git cannot keep in a "
                "commit message")
    if value.isascii():  # known without a look at the characters (CPython marks such str)
        return None
    m = _SURROGATE_RE.search(value)
    return f"is not valid Unicode (lone surrogate at index {m.start()})" if m else None


def check_storable(value: str, what: str) -> str:
    """``value``, or INVALID_INPUT saying why the store cannot keep it (:func:`unstorable`)."""
    problem = unstorable(value)
    if problem is not None:
        raise errors.invalid_input(f"{what} {problem}; nothing was written")
    return value


# ---------------------------------------------------------------- field rules


def validate_layer(track: Any, scope: Any, *, track_missing: bool = False,
                   scope_missing: bool = False) -> tuple[str, str]:
    if track not in TRACKS or scope not in SCOPES or not isinstance(track, str) \
            or not isinstance(scope, str):
        raise errors.invalid_input(
            f"invalid memory scope: track={js_json(track, missing=track_missing)} "
            f"scope={js_json(scope, missing=scope_missing)} "
            "(track \u2208 user|agent, scope \u2208 user-global|workspace)"
        )
    return track, scope


def validate_text(text: Any) -> str:
    if not isinstance(text, str) or len(text) < 1:
        raise errors.invalid_input("entry text must be a non-empty string")
    return check_storable(text, "entry text")


def normalize_tags(raw: Any) -> list[str]:
    """The protocol's ``normalizeTags``: trim, reject empties/controls/long tags, dedupe, cap."""
    if raw is None:
        return []
    if not isinstance(raw, (list, tuple)):
        raise errors.invalid_input("entry tags must be an array of strings")
    out: list[str] = []
    seen: set[str] = set()
    for item in raw:
        if not isinstance(item, str):
            raise errors.invalid_input("entry tags must be an array of strings")
        tag = js_trim(item)
        if not tag:
            raise errors.invalid_input("entry tags must be non-empty strings")
        if _CONTROL_RE.search(tag):
            raise errors.invalid_input(f"entry tag {js_json(tag)} contains control characters")
        if utf16_len(tag) > MAX_TAG_LENGTH:
            raise errors.invalid_input(
                f"entry tag {js_json(utf16_prefix(tag, 20))}\u2026 exceeds {MAX_TAG_LENGTH} chars"
            )
        check_storable(tag, "entry tag")
        if tag not in seen:
            seen.add(tag)
            out.append(tag)
    if len(out) > MAX_TAGS:
        raise errors.invalid_input(f"entry has {len(out)} tags; at most {MAX_TAGS} are allowed")
    return out


def check_batch(count: int, verb: str) -> None:
    """One seed or import adds at most MAX_IMPORT entries (one approval, one commit)."""
    if count > MAX_IMPORT:
        raise errors.invalid_input(
            f"{verb}: {count:,} entries, more than {MAX_IMPORT:,} per {verb}; split it and "
            f"{verb} the parts one by one; nothing was written")


def validate_object(value: Any, what: str = "memory write input") -> dict[str, Any]:
    if not isinstance(value, dict):
        raise errors.invalid_input(f"{what} must be an object")
    return value


def validate_optional_str(value: Any, what: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise errors.invalid_input(f"entry {what} must be a string")
    return check_storable(value, f"entry {what}")


def workspace_key_of(cwd: Any, *, windows: bool = ON_WINDOWS) -> str:
    """Normalise a working directory into a workspace key (``path.resolve`` semantics)."""
    if not isinstance(cwd, str) or cwd == "":
        return ""
    if windows:
        return ntpath.abspath(cwd).lower()
    # an absolute cwd (what agents send) needs no getcwd(), a system call on every write
    resolved = posixpath.normpath(cwd if cwd[0] == "/" else posixpath.join(os.getcwd(), cwd))
    if resolved.startswith("//"):
        resolved = "/" + resolved.lstrip("/")  # node maps //a to /a
    return resolved


def agent_key_of(preset: Any, *, windows: bool = ON_WINDOWS) -> str:
    if not isinstance(preset, str) or preset == "":
        return ""
    key = js_trim(preset)
    return key.lower() if windows else key


# ---------------------------------------------------------------- metadata


def meta_json(value: Any) -> str:
    """The one JSON text of a metadata value (keys in their order; ValueError/TypeError if
    it is not JSON: NaN, a set, a non-string key...)."""
    if isinstance(value, dict) and not all(isinstance(k, str) for k in value):
        raise TypeError("keys must be strings")
    return json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(", ", ": "),
                      default=_not_json)


def _not_json(value: Any) -> Any:
    raise TypeError(f"{type(value).__name__} is not JSON")


def _depth(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((_depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((_depth(v) for v in value), default=0)
    return 0


def meta_problem(key: Any, value: Any) -> str | None:
    """Why ``key: value`` cannot be an entry's metadata key (None if it can)."""
    if not isinstance(key, str) or not META_KEY_RE.match(key):
        return (f"metadata key {js_json(key)} must be x-<name> (lowercase letters, digits and "
                "dashes, at most 64 characters)")
    if not isinstance(value, dict):
        return f"metadata {key} must be an object"
    try:
        text = meta_json(value)
    except (TypeError, ValueError, RecursionError) as exc:
        return f"metadata {key} is not JSON ({exc})"
    if _SURROGATE_RE.search(text):
        return f"metadata {key} is not valid Unicode (a lone surrogate)"
    if _depth(value) > META_DEPTH:
        return f"metadata {key} is nested more than {META_DEPTH} levels deep"
    return None


def validate_meta(raw: Any) -> tuple[tuple[str, str], ...]:
    """An entry input's ``meta`` ({"x-<name>": {...}}) as Entry.meta; INVALID_INPUT if not."""
    if raw is None:
        return ()
    if not isinstance(raw, dict):
        raise errors.invalid_input("entry meta must be an object of x-<name> keys; nothing was "
                                   "written")
    for key, value in raw.items():
        problem = meta_problem(key, value)
        if problem:
            raise errors.invalid_input(f"entry {problem}; nothing was written")
    meta = tuple(sorted((k, meta_json(v)) for k, v in raw.items()))
    size = sum(len(k) + len(v.encode("utf-8")) for k, v in meta)
    if size > META_MAX:
        raise errors.invalid_input(
            f"entry metadata is {size:,} bytes, more than {META_MAX:,}; nothing was written")
    return meta


# ---------------------------------------------------------------- entries


class Entry:
    """A committed memory entry. Recall counters are not part of it: they live beside the store.

    Immutable, compared and hashed by its fields (``fold`` aside). A plain class rather than
    a dataclass: making a dataclass costs every cold command about a millisecond."""

    # what equality, hash and repr look at, in the protocol's order
    _FIELDS: ClassVar = ("id", "track", "scope", "workspace_key", "agent_key", "text", "source",
                         "tags", "version", "created_at", "updated_at", "session_id", "meta")
    __slots__ = (*_FIELDS, "fold")

    id: str
    track: str
    scope: str
    workspace_key: str
    agent_key: str
    text: str
    source: str
    tags: tuple[str, ...]
    version: int
    created_at: int
    updated_at: int
    session_id: str | None
    # ``x-<name>`` front-matter keys, sorted, each with its value as JSON text (meta_json):
    # another tool's data that passes through filemem untouched (never in the protocol shape)
    meta: tuple[tuple[str, str], ...]
    fold: str  # ascii_lower(text), for matching

    def __init__(self, id: str, track: str, scope: str, workspace_key: str, agent_key: str,
                 text: str, source: str, tags: tuple[str, ...], version: int,
                 created_at: int, updated_at: int, session_id: str | None,
                 meta: tuple[tuple[str, str], ...] = (), fold: str = "") -> None:
        # each slot set through its own descriptor (bound below the class): a third less
        # time than object.__setattr__ by name, for the 1,000s of entries a load makes
        _set_id(self, id)
        _set_track(self, track)
        _set_scope(self, scope)
        _set_workspace_key(self, workspace_key)
        _set_agent_key(self, agent_key)
        _set_text(self, text)
        _set_source(self, source)
        _set_tags(self, tags)
        _set_version(self, version)
        _set_created_at(self, created_at)
        _set_updated_at(self, updated_at)
        _set_session_id(self, session_id)
        _set_meta(self, meta)
        _set_fold(self, fold or ascii_lower(text))

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"an Entry cannot be changed (set {name!r}): use revised()")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"an Entry cannot be changed (delete {name!r})")

    def __reduce__(self) -> tuple[type[Entry], tuple[object, ...]]:
        # copy and pickle rebuild it through __init__ (setting its slots one by one would
        # meet __setattr__'s refusal)
        return Entry, tuple(getattr(self, name) for name in self.__slots__)

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        if type(other) is not Entry:
            return NotImplemented
        return self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return "Entry(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self._FIELDS) + ")"

    @property
    def layer(self) -> tuple[str, str]:
        return (self.track, self.scope)

    @property
    def size(self) -> int:
        return utf16_len(self.text)

    def revised(self, **changes: Any) -> Entry:
        unknown = changes.keys() - set(self.__slots__)
        if unknown:
            raise TypeError(f"Entry has no field {sorted(unknown)[0]!r}")
        if "text" in changes:
            changes.setdefault("fold", "")  # the new text's, made by __init__
        return Entry(**{n: changes.get(n, getattr(self, n)) for n in self.__slots__})

    def metadata(self) -> dict[str, Any]:
        """The ``x-<name>`` keys with their JSON values (empty for most entries)."""
        return {k: json.loads(v) for k, v in self.meta}

    def to_protocol(self, recall_count: int = 0,
                    last_recalled: int | None = None) -> ProtocolEntry:
        """The 14-field protocol shape, in the export envelope's key order."""
        return {
            "id": self.id,
            "track": self.track,
            "scope": self.scope,
            "workspaceKey": self.workspace_key,
            "agentKey": self.agent_key,
            "text": self.text,
            "source": self.source,
            "tags": list(self.tags),
            "version": self.version,
            "createdAt": self.created_at,
            "updatedAt": self.updated_at,
            "lastRecalled": last_recalled,
            "recallCount": recall_count,
            "sessionId": self.session_id,
        }


(_set_id, _set_track, _set_scope, _set_workspace_key, _set_agent_key, _set_text, _set_source,
 _set_tags, _set_version, _set_created_at, _set_updated_at, _set_session_id, _set_meta,
 _set_fold) = (Entry.__dict__[name].__set__ for name in Entry.__slots__)


def visible(entry: Entry, workspace_key: str | None, agent_key: str | None) -> bool:
    """The session visibility predicate; ``None`` means that filter is not applied."""
    if agent_key is not None and entry.agent_key not in ("", agent_key):
        return False
    return (workspace_key is None or entry.scope != "workspace"
            or entry.workspace_key == workspace_key)


def validate_protocol_entry(e: Any, *, require_session_id: bool = True) -> dict[str, Any]:
    """``validateMemoryEntry``: check a protocol-shaped entry, return a copy with the 14 fields."""
    if not isinstance(e, dict):
        raise errors.invalid_input("memory entry must be an object")
    eid = e.get("id")
    if not isinstance(eid, str) or not UUID_RE.match(eid):
        raise errors.invalid_input(f"memory entry id must be a UUID v4 (got {js_json(eid)})")
    validate_layer(e.get("track"), e.get("scope"), track_missing="track" not in e,
                   scope_missing="scope" not in e)
    for key in ("workspaceKey", "agentKey"):
        if not isinstance(e.get(key), str):
            raise errors.invalid_input(f"memory entry {key} must be a string")
    validate_text(e.get("text"))
    if not isinstance(e.get("source"), str) or not e["source"]:
        raise errors.invalid_input("memory entry source must be a non-empty string")
    version = e.get("version")
    if not _is_int(version) or version < 1:
        raise errors.invalid_input("memory entry version must be an integer >= 1")
    created, updated = e.get("createdAt"), e.get("updatedAt")
    if not _is_int(created) or not _is_int(updated) or created < 0 or updated < created:
        raise errors.invalid_input(
            "memory entry createdAt/updatedAt must be integers with updatedAt >= createdAt"
        )
    last = e.get("lastRecalled")
    if last is not None and not _is_int(last):
        raise errors.invalid_input("memory entry lastRecalled must be null or an integer")
    count = e.get("recallCount")
    if not _is_int(count) or count < 0:
        raise errors.invalid_input("memory entry recallCount must be an integer >= 0")
    if "sessionId" not in e and require_session_id:
        raise errors.invalid_input("memory entry sessionId must be null or a string")
    sid = e.get("sessionId")
    if sid is not None and not isinstance(sid, str):
        raise errors.invalid_input("memory entry sessionId must be null or a string")
    tags = normalize_tags(e.get("tags"))
    return {
        "id": eid, "track": e["track"], "scope": e["scope"],
        "workspaceKey": e["workspaceKey"], "agentKey": e["agentKey"], "text": e["text"],
        "source": e["source"], "tags": tags, "version": version, "createdAt": created,
        "updatedAt": updated, "lastRecalled": last, "recallCount": count, "sessionId": sid,
    }


def _is_int(v: Any) -> TypeGuard[int]:
    return isinstance(v, int) and not isinstance(v, bool)
