"""Another program's JSON configuration file, edited without losing anything of it.

filemem edits a few files that belong to other tools (Claude Code's ``settings.json``,
``.mcp.json``, ``~/.claude.json``). Those files are the person's, so:

* **Read strictly, never guessed at.** A file that is not UTF-8, not JSON (comments,
  trailing commas, ``NaN``), not an object at the top, or that has a key twice in one
  object is refused with :class:`~filemem.errors.ConnectError` (``CONFIG_INVALID``) naming
  the file and, for a syntax error, a repeated key or ``NaN``, its line and column. Such a
  file is never written.
* **Everything else is kept.** Keys keep their order and values (numbers as written: ``1.0``
  stays ``1.0``); only the keys the caller changes change. The file is written back in its
  own layout: the indent of its nested lines (2 spaces, 4, a tab, or all on one line) and
  whether it ends with a newline, so a file in that layout (as Claude Code writes its files:
  ``JSON.stringify(value, null, 2)``) comes back byte for byte when the change is undone.
* **Replaced whole**, through :func:`filemem.files.atomic.atomic_write` (temp file, fsync,
  rename): a reader or a kill sees the old file or the new one. A symbolic link (a
  dotfiles repository's ``settings.json``) is written through: its target is replaced and
  the link stays. The file keeps its permission bits.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from typing import Any, Final

from filemem import errors
from filemem.files import atomic

MAX_BYTES: Final = 16 * 1024 * 1024
NEW_LAYOUT: Final = ("  ", False)  # a file filemem creates: 2-space indent, no final newline
_INDENT: Final = re.compile(rb"\n([ \t]+)\S")


def json_type(value: Any) -> str:
    """A value's JSON type name (``object``, ``array``, ...), for messages."""
    for kind, name in ((dict, "object"), (list, "array"), (str, "string"), (bool, "boolean"),
                       ((int, float), "number")):
        if isinstance(value, kind):
            return name
    return "null"


def invalid(path: str, why: str, **details: Any) -> errors.ConnectError:
    return errors.ConnectError(
        errors.CONFIG_INVALID,
        f"{path}: {why}; it was not changed (nor was anything else): fix the file (or move "
        "it away), then run the command again", {"path": path, **details})


@dataclass
class JsonFile:
    """One JSON file as it is on disk now: ``data`` is ``{}`` for a file that is absent."""

    path: str  # as the person knows it (a link is not resolved)
    raw: bytes | None  # None: there is no file
    data: dict[str, Any]
    indent: str | None  # None: everything on one line
    newline: bool  # ends with a newline

    @property
    def exists(self) -> bool:
        return self.raw is not None

    def render(self, data: dict[str, Any]) -> bytes:
        """``data`` in this file's layout."""
        if self.indent is None:
            text = json.dumps(data, ensure_ascii=False, separators=_compact(self.raw))
        else:
            text = json.dumps(data, ensure_ascii=False, indent=self.indent)
        return (text + ("\n" if self.newline else "")).encode("utf-8")


def _compact(raw: bytes | None) -> tuple[str, str]:
    """The separators of a one-line file: Python's ``", "`` / ``": "`` or JSON.stringify's."""
    if raw is not None and re.search(rb'[,:] ', raw) is None:
        return (",", ":")
    return (", ", ": ")


class _Refused(Exception):
    """What the parser's hooks found (they are not told where): located afterwards."""


def _no_duplicates(items: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in items:
        if key in out:
            raise _Refused()
        out[key] = value
    return out


def _no_constant(name: str) -> Any:
    raise _Refused()


def _refused_at(path: str, text: str) -> errors.ConnectError:
    """CONFIG_INVALID for the first key repeated in one object, or ``NaN``/``Infinity``, in
    ``text`` (which the parser refused for one of them), with its line and column."""
    stack: list[set[str] | None] = []  # per open object its keys (None: an array)
    expect_key = False
    i = 0
    while i < len(text):
        c = text[i]
        if c == '"':
            end = i + 1
            while end < len(text) and text[end] != '"':
                end += 2 if text[end] == "\\" else 1
            end += 1
            key = json.loads(text[i:end])  # the parser read it already: it is valid
            if expect_key and stack and stack[-1] is not None:
                if key in stack[-1]:
                    return _at(path, text, i, f"the key {json.dumps(key, ensure_ascii=False)} "
                               "appears twice in one object (Claude Code would read only the "
                               "last one): keep one", key=key)
                stack[-1].add(key)
            expect_key = False
            i = end
            continue
        if c in "{[":
            stack.append(set() if c == "{" else None)
            expect_key = c == "{"
        elif c in "}]":
            stack.pop()
        elif c == ",":
            expect_key = bool(stack) and stack[-1] is not None
        elif c in "NI-":
            m = re.match(r"-?Infinity|NaN", text[i:])
            if m:
                return _at(path, text, i, f"{m.group()} is not JSON")
        i += 1
    return invalid(path, "is not valid JSON")  # not reached: the parser found one


def _at(path: str, text: str, pos: int, why: str, **details: Any) -> errors.ConnectError:
    line = text.count("\n", 0, pos) + 1
    column = pos - text.rfind("\n", 0, pos)  # from 1, as the parser's own messages count
    return invalid(path, f"line {line} column {column}: {why}", line=line, column=column,
                   **details)


def load(path: str) -> JsonFile:
    """The file at ``path`` (absent: an empty object in the layout filemem writes)."""
    try:
        with open(path, "rb") as f:  # a link is followed: its target is the file
            raw = f.read(MAX_BYTES + 1)
    except FileNotFoundError:
        return JsonFile(path, None, {}, *NEW_LAYOUT)
    except IsADirectoryError:
        raise invalid(path, "is a folder, not a JSON file") from None
    except OSError as exc:
        raise invalid(path, f"cannot be read ({exc.strerror})") from None
    if len(raw) > MAX_BYTES:
        raise invalid(path, f"is larger than {MAX_BYTES:,} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise invalid(path, f"is not UTF-8 text (byte {exc.start})") from None
    if text.startswith("\ufeff"):
        raise invalid(path, "starts with a byte-order mark, which JSON does not allow")
    if not text.strip():
        return JsonFile(path, raw, {}, *NEW_LAYOUT)  # an empty file: no settings yet
    try:
        data = json.loads(text, object_pairs_hook=_no_duplicates,
                          parse_constant=_no_constant)
    except _Refused:
        raise _refused_at(path, text) from None
    except json.JSONDecodeError as exc:
        raise invalid(path, f"is not valid JSON: line {exc.lineno} column {exc.colno}: "
                            f"{exc.msg}", line=exc.lineno, column=exc.colno) from None
    if not isinstance(data, dict):
        raise invalid(path, f"holds a JSON {json_type(data)}, not an object")
    m = _INDENT.search(raw)
    indent = m.group(1).decode("ascii") if m else ("" if b"\n" in raw.strip() else None)
    return JsonFile(path, raw, data, indent, raw.endswith(b"\n"))


def unwritable(path: str, exc: OSError) -> errors.ConnectError:
    return errors.ConnectError(
        errors.CONFIG_UNWRITABLE,
        f"{path} cannot be written ({exc.strerror or exc}); it was left as it was: make it (or "
        "its folder) writable, or free disk space, then run the command again",
        {"path": path})


def save(f: JsonFile, data: dict[str, Any], *, mode: int = 0o644) -> None:
    """Replace the file with ``data`` in its layout (a new file gets ``mode``)."""
    write_bytes(f.path, f.render(data), mode=mode)


def write_bytes(path: str, data: bytes, *, mode: int = 0o644) -> None:
    """Replace ``path`` (through a link: its target) with ``data`` atomically and durably,
    keeping its permission bits; its folder is made if it is missing. CONFIG_UNWRITABLE if
    that fails (the file is then as it was)."""
    real = os.path.realpath(path)
    try:
        try:
            keep: int | None = os.stat(real).st_mode & 0o7777
        except FileNotFoundError:
            keep = None
            os.makedirs(os.path.dirname(real), mode=0o755, exist_ok=True)
        atomic.atomic_write(real, data, durable=True, mode=mode if keep is None else keep)
        if keep is not None and os.stat(real).st_mode & 0o7777 != keep:
            os.chmod(real, keep)  # the umask took bits away from the temp file
    except OSError as exc:
        raise unwritable(path, exc) from None


def remove(path: str) -> None:
    """Delete the file (a regular file: callers write a link's target instead)."""
    try:
        os.unlink(path)
        atomic.fsync_dir(os.path.dirname(os.path.abspath(path)))
    except OSError as exc:
        raise unwritable(path, exc) from None


__all__ = ["JsonFile", "invalid", "json_type", "load", "remove", "save", "unwritable",
           "write_bytes"]
