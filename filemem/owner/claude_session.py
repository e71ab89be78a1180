"""Claude Code sessions and filemem: the SessionStart hook, and Claude Code's own
auto-memory folder.

**The hook.** ``filemem connect claude-code`` makes Claude Code run
``filemem hook claude-code session-start`` whenever a session starts, resumes, is cleared
or compacted. Claude Code sends it a JSON object on stdin (``session_id``, ``cwd``,
``hook_event_name: "SessionStart"``, ``source``: ``startup | resume | clear | compact |
fork``, ``transcript_path``, and optional ``model``, ``agent_type``...) and reads a JSON
object from its stdout; ``hookSpecificOutput.additionalContext`` is added to the model's
context before the first prompt. :func:`session_start` answers with the session's frozen
snapshot (workspace: the ``cwd`` Claude Code reports; agent: the one connect was given):

* a new session id (``startup``, ``clear``, ``fork``) gets the snapshot rendered now by the
  Provider, which records it as the protocol's ``snapshot`` audit row with Claude Code's
  session id, byte-identical to the ``additionalContext`` sent;
* ``resume`` and ``compact`` keep the session id: they get the same text again, the one
  that session's ``snapshot`` row holds (no second row), so the snapshot stays frozen for
  the whole session. A session with no such row (the store was read-only then) gets a new
  snapshot, recorded as usual.

An empty snapshot (nothing to show) prints nothing: Claude Code adds nothing. A snapshot
over 10,000 characters (Claude Code then gives the model a file with a preview instead)
comes with a ``systemMessage`` telling the person so.

**Auto-memory.** Claude Code keeps its own memory in
``<config>/projects/<project>/memory/``: ``<config>`` is ``~/.claude`` (or
``$CLAUDE_CONFIG_DIR``), ``<project>`` the project's folder with every UTF-16 code unit
other than an ASCII letter or digit replaced by ``-`` (cut at 200 characters plus a hash of
the path when longer), and the project's folder is the root of its git repository (the main
checkout for a linked worktree), else the folder itself. :func:`plan_import` turns that
folder into entries with the ``claude-code-memory-md`` adapter and leaves out the ones
``filemem import`` would (the same rule: same text in the same layer, the same memory file
imported before, or one a pending approval waits to add), so offering the import again
after it was done, even after the memory was changed in filemem, or while an earlier offer
waits in ``filemem pending``, offers nothing.
"""

from __future__ import annotations

import json
import os
from typing import Any, Final, NamedTuple

from filemem import errors
from filemem.model import workspace_key_of
from filemem.provider import Provider
from filemem.toolspec import WRITE_TOOL_NAMES

# the MCP server's name in Claude Code's settings (`connect claude-code` registers it): here,
# not in .claude_code, so that the hook Claude Code runs at every session start does not
# import what editing Claude Code's files needs (subprocess, the JSON editor, the adapters)
SERVER: Final = "filemem"
ADAPTER: Final = "claude-code-memory-md"
EVENT: Final = "SessionStart"
KEEPS_SESSION: Final = ("resume", "compact")
INPUT_MAX: Final = 1024 * 1024
SLUG_MAX: Final = 200
CONTEXT_MAX: Final = 10_000  # Claude Code hands longer hook text to the model as a file


# ---------------------------------------------------------------- the SessionStart hook


def _bad_input(why: str) -> errors.ProtocolError:
    return errors.invalid_input(
        f"hook claude-code session-start: {why}; this command is run by Claude Code at "
        "session start with its SessionStart hook input on stdin (a JSON object with "
        "session_id and cwd); `filemem connect claude-code` sets that up")


def read_input(raw: bytes) -> dict[str, Any]:
    """Claude Code's SessionStart hook input, checked."""
    if len(raw) > INPUT_MAX:
        raise _bad_input(f"stdin is more than {INPUT_MAX:,} bytes")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise _bad_input(f"stdin is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise _bad_input("stdin is not a JSON object")
    event = data.get("hook_event_name")
    if event is not None and event != EVENT:
        raise _bad_input(f"it was run for the {event!r} event, not {EVENT}")
    sid = data.get("session_id")
    if not isinstance(sid, str) or not sid:
        raise _bad_input("the input has no session_id")
    cwd = data.get("cwd")
    if cwd is not None and (not isinstance(cwd, str) or not os.path.isabs(cwd)):
        raise _bad_input("its cwd is not an absolute path")
    return data


def tool_names() -> tuple[str, ...]:
    """The memory write tools as Claude Code names an MCP server's tools:
    ``mcp__<server>__<tool>``."""
    return tuple(f"mcp__{SERVER}__{name}" for name in WRITE_TOOL_NAMES)


def session_start(provider: Provider, raw: bytes, agent: str,
                  tools: tuple[str, ...] | None = None) -> tuple[bytes, str]:
    """(what to print for Claude Code, the snapshot text in it) for the hook input ``raw``;
    the snapshot's header names ``tools``, the memory tools as Claude Code shows them."""
    data = read_input(raw)
    sid = data["session_id"]
    cwd = data.get("cwd") or os.getcwd()
    text: str | None = None
    if data.get("source") in KEEPS_SESSION:
        earlier = provider.store.ledger.last_row("snapshot", sid)
        if earlier is not None and isinstance(earlier["text"], str):
            text = earlier["text"]
    if text is None:
        text = provider.snapshot({"id": sid, "header": {"cwd": cwd, "agentPreset": agent}},
                                 tools=tools)
    if not text:
        return b"", ""
    out: dict[str, Any] = {"hookSpecificOutput": {"hookEventName": EVENT,
                                                  "additionalContext": text}}
    size = len(text.encode("utf-16-le")) // 2  # JavaScript's length, as Claude Code counts
    if size > CONTEXT_MAX:
        out["systemMessage"] = (
            f"filemem: this session's memory snapshot is {size:,} characters; Claude Code "
            f"gives the model hook text over {CONTEXT_MAX:,} characters as a file with a "
            "preview. To keep it in the prompt, consolidate or remove memories "
            "(`filemem budgets` shows what each track and scope uses, `filemem list` every "
            "entry).")
    return (json.dumps(out, ensure_ascii=True) + "\n").encode("ascii"), text


# ---------------------------------------------------------------- Claude Code's auto-memory


def project_slug(path: str) -> str:
    """Claude Code's name for a project's folder under ``<config>/projects/``."""
    units = path.encode("utf-16-le")
    codes = [int.from_bytes(units[i:i + 2], "little") for i in range(0, len(units), 2)]
    slug = "".join(chr(c) if chr(c).isascii() and chr(c).isalnum() else "-" for c in codes)
    if len(slug) <= SLUG_MAX:
        return slug
    h = 0
    for c in codes:  # JavaScript's ((h << 5) - h + c) | 0, over UTF-16 code units
        h = ((h << 5) - h + c) & 0xFFFFFFFF
    h = abs(h - (1 << 32) if h >= 1 << 31 else h)
    digits = ""
    while True:
        h, d = divmod(h, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
        if not h:
            break
    return f"{slug[:SLUG_MAX]}-{digits}"


def repository_root(folder: str) -> str | None:
    """The root of the git repository ``folder`` is in (a linked worktree's: the main
    checkout's), or None outside one. Reads ``.git`` files, runs no git."""
    d = os.path.realpath(folder)
    while True:
        dot = os.path.join(d, ".git")
        if os.path.isdir(dot):
            return d
        if os.path.isfile(dot):
            return _main_checkout(d, dot) or d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def _main_checkout(folder: str, dot_git: str) -> str | None:
    try:
        with open(dot_git, encoding="utf-8") as f:
            text = f.read(4096)
        if not text.startswith("gitdir:"):
            return None
        gitdir = os.path.normpath(os.path.join(folder, text[len("gitdir:"):].strip()))
        with open(os.path.join(gitdir, "commondir"), encoding="utf-8") as f:
            common = os.path.normpath(os.path.join(gitdir, f.read(4096).strip()))
    except (OSError, UnicodeDecodeError):
        return None  # a submodule (no commondir), or unreadable: the folder itself
    return os.path.dirname(common) if os.path.basename(common) == ".git" else None


def auto_memory_dir(project: str) -> str:
    """Where Claude Code keeps its auto-memory for sessions started in ``project``."""
    from filemem.owner.claude_code import config_dir

    root = repository_root(project) or os.path.realpath(project)
    return os.path.join(config_dir(), "projects", project_slug(root), "memory")


class ImportPlan(NamedTuple):
    """What importing a project's auto-memory would add."""

    folder: str
    entries: list[Any]  # the adapter's entries filemem does not hold yet
    already: int  # the adapter's entries filemem holds already
    waiting: dict[str, int]  # pending approval id -> how many of them it waits to add


def plan_import(provider: Provider, payload: Any, project: str, write: Any) -> ImportPlan:
    """The adapter's entries for the auto-memory folder ``payload`` (as ``filemem import``
    reads a folder), placed in ``project``'s workspace and ``agent``'s layer, minus those
    ``filemem import`` would leave out (:mod:`filemem.owner.imports`: the same text in the
    same layer, the same memory file imported before and changed in filemem since, or one
    a pending approval waits to add)."""
    from filemem.adapters import default_registry
    from filemem.owner import imports

    folder = str(payload.get("path", "")) if isinstance(payload, dict) else ""
    entries = default_registry().adapt(ADAPTER, payload)
    wk = workspace_key_of(project)
    for e in entries:
        if isinstance(e, dict) and e.get("scope") == "workspace":
            e["workspaceKey"] = wk
    todo, skipped = imports.plan(provider, entries, write, adapter_id=ADAPTER)
    waiting: dict[str, int] = {}
    for s in skipped:
        if s["why"] == "pending":
            waiting[s.get("pendingId", "")] = waiting.get(s.get("pendingId", ""), 0) + 1
    return ImportPlan(folder, todo, len(skipped) - sum(waiting.values()), waiting)


__all__ = ["ADAPTER", "CONTEXT_MAX", "SERVER", "ImportPlan", "auto_memory_dir", "plan_import",
           "project_slug", "read_input", "repository_root", "session_start", "tool_names"]
