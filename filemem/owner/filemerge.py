"""Merging a store's files other than entries when both machines changed them.

:func:`three_way` is the line-based three-way merge (the ``merge3`` package) of text files
(``README.md``, ``.gitignore``, ...). :func:`merge_yaml` merges ``filemem.yaml`` key by key:

- a key one side changed (set, added or removed) and the other left as it was in the base
  takes that side's change; a key both sides changed to the same value agrees; nested
  mappings (``budgets.user``, ``writePolicies``) merge key by key; any other value (a
  number, a word, a list) is one value;
- a key both sides changed differently, or one removed and the other changed, is a
  :class:`KeyConflict`. It is never resolved silently: without ``prefer`` the merge gives
  no text (the sync refuses and names the keys); ``prefer="local"`` or ``"remote"`` is the
  owner's choice for every such key.

The merged text is the line merge when that is clean and means exactly the key-by-key
result (every comment and blank line of both sides kept); otherwise the local file
rewritten by ruamel's round-trip mode with the other side's changes applied (its comments,
key order and layout kept as far as ruamel keeps them). Both are pure functions of the three
files, so every machine (and ``filemem verify``) computes the same merge.
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from filemem import yamlsafe

Prefer = Literal["local", "remote"]
PREFER: Final = ("local", "remote")


class _Missing:
    """A key that is not there (distinct from a key whose value is null)."""

    def __repr__(self) -> str:
        return "MISSING"


MISSING: Final = _Missing()


def three_way(base: bytes, mine: bytes, other: bytes) -> bytes | None:
    """A line-based three-way merge of text files (``merge3``), or None if the changes
    overlap or a file is not UTF-8 text."""
    import merge3

    try:
        texts = [b.decode("utf-8") for b in (base, mine, other)]
    except UnicodeDecodeError:
        return None
    if any("\0" in t for t in texts):
        return None
    lines = [t.splitlines(keepends=True) for t in texts]
    out: list[str] = []
    for group in merge3.Merge3(lines[0], lines[1], lines[2]).merge_groups():
        if group[0] == "conflict":
            return None
        out.extend(group[1])
    return "".join(out).encode("utf-8")


def shown(value: Any) -> str:
    """A value as a person reads it in a conflict message: JSON, or ``(not set)``."""
    if value is MISSING:
        return "(not set)"
    return json.dumps(value, ensure_ascii=False, sort_keys=False)


@dataclass(frozen=True)
class KeyConflict:
    """One key both sides changed differently since the base."""

    key: tuple[str, ...]
    base: Any
    local: Any
    remote: Any

    @property
    def name(self) -> str:
        return ".".join(self.key)

    def to_json(self) -> dict[str, Any]:
        def value(v: Any) -> Any:
            return None if v is MISSING else v

        return {"key": self.name, "local": value(self.local), "remote": value(self.remote),
                "base": value(self.base), "localSet": self.local is not MISSING,
                "remoteSet": self.remote is not MISSING}


@dataclass
class YamlMerge:
    """The result of :func:`merge_yaml`: ``text`` is None when a key conflict is left
    unresolved or ``problem`` says why the files cannot be merged."""

    text: bytes | None
    data: Any = None
    conflicts: list[KeyConflict] = field(default_factory=list)
    problem: str | None = None


def same(a: Any, b: Any) -> bool:
    """Equal as YAML data, types included (``1`` is not ``true``, ``1`` is not ``1.0``)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _merge(key: tuple[str, ...], base: Any, local: Any, remote: Any, prefer: Prefer | None,
           conflicts: list[KeyConflict]) -> Any:
    if same(local, remote):
        return local
    if same(local, base):
        return remote
    if same(remote, base):
        return local
    if isinstance(local, dict) and isinstance(remote, dict) \
            and (base is MISSING or isinstance(base, dict)):
        old = base if isinstance(base, dict) else {}
        out: dict[Any, Any] = {}
        for k in [*local, *(k for k in remote if k not in local)]:
            value = _merge((*key, str(k)), old.get(k, MISSING), local.get(k, MISSING),
                           remote.get(k, MISSING), prefer, conflicts)
            if value is not MISSING:
                out[k] = value
        return out
    conflicts.append(KeyConflict(key, base, local, remote))
    return remote if prefer == "remote" else local


def _apply(doc: Any, target: dict[Any, Any], remote: Any) -> None:
    """Make the round-trip mapping ``doc`` hold ``target`` (plain data), editing in place
    so its comments stay. A value taken from ``remote`` (the other side's round-trip
    mapping) is its node, with its comments; a key new to ``doc`` goes after the key it
    follows in ``remote``'s order."""
    theirs = remote if isinstance(remote, dict) else {}
    for k in [k for k in doc if k not in target]:
        del doc[k]
    order = list(theirs)

    def node(k: Any, value: Any) -> Any:
        return theirs[k] if k in theirs and same(_plain(theirs[k]), value) else value

    for k, value in target.items():
        if k in doc:
            if same(_plain(doc[k]), value):
                continue
            if isinstance(value, dict) and isinstance(doc[k], dict) and doc[k]:
                _apply(doc[k], value, theirs.get(k))
            else:
                doc[k] = node(k, value)
            continue
        pos = len(doc)
        if k in order:
            before = [p for p in order[:order.index(k)] if p in doc]
            pos = list(doc).index(before[-1]) + 1 if before else 0
        doc.insert(pos, k, node(k, value))
        comment = getattr(theirs, "ca", None)
        if comment is not None and k in comment.items and hasattr(doc, "ca"):
            doc.ca.items[k] = comment.items[k]  # the other side's comment on that line


def _plain(value: Any) -> Any:
    """Round-trip data as plain data (for comparisons)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, str):
        return str(value)
    return value


def merge_yaml(base: bytes | None, local: bytes, remote: bytes, *, what: str,
               max_bytes: int = yamlsafe.MAX_BYTES, prefer: Prefer | None = None) -> YamlMerge:
    """Merge two versions of a YAML mapping file key by key against ``base`` (None: no
    common version, every key counts as added on both sides). See the module docstring."""
    try:
        loaded = [MISSING if data is None else
                  yamlsafe.load(data.decode("utf-8"), what=what, max_bytes=max_bytes)
                  for data in (base, local, remote)]
    except (yamlsafe.YamlError, UnicodeDecodeError) as exc:
        return YamlMerge(None, problem=f"{what} does not parse: {exc}")
    old, mine, other = loaded
    conflicts: list[KeyConflict] = []
    merged = _merge((), old, mine, other, prefer, conflicts)
    if conflicts and prefer is None:
        return YamlMerge(None, merged, conflicts)
    text = three_way(base or b"", local, remote)
    if text is not None:
        try:
            if same(yamlsafe.load(text.decode("utf-8"), what=what, max_bytes=max_bytes),
                    merged):
                return YamlMerge(text, merged, conflicts)
        except yamlsafe.YamlError:
            pass
    if same(merged, mine):
        return YamlMerge(local, merged, conflicts)
    if same(merged, other):
        return YamlMerge(remote, merged, conflicts)
    if not isinstance(merged, dict):
        return YamlMerge(None, merged, conflicts, f"{what}: the merged file is not a mapping")
    return _rewrite(local, remote, merged, conflicts, what, max_bytes)


def _rewrite(local: bytes, remote: bytes, merged: dict[Any, Any], conflicts: list[KeyConflict],
             what: str, max_bytes: int) -> YamlMerge:
    """The local file with the merge's changes applied by ruamel's round-trip mode."""
    from ruamel.yaml import YAML

    doc = yamlsafe.load(local.decode("utf-8"), what=what, typ="rt", max_bytes=max_bytes)
    theirs = yamlsafe.load(remote.decode("utf-8"), what=what, typ="rt", max_bytes=max_bytes)
    if not isinstance(doc, dict):
        return YamlMerge(None, merged, conflicts, f"{what}: the local file is not a mapping")
    _apply(doc, merged, theirs)
    out = io.StringIO()
    yaml = YAML(typ="rt")
    yaml.dump(doc, out)
    text = out.getvalue().encode("utf-8")
    try:
        back = yamlsafe.load(text.decode("utf-8"), what=what, max_bytes=max_bytes)
    except yamlsafe.YamlError as exc:
        return YamlMerge(None, merged, conflicts, f"{what}: the merged file does not parse "
                                                  f"back ({exc})")
    if not same(back, merged):
        return YamlMerge(None, merged, conflicts, f"{what}: the merged file does not read "
                                                  "back as the merge")
    return YamlMerge(text, merged, conflicts)


__all__ = ["MISSING", "PREFER", "KeyConflict", "Prefer", "YamlMerge", "merge_yaml", "same",
           "shown", "three_way"]
