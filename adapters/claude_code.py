"""``claude-code-memory-md``: Claude Code's CLAUDE.md files and its auto-memory directory.

Two shapes come in:

- **CLAUDE.md-style Markdown** (``~/.claude/CLAUDE.md``, a project's ``CLAUDE.md``): each
  bullet and each paragraph becomes an entry, the ``##`` headings above it its tags (see
  ``_markdown``). A project's ``CLAUDE.md`` holds the project's conventions, so it lands in
  the ``agent`` track of that project's workspace; any other Markdown (the user-level file,
  text without a file name) in ``user``/``user-global``.
- **The auto-memory directory** ``~/.claude/projects/<project>/memory/``: one Markdown file
  per memory with front-matter (``name``, ``description``, a type in ``type`` or
  ``metadata.type``, ``modified``) and ``MEMORY.md``, an index of ``- [Title](file.md) —
  hook`` lines. ``<project>`` is the repository path with every character other than a
  letter or digit replaced by ``-``; it is decoded back into the workspace
  (``-Users-me-code-api`` → ``/Users/me/code/api``). The encoding is lossy (``my-app`` and
  ``my/app`` look the same), so callers may pass the workspace themselves.

How a memory file's fields map onto an entry (the protocol's entry has no free-form keys):

- ``type`` → track: ``user`` and ``feedback`` are about the person (``user`` track),
  ``project`` and ``reference`` about the work (``agent`` track). A type that is not the
  default of its track (``user`` for user, ``project`` for agent) is kept as the tag
  ``type:<type>``.
- ``name`` → the tag ``name:<name>``, unless it is the name export would derive anyway. A
  name too long for a tag (over 27 characters) is not kept; export derives a new one.
- ``description`` → the text. When the body's first line already says it (starts with it,
  up to trailing punctuation; export writes exactly that), the text is the body alone;
  otherwise the text is the description, a blank line, then the body.
- a ``tags`` list (which filemem's export adds when the tags carry more than the above) →
  the tags. ``modified``, ``originSessionId`` and the other keys are not entry fields.

Round trips: every entry of an auto-memory directory also carries the adapter's metadata
(kept in its entry file, never shown to the model): the file it came from, the exact text
around its text there (a memory file's front-matter with every key, its body's whitespace;
the headings and bullet markers around a note) and its ``MEMORY.md`` line with what stood
before it. Export (``_claude_export``) uses it to give every file back as it came while the
text is unchanged.

Export writes such a directory: one file per entry, named after the memory, and a
``MEMORY.md`` index. Claude Code reads only the first 200 lines / 25 KB of the index, so an
export that would not fit is refused rather than cut.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import unquote

from . import _claude_export
from ._claude_common import (
    DEFAULT_TYPE,
    ID,
    INDEX,
    INDEX_LINE,
    file_id,
    is_derived_name,
    locate,
    newlines,
    track_of_type,
)
from ._claude_common import derive_description as derive_description
from ._claude_common import derive_name as derive_name
from ._common import (
    add_tag,
    at,
    files_payload,
    front_matter,
    payload_error,
    tag_problem,
    text_payload,
    too_many_tags,
)
from ._markdown import Block, MarkdownError, parse

MD_FORMAT: Final = ID
DIR_FORMAT: Final = "claude-code-memory-dir"
SHAPES: Final = ('markdown text, {"text": "..."} or {"files": {"MEMORY.md": "...", '
                 '"<memory>.md": "..."}}')
_TRAILING: Final = " \t.,;:!?\u3002\uff0c\uff1b\uff1a\uff01\uff1f\u2026"
FRONT_MATTER_KEPT: Final = 16_000  # bytes of a memory file's front-matter kept


def _restates(description: str, body: str) -> bool:
    """Whether the body's first line already says the description (it starts with it, up
    to trailing punctuation), so repeating the description in the text would add nothing."""
    if description == derive_description(body):
        return True
    first = next((ln.strip() for ln in body.split("\n") if ln.strip()), "")
    d = description.rstrip(_TRAILING)
    return bool(d) and first.rstrip(_TRAILING).startswith(d)


def decode_project(project: str) -> str | None:
    """A Claude project directory name back to the path it came from (best effort)."""
    m = re.fullmatch(r"([A-Za-z])--(.*)", project)
    if m:  # C:\Users\me\api -> C--Users-me-api; Windows workspace keys are lower-case
        return (m.group(1) + ":\\" + m.group(2).replace("-", "\\")).lower()
    if project.startswith("-"):
        parts = [p for p in project[1:].split("-") if p]
        return "/" + "/".join(parts)
    return None


def project_of_path(path: str) -> str | None:
    """``<project>`` of a ``.../projects/<project>/memory`` directory path, if it is one."""
    parts = [p for p in re.split(r"[\\/]+", path) if p]
    if len(parts) >= 3 and parts[-1] == "memory" and parts[-3] == "projects":
        return parts[-2]
    return None


def _kept(entry: dict[str, Any], key: str, data: dict[str, Any]) -> dict[str, Any]:
    entry["adapterMetadata"] = {"key": key, "data": data}
    return entry


def _data(entry: dict[str, Any]) -> dict[str, Any]:
    meta = entry.get("adapterMetadata")
    return meta["data"] if isinstance(meta, dict) else {}


# ---------------------------------------------------------------- the adapter


class ClaudeCodeMemoryMd:
    """The ``claude-code-memory-md`` adapter (pure: strings in, strings out)."""

    id = ID
    name = "Claude Code memory (CLAUDE.md, auto-memory directory)"
    description = (
        "CLAUDE.md-style Markdown (bullets and paragraphs become entries, '## section' a tag) "
        "and Claude Code's auto-memory directory (~/.claude/projects/<project>/memory/: one "
        "front-matter file per memory plus the MEMORY.md index). Type maps to track, name to "
        "a 'name:' tag, description to the text's first line, the project to the workspace. "
        "Export writes the directory, each memory back under its own file name with its own "
        "front-matter and MEMORY.md line while its text is unchanged, and exporting into a "
        "live folder keeps the MEMORY.md lines of files it does not write. Cannot carry: scope "
        "and agent layer (one directory is one project), source, surrounding whitespace; "
        "Markdown imports lose bullet markers and '# Title' lines."
    )
    version = "1.1.0"
    import_formats = (MD_FORMAT, DIR_FORMAT)
    export_format = DIR_FORMAT

    # ------------------------------------------------------------ import

    def adapt(self, payload: Any) -> list[dict[str, Any]]:
        directory = files_payload(ID, payload)
        workspace = self._workspace_hint(payload)
        if directory is not None:
            files, path = directory
            if workspace is None and path is not None:
                project = project_of_path(path)
                workspace = decode_project(project) if project else None
            return self._read_directory(files, workspace)
        text, file, path = text_payload(ID, payload, SHAPES)
        name = file or ""
        upper = name.upper()
        if name and upper not in ("CLAUDE.MD", "CLAUDE.LOCAL.MD", INDEX.upper()) \
                and front_matter(ID, text, name) is not None:
            if workspace is None and path is not None:
                parent = re.sub(r"[\\/]+[^\\/]*\Z", "", path)
                project = project_of_path(parent)
                workspace = decode_project(project) if project else None
            return self._read_directory({name: text}, workspace)
        track, scope = "user", "user-global"
        if upper in ("CLAUDE.MD", "CLAUDE.LOCAL.MD") and path is not None:
            parts = [p for p in re.split(r"[\\/]+", path) if p]
            if len(parts) >= 2 and parts[-2] != ".claude":
                parent = re.sub(r"[\\/]+[^\\/]*\Z", "", path) or "/"
                track, scope = "agent", "workspace"
                workspace = workspace or parent
        return [self._entry(b, track, scope, workspace)
                for b in self._blocks(text, file)]

    @staticmethod
    def _workspace_hint(payload: Any) -> str | None:
        if not isinstance(payload, Mapping):
            return None
        key = payload.get("workspaceKey")
        if isinstance(key, str) and key:
            return key
        project = payload.get("project")
        return decode_project(project) if isinstance(project, str) and project else None

    @staticmethod
    def _blocks(text: str, file: str | None) -> list[Block]:
        try:
            return parse(text)
        except MarkdownError as exc:
            raise payload_error(ID, f"{at(file, exc.line)}{exc.message}", file=file,
                                line=exc.line) from None

    @staticmethod
    def _entry(b: Block, track: str, scope: str, workspace: str | None) -> dict[str, Any]:
        entry: dict[str, Any] = {"track": track, "scope": scope, "text": b.text,
                                 "source": ID, "tags": b.tags}
        if scope == "workspace" and workspace:
            entry["workspaceKey"] = workspace
        return entry

    def _notes(self, name: str, text: str, scope: str, workspace: str | None
               ) -> list[dict[str, Any]]:
        """A topic file without front-matter: its bullets and paragraphs, as Markdown notes
        on the agent track, each knowing its part of the file."""
        blocks = self._blocks(text, name)
        notes = [self._entry(b, "agent", scope, workspace) for b in blocks]
        found = locate(text, [(b.line, b.text) for b in blocks])
        if found is not None and blocks:
            before, after = found
            for i, entry in enumerate(notes):
                data: dict[str, Any] = {"file": name, "of": file_id(text), "part": i,
                                        "parts": len(notes), "before": before[i]}
                if i == len(notes) - 1:
                    data["after"] = after
                _kept(entry, name, data)
        return notes

    def _read_directory(self, files: dict[str, str], workspace: str | None
                        ) -> list[dict[str, Any]]:
        scope = "workspace" if workspace else "user-global"
        md = {n: newlines(t) for n, t in files.items() if n.lower().endswith(".md")}
        index_name = next((n for n in md if n.upper() == INDEX.upper()), None)
        order: list[str] = []
        linked: dict[str, tuple[int, str]] = {}  # file -> (line, line text) of its index line
        leftover = ""
        if index_name is not None:
            kept: list[str] = []
            for n, line in enumerate(md[index_name].split("\n"), start=1):
                m = INDEX_LINE.match(line)
                target = unquote(m.group("target")).removeprefix("./") if m else None
                if target is not None and target in md and target != index_name:
                    if target not in order:
                        order.append(target)
                        linked[target] = (n, line)
                    kept.append("")  # keep line numbers for messages about the rest
                else:
                    kept.append(line)
            leftover = "\n".join(kept)
        order += sorted(n for n in md if n not in order and n != index_name)
        memories: list[dict[str, Any]] = []
        notes: list[dict[str, Any]] = []
        carriers: dict[str, dict[str, Any]] = {}  # file -> the entry that keeps its index line
        for name in order:
            entry = self._memory_file(name, md[name])
            if entry is None:  # a topic file without front-matter: Claude's notes
                parts = self._notes(name, md[name], scope, workspace)
                notes += parts
                if parts and "adapterMetadata" in parts[0]:
                    carriers[name] = parts[0]
            elif entry:
                memories.append(entry)
                if "adapterMetadata" in entry:
                    carriers[name] = entry
        if index_name is not None:
            index_notes = self._index(md[index_name], index_name, leftover, linked, carriers,
                                      scope, workspace, memories + notes)
            notes = index_notes + notes
            for entry in memories:  # a memory MEMORY.md does not list stays unlisted
                data = _data(entry)
                if data and data["file"] not in linked:
                    data["unlisted"] = True
        for entry in memories:
            entry["scope"] = scope
            if workspace:
                entry["workspaceKey"] = workspace
        return memories + notes

    def _index(self, text: str, name: str, leftover: str, linked: dict[str, tuple[int, str]],
               carriers: dict[str, dict[str, Any]], scope: str, workspace: str | None,
               others: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """MEMORY.md's notes (what is not an index line), and where every piece of it sits:
        each index line is kept by its file's entry, each note by its own, with the text
        before it, so an unchanged MEMORY.md is given back as it was. A MEMORY.md with no
        piece at all (a title, blank lines) is kept whole by the first entry of the folder."""
        blocks = self._blocks(leftover, name)
        notes = [self._entry(b, "agent", scope, workspace) for b in blocks]
        pieces: list[tuple[int, str, dict[str, Any]]] = []
        for target, (line, content) in linked.items():
            if target in carriers:
                _data(carriers[target])["line"] = content
                pieces.append((line, content, carriers[target]))
        pieces += [(b.line, b.text, _kept(e, name, {"file": name}))
                   for b, e in zip(blocks, notes, strict=True)]
        pieces.sort(key=lambda p: p[0])
        if not pieces:
            keeper = next((e for e in others if "adapterMetadata" in e), None)
            if keeper is not None and text:
                _data(keeper)["index"] = text
            return notes
        found = locate(text, [(line, content) for line, content, _ in pieces])
        if found is None:
            return notes
        before, after = found
        of = file_id(text)
        for i, (_, _, entry) in enumerate(pieces):
            seg: dict[str, Any] = {"of": of, "at": i, "before": before[i]}
            if i == len(pieces) - 1:
                seg["after"] = after
            _data(entry)["seg"] = seg
        return notes

    def _memory_file(self, file: str, text: str) -> dict[str, Any] | None:
        """The entry of one memory file; None if it has no front-matter, {} if it is empty."""
        fm = front_matter(ID, text, file)
        if fm is None:
            return None
        keys, raw_body, _ = fm

        def scalar(key: str, value: Any) -> str:
            if value is None:
                return ""
            if isinstance(value, (dict, list)):
                raise payload_error(ID, f"{at(file)}front-matter {key} must be a single value",
                                    file=file)
            return str(value).strip()

        metadata = keys.get("metadata")
        raw_type = keys.get("type")
        if raw_type is None and isinstance(metadata, Mapping):
            raw_type = metadata.get("type")
        name = scalar("name", keys.get("name"))
        description = scalar("description", keys.get("description"))
        declared = scalar("type", raw_type)
        body = raw_body.strip()
        if not body and not description:
            return {}
        if not description or _restates(description, body):
            text_out = body
        else:
            text_out = f"{description}\n\n{body}" if body else description
        kind = declared or DEFAULT_TYPE["user"]
        track = track_of_type(kind)
        tags: list[str] = []
        listed = keys.get("tags")
        if listed is not None:
            if not isinstance(listed, list) or not all(isinstance(t, str) for t in listed):
                raise payload_error(ID, f"{at(file)}front-matter tags must be a list of strings",
                                    file=file)
            for t in listed:
                problem = tag_problem(t)
                if problem:
                    raise payload_error(ID, f"{at(file)}front-matter tags: {problem}", file=file)
                add_tag(tags, t)
        if kind != DEFAULT_TYPE[track]:
            problem = tag_problem(f"type:{kind}")
            if problem:
                raise payload_error(ID, f"{at(file)}the type {kind!r} cannot be kept as a tag: "
                                    f"{problem}", file=file)
            add_tag(tags, f"type:{kind}")
        if name and not is_derived_name(name, kind, text_out) \
                and tag_problem(f"name:{name}") is None:
            add_tag(tags, f"name:{name}")
        problem = too_many_tags(tags)
        if problem:
            raise payload_error(ID, f"{at(file)}{problem}", file=file)
        entry = {"track": track, "scope": "user-global", "text": text_out, "source": ID,
                 "tags": tags}
        data = self._file_data(file, text, raw_body, text_out)
        return _kept(entry, file, data) if data is not None else entry

    @staticmethod
    def _file_data(file: str, text: str, raw_body: str, text_out: str
                   ) -> dict[str, Any] | None:
        """How the memory file is made of its entry's text: ``prefix + text[skip:] +
        suffix`` (the front-matter and the body's whitespace around the body; ``skip``
        passes over the description when the text starts with it)."""
        core = raw_body.strip()
        if text_out == core:
            skip = 0
        elif not core:
            skip = len(text_out)
        elif text_out.endswith("\n\n" + core):
            skip = len(text_out) - len(core)
        else:
            return None
        start = len(text) - len(raw_body) + len(raw_body) - len(raw_body.lstrip())
        prefix, suffix = text[:start], text[start + len(core):]
        if prefix + text_out[skip:] + suffix != text:
            return None
        size = len(prefix.encode("utf-8", "surrogatepass"))
        if size > FRONT_MATTER_KEPT:
            raise payload_error(
                ID, f"{at(file)}the front-matter is {size:,} bytes; filemem keeps at most "
                f"{FRONT_MATTER_KEPT:,} bytes of a memory file's own keys to give them back "
                "on export: shorten it and import again", file=file)
        return {"file": file, "prefix": prefix, "skip": skip, "suffix": suffix}

    # ------------------------------------------------------------ export

    def export(self, entries: Any) -> dict[str, Any]:
        return _claude_export.export(entries, None)

    def export_into(self, entries: Any, current: Any) -> dict[str, Any]:
        """The export merged into a live memory folder: ``current`` is what its files hold
        now (``{"files": {name: text}}``); MEMORY.md keeps the lines of files the export does
        not write."""
        found = files_payload(ID, current)
        return _claude_export.export(entries, found[0] if found else None)
