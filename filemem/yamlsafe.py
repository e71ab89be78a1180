"""The one guarded YAML reader: entry front-matter, other tools' memory files, filemem.yaml.

YAML that a person or another program wrote may be hostile, and ruamel.yaml is slow on some
inputs (a few KB of ``[[[[`` take it seconds). So before any real work :func:`load` refuses

* text larger than a size cap (64 KiB of UTF-8 unless the caller says otherwise);
* nesting deeper than :data:`MAX_DEPTH` levels: a cheap scan of brackets and indentation
  before parsing, then an exact count on the parser's event stream, which stops at the
  first level too many (the scan is a fast path, the count the rule);
* anchors and aliases (``&a``, ``*a``: billion-laughs documents), explicit tags (``!!python/...``,
  ``!mine``, also ``!!str``), merge keys (``<<``) and duplicate keys;

then parses with ruamel.yaml (``safe``, or ``rt`` when the caller wants round-trip types).
A document that is only nested block mappings of plain keys to decimal integers, plain
words and ``{}`` (``filemem.yaml`` as ``filemem init`` writes it, with its comments) is read
by :func:`simple_mapping` instead, for the same result without importing ruamel (which
would otherwise be a sixth of a cold ``filemem query``); anything else, or anything it is
unsure of, goes to ruamel.
Every problem is a :class:`YamlError` with a message that starts with the name the caller
gave the document (``what``) and, when known, the 1-based line; callers turn it into their
own error code. This module imports nothing from filemem, and ruamel only when it parses.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal

MAX_BYTES: Final = 64 * 1024
MAX_DEPTH: Final = 32
_MAX_INDENT: Final = 4 * MAX_DEPTH
_DEEP_INDENT_RE: Final = re.compile(rf"^ {{{_MAX_INDENT + 1},}}\S", re.M)
_BLANK: Final = frozenset(" \t")


class YamlError(ValueError):
    """YAML that :func:`load` refuses or cannot parse; ``line`` is 1-based, or None."""

    def __init__(self, message: str, line: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.line = line


def _too_deep(what: str, line: int | None) -> YamlError:
    return YamlError(f"{what} is nested too deeply (more than {MAX_DEPTH} levels); flatten "
                     "the value", line)


def check_size(text: str, what: str, max_bytes: int = MAX_BYTES) -> None:
    """Refuse ``text`` if its UTF-8 form is larger than ``max_bytes``."""
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise YamlError(f"{what} is larger than {max_bytes} bytes")


def check_nesting(text: str, what: str) -> None:
    """Refuse deep nesting before parsing, in one pass over the characters.

    Counts ``[``/``{`` against ``]``/``}`` outside quoted scalars and comments, and refuses
    lines indented more than ``4 * MAX_DEPTH`` spaces. A quote only opens a quoted scalar
    where YAML allows one (at the start of a line or after ``[{,`` or ``: - ?`` and a
    blank), so an apostrophe inside a plain scalar (``don't``) hides nothing. The scan may
    over-count (brackets in plain text) but :func:`load` also counts the parser's real levels,
    so nothing that gets past this scan can nest deeper either.
    """
    deep = _DEEP_INDENT_RE.search(text)
    if deep is not None:
        raise _too_deep(what, text.count("\n", 0, deep.start()) + 1)
    depth = 0
    line = 1
    quote = ""
    prev = ""  # the last non-blank character on this line ("" at its start)
    blank = False  # a blank since prev
    comment = False
    for ch in text:
        if ch == "\n":
            line += 1
            quote = prev = ""
            blank = comment = False
        elif comment:
            pass
        elif quote:
            if ch == quote:
                quote, prev, blank = "", ch, False
        elif ch in _BLANK:
            blank = True
        else:
            if ch in "\"'" and (prev in ("", "[", "{", ",") or (blank and prev in ":-?")):
                quote = ch
            elif ch == "#" and (blank or prev == ""):
                comment = True
            elif ch in "[{":
                depth += 1
                if depth > MAX_DEPTH:
                    raise _too_deep(what, line)
            elif ch in "]}":
                depth = max(depth - 1, 0)
            prev, blank = ch, False


def _check_events(yaml: Any, text: str, what: str) -> None:
    """Walk the parser's events (no objects are built): anchors, aliases, tags, merge keys and
    the exact nesting depth, stopping at the first problem."""
    from ruamel.yaml.events import (
        AliasEvent,
        CollectionEndEvent,
        CollectionStartEvent,
        NodeEvent,
        ScalarEvent,
    )

    depth = 0
    for event in yaml.parse(text):
        mark = getattr(event, "start_mark", None)
        line = mark.line + 1 if mark is not None else None
        if isinstance(event, AliasEvent) or (
                isinstance(event, NodeEvent) and getattr(event, "anchor", None)):
            raise YamlError(f"{what} uses YAML anchors or aliases (&name, *name), which are "
                            "not allowed; write each value out in full", line)
        tag = getattr(event, "tag", None)
        implicit = getattr(event, "implicit", True)
        explicit = not (implicit[0] if isinstance(implicit, tuple) else implicit)
        if tag and explicit:
            raise YamlError(f"{what} uses the YAML tag {tag}, which is not allowed; write the "
                            "plain value", line)
        if isinstance(event, ScalarEvent) and event.value == "<<" and not event.style:
            raise YamlError(f"{what} uses a YAML merge key (<<), which is not allowed; write "
                            "the keys out", line)
        if isinstance(event, CollectionStartEvent):
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep(what, line)
        elif isinstance(event, CollectionEndEvent):
            depth -= 1


_SIMPLE_LINE: Final = re.compile(
    r"( *)([A-Za-z_][A-Za-z0-9_./-]*(?::[A-Za-z0-9_./-]+)*):(?: +([^ ].*?))?")
_INT: Final = re.compile(r"0|[1-9][0-9]*")
_WORD: Final = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*")
# words some YAML reader takes for a boolean, a null or a number: left to ruamel
_NOT_WORDS: Final = frozenset({"true", "false", "null", "yes", "no", "on", "off", "y", "n",
                               "nan", "inf"})
_UNSURE: Final = frozenset("\t\r\"'&*!|>%@`[]?,\ufeff")


def simple_mapping(text: str) -> dict[str, Any] | None:
    """``text`` as nested dicts if it is only block mappings of plain keys to decimal
    integers, plain words and ``{}`` (with ``#`` comments), else None: then ruamel decides,
    including every error. Where it answers, the answer is what ruamel's safe loader gives
    (tests/test_yaml_guard.py compares the two on generated documents)."""
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(0, root)]
    opened: dict[str, Any] | None = None  # a key with no value: its mapping comes next
    for raw in text.split("\n"):
        line = raw.split(" #", 1)[0].rstrip(" ")  # a comment: "#" first or after a blank
        if line.lstrip(" ").startswith("#") or not line.strip(" "):
            continue
        if "#" in line or line.startswith(("---", "...")) or _UNSURE.intersection(line):
            return None
        m = _SIMPLE_LINE.fullmatch(line)
        if m is None:
            return None
        indent, key, value = len(m.group(1)), m.group(2), m.group(3)
        if opened is not None:
            if indent <= stack[-1][0] or len(stack) >= MAX_DEPTH:
                return None  # an empty value (null), or nesting left to the exact count
            stack.append((indent, opened))
            opened = None
        while indent < stack[-1][0]:
            stack.pop()
        mapping = stack[-1][1]
        if indent != stack[-1][0] or key in mapping or key.lower() in _NOT_WORDS:
            return None
        if value is None:
            opened = mapping[key] = {}
        elif value == "{}":
            mapping[key] = {}
        elif _INT.fullmatch(value):
            mapping[key] = int(value)
        elif _WORD.fullmatch(value) and value.lower() not in _NOT_WORDS:
            mapping[key] = value
        else:
            return None
    return root if root and opened is None else None


def load(text: str, *, what: str, typ: Literal["safe", "rt"] = "safe",
         max_bytes: int = MAX_BYTES) -> Any:
    """Parse ``text`` behind the guards; plain data (``safe``) or ruamel's round-trip types
    (``rt``). Raises :class:`YamlError` and nothing else."""
    check_size(text, what, max_bytes)
    check_nesting(text, what)
    simple = simple_mapping(text) if typ == "safe" else None
    if simple is not None:
        return simple
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    yaml = YAML(typ="rt") if typ == "rt" else YAML(typ="safe", pure=True)
    yaml.allow_duplicate_keys = False
    try:
        _check_events(yaml, text, what)
        return yaml.load(text)
    except YamlError:
        raise
    except RecursionError:
        raise _too_deep(what, None) from None
    except YAMLError as exc:
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [repr(exc)])[0]
        mark = getattr(exc, "problem_mark", None)
        raise YamlError(f"{what} is not valid YAML: {problem}",
                        mark.line + 1 if mark is not None else None) from None
    except Exception as exc:  # ruamel raises a few non-YAMLError types on odd input
        raise YamlError(f"{what} is not valid YAML: {exc}") from None


__all__ = ["MAX_BYTES", "MAX_DEPTH", "YamlError", "check_nesting", "check_size", "load",
           "simple_mapping"]
