"""Connecting filemem to Claude Code: what ``filemem connect claude-code`` and
``filemem disconnect claude-code`` change in Claude Code's files.

Connect makes two changes, in the files Claude Code reads for the scope:

================  ==========================================  ===============================
scope             the MCP server ``filemem``                  the ``SessionStart`` hook
================  ==========================================  ===============================
``user``          ``~/.claude.json``, key ``mcpServers``      ``~/.claude/settings.json``
``project``       ``<project>/.mcp.json``                     ``<project>/.claude/settings.json``
================  ==========================================  ===============================

(``$CLAUDE_CONFIG_DIR`` replaces ``~/.claude`` and holds ``.claude.json``.) The server is
registered through ``claude mcp add-json`` when the ``claude`` command is on PATH (Claude
Code rewrites ``~/.claude.json`` itself while it runs, so only its own command may change
it), else by writing the same entry into the file. The hook is one matcher group
``{"hooks": [{"type": "command", "command": "<filemem> hook claude-code session-start
--agent NAME [--store PATH]", "timeout": 30}]}`` appended to ``hooks.SessionStart``.

What is filemem's is recognised by what it runs, not by a marker: the server named
``filemem`` whose command is a ``filemem`` executable (or ``python -m filemem``) running
``mcp``, and every hook handler whose command runs ``filemem hook claude-code
session-start``. Connect replaces those in place (so running it again, or with another
``--agent``, never adds a second one) and keeps every other key, value and hook; disconnect
removes exactly them, and the containers (``hooks``, ``SessionStart``, ``mcpServers``, the
file itself) that are empty only because of that.

Every file is checked before anything is written (:mod:`filemem.owner.jsonconfig`: a file
that is not valid JSON is never written), each file is replaced atomically, and the server
(the step that can fail, when ``claude`` fails) comes before the hook; if writing the hook
fails, the server registration is undone. So a connect that stops at any point leaves
each file as it was or connected, and running it again finishes the job.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Any, Final

from filemem import errors
from filemem.owner import jsonconfig
from filemem.owner.jsonconfig import JsonFile

SERVER: Final = "filemem"
EVENT: Final = "SessionStart"
HOOK_ARGS: Final = ("hook", "claude-code", "session-start")
HOOK_TIMEOUT: Final = 30  # seconds: a stuck store never holds a session start for long
SCOPES: Final = ("user", "project")
DEFAULT_AGENT: Final = "claude-code"
CLAUDE_TIMEOUT: Final = 120.0
PROJECT_MODE: Final = 0o644  # .mcp.json: a file a team may commit
SETTINGS_MODE: Final = 0o644  # settings.json, as Claude Code makes it
STATE_MODE: Final = 0o600  # ~/.claude.json: Claude Code keeps it private too


# ---------------------------------------------------------------- where Claude Code reads


def config_dir() -> str:
    """Claude Code's configuration folder: ``$CLAUDE_CONFIG_DIR``, else ``~/.claude``."""
    custom = os.environ.get("CLAUDE_CONFIG_DIR")
    if custom:
        return os.path.abspath(os.path.expanduser(custom))
    return os.path.join(os.path.expanduser("~"), ".claude")


def state_file() -> str:
    """Claude Code's own state file, which holds user-scope MCP servers: ``~/.claude.json``
    (inside ``$CLAUDE_CONFIG_DIR`` when that is set)."""
    if os.environ.get("CLAUDE_CONFIG_DIR"):
        return os.path.join(config_dir(), ".claude.json")
    return os.path.join(os.path.expanduser("~"), ".claude.json")


def filemem_program() -> tuple[str, ...]:
    """How Claude Code should start this filemem: the ``filemem`` executable that is
    running (by its full path: Claude Code may run with another PATH), else this
    interpreter with ``-m filemem``."""
    argv0 = sys.argv[0] if sys.argv else ""
    name = os.path.basename(argv0).lower().removesuffix(".exe")
    if name == "filemem" and os.path.isfile(argv0):
        return (os.path.abspath(argv0),)
    return (sys.executable, "-m", "filemem")


def _filemem_args(argv: list[str]) -> list[str] | None:
    """The arguments given to filemem if ``argv`` runs filemem, else None."""
    if not argv:
        return None
    if os.path.basename(argv[0]).lower().removesuffix(".exe") == "filemem":
        return argv[1:]
    if len(argv) >= 3 and argv[1] == "-m" and argv[2] in ("filemem", "filemem.cli"):
        return argv[3:]
    return None


def is_our_hook(handler: Any) -> bool:
    """A hook handler that runs ``filemem hook claude-code session-start``."""
    if not isinstance(handler, dict) or handler.get("type", "command") != "command":
        return False
    command = handler.get("command")
    if not isinstance(command, str):
        return False
    args = handler.get("args")
    try:
        argv = [command, *args] if isinstance(args, list) else shlex.split(command)
    except ValueError:
        return False
    rest = _filemem_args([str(a) for a in argv])
    return rest is not None and tuple(rest[:3]) == HOOK_ARGS


def is_our_server(entry: Any) -> bool:
    """An MCP server entry that runs ``filemem mcp``."""
    if not isinstance(entry, dict) or entry.get("type", "stdio") != "stdio":
        return False
    command, args = entry.get("command"), entry.get("args", [])
    if not isinstance(command, str) or not isinstance(args, list):
        return False
    rest = _filemem_args([command, *(str(a) for a in args)])
    return rest is not None and rest[:1] == ["mcp"]


# ---------------------------------------------------------------- what connect writes


@dataclass(frozen=True)
class Target:
    """One connection: the scope, the project folder, and what filemem runs as."""

    scope: str
    project: str
    agent: str = DEFAULT_AGENT
    store: str | None = None  # None: filemem's default store, whatever the environment
    program: tuple[str, ...] = field(default_factory=filemem_program)

    @property
    def settings_path(self) -> str:
        if self.scope == "user":
            return os.path.join(config_dir(), "settings.json")
        return os.path.join(self.project, ".claude", "settings.json")

    @property
    def server_path(self) -> str:
        return state_file() if self.scope == "user" else os.path.join(self.project, ".mcp.json")

    def _options(self) -> list[str]:
        return ["--agent", self.agent] + (["--store", self.store] if self.store else [])

    def server(self) -> dict[str, Any]:
        """The entry ``claude mcp add`` writes for ``filemem mcp``."""
        return {"type": "stdio", "command": self.program[0],
                "args": [*self.program[1:], "mcp", *self._options()], "env": {}}

    def hook(self) -> dict[str, Any]:
        command = shlex.join([*self.program, *HOOK_ARGS, *self._options()])
        return {"type": "command", "command": command, "timeout": HOOK_TIMEOUT}


@dataclass(frozen=True)
class Change:
    """What connect or disconnect did (or found) for one of the two pieces."""

    what: str  # "server" | "hook"
    path: str
    action: str  # added, updated, unchanged, removed, absent, kept (not filemem's)
    via: str = ""  # the claude command that made the change, if one did


def _object(doc: dict[str, Any], key: str, f: JsonFile, where: str) -> dict[str, Any] | None:
    value = doc.get(key)
    if key in doc and not isinstance(value, dict):
        raise jsonconfig.invalid(f.path, f'"{where}" is a JSON {jsonconfig.json_type(value)}, '
                                         "not an object")
    return value


def servers_of(f: JsonFile) -> dict[str, Any]:
    return _object(f.data, "mcpServers", f, "mcpServers") or {}


def _groups(doc: dict[str, Any], f: JsonFile) -> list[Any] | None:
    hooks = _object(doc, "hooks", f, "hooks")
    groups = None if hooks is None else hooks.get(EVENT)
    if hooks is not None and EVENT in hooks and not isinstance(groups, list):
        raise jsonconfig.invalid(f.path, f'"hooks.{EVENT}" is a JSON '
                                         f"{jsonconfig.json_type(groups)}, not an array")
    return groups


def with_hook(f: JsonFile, handler: dict[str, Any]) -> dict[str, Any] | None:
    """The settings with our hook handler (the first of ours replaced in place, any other
    of ours removed), or None if they already have exactly that."""
    doc = copy.deepcopy(f.data)
    groups = _groups(doc, f)
    if groups is None:
        doc.setdefault("hooks", {})[EVENT] = groups = []
    placed = False
    for group in list(groups):
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list) or not any(is_our_hook(h) for h in handlers):
            continue
        kept = []
        for h in handlers:
            if not is_our_hook(h):
                kept.append(h)
            elif not placed:
                kept.append(h if h == handler else handler)
                placed = True
        if kept:
            group["hooks"] = kept
        else:
            groups.remove(group)
    if not placed:
        groups.append({"hooks": [handler]})
    return None if doc == f.data else doc


def without_hook(f: JsonFile) -> dict[str, Any] | None:
    """The settings without our hook handlers, dropping what only they filled; None if
    there is none of ours."""
    doc = copy.deepcopy(f.data)
    groups = _groups(doc, f)
    if not groups:
        return None
    found = False
    for group in list(groups):
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list) or not any(is_our_hook(h) for h in handlers):
            continue
        found = True
        kept = [h for h in handlers if not is_our_hook(h)]
        if kept:
            group["hooks"] = kept
        else:
            groups.remove(group)
    if not found:
        return None
    if not groups:
        del doc["hooks"][EVENT]
        if not doc["hooks"]:
            del doc["hooks"]
    return doc


def _same_server(entry: dict[str, Any], want: dict[str, Any]) -> bool:
    return bool(entry.get("type", "stdio") == "stdio"
                and entry.get("command") == want["command"]
                and entry.get("args", []) == want["args"])


def _merged(current: dict[str, Any] | None, want: dict[str, Any]) -> dict[str, Any]:
    """The server entry to write: ours, keeping keys the person added to an earlier one
    (``env``, ``timeout``) in their place."""
    if current is None:
        return want
    out = dict(current)
    out.update(type="stdio", command=want["command"], args=want["args"])
    out.setdefault("env", {})
    return out


# ---------------------------------------------------------------- running `claude`


def run_claude(claude: str, args: list[str], cwd: str) -> None:
    """Run Claude Code's own command; AGENT_CLI_FAILED with its message if it fails."""
    shown = "claude " + shlex.join(args)
    try:
        out = subprocess.run([claude, *args], cwd=cwd, capture_output=True, text=True,
                             stdin=subprocess.DEVNULL, timeout=CLAUDE_TIMEOUT)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise errors.ConnectError(
            errors.AGENT_CLI_FAILED,
            f"`{shown}` could not run ({exc}); check that `claude --version` works, then run "
            "the command again", {"command": shown}) from None
    if out.returncode != 0:
        said = (out.stderr.strip() or out.stdout.strip() or "no message").splitlines()[-1]
        raise errors.ConnectError(
            errors.AGENT_CLI_FAILED,
            f"`{shown}` failed (exit {out.returncode}: {said}); check that `claude --version` "
            "works, then run the command again", {"command": shown, "exit": out.returncode})


def _json_arg(entry: dict[str, Any]) -> str:
    return json.dumps(entry, ensure_ascii=False, separators=(",", ":"))


# ---------------------------------------------------------------- connect / disconnect


def _check_server(f: JsonFile) -> dict[str, Any] | None:
    current = servers_of(f).get(SERVER)
    if current is not None and not is_our_server(current):
        command = (current.get("command") or current.get("url")) \
            if isinstance(current, dict) else current
        raise errors.ConnectError(
            errors.NAME_TAKEN,
            f'{f.path} already has an MCP server named "{SERVER}" that does not run filemem '
            f"({command!r}); rename or remove it (`claude mcp remove {SERVER}`), then run the "
            "command again; nothing was changed", {"path": f.path})
    return current


def _write_server(t: Target, f: JsonFile, entry: dict[str, Any] | None) -> None:
    """Put ``entry`` (None: remove ours) into the server file ourselves."""
    doc = copy.deepcopy(f.data)
    found = servers_of(f)
    if entry is not None:
        doc.setdefault("mcpServers", {})[SERVER] = entry
    else:
        del doc["mcpServers"][SERVER]
        if not found.keys() - {SERVER}:
            del doc["mcpServers"]
    mode = STATE_MODE if t.scope == "user" else PROJECT_MODE
    _replace(f, doc, mode)


def _replace(f: JsonFile, doc: dict[str, Any], mode: int) -> None:
    """Write ``doc``; a regular file that ``doc`` leaves empty is deleted instead (a link,
    say into a dotfiles repository, stays and gets ``{}``)."""
    if doc or os.path.islink(f.path):
        jsonconfig.save(f, doc, mode=mode)
    elif f.exists:
        jsonconfig.remove(f.path)


def connect(t: Target, claude: str | None) -> list[Change]:
    """Register the server and add the hook for ``t`` (``claude``: the path of Claude
    Code's command, or None to write the server file directly)."""
    settings = jsonconfig.load(t.settings_path)
    server_file = jsonconfig.load(t.server_path)
    current = _check_server(server_file)
    new_settings = with_hook(settings, t.hook())  # CONFIG_INVALID before any change
    want = t.server()
    changes: list[Change] = []
    undo = None
    if current is not None and _same_server(current, want):
        changes.append(Change("server", t.server_path, "unchanged"))
    else:
        entry = _merged(current, want)
        via = ""
        if claude is not None:
            if current is not None:  # `claude` replaces nothing: remove, then add (a stop
                # between the two leaves the server unregistered; connect again adds it)
                run_claude(claude, ["mcp", "remove", SERVER, "--scope", t.scope], t.project)
            add = ["mcp", "add-json", "--scope", t.scope, SERVER, _json_arg(entry)]
            run_claude(claude, add, t.project)
            via = f"claude mcp add-json --scope {t.scope}"
        else:
            _write_server(t, server_file, entry)
        undo = _undo(t, claude, server_file, current)
        changes.append(Change("server", t.server_path,
                              "added" if current is None else "updated", via))
    if new_settings is None:
        changes.append(Change("hook", t.settings_path, "unchanged"))
    else:
        try:
            jsonconfig.save(settings, new_settings, mode=SETTINGS_MODE)
        except BaseException as exc:
            if undo is not None:
                undo()
                if isinstance(exc, errors.FilememError):
                    exc.message += "; the MCP server registration made before it was undone"
            raise
        had = without_hook(settings) is not None
        changes.append(Change("hook", t.settings_path, "updated" if had else "added"))
    return changes


def _undo(t: Target, claude: str | None, before: JsonFile, current: dict[str, Any] | None
          ) -> Any:
    """Put the server registration back as it was (best effort: the error that made us
    undo is the one reported)."""
    def undo() -> None:
        try:
            if claude is None:
                if before.raw is not None:
                    jsonconfig.write_bytes(t.server_path, before.raw)
                else:
                    jsonconfig.remove(t.server_path)
                return
            run_claude(claude, ["mcp", "remove", SERVER, "--scope", t.scope], t.project)
            if current is not None:
                run_claude(claude, ["mcp", "add-json", "--scope", t.scope, SERVER,
                                    _json_arg(current)], t.project)
            elif t.scope == "project" and not servers_of(before).keys():
                _tidy(t)
        except (OSError, errors.FilememError):
            pass  # the error that made us undo is the one to report
    return undo


def disconnect(t: Target, claude: str | None) -> list[Change]:
    """Remove what connect added for ``t.scope`` (the hook first, then the server)."""
    settings = jsonconfig.load(t.settings_path)
    server_file = jsonconfig.load(t.server_path)
    new_settings = without_hook(settings)
    current = servers_of(server_file).get(SERVER)
    changes: list[Change] = []
    if new_settings is None:
        changes.append(Change("hook", t.settings_path, "absent"))
    else:
        _replace(settings, new_settings, SETTINGS_MODE)
        if t.scope == "project" and not new_settings:
            _rmdir_if_empty(os.path.dirname(t.settings_path))
        changes.append(Change("hook", t.settings_path, "removed"))
    if current is None:
        changes.append(Change("server", t.server_path, "absent"))
    elif not is_our_server(current):
        changes.append(Change("server", t.server_path, "kept"))
    elif claude is not None:
        run_claude(claude, ["mcp", "remove", SERVER, "--scope", t.scope], t.project)
        if t.scope == "project" and not servers_of(server_file).keys() - {SERVER}:
            _tidy(t)  # `claude mcp remove` leaves an empty "mcpServers" (or file) behind
        changes.append(Change("server", t.server_path, "removed",
                              f"claude mcp remove --scope {t.scope}"))
    else:
        _write_server(t, server_file, None)
        changes.append(Change("server", t.server_path, "removed"))
    return changes


def _tidy(t: Target) -> None:
    """Drop the empty ``mcpServers`` that removing the last server left in ``.mcp.json``
    (and the file, if nothing else is in it): they were there only for filemem's."""
    f = jsonconfig.load(t.server_path)
    if f.data.get("mcpServers") == {}:
        doc = dict(f.data)
        del doc["mcpServers"]
        _replace(f, doc, PROJECT_MODE)


def _rmdir_if_empty(path: str) -> None:
    with contextlib.suppress(OSError):  # not empty (or not there): it is not only ours
        os.rmdir(path)


def auto_memory_off(t: Target) -> str | None:
    """The settings file that already turns Claude Code's auto-memory off, if one does."""
    for path in (t.settings_path, os.path.join(config_dir(), "settings.json"),
                 os.path.join(t.project, ".claude", "settings.json"),
                 os.path.join(t.project, ".claude", "settings.local.json")):
        try:
            f = jsonconfig.load(path)
        except errors.ConnectError:
            continue
        if f.data.get("autoMemoryEnabled") is False:
            return path
    return None


__all__ = ["DEFAULT_AGENT", "SCOPES", "Change", "Target", "config_dir", "connect",
           "disconnect", "filemem_program", "is_our_hook", "is_our_server", "run_claude",
           "state_file", "with_hook", "without_hook"]
