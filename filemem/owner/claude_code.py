"""Connecting filemem to Claude Code: what ``filemem connect claude-code`` and
``filemem disconnect claude-code`` change in Claude Code's files.

Connect makes two changes, in the files Claude Code reads for the scope:

================  ==========================================  ===============================
scope             the MCP server ``filemem``                  the ``SessionStart`` hook
================  ==========================================  ===============================
``user``          ``~/.claude.json``, key ``mcpServers``      ``~/.claude/settings.json``
``project``       ``<project>/.mcp.json``                     ``<project>/.claude/settings.json``
================  ==========================================  ===============================

(``$CLAUDE_CONFIG_DIR`` replaces ``~/.claude`` and holds ``.claude.json``.) A first
registration goes through ``claude mcp add-json`` when the ``claude`` command is on PATH,
else the same entry is written into the file. A change of it, and its removal, are one
atomic write of the file (:mod:`filemem.owner.claudelock`: under the lock Claude Code
itself takes for ``~/.claude.json``): Claude Code's commands cannot replace a server, and
remove-then-add would leave it unregistered in between. The hook is one matcher group
``{"hooks": [{"type": "command", "command": "<filemem> hook claude-code session-start
--agent NAME [--store PATH]", "timeout": 30}]}`` appended to ``hooks.SessionStart``.

What is filemem's is recognised by what it runs, not by a marker: the server named
``filemem`` whose command is a ``filemem`` executable (or ``python -m filemem``) running
``mcp``, and every hook handler whose command runs ``filemem hook claude-code
session-start``. Connect replaces those in place (so running it again, or with another
``--agent``, never adds a second one) and keeps every other key, value and hook; disconnect
removes exactly them, and the containers that are empty only because of that (``hooks``,
``SessionStart``, a settings file; ``mcpServers`` and the server file when connect made
them).

When connect adds ``mcpServers`` (or the server file) itself, or finds an empty ``hooks`` or
``hooks.SessionStart`` that it fills, it says so in ``filemem-connect.json`` beside the
settings file, so that disconnect removes exactly what connect made and keeps a key (even
an empty one) that was there before.

Every file is checked before anything is written (:mod:`filemem.owner.jsonconfig`: a file
that is not valid JSON is never written) and each change is one atomic replace of one
file, in the order record, server, hook (disconnect: hook, server, record), each behind a
:func:`filemem.files.stoppoint.reached` for the tests that SIGKILL it there. If writing the
hook fails, the server registration is undone. So a connect or disconnect killed at any
point leaves each file as it was or done, and running it again finishes the job.
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
from filemem.files import stoppoint
from filemem.owner import claudelock, jsonconfig
from filemem.owner.claude_session import SERVER
from filemem.owner.jsonconfig import JsonFile

EVENT: Final = "SessionStart"
HOOK_ARGS: Final = ("hook", "claude-code", "session-start")
HOOK_TIMEOUT: Final = 30  # seconds: a stuck store never holds a session start for long
SCOPES: Final = ("user", "project")
DEFAULT_AGENT: Final = "claude-code"
CLAUDE_TIMEOUT: Final = 120.0
PROJECT_MODE: Final = 0o644  # .mcp.json: a file a team may commit
SETTINGS_MODE: Final = 0o644  # settings.json, as Claude Code makes it
STATE_MODE: Final = 0o600  # ~/.claude.json: Claude Code keeps it private too
RECORD: Final = "filemem-connect.json"  # beside settings.json: what connect found
RECORD_BY: Final = "filemem connect claude-code"


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
    def record_path(self) -> str:
        return os.path.join(os.path.dirname(self.settings_path), RECORD)

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


def without_hook(f: JsonFile, keep: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """The settings without our hook handlers, dropping what only they filled except the
    empty containers in ``keep`` (``hooks``, ``hooks.SessionStart``: there before connect);
    None if there is none of ours."""
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
    if not groups and f"hooks.{EVENT}" not in keep:
        del doc["hooks"][EVENT]
    if not doc["hooks"] and "hooks" not in keep:
        del doc["hooks"]
    return doc


def empty_before(f: JsonFile) -> tuple[str, ...]:
    """The empty containers of our hook the settings have without it, which disconnect
    would otherwise drop as left empty: the ``file`` (``{}``), ``hooks`` (``{}``),
    ``hooks.SessionStart`` (``[]``)."""
    hooks = f.data.get("hooks")
    if f.exists and not f.data:
        return ("file",)
    if hooks == {}:
        return ("hooks",)
    return (f"hooks.{EVENT}",) if isinstance(hooks, dict) and hooks.get(EVENT) == [] else ()


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


# ---------------------------------------------------------------- connect's record


@dataclass(frozen=True)
class Record:
    """What connect found, for disconnect: whether it made ``mcpServers`` in the server
    file, and the server file itself, and which empty hook containers were in the settings
    (so that disconnect removes what connect made and keeps what was there, even empty)."""

    made_servers: bool
    made_file: bool
    empty_before: tuple[str, ...] = ()

    def render(self) -> bytes:
        doc: dict[str, Any] = {"by": RECORD_BY, "madeMcpServers": self.made_servers,
                               "madeServerFile": self.made_file}
        if self.empty_before:
            doc["emptyBefore"] = list(self.empty_before)
        return (json.dumps(doc, indent=2) + "\n").encode("utf-8")


def read_record(t: Target) -> Record | None:
    """Connect's record for ``t``, if one is there and is filemem's."""
    try:
        f = jsonconfig.load(t.record_path)
    except errors.ConnectError:
        return None
    if f.data.get("by") != RECORD_BY:
        return None
    empty = f.data.get("emptyBefore")
    return Record(f.data.get("madeMcpServers") is True, f.data.get("madeServerFile") is True,
                  tuple(str(k) for k in empty) if isinstance(empty, list) else ())


def _record_for(t: Target, server_file: JsonFile, current: dict[str, Any] | None,
                settings: JsonFile) -> Record | None:
    """The record to keep: None when connected already (what the first connect found
    still holds, whatever it is), else what this connect finds for each piece it adds."""
    hooked = without_hook(settings) is not None
    if current is not None and hooked:
        return None
    old = read_record(t) or Record(False, False)
    made = (old.made_servers, old.made_file) if current is not None else \
        ("mcpServers" not in server_file.data, not server_file.exists)
    return Record(*made, old.empty_before if hooked else empty_before(settings))


# ---------------------------------------------------------------- the server file


def _servers_changed(f: JsonFile, entry: dict[str, Any] | None,
                     record: Record | None) -> dict[str, Any] | None:
    """The server file with ``entry`` as ours (None: ours removed, and ``mcpServers`` too
    when connect made it and nothing else is in it); None if that changes nothing."""
    doc = copy.deepcopy(f.data)
    current = _check_server(f)
    if entry is not None:
        if current == entry:
            return None
        doc.setdefault("mcpServers", {})[SERVER] = entry
        return doc
    if current is None:
        return None
    del doc["mcpServers"][SERVER]
    if not doc["mcpServers"] and record is not None and record.made_servers:
        del doc["mcpServers"]
    return doc


def _set_server(t: Target, entry: dict[str, Any] | None, record: Record | None) -> bool:
    """Put ``entry`` (None: remove ours) into the server file in one atomic write, under
    Claude Code's lock for ``~/.claude.json``; a file connect made that is left empty is
    deleted. Returns whether the file changed."""
    def change(f: JsonFile) -> dict[str, Any] | None:
        return _servers_changed(f, entry, record)

    mode = STATE_MODE if t.scope == "user" else PROJECT_MODE
    if entry is None and record is not None and record.made_file:
        f = jsonconfig.load(t.server_path)
        doc = _servers_changed(f, None, record)
        if doc is not None and not doc and not os.path.islink(t.server_path):
            stoppoint.reached(f"remove {t.server_path}")
            jsonconfig.remove(t.server_path)  # only ours was in the file connect made
            return True
    return claudelock.update(t.server_path, change, mode=mode,
                             locked=t.scope == "user") is not None


def _write_record(t: Target, record: Record) -> bool:
    """Write the record (a record that says nothing, because connect made neither, is no
    file at all; a leftover one from a connect stopped earlier goes)."""
    if not (record.made_servers or record.made_file or record.empty_before):
        if os.path.lexists(t.record_path):
            _drop_record(t)
            return True
        return False
    data = record.render()
    try:
        with open(t.record_path, "rb") as fh:
            if fh.read() == data:
                return False
    except OSError:
        pass
    stoppoint.reached(f"write {t.record_path}")
    jsonconfig.write_bytes(t.record_path, data, mode=SETTINGS_MODE)
    return True


def _drop_record(t: Target) -> None:
    if os.path.lexists(t.record_path):
        stoppoint.reached(f"remove {t.record_path}")
        jsonconfig.remove(t.record_path)


# ---------------------------------------------------------------- connect / disconnect


def connect(t: Target, claude: str | None) -> list[Change]:
    """Register the server and add the hook for ``t`` (``claude``: the path of Claude
    Code's command, used for a first registration; None: the server file is written
    directly). Order: connect's record, the server, the hook; each one atomic write."""
    settings = jsonconfig.load(t.settings_path)
    server_file = jsonconfig.load(t.server_path)
    current = _check_server(server_file)
    new_settings = with_hook(settings, t.hook())  # CONFIG_INVALID before any change
    want = t.server()
    found = _record_for(t, server_file, current, settings)
    record = found if found is not None else read_record(t)
    changes: list[Change] = []
    had_record = os.path.lexists(t.record_path)
    wrote_record = found is not None and _write_record(t, found)
    undo = None
    if current is not None and _same_server(current, want):
        changes.append(Change("server", t.server_path, "unchanged"))
    else:
        entry = _merged(current, want)
        via = ""
        try:
            if claude is not None and current is None:
                # a first registration: Claude Code's own command (which cannot replace one)
                stoppoint.reached(f"claude mcp add-json --scope {t.scope}")
                run_claude(claude, ["mcp", "add-json", "--scope", t.scope, SERVER,
                                    _json_arg(entry)], t.project)
                via = f"claude mcp add-json --scope {t.scope}"
            else:  # a change: one atomic write, under the lock Claude Code takes for it
                _set_server(t, entry, record)
        except BaseException:
            if wrote_record and not had_record:  # the record of a connect that did not
                with contextlib.suppress(OSError, errors.FilememError):  # happen goes too
                    _drop_record(t)
            raise
        undo = _undo(t, current, record)
        changes.append(Change("server", t.server_path,
                              "added" if current is None else "updated", via))
    if new_settings is None:
        changes.append(Change("hook", t.settings_path, "unchanged"))
    else:
        try:
            stoppoint.reached(f"write {t.settings_path}")
            jsonconfig.save(settings, new_settings, mode=SETTINGS_MODE)
        except BaseException as exc:
            if undo is not None:
                undo()
                if isinstance(exc, errors.FilememError):
                    exc.message += "; the MCP server registration made before it was undone"
            if wrote_record and not had_record:
                with contextlib.suppress(OSError, errors.FilememError):
                    _drop_record(t)
            raise
        had = without_hook(settings) is not None
        changes.append(Change("hook", t.settings_path, "updated" if had else "added"))
    return changes


def _undo(t: Target, current: dict[str, Any] | None, record: Record | None) -> Any:
    """Put the server registration back as it was (best effort: the error that made us
    undo is the one reported)."""
    def undo() -> None:
        with contextlib.suppress(OSError, errors.FilememError):
            _set_server(t, current, record)
    return undo


def disconnect(t: Target, claude: str | None) -> list[Change]:
    """Remove what connect added for ``t.scope``: the hook, then the server (one atomic
    write that also drops the ``mcpServers`` or the file connect made), then connect's
    record. ``claude`` is not needed: Claude Code's ``claude mcp remove`` would leave an
    empty ``mcpServers`` behind and tidying it would be a second write."""
    del claude
    settings = jsonconfig.load(t.settings_path)
    server_file = jsonconfig.load(t.server_path)
    record = read_record(t)
    keep = record.empty_before if record else ()
    new_settings = without_hook(settings, keep)
    current = servers_of(server_file).get(SERVER)
    changes: list[Change] = []
    if new_settings is None:
        changes.append(Change("hook", t.settings_path, "absent"))
    else:
        stoppoint.reached(f"write {t.settings_path}")
        _replace(settings, new_settings, SETTINGS_MODE, "file" in keep)
        changes.append(Change("hook", t.settings_path, "removed"))
    if current is None:
        changes.append(Change("server", t.server_path, "absent"))
    elif not is_our_server(current):
        changes.append(Change("server", t.server_path, "kept"))
    else:
        _set_server(t, None, record)
        changes.append(Change("server", t.server_path, "removed"))
    _drop_record(t)
    if t.scope == "project":
        _rmdir_if_empty(os.path.dirname(t.settings_path))
    return changes


def _replace(f: JsonFile, doc: dict[str, Any], mode: int, keep: bool = False) -> None:
    """Write ``doc``; a regular file that ``doc`` leaves empty is deleted instead, unless
    ``keep`` (it was there before connect; a link, say into a dotfiles repository, stays
    too and gets ``{}``)."""
    if doc or keep or os.path.islink(f.path):
        jsonconfig.save(f, doc, mode=mode)
    elif f.exists:
        jsonconfig.remove(f.path)


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


def connection(t: Target) -> dict[str, Any]:
    """Whether ``t``'s server and hook are filemem's, read only (``filemem connections``);
    CONFIG_INVALID for a file that cannot be read as JSON."""
    entry = servers_of(jsonconfig.load(t.server_path)).get(SERVER)
    server = "absent" if entry is None else ("filemem" if is_our_server(entry) else "other")
    hook = without_hook(jsonconfig.load(t.settings_path)) is not None
    return {"scope": t.scope, "connected": server == "filemem" and hook,
            "server": server, "serverFile": t.server_path, "hook": hook,
            "settingsFile": t.settings_path}


__all__ = ["DEFAULT_AGENT", "SCOPES", "Change", "Target", "config_dir", "connect",
           "connection", "disconnect", "filemem_program", "is_our_hook", "is_our_server",
           "run_claude", "state_file", "with_hook", "without_hook"]

