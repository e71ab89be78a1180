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
  the tags. ``modified``, ``originSessionId`` and other keys are not kept: filemem stamps its
  own times and session ids.

Export writes such a directory: one file per entry, named after the memory, and a
``MEMORY.md`` index. Claude Code reads only the first 200 lines / 25 KB of the index, so an
export that would not fit is refused rather than cut.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import unquote

from filemem.files.codec import quote

from ._common import (
    add_tag,
    at,
    files_payload,
    front_matter,
    iso_time,
    payload_error,
    tag_problem,
    text_payload,
    too_many_tags,
)
from ._markdown import MarkdownError, parse

ID: Final = "claude-code-memory-md"
MD_FORMAT: Final = ID
DIR_FORMAT: Final = "claude-code-memory-dir"
INDEX: Final = "MEMORY.md"
INDEX_MAX_LINES: Final = 200
INDEX_MAX_BYTES: Final = 25_000
DESCRIPTION_MAX: Final = 150
TRACK_OF_TYPE: Final = {"user": "user", "feedback": "user", "project": "agent",
                        "reference": "agent"}
DEFAULT_TYPE: Final = {"user": "user", "agent": "project"}
SHAPES: Final = ('markdown text, {"text": "..."} or {"files": {"MEMORY.md": "...", '
                 '"<memory>.md": "..."}}')
_INDEX_LINE: Final = re.compile(
    r"\s{0,3}[-*+]\s+\[(?P<title>[^\]]*)\]\((?P<target>[^)\s]+)\)(?P<rest>.*)\Z")
_TRAILING: Final = " \t.,;:!?\u3002\uff0c\uff1b\uff1a\uff01\uff1f\u2026"
_YAML_BREAKS: Final = "\u2028\u2029\ufeff\ufffe\uffff"
_YAML_WORDS: Final = frozenset({"y", "n", "yes", "no", "on", "off", "true", "false", "null"})
_SAFE_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")


# ---------------------------------------------------------------- shared rules


def track_of_type(kind: str) -> str:
    return TRACK_OF_TYPE.get(kind, "user")


def derive_description(text: str) -> str:
    """The description export writes: the first non-blank line, cut at 150 characters (the
    body keeps the whole text, so nothing is lost)."""
    first = next((ln.strip() for ln in text.split("\n") if ln.strip()), "")
    return first if len(first) <= DESCRIPTION_MAX else first[:DESCRIPTION_MAX - 1] + "\u2026"


def derive_name(kind: str, description: str) -> str:
    """``<type>-<first words>``, Claude's own naming habit (``feedback-db-tests``)."""
    ascii_text = unicodedata.normalize("NFKD", description).encode("ascii", "ignore").decode()
    words = re.findall(r"[a-z0-9]+", ascii_text.lower())
    slug = ""
    for w in words[:6]:
        if len(slug) + len(w) + 1 > 48:
            break
        slug = f"{slug}-{w}" if slug else w
    base = re.sub(r"[^a-z0-9-]+", "-", kind.lower()).strip("-") or "memory"
    if slug == base or slug.startswith(base + "-"):
        return slug  # "project-..." needs no second "project-"
    return f"{base}-{slug or 'memory'}"


def _restates(description: str, body: str) -> bool:
    """Whether the body's first line already says the description (it starts with it, up
    to trailing punctuation), so repeating the description in the text would add nothing."""
    if description == derive_description(body):
        return True
    first = next((ln.strip() for ln in body.split("\n") if ln.strip()), "")
    d = description.rstrip(_TRAILING)
    return bool(d) and first.rstrip(_TRAILING).startswith(d)


def _yaml_str(value: str) -> str:
    """A YAML scalar for ``value``: plain when that is unambiguous (as Claude Code writes
    them), else double-quoted."""
    if (value and value[0].isalpha() and value == value.strip() and ": " not in value
            and " #" not in value and not value.endswith(":")
            and not any(ch < " " or "\x7f" <= ch <= "\x9f" or ch in _YAML_BREAKS
                        for ch in value)
            and value.lower() not in _YAML_WORDS):
        return value
    return quote(value)


def _is_derived_name(name: str, kind: str, text: str) -> bool:
    base = derive_name(kind, derive_description(text))
    return name == base or re.fullmatch(re.escape(base) + r"-\d+", name) is not None


def expected_tags(kind: str, name: str, text: str) -> list[str]:
    """The tags import derives from a memory file's type and name alone."""
    tags = []
    if kind != DEFAULT_TYPE[track_of_type(kind)]:
        tags.append(f"type:{kind}")
    if not _is_derived_name(name, kind, text) and tag_problem(f"name:{name}") is None:
        tags.append(f"name:{name}")
    return tags


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


def _newlines(text: str) -> str:
    """CRLF (and CRs before a line end, invisible anyway) to LF, idempotently."""
    return re.sub(r"\r+\n", "\n", text)


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
        "Export writes the directory. Cannot carry: scope and agent layer (one directory is "
        "one project), source, times, surrounding whitespace; Markdown imports lose bullet "
        "markers and '# Title' lines."
    )
    version = "1.0.0"
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
        return self._markdown(text, file, track, scope, workspace)

    @staticmethod
    def _workspace_hint(payload: Any) -> str | None:
        if not isinstance(payload, Mapping):
            return None
        key = payload.get("workspaceKey")
        if isinstance(key, str) and key:
            return key
        project = payload.get("project")
        return decode_project(project) if isinstance(project, str) and project else None

    def _markdown(self, text: str, file: str | None, track: str, scope: str,
                  workspace: str | None) -> list[dict[str, Any]]:
        try:
            blocks = parse(text)
        except MarkdownError as exc:
            raise payload_error(ID, f"{at(file, exc.line)}{exc.message}", file=file,
                                line=exc.line) from None
        out = []
        for b in blocks:
            entry: dict[str, Any] = {"track": track, "scope": scope, "text": b.text,
                                     "source": ID, "tags": b.tags}
            if scope == "workspace" and workspace:
                entry["workspaceKey"] = workspace
            out.append(entry)
        return out

    def _read_directory(self, files: dict[str, str], workspace: str | None
                        ) -> list[dict[str, Any]]:
        scope = "workspace" if workspace else "user-global"
        md = {n: t for n, t in files.items() if n.lower().endswith(".md")}
        index_name = next((n for n in md if n.upper() == INDEX.upper()), None)
        order: list[str] = []
        leftover = ""
        if index_name is not None:
            kept: list[str] = []
            for line in _newlines(md[index_name]).split("\n"):
                m = _INDEX_LINE.match(line)
                target = unquote(m.group("target")).removeprefix("./") if m else None
                if target is not None and target in md and target != index_name:
                    if target not in order:
                        order.append(target)
                    kept.append("")  # keep line numbers for messages about the rest
                else:
                    kept.append(line)
            leftover = "\n".join(kept)
        order += sorted(n for n in md if n not in order and n != index_name)
        memories: list[dict[str, Any]] = []
        notes: list[dict[str, Any]] = []
        for name in order:
            entry = self._memory_file(name, md[name])
            if entry is None:  # a topic file without front-matter: Claude's notes
                notes += self._markdown(md[name], name, "agent", scope, workspace)
            elif entry:
                memories.append(entry)
        if index_name is not None:
            notes = self._markdown(leftover, index_name, "agent", scope, workspace) + notes
        for entry in memories:
            entry["scope"] = scope
            if workspace:
                entry["workspaceKey"] = workspace
        return memories + notes

    def _memory_file(self, file: str, text: str) -> dict[str, Any] | None:
        """The entry of one memory file; None if it has no front-matter, {} if it is empty."""
        fm = front_matter(ID, _newlines(text), file)
        if fm is None:
            return None
        keys, body, _ = fm

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
        body = body.strip()
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
        if name and not _is_derived_name(name, kind, text_out) \
                and tag_problem(f"name:{name}") is None:
            add_tag(tags, f"name:{name}")
        problem = too_many_tags(tags)
        if problem:
            raise payload_error(ID, f"{at(file)}{problem}", file=file)
        return {"track": track, "scope": "user-global", "text": text_out, "source": ID,
                "tags": tags}

    # ------------------------------------------------------------ export

    def export(self, entries: Any) -> dict[str, Any]:
        if not isinstance(entries, (list, tuple)):
            raise payload_error(ID, "export takes a list of entries")
        files: dict[str, str] = {}
        index: list[str] = []
        used = {"memory"}
        for i, e in enumerate(entries):
            if not isinstance(e, dict) or not isinstance(e.get("text"), str) \
                    or e.get("track") not in DEFAULT_TYPE:
                raise payload_error(ID, f"entry {i} is not an entry with a track and a text",
                                    item=i)
            track = e["track"]
            text = _newlines(e["text"]).strip()
            if not text:
                raise payload_error(ID, f"entry {i} is only whitespace; a memory file needs a "
                                    "body: remove it first", item=i)
            tags = [t for t in e.get("tags") or [] if isinstance(t, str)]
            kind = next((t[5:] for t in tags if t.startswith("type:") and t[5:]
                         and track_of_type(t[5:]) == track), DEFAULT_TYPE[track])
            description = derive_description(text)
            given = next((t[5:] for t in tags if t.startswith("name:")
                          and _SAFE_NAME.match(t[5:]) and not t.lower().endswith(".md")), None)
            stem = self._unique(given or derive_name(kind, description), used)
            name = given or stem  # a given name stays as it is, even if its file is name-2.md
            head = ["---", f"name: {_yaml_str(name)}", f"description: {_yaml_str(description)}",
                    "metadata:", f"  type: {_yaml_str(kind)}"]
            modified = iso_time(e.get("updatedAt"))
            if modified is not None:
                head.append(f"modified: {modified}")
            if tags != expected_tags(kind, name, text):
                head.append("tags: [" + ", ".join(quote(t) for t in tags) + "]")
            head.append("---")
            files[f"{stem}.md"] = "\n".join(head) + "\n" + text + "\n"
            index.append(f"- [{name}]({stem}.md) \u2014 {description}")
        if not files:
            return {"files": {}}
        index_text = "\n".join(index) + "\n"
        size = len(index_text.encode("utf-8"))
        if len(index) > INDEX_MAX_LINES or size > INDEX_MAX_BYTES:
            raise payload_error(
                ID, f"the MEMORY.md index would be {len(index)} lines / {size:,} bytes, and "
                f"Claude Code reads only the first {INDEX_MAX_LINES} lines / "
                f"{INDEX_MAX_BYTES:,} bytes of it, so memories past that would never be found: "
                "export fewer entries (e.g. one track or scope at a time) or consolidate them; "
                "nothing was cut", lines=len(index), size=size)
        files[INDEX] = index_text
        return {"files": files}

    @staticmethod
    def _unique(name: str, used: set[str]) -> str:
        """``name``, or ``name-2``, ``name-3``... not yet taken (case-insensitively: macOS
        and Windows file systems fold case)."""
        candidate, n = name, 1
        while candidate.lower() in used:
            n += 1
            candidate = f"{name}-{n}"
        used.add(candidate.lower())
        return candidate
