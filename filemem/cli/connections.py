"""`filemem connections`: which agents this machine has connected to filemem, read only
(what `filemem connect` set up, and a connect or disconnect that was interrupted)."""

from __future__ import annotations

import os
from typing import Any

import click

from filemem import errors
from filemem.cli.app import main
from filemem.cli.common import command, emit_json, json_option
from filemem.shown import visible


def _claude(scope: str) -> dict[str, Any]:
    from filemem.owner import claude_code

    try:
        return claude_code.connection(claude_code.Target(scope, os.getcwd()))
    except errors.ConnectError as exc:
        return {"scope": scope, "connected": False, "error": exc.message}


def _hermes() -> dict[str, Any]:
    from filemem.owner import hermes

    home = hermes.hermes_home()
    if not os.path.isdir(home):
        return {"home": home, "connected": False, "installed": False}
    try:
        return {"installed": True, **hermes.connection(home)}
    except errors.ConnectError as exc:
        return {"home": home, "connected": False, "installed": True, "error": exc.message}


def _claude_line(c: dict[str, Any]) -> str:
    name = f"Claude Code (scope {c['scope']})"
    if "error" in c:
        return f"{name}: cannot tell: {visible(c['error'])}"
    if c["connected"]:
        return f"{name}: connected"
    if c["server"] == "absent" and not c["hook"]:
        return f"{name}: not connected"
    parts = [f"MCP server {'is filemem' if c['server'] == 'filemem' else c['server']}",
             f"SessionStart hook {'present' if c['hook'] else 'absent'}"]
    return (f"{name}: partly connected ({', '.join(parts)}); `filemem connect claude-code"
            f"{' --scope project' if c['scope'] == 'project' else ''}` finishes it")


def _hermes_lines(h: dict[str, Any]) -> list[str]:
    name = f"Hermes Agent (home {visible(h['home'])})"
    if "error" in h:
        return [f"{name}: cannot tell: {visible(h['error'])}"]
    if not h["installed"]:
        return [f"{name}: not installed here"]
    if h["connected"] and h["pythonMissing"]:
        line = f"{name}: connected, but not working: the Python it runs filemem with " \
               f"({visible(str(h['python']))}) is gone, so Hermes finds the memory provider " \
               "not available; `filemem connect hermes` again, from the filemem you use now, " \
               "mends it"
    elif h["connected"]:
        line = f"{name}: connected (store {visible(str(h['store']))}, agent " \
               f"{visible(str(h['agent']))})"
    elif h["plugin"]:
        line = f"{name}: not connected (filemem's plugin folder is there, but config.yaml " \
               "selects another memory provider)"
    else:
        line = f"{name}: not connected"
    return [line] + ([f"  {visible(h['interrupted'])}"] if h.get("interrupted") else [])


@main.command()
@json_option
@command
def connections(as_json: bool) -> None:
    """Show which agents are connected to filemem on this machine (Claude Code for your
    user and for the current folder, Hermes Agent at $HERMES_HOME), and any `filemem
    connect` or `disconnect` that was interrupted and what the next one does about it.
    Changes nothing."""
    claude, hermes = [_claude("user"), _claude("project")], _hermes()
    if as_json:
        emit_json({"claudeCode": claude, "hermes": hermes})
        return
    for c in claude:
        click.echo(_claude_line(c))
    for line in _hermes_lines(hermes):
        click.echo(line)
