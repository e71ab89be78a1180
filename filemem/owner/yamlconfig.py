"""Another program's YAML configuration file, one key edited without disturbing the rest.

filemem edits one key of Hermes Agent's ``config.yaml`` (``memory.provider``). The file is
the person's, so:

* **Read strictly.** A file that is not UTF-8, not valid YAML (ruamel.yaml's round-trip
  parser; a key twice in one mapping counts as invalid), too large or too deep, or whose
  top level (or the section edited) is not a mapping is refused with
  :class:`~filemem.errors.ConnectError` (``CONFIG_INVALID``) naming the file and, when
  known, the line. Such a file is never written.
* **Only that key changes.** The round-trip parse says where the key and its value are; the
  change is made in the text itself: the value's own characters are replaced, or one line
  is added or removed. Comments, order, quoting, blank lines, line ends (CRLF too) and a
  byte-order mark stay exactly as they were, so undoing a change gives the file back byte
  for byte. Where that is not possible (a flow-style ``{...}`` section, a value spread over
  several lines), the document is written back by ruamel.yaml's round-trip dumper, in the
  file's own indentation: comments and order are kept, spacing may change.
* **Checked before it is written.** The new text is parsed again and must hold exactly the
  old data with that one change; otherwise nothing is written.

Writing is the caller's (:mod:`filemem.owner.hermes`: temp file, fsync, rename).
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass
from typing import Any, Final

from filemem import errors, yamlsafe

MAX_BYTES: Final = 1024 * 1024
_INDENTS: Final = ((2, 4, 2), (2, 2, 0), (4, 4, 2), (4, 6, 4), (4, 4, 0))  # mapping, seq, offset
_MISSING: Final = object()


def invalid(path: str, why: str, line: int | None = None) -> errors.ConnectError:
    where = f"{path}, line {line}" if line else path
    return errors.ConnectError(
        errors.CONFIG_INVALID,
        f"{where}: {why}; it was not changed (nor was anything else): fix the file, then run "
        "the command again", {"path": path, **({"line": line} if line else {})})


def _rt() -> Any:
    from ruamel.yaml import YAML

    yaml = YAML(typ="rt")
    yaml.allow_duplicate_keys = False
    yaml.preserve_quotes = True
    yaml.width = 4096
    return yaml


def _parse(text: str, path: str, *, rt: bool) -> Any:
    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    try:
        yamlsafe.check_size(text, path, MAX_BYTES)
        yamlsafe.check_nesting(text, path)
    except yamlsafe.YamlError as exc:
        raise invalid(path, exc.message.removeprefix(path + " ").removeprefix("is "),
                      exc.line) from None
    if rt:
        yaml = _rt()
    else:
        yaml = YAML(typ="safe", pure=True)
        yaml.allow_duplicate_keys = False
    try:
        return yaml.load(text)
    except YAMLError as exc:
        problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [repr(exc)])[0]
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        problem = re.sub(r" with value .*", "", str(problem))  # a duplicate key's values
        # may be secrets (an api_key twice): the key's name and line say enough
        context, start = getattr(exc, "context", None), getattr(exc, "context_mark", None)
        if context and start is not None and start is not mark:
            problem = f"{problem}, {context} on line {start.line + 1}"
        raise invalid(path, f"not valid YAML ({problem})",
                      mark.line + 1 if mark is not None else None) from None
    except Exception as exc:  # ruamel raises a few other types on odd input
        raise invalid(path, f"not valid YAML ({exc})") from None


@dataclass
class YamlFile:
    """One YAML file as it is on disk now (``raw`` None: there is no file)."""

    path: str
    raw: bytes | None
    text: str  # without a byte-order mark
    bom: bool
    newline: str
    doc: Any  # ruamel's round-trip document (a CommentedMap), or None when empty
    data: dict[str, Any]  # the plain data

    @property
    def exists(self) -> bool:
        return self.raw is not None

    def encode(self, text: str) -> bytes:
        return (("\ufeff" if self.bom else "") + text).encode("utf-8")

    def section(self, name: str) -> Any:
        """The plain value of a top-level key (``_MISSING`` when absent)."""
        return self.data.get(name, _MISSING)

    def line_of(self, name: str) -> int | None:
        """The line (from 1) of a top-level key, for a message; None if it is not known."""
        lc = getattr(self.doc, "lc", None)
        try:
            return int(lc.key(name)[0]) + 1 if lc is not None else None
        except (KeyError, TypeError, IndexError):
            return None


def read(path: str) -> YamlFile:
    """The file at ``path`` (through a symbolic link), parsed; CONFIG_INVALID if unusable."""
    try:
        with open(path, "rb") as f:
            raw: bytes | None = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        raw = None
    except IsADirectoryError:
        raise invalid(path, "is a folder, not a file") from None
    except OSError as exc:
        raise errors.ConnectError(errors.CONFIG_UNWRITABLE,
                                  f"{path}: cannot be read ({exc.strerror}); nothing was "
                                  "changed", {"path": path}) from None
    if raw is None:
        return YamlFile(path, None, "", False, "\n", None, {})
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid(path, "not UTF-8 text", raw[: exc.start].count(b"\n") + 1) from None
    bom = text.startswith("\ufeff")
    text = text.removeprefix("\ufeff")
    doc = _parse(text, path, rt=True)
    data = _parse(text, path, rt=False)
    if doc is not None and not isinstance(data, dict):
        raise invalid(path, "its top level is not a mapping of keys to values", 1)
    return YamlFile(path, raw, text, bom, "\r\n" if "\r\n" in text else "\n", doc, data or {})


# ---------------------------------------------------------------- where a value is


def _quoted_end(line: str, start: int) -> int | None:
    """The index after the quoted scalar starting at ``start``, if it ends on this line."""
    quote = line[start]
    i = start + 1
    while i < len(line):
        ch = line[i]
        if quote == '"' and ch == "\\":
            i += 2
            continue
        if ch == quote:
            if quote == "'" and line[i + 1:i + 2] == "'":
                i += 2
                continue
            return i + 1
        i += 1
    return None


def _token_end(line: str, start: int) -> int | None:
    """The index after a one-line scalar starting at ``start``; None if it is anything
    else (a flow collection, a block scalar, an anchor, a tag, an unclosed quote)."""
    if start >= len(line):
        return start
    if line[start] in "'\"":
        end = _quoted_end(line, start)
    elif line[start] in "[{|>&*!%@`#":
        return start if line[start] == "#" else None
    else:
        end = len(line)
        for i in range(start, len(line)):
            if line[i] == "#" and line[i - 1] in " \t":
                end = i
                break
        end = len(line[:end].rstrip(" \t\r"))
    if end is None:
        return None
    rest = line[end:].strip(" \t\r")
    return end if not rest or rest.startswith("#") else None


@dataclass(frozen=True)
class Spot:
    """Where ``key: value`` of a block mapping is: the line, the key's column, the index
    just after its colon, and the value's characters ``[start, end)`` on that line
    (``start == end == colon``: no value)."""

    line: int
    column: int
    colon: int
    start: int
    end: int


def _lines(text: str) -> list[str]:
    return text.split("\n")


def _spot(f: YamlFile, section: str, key: str) -> Spot | None:
    """``section.key`` written as one line ``key: <one-line scalar>``, else None."""
    sec = f.doc.get(section) if f.doc is not None else None
    if sec is None or not hasattr(sec, "lc") or key not in sec or sec.fa.flow_style():
        return None
    line_no, col = sec.lc.key(key)
    line = _lines(f.text)[line_no]
    i = col
    if line[i:i + 1] in ("'", '"'):
        end = _quoted_end(line, i)
        if end is None:
            return None
        i = end
    else:
        while i < len(line) and line[i] != ":":
            i += 1
    while i < len(line) and line[i] in " \t":
        i += 1
    if line[i:i + 1] != ":":
        return None
    start = i + 1
    while start < len(line) and line[start] in " \t":
        start += 1
    end = _token_end(line, start)
    if end is None:
        return None
    if start == end or line[start:start + 1] == "#":  # nothing (or only a comment) after ':'
        return Spot(line_no, col, i + 1, i + 1, i + 1)
    return Spot(line_no, col, i + 1, start, end)


def token(f: YamlFile, section: str, key: str) -> str | None:
    """How ``section.key``'s value is written (``''``, ``"mem0"``, ``honcho``, ``""`` for
    an empty value), when it is one line of a block mapping."""
    spot = _spot(f, section, key)
    if spot is None:
        return None
    return _lines(f.text)[spot.line][spot.start:spot.end]


# ---------------------------------------------------------------- changing one key


def _nested_indent(f: YamlFile) -> int:
    """The indentation of the file's nested mappings (2 unless it shows another)."""
    for value in (f.doc or {}).values():
        if hasattr(value, "lc") and hasattr(value, "keys") and len(value) and \
                not value.fa.flow_style():
            return int(value.lc.key(next(iter(value)))[1])
    return 2


def _checked(f: YamlFile, text: str, expected: dict[str, Any]) -> str | None:
    try:
        data = _parse(text, f.path, rt=False)
    except errors.ConnectError:
        return None
    return text if (data or {}) == expected else None


def _dumped(f: YamlFile, change: Any, expected: dict[str, Any], section: str) -> str:
    """The whole document written back by ruamel.yaml (comments and order kept), in the
    indentation that reproduces the file as it is; CONFIG_INVALID if nothing fits."""
    from ruamel.yaml.comments import CommentedMap

    best: str | None = None
    for mapping, sequence, offset in _INDENTS:
        yaml = _rt()
        yaml.indent(mapping=mapping, sequence=sequence, offset=offset)
        doc = yaml.load(f.text) if f.text.strip() else None
        if doc is None:
            doc = CommentedMap()
        same = io.StringIO()
        yaml.dump(doc, same)
        change(doc)
        out = io.StringIO()
        yaml.dump(doc, out)
        text = out.getvalue().replace("\n", f.newline)
        if _checked(f, text, expected) is None:
            continue
        if best is None:
            best = text
        if same.getvalue().replace("\n", f.newline) == f.text:
            return text
    if best is None:
        raise invalid(f.path, "filemem cannot change it without changing other values too "
                              "(edit it by hand)", f.line_of(section))
    return best


def set_value(f: YamlFile, section: str, key: str, value: Any, written: str) -> str:
    """The file's text with ``section.key`` set to ``value``, written as the scalar
    ``written``; the section is added at the end if missing."""
    sec = f.section(section)
    if sec is not _MISSING and sec is not None and not isinstance(sec, dict):
        raise invalid(f.path, f"`{section}` is not a mapping of keys to values",
                      f.line_of(section))
    expected = {**f.data, section: {**(sec if isinstance(sec, dict) else {}), key: value}}
    nl = f.newline
    lines = _lines(f.text)
    candidate: str | None = None
    spot = _spot(f, section, key)
    if spot is not None:
        line = lines[spot.line]
        if not written:  # no value: nothing after the colon, as `key:` is written
            lines[spot.line] = line[:spot.colon] + line[spot.end:]
        else:
            gap = " " if spot.start == spot.colon else ""
            lines[spot.line] = line[:spot.start] + gap + written + line[spot.end:]
        candidate = "\n".join(lines)
    elif isinstance(sec, dict) and sec and not f.doc[section].fa.flow_style():
        first_line, col = f.doc[section].lc.key(next(iter(f.doc[section])))
        lines.insert(first_line, " " * col + f"{key}: {written}" + ("\r" if nl == "\r\n" else ""))
        candidate = "\n".join(lines)
    elif sec is _MISSING and (f.doc is None or not f.doc.fa.flow_style()):
        text = f.text
        if text and not text.endswith("\n"):
            text += nl
        candidate = text + f"{section}:{nl}" + " " * _nested_indent(f) + f"{key}: {written}{nl}"
    if candidate is not None and _checked(f, candidate, expected) is not None:
        return candidate

    def change(doc: Any) -> None:
        from ruamel.yaml.comments import CommentedMap

        if not isinstance(doc.get(section), CommentedMap):
            doc[section] = CommentedMap()
        doc[section][key] = value

    return _dumped(f, change, expected, section)


def remove_key(f: YamlFile, section: str, key: str, *, drop_section: bool) -> str:
    """The file's text without ``section.key`` (and without the section, if
    ``drop_section`` and nothing else is left in it)."""
    sec = f.section(section)
    if not isinstance(sec, dict) or key not in sec:
        return f.text
    rest = {k: v for k, v in sec.items() if k != key}
    expected = dict(f.data)
    if rest or not drop_section:
        expected[section] = rest
    else:
        del expected[section]
    lines = _lines(f.text)
    spot = _spot(f, section, key)
    candidate: str | None = None
    if spot is not None and not lines[spot.line][:spot.column].strip():
        del lines[spot.line]
        if not rest and drop_section:
            sec_line = f.doc.lc.key(section)[0]
            head = lines[sec_line].rstrip("\r")
            if head.split("#", 1)[0].strip() == f"{section}:":
                del lines[sec_line]
        candidate = "\n".join(lines)
        if not rest and not drop_section:
            candidate = None  # `memory:` with nothing under it is null, not {}: dump it
    if candidate is not None and _checked(f, candidate, expected) is not None:
        return candidate

    def change(doc: Any) -> None:
        del doc[section][key]
        if not doc[section] and drop_section:
            del doc[section]

    return _dumped(f, change, expected, section)


def file_mode(path: str, default: int = 0o600) -> int:
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return default


__all__ = ["MAX_BYTES", "Spot", "YamlFile", "file_mode", "invalid", "read", "remove_key",
           "set_value", "token"]
