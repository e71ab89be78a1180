"""Export of the ``claude-code-memory-md`` adapter: a Claude Code auto-memory directory.

Every entry becomes a file and, for a memory, a ``MEMORY.md`` line. What the import kept in
an entry's metadata (``adapterMetadata.data``, see ``claude_code``) decides how:

- **A memory file** (``prefix``, ``skip``, ``suffix``) keeps its file name. While the text is
  unchanged the file is given back exactly as it came (``prefix + text[skip:] + suffix``:
  every front-matter key, the body as it was) with its own ``MEMORY.md`` line (none if
  MEMORY.md did not list it: ``unlisted``); once the text changed in filemem it gets a fresh
  description, front-matter and line under its file name and ``name``.
- **A note of a topic file** (``part`` of ``parts``) goes back into that file, with the
  headings and bullet markers that stood before it; a changed note takes the new text in its
  place. The file is given back exactly while every note is there unchanged.
- **A note of MEMORY.md** and every ``MEMORY.md`` line keep their place (``seg``: the text
  before them), so an unchanged MEMORY.md is given back as it was; lines of new or other
  entries follow it.
- Anything else (an entry filemem made, metadata a hand edit broke) is written fresh:
  ``<name>.md`` with ``name``, a one-line ``description``, ``metadata.type``, ``modified``.

Exporting into a live folder (``current``: its MEMORY.md) changes only what the export
manages there: the lines of the files it writes are replaced in place (or added), a MEMORY.md
note changed in filemem replaces the note as it was imported, and every other line stays.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import unquote

from filemem.files.codec import quote

from ._claude_common import (
    DEFAULT_TYPE,
    ID,
    INDEX,
    INDEX_LINE,
    INDEX_MAX_BYTES,
    INDEX_MAX_LINES,
    SAFE_NAME,
    derive_description,
    derive_name,
    expected_tags,
    line_starts,
    newlines,
    sha256,
    track_of_type,
    yaml_str,
)
from ._common import front_matter, iso_time, payload_error
from ._markdown import MarkdownError, parse

_IN_FOLDER: Final = re.compile(r"[^/\\\x00-\x1f]{1,200}\Z")
_MEMORY: Final = "memory"
_PART: Final = "part"
_NOTE: Final = "note"


@dataclass
class _Item:
    """One entry on its way out, with what its metadata says (checked: a hand edit may have
    left anything there)."""

    index: int
    track: str
    raw: str  # the entry's text, exactly
    text: str  # the text as a Markdown body: LF line ends, no surrounding whitespace
    tags: list[str]
    modified: str | None
    kind: str  # _MEMORY, _PART, _NOTE or "" (no usable metadata)
    data: dict[str, Any]
    unchanged: bool
    sha: str | None

    @property
    def seg(self) -> dict[str, Any] | None:
        seg = self.data.get("seg")
        if not isinstance(seg, dict) or not isinstance(seg.get("of"), str) \
                or not _count(seg.get("at")) or not isinstance(seg.get("before"), str) \
                or not isinstance(seg.get("after", ""), str):
            return None
        return seg

    @property
    def line(self) -> str | None:
        line = self.data.get("line")
        return line if isinstance(line, str) and "\n" not in line else None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _md_file(value: Any) -> bool:
    """A file name the metadata may give back: a Markdown file in the folder itself (any
    name its import read: not hidden, no folder, not MEMORY.md)."""
    return (isinstance(value, str) and _IN_FOLDER.match(value) is not None
            and not value.startswith(".") and len(value) > 3
            and value.lower().endswith(".md") and value.upper() != INDEX.upper())


def _kind(data: dict[str, Any], raw: str) -> str:
    file = data.get("file")
    if _md_file(file) and isinstance(data.get("prefix"), str) \
            and isinstance(data.get("suffix"), str) and _count(data.get("skip")) \
            and data["skip"] <= len(raw):
        return _MEMORY
    if _md_file(file) and isinstance(data.get("of"), str) and _count(data.get("part")) \
            and _count(data.get("parts")) and data["part"] < data["parts"] \
            and isinstance(data.get("before"), str) \
            and isinstance(data.get("after", ""), str):
        return _PART
    if isinstance(file, str) and file.upper() == INDEX.upper() and "seg" in data:
        return _NOTE
    return ""


def _items(entries: Any) -> list[_Item]:
    if not isinstance(entries, (list, tuple)):
        raise payload_error(ID, "export takes a list of entries")
    items = []
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not isinstance(e.get("text"), str) \
                or e.get("track") not in DEFAULT_TYPE:
            raise payload_error(ID, f"entry {i} is not an entry with a track and a text",
                                item=i)
        text = newlines(e["text"]).strip()
        if not text:
            raise payload_error(ID, f"entry {i} is only whitespace; a memory file needs a "
                                "body: remove it first", item=i)
        meta = e.get("adapterMetadata")
        data = meta.get("data") if isinstance(meta, dict) else None
        data = data if isinstance(data, dict) else {}
        sha = meta.get("textSha256") if isinstance(meta, dict) else None
        item = _Item(i, e["track"], e["text"], text,
                     [t for t in e.get("tags") or [] if isinstance(t, str)],
                     iso_time(e.get("updatedAt")), _kind(data, e["text"]), data,
                     isinstance(meta, dict) and meta.get("textUnchanged") is True,
                     sha if isinstance(sha, str) else None)
        if item.kind == _NOTE and item.seg is None:
            item.kind = ""
        items.append(item)
    return items


# ---------------------------------------------------------------- files


class _Files:
    """The directory being written: file names taken (case-insensitively: macOS and Windows
    fold case), the files, and each entry's MEMORY.md line."""

    def __init__(self) -> None:
        self.used = {_MEMORY}  # MEMORY.md is the index's
        self.files: dict[str, str] = {}
        self.lines: dict[int, str] = {}  # entry index -> its MEMORY.md line
        self.owner: dict[int, str] = {}  # entry index -> the file it went into

    def take(self, stem: str) -> bool:
        if stem.lower() in self.used:
            return False
        self.used.add(stem.lower())
        return True

    def unique(self, name: str) -> str:
        """``name``, or ``name-2``, ``name-3``... not yet taken."""
        candidate, n = name, 1
        while not self.take(candidate):
            n += 1
            candidate = f"{name}-{n}"
        return candidate


def _type_of(item: _Item) -> str:
    return next((t[5:] for t in item.tags if t.startswith("type:") and t[5:]
                 and track_of_type(t[5:]) == item.track), DEFAULT_TYPE[item.track])


def _fresh(item: _Item, out: _Files, file: str, name: str) -> None:
    """A memory file written from the entry alone (as filemem writes a new memory)."""
    kind = _type_of(item)
    description = derive_description(item.text)
    head = ["---", f"name: {yaml_str(name)}", f"description: {yaml_str(description)}",
            "metadata:", f"  type: {yaml_str(kind)}"]
    if item.modified is not None:
        head.append(f"modified: {item.modified}")
    if item.tags != expected_tags(kind, name, item.text):
        head.append("tags: [" + ", ".join(quote(t) for t in item.tags) + "]")
    head.append("---")
    out.files[file] = "\n".join(head) + "\n" + item.text + "\n"
    out.lines[item.index] = f"- [{name}]({file}) \u2014 {description}"
    out.owner[item.index] = file


def _stored_name(item: _Item) -> str | None:
    """The ``name`` of the memory file as it came in (a changed memory keeps it)."""
    try:
        fm = front_matter(ID, item.data["prefix"], item.data["file"])
    except Exception:  # a prefix a hand edit broke: the file name stands in
        return None
    name = fm[0].get("name") if fm else None
    return name.strip() if isinstance(name, str) and name.strip() \
        and "\n" not in name else None


def _memory(item: _Item, out: _Files) -> bool:
    file = item.data["file"]
    stem = file[:-3]
    if not out.take(stem):
        return False  # another entry has this file (a copy, a sync conflict's fork)
    if item.unchanged:
        out.files[file] = item.data["prefix"] + item.raw[item.data["skip"]:] \
            + item.data["suffix"]
        out.owner[item.index] = file
        if item.line is not None:
            out.lines[item.index] = item.line
        elif item.data.get("unlisted") is not True:  # it came without a MEMORY.md
            out.lines[item.index] = f"- [{_stored_name(item) or stem}]({file}) \u2014 " \
                f"{derive_description(item.text)}"
    else:
        _fresh(item, out, file, _stored_name(item) or stem)
    return True


def _topics(items: list[_Item], out: _Files) -> list[_Item]:
    """Topic files back from their notes; returns the notes that cannot go back (their file
    is another's, or they are a second copy of a part)."""
    groups: dict[str, tuple[str, int, dict[int, _Item]]] = {}
    left: list[_Item] = []
    for item in items:
        file, of = item.data["file"], item.data["of"]
        group = groups.setdefault(file, (of, item.data["parts"], {}))
        if group[0] != of or group[1] != item.data["parts"] or item.data["part"] in group[2]:
            left.append(item)
            continue
        group[2][item.data["part"]] = item
    for file, (_, count, parts) in groups.items():
        if not out.take(file[:-3]):
            left.extend(parts.values())
            continue
        text = ""
        for i in sorted(parts):
            item = parts[i]
            text += item.data["before"] + (item.raw if item.unchanged else item.text)
            out.owner[item.index] = file
        last = parts.get(count - 1)
        text += last.data.get("after", "") if last is not None else "\n"
        if 0 not in parts:
            text = text.lstrip("\n")
        out.files[file] = text
        first = parts.get(0)
        if first is not None and first.line is not None:
            out.lines[first.index] = first.line
    return left


# ---------------------------------------------------------------- MEMORY.md


def _index(items: list[_Item], out: _Files, group: str | None) -> str:
    """MEMORY.md of a new folder: the pieces of the imported one in their places, then the
    lines of the other files."""
    members: dict[int, tuple[_Item, str]] = {}
    for item in items:
        seg = item.seg
        if seg is None or seg["of"] != group or seg["at"] in members:
            continue
        if item.kind == _NOTE:
            members[seg["at"]] = (item, item.raw if item.unchanged else item.text)
        elif item.index in out.lines and out.owner.get(item.index) == item.data.get("file"):
            members[seg["at"]] = (item, out.lines[item.index])
    text = ""
    tail: str | None = None
    for k, at in enumerate(sorted(members)):
        item, content = members[at]
        before = item.seg["before"] if item.seg else ""
        text += (before.lstrip("\n") if k == 0 and at > 0 else before) + content
        tail = item.seg.get("after") if item.seg else None
    text += tail or ""
    if not members:  # a MEMORY.md that had no lines of files and no notes, kept whole
        text = next((i.data["index"] for i in items if isinstance(i.data.get("index"), str)),
                    "")
        tail = "" if text else None
    placed = {item.index for item, _ in members.values()}
    rest = [out.lines[i.index] for i in items if i.index in out.lines and i.index not in placed]
    if text and not text.endswith("\n") and (rest or tail is None):
        text += "\n"
    return text + "".join(line + "\n" for line in rest)


def _target(line: str) -> str | None:
    m = INDEX_LINE.match(line.rstrip("\r"))
    return unquote(m.group("target")).removeprefix("./") if m else None


def _note_span(text: str, sha: str, managed: set[str]) -> tuple[int, int] | None:
    """Where the MEMORY.md note whose text has hash ``sha`` is in ``text``, read as import
    reads it (the lines of the files being written are the index, the rest notes)."""
    lines = text.split("\n")
    leftover = "\n".join("" if _target(line) in managed else line for line in lines)
    try:
        blocks = parse(leftover)
    except MarkdownError:
        return None
    starts = line_starts(text)
    for b in blocks:
        if sha256(b.text) == sha:
            pos = text.find(b.text, starts[b.line - 1])
            if pos >= 0:
                return pos, pos + len(b.text)
    return None


def _merge(live: str, items: list[_Item], out: _Files) -> str:
    """The live folder's MEMORY.md with the lines of the files written replaced in place
    (or added at the end) and the MEMORY.md notes changed in filemem in place of the notes
    they were; every other line stays."""
    line_of: dict[str, str] = {}
    for item in items:
        file = out.owner.get(item.index)
        if file is not None and item.index in out.lines:
            line_of.setdefault(file, out.lines[item.index])
    managed = set(out.files)
    kept: list[str] = []
    placed: set[str] = set()
    for line in live.split("\n"):
        target = _target(line)
        if target is not None and target in managed:
            if target not in placed:
                placed.add(target)
                kept.append(line_of.get(target, line))
            continue  # the same file listed twice: once is enough
        kept.append(line)
    text = "\n".join(kept)
    notes: list[str] = []
    for item in items:
        if item.kind == _NOTE and not item.unchanged and item.sha is not None:
            span = _note_span(text, item.sha, managed)
            if span is None:
                notes.append(item.text)
            else:
                text = text[:span[0]] + item.text + text[span[1]:]
    added = [line_of[f] for f in out.files if f in line_of and f not in placed]
    if (added or notes) and text and not text.endswith("\n"):
        text += "\n"
    text += "".join(line + "\n" for line in added)
    return text + "".join(f"\n{note}\n" for note in notes)


# ---------------------------------------------------------------- export


def export(entries: Any, current: dict[str, str] | None) -> dict[str, Any]:
    """The directory for ``entries``; with ``current`` (the live folder's files), its
    MEMORY.md merged into the live one."""
    items = _items(entries)
    if not items:
        return {"files": {}}
    segs = [i.seg for i in items if i.seg is not None and i.kind]
    group = segs[0]["of"] if segs else None
    out = _Files()
    fresh = _topics([i for i in items if i.kind == _PART], out)
    fresh += [i for i in items if i.kind == _MEMORY and not _memory(i, out)]
    fresh += [i for i in items if not i.kind]
    fresh += [i for i in items if i.kind == _NOTE and i.seg is not None
              and i.seg["of"] != group]
    for item in sorted(fresh, key=lambda i: i.index):
        kind = _type_of(item)
        given = next((t[5:] for t in item.tags if t.startswith("name:")
                      and SAFE_NAME.match(t[5:]) and not t.lower().endswith(".md")), None)
        stem = out.unique(given or derive_name(kind, derive_description(item.text)))
        _fresh(item, out, f"{stem}.md", given or stem)  # a given name stays, in name-2.md too
    live = next((t for n, t in (current or {}).items() if n.upper() == INDEX.upper()), None)
    index = _merge(newlines(live), items, out) if live is not None \
        else _index(items, out, group)
    lines = index.count("\n") + (0 if index.endswith("\n") or not index else 1)
    size = len(index.encode("utf-8"))
    if lines > INDEX_MAX_LINES or size > INDEX_MAX_BYTES:
        raise payload_error(
            ID, f"the MEMORY.md index would be {lines} lines / {size:,} bytes, and "
            f"Claude Code reads only the first {INDEX_MAX_LINES} lines / "
            f"{INDEX_MAX_BYTES:,} bytes of it, so memories past that would never be found: "
            "export fewer entries (e.g. one track or scope at a time) or consolidate them; "
            "nothing was cut", lines=lines, size=size)
    return {"files": {**out.files, INDEX: index}}
