"""`filemem connect AGENT`, `filemem disconnect AGENT`, and `filemem hook ...`, the commands
agents run once connected: the three groups, and Claude Code's commands in them (Hermes
Agent's are in :mod:`filemem.cli.hermes`, attached to the same groups). The work is on the
owner's side (:mod:`filemem.owner.claude_code`, :mod:`filemem.owner.claude_session`); this
module asks, reads the auto-memory folder the way `filemem import` does, and reports."""

from __future__ import annotations

import os
import shutil
import sys
from typing import Any

import click

from filemem import errors, location
from filemem.cli.app import main
from filemem.cli.common import command, open_store, store_option, write_ctx, yes_option
from filemem.shown import counted, visible

SCOPE_HELP = ("user: every project (~/.claude.json and ~/.claude/settings.json); project: "
              "the current folder only (.mcp.json and .claude/settings.json in it).")


@main.group()
def connect() -> None:
    """Connect filemem to an agent, so that its sessions start with your memory snapshot
    and write memory through filemem's approval gate. `filemem disconnect` undoes it."""


@main.group()
def disconnect() -> None:
    """Undo `filemem connect`: remove exactly what it added to the agent's files."""


@main.group()
def hook() -> None:
    """Commands an agent runs by itself once connected (not for typing)."""


@hook.group("claude-code")
def hook_claude_code() -> None:
    """Claude Code's hooks (set up by `filemem connect claude-code`)."""


def _pinned_store(store_path: str | None) -> str | None:
    """The store to name in Claude Code's commands: the one given (--store, $FILEMEM_STORE)
    or chosen by $FILEMEM_HOME, which Claude Code may not have in its environment; None for
    the default store, which every process finds by itself."""
    from filemem.location import resolve_store_path

    if store_path or os.environ.get("FILEMEM_HOME"):
        return resolve_store_path(store_path)
    return None


def connect_store(store_path: str | None) -> tuple[str, bool]:
    """The store an agent is connected to: its folder, and whether it is still to be made.
    One that exists is opened now (a folder that is not a store is refused before anything
    changes); a missing one is made once the agent's own files are changed, so a connect
    refused for those (a config that is not valid, a name taken) leaves nothing behind."""
    import filemem

    root = location.resolve_store_path(store_path)
    if location.to_make(root):
        return root, True
    with filemem.open_store(store_path) as provider:
        return provider.path, False


def make_store(store_path: str | None) -> None:
    """Create the store :func:`connect_store` left to be made."""
    import filemem

    filemem.open_store(store_path, create=True).close()


def _claude() -> str | None:
    return shutil.which("claude")


def _memories(n: int) -> str:
    return counted(n, "memory", "memories")


def _shown(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home):] if home != "/" and path.startswith(home + os.sep) else path


@connect.command("claude-code")
@click.option("--scope", type=click.Choice(["user", "project"]), default="user",
              show_default=True, help=SCOPE_HELP)
@click.option("--agent", default="claude-code", show_default=True, metavar="NAME",
              help="The agent name Claude Code's sessions read and write memory as (its own "
                   "layer beside the shared one).")
@click.option("--no-import", "no_import", is_flag=True,
              help="Do not offer to import the project's existing Claude Code auto-memory.")
@yes_option
@store_option
@command
def connect_claude_code(scope: str, agent: str, no_import: bool, yes: bool,
                        store_path: str | None) -> None:
    """Connect Claude Code: register `filemem mcp` as its MCP server "filemem" and add a
    SessionStart hook that puts this store's frozen snapshot into every session's context.

    Uses `claude mcp add-json` when `claude` is on PATH, else writes the file Claude Code
    reads. Every other setting in those files is kept; running it again changes nothing.
    Then offers to import the project's existing auto-memory (one approval; --yes approves
    it, --no-import skips it) and says how to turn Claude Code's own auto-memory off.
    """
    from filemem.owner import claude_code

    if not agent.strip():
        raise click.BadParameter("must not be empty", param_hint="--agent")
    project = os.getcwd()
    store = _pinned_store(store_path)
    root, to_make = connect_store(store_path)  # the store they will use
    target = claude_code.Target(scope, project, agent, store)
    claude = _claude()
    installed = claude is not None or os.path.isdir(claude_code.config_dir())
    changes = claude_code.connect(target, claude)
    if to_make:
        make_store(store_path)
    _report_connect(target, root, changes, claude, installed)
    if not no_import:
        _offer_import(target, store_path, yes)
    _auto_memory_advice(target)


def _report_connect(target: Any, root: str, changes: list[Any], claude: str | None,
                    installed: bool) -> None:
    if all(c.action == "unchanged" for c in changes):
        click.echo(f"filemem was already connected to Claude Code (scope {target.scope}, agent "
                   f"{visible(target.agent)}, store {root}): nothing changed.")
        return
    click.echo(f"Connected Claude Code to filemem (scope {target.scope}, agent "
               f"{visible(target.agent)}, store {root}):")
    for c in changes:
        what = 'MCP server "filemem"' if c.what == "server" else "SessionStart hook"
        via = f" (by `{c.via}`)" if c.via else ""
        click.echo(f"  {what} in {_shown(c.path)}: {c.action}{via}")
    click.echo(f"    hook command: {target.hook()['command']}")
    if claude is None:
        from filemem.owner.claude_code import config_dir

        where = "" if installed else (f"; {_shown(config_dir())} did not exist either, so "
                                      "Claude Code looks not installed here")
        click.echo(f"Claude Code's `claude` command is not on PATH{where}: the server entry "
                   f"was written into {_shown(target.server_path)} directly (what `claude mcp "
                   f"add-json --scope {target.scope}` writes). Claude Code reads it once "
                   "installed (npm install -g @anthropic-ai/claude-code).")
    click.echo("Start a new Claude Code session: it begins with your memory snapshot and has "
               "filemem's memory_* tools. Undo with `filemem disconnect claude-code"
               f"{' --scope project' if target.scope == 'project' else ''}`.")
    if target.scope == "project":
        click.echo("The first time you start Claude Code in this folder it asks you to trust "
                   "the folder and to approve the .mcp.json server \"filemem\".")


def _import_command(root: str, folder: str, workspace: str, agent: str) -> str:
    """The `filemem import` that does what connect's offer does: the same folder, workspace,
    agent layer and store."""
    return location.command(root, "import", "--adapter", "claude-code-memory-md", folder,
                            "--workspace", workspace, "--agent", agent)


def _way_on(root: str, pid: str) -> str:
    return (f"see it with `{location.command(root, 'pending')}`, import it with "
            f"`{location.command(root, 'approve', pid)}` (or drop it with "
            f"`{location.command(root, 'reject', pid)}`)")


def _offer_import(target: Any, store_path: str | None, yes: bool) -> None:
    """Offer the project's Claude Code auto-memory: one approval, one commit, into the
    workspace of the folder connect runs in (the auto-memory is the repository's)."""
    from filemem.cli.adapters import read_payload
    from filemem.model import workspace_key_of
    from filemem.owner import claude_session

    folder = claude_session.auto_memory_dir(target.project)
    if not os.path.isdir(folder):
        return
    workspace = workspace_key_of(target.project)  # the plan's and the hint's, one value
    root = location.resolve_store_path(store_path)  # named in the commands printed
    try:
        with open_store(store_path, yes=yes) as provider:
            write = write_ctx(workspace, target.agent, None)
            plan = claude_session.plan_import(provider, read_payload(folder), workspace,
                                              write)
            for pid, n in plan.waiting.items():  # staged by an earlier run: not again
                click.echo(f"The import of {_memories(n)} from Claude Code's auto-memory for "
                           f"this project ({_shown(folder)}) already waits as pending approval "
                           f"{pid}: {_way_on(root, pid)}.")
            if not plan.entries:
                if plan.already:
                    click.echo(f"Claude Code's auto-memory for this project ({_shown(folder)}) "
                               f"is already in filemem ({_memories(plan.already)}).")
                return
            click.echo(f"Claude Code has {_memories(len(plan.entries))} for this project in "
                       f"{_shown(folder)}. Importing into filemem takes one approval and one "
                       "commit (the folder itself is not changed):")
            result = provider.import_entries(plan.entries, write)
    except errors.FilememError as exc:
        outcome = exc.details.get("outcome") if exc.code == errors.WRITE_DENIED else None
        if outcome == "pending":
            pid = str(exc.details.get("pendingId"))
            click.echo(f"Not imported yet: nobody could be asked here, so the import waits as "
                       f"pending approval {pid}: {_way_on(root, pid)}. Running connect again "
                       "does not stage it a second time.")
            return
        why = {"rejected": "you declined", "cancelled": "cancelled"}.get(str(outcome)) or \
            f"{exc.code}: {visible(exc.message, keep_newlines=True)}"
        click.echo(f"Not imported ({why}). To import later: "
                   f"{_import_command(root, folder, workspace, target.agent)}", err=True)
        return
    click.echo(f"Imported {_memories(result['added'])} from Claude Code's auto-memory in one "
               "commit.")


def _auto_memory_advice(target: Any) -> None:
    from filemem.owner import claude_code

    off = claude_code.auto_memory_off(target)
    if off is not None:
        click.echo(f"Claude Code's own auto-memory is off ({_shown(off)}): filemem is its only "
                   "memory.")
        return
    click.echo("Claude Code also keeps its own auto-memory. To make filemem its only memory, "
               "turn that off: the auto-memory toggle in /memory inside Claude Code, or "
               f'"autoMemoryEnabled": false in {_shown(target.settings_path)}, or '
               "CLAUDE_CODE_DISABLE_AUTO_MEMORY=1 in its environment.")


@disconnect.command("claude-code")
@click.option("--scope", type=click.Choice(["user", "project"]), default="user",
              show_default=True, help=SCOPE_HELP)
@command
def disconnect_claude_code(scope: str) -> None:
    """Remove the MCP server "filemem" and the SessionStart hook that `filemem connect
    claude-code` added for SCOPE, and nothing else. Your memories stay in the store."""
    from filemem.owner import claude_code

    target = claude_code.Target(scope, os.getcwd())
    changes = claude_code.disconnect(target, _claude())
    if all(c.action == "absent" for c in changes):
        click.echo(f"filemem was not connected to Claude Code (scope {scope}): nothing "
                   "changed.")
        return
    click.echo(f"Disconnected Claude Code from filemem (scope {scope}):")
    for c in changes:
        what = 'MCP server "filemem"' if c.what == "server" else "SessionStart hook"
        action = {"absent": "was not there", "kept": "left alone (it does not run filemem)"
                  }.get(c.action, c.action)
        via = f" (by `{c.via}`)" if c.via else ""
        click.echo(f"  {what} in {_shown(c.path)}: {action}{via}")
    click.echo("Your memories stay in filemem; connect again with `filemem connect "
               f"claude-code{' --scope project' if scope == 'project' else ''}`.")


@hook_claude_code.command("session-start")
@click.option("--agent", default="claude-code", show_default=True, metavar="NAME",
              help="The agent the session's snapshot is for.")
@store_option
@command
def hook_session_start(agent: str, store_path: str | None) -> None:
    """Print the SessionStart hook output for the hook input on stdin: the frozen snapshot
    for that session as additionalContext, recorded as a `snapshot` audit row with Claude
    Code's session id."""
    from filemem.owner import claude_session

    if sys.stdin.isatty():
        raise click.UsageError("this command is run by Claude Code, with its SessionStart "
                               "hook input (JSON) on stdin; see `filemem connect claude-code`")
    raw = sys.stdin.buffer.read(claude_session.INPUT_MAX + 1)
    with open_store(store_path) as provider:
        out, _ = claude_session.session_start(provider, raw, agent,
                                              claude_session.tool_names())
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
