"""``hermes-memory-md``: Hermes Agent's ``~/.hermes/memories/MEMORY.md`` and ``USER.md``.

Hermes keeps two files of entries joined by a line holding only ``§`` (``"\\n§\\n"``), with
no header and no trailing newline. ``MEMORY.md`` is the agent's notes (our ``agent`` track),
``USER.md`` the user profile (our ``user`` track); both are global, so imports land in
``user-global``. This adapter reads the files the way Hermes does (universal newlines, each
entry stripped, empty and repeated entries dropped) and writes them the way Hermes does, so
a file Hermes wrote comes back byte for byte.

People also write ``MEMORY.md`` as ordinary Markdown (``## Section`` headings over ``-``
bullets). Hermes would read such a file as one giant entry; import reads it as memories
instead (see ``_markdown``), headings becoming tags. Export always writes the ``§`` shape
Hermes really reads, and refuses, rather than cut anything, what Hermes would not keep:
a file over its character budget or an entry that would split at a delimiter.

Payloads: a string or ``{"text", "file"?}`` (one file; ``USER.md`` by name is the user
profile, any other name is read as ``MEMORY.md``), or ``{"files": {"MEMORY.md": ...,
"USER.md": ...}}`` (a memories directory; other files such as Hermes' ``.lock`` and
``.bak`` files are ignored). Export returns ``{"files": {...}}`` with the files that have
entries.
"""

from __future__ import annotations

from typing import Any, Final

from filemem.shown import counted

from ._common import at, files_payload, payload_error, text_payload
from ._markdown import MarkdownError, looks_structured, parse

ID: Final = "hermes-memory-md"
DELIMITER: Final = "\n\u00a7\n"
MEMORY: Final = "MEMORY.md"
USER: Final = "USER.md"
TRACK_OF: Final = {MEMORY: "agent", USER: "user"}
FILE_OF: Final = {"agent": MEMORY, "user": USER}
CONFIG_KEY: Final = {MEMORY: "memory.memory_char_limit", USER: "memory.user_char_limit"}
SHAPES: Final = ('markdown text, {"text": "..."} or {"files": {"MEMORY.md": "...", '
                 '"USER.md": "..."}}')


def universal_newlines(text: str) -> str:
    """What Python's text-mode read (Hermes' ``read_text``) makes of the line ends."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_entries(text: str) -> list[str]:
    """Hermes' reader: split on the delimiter, strip, drop empty and repeated entries."""
    out: list[str] = []
    for part in universal_newlines(text).split(DELIMITER):
        entry = part.strip()
        if entry and entry not in out:
            out.append(entry)
    return out


def _excerpt(text: str) -> str:
    one = " ".join(text.split())
    return one if len(one) <= 40 else one[:39] + "\u2026"


class HermesMemoryMd:
    """The ``hermes-memory-md`` adapter (pure: strings in, strings out)."""

    id = ID
    name = "Hermes Agent memory (MEMORY.md / USER.md)"
    description = (
        "Hermes' MEMORY.md (agent track) and USER.md (user track): entries joined by a line "
        "holding only \u00a7, no trailing newline; import also reads the '## heading' + "
        "bullets variant (headings become tags). Cannot carry: tags, scope, workspace or agent "
        "layer (Hermes memory is global), source, surrounding whitespace, repeated texts. "
        "Export refuses a file over Hermes' budget (2,200 / 1,375 characters) and an entry "
        "holding a \u00a7 line."
    )
    version = "1.0.0"
    import_formats = (ID,)
    export_format = ID

    def __init__(self, memory_char_limit: int = 2200, user_char_limit: int = 1375) -> None:
        self.limits = {MEMORY: memory_char_limit, USER: user_char_limit}

    # ------------------------------------------------------------ import

    def adapt(self, payload: Any) -> list[dict[str, Any]]:
        directory = files_payload(ID, payload)
        if directory is not None:
            found = {n.upper(): (n, t) for n, t in directory[0].items()}
            picked = [(name, *found[name.upper()]) for name in (MEMORY, USER)
                      if name.upper() in found]
            if not picked:
                raise payload_error(ID, "the directory has neither MEMORY.md nor USER.md")
        else:
            text, file, _ = text_payload(ID, payload, SHAPES)
            kind = USER if file is not None and file.upper() == USER.upper() else MEMORY
            picked = [(kind, file or kind, text)]
        entries: list[dict[str, Any]] = []
        for kind, shown, text in picked:
            entries += self._read(kind, shown, text)
        return entries

    def _read(self, kind: str, shown: str, text: str) -> list[dict[str, Any]]:
        track = TRACK_OF[kind]
        text = universal_newlines(text)
        if DELIMITER in text or not looks_structured(text):
            return [{"track": track, "scope": "user-global", "text": e, "source": ID,
                     "tags": []} for e in split_entries(text)]
        try:
            blocks = parse(text)
        except MarkdownError as exc:
            raise payload_error(ID, f"{at(shown, exc.line)}{exc.message}", file=shown,
                                line=exc.line) from None
        return [{"track": track, "scope": "user-global", "text": b.text, "source": ID,
                 "tags": b.tags} for b in blocks]

    # ------------------------------------------------------------ export

    def export(self, entries: Any) -> dict[str, Any]:
        if not isinstance(entries, (list, tuple)):
            raise payload_error(ID, "export takes a list of entries")
        groups: dict[str, list[str]] = {MEMORY: [], USER: []}
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or not isinstance(e.get("text"), str) \
                    or e.get("track") not in FILE_OF:
                raise payload_error(ID, f"entry {i} is not an entry with a track and a text",
                                    item=i)
            kind = FILE_OF[e["track"]]
            text = universal_newlines(e["text"]).strip()
            if not text:
                raise payload_error(
                    ID, f"entry {i} is only whitespace; Hermes drops empty entries, so it "
                    "cannot be exported: remove it first", item=i)
            lines = text.split("\n")
            if len(lines) > 1 and "\u00a7" in lines:
                raise payload_error(
                    ID, f"entry {i} ({_excerpt(text)!r}) has a line holding only \u00a7, "
                    f"Hermes' entry delimiter, so {kind} would split it into several entries: "
                    "edit the entry first; nothing was exported", item=i, file=kind)
            if text not in groups[kind]:
                groups[kind].append(text)
        files: dict[str, str] = {}
        for kind, items in groups.items():
            if not items:
                continue
            content = DELIMITER.join(items)
            size, limit = len(content), self.limits[kind]
            if size > limit:
                raise payload_error(
                    ID, f"{kind} would be {size:,} characters "
                    f"({counted(len(items), 'entry', 'entries')} joined by "
                    f"\"\\n\u00a7\\n\"), over Hermes' default {limit:,}-character budget "
                    f"by {size - limit:,} (the one checked here, whatever {CONFIG_KEY[kind]} "
                    f"says in Hermes' config.yaml): remove or consolidate "
                    f"{TRACK_OF[kind]}-track entries, then export again; nothing was cut",
                    file=kind, size=size, limit=limit)
            if split_entries(content) != items:  # the line rule above makes this unreachable
                raise payload_error(ID, f"{kind} would not read back as the same entries; "
                                    "nothing was exported", file=kind)
            files[kind] = content
        return {"files": files}
