"""`filemem connect hermes`, `filemem disconnect hermes` and `filemem hook hermes`: filemem
as Hermes Agent's memory provider (the work is in :mod:`filemem.owner.hermes`; what the
plugin asks for is answered by :mod:`filemem.hermes`)."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from filemem import errors, location
from filemem.cli.common import command, store_option
from filemem.cli.connect import connect, connect_store, disconnect, hook, make_store
from filemem.shown import visible


def _shown(path: str) -> str:
    home = os.path.expanduser("~")
    return "~" + path[len(home):] if home != "/" and path.startswith(home + os.sep) else path


def _home_help() -> str:
    return ("Hermes' home is $HERMES_HOME, else ~/.hermes; set HERMES_HOME for another "
            "one (a profile's folder, ~/.hermes/profiles/NAME).")


def _recovered(changes: list[Any]) -> list[Any]:
    """Say first (in one line) what was done about an interrupted connect or disconnect;
    the other changes are this run's."""
    for c in changes:
        if c.action == "recovered":
            click.echo(visible(c.note))
    return [c for c in changes if c.action != "recovered"]


@connect.command("hermes", epilog=_home_help())
@click.option("--agent", default="hermes", show_default=True, metavar="NAME",
              help="The agent name Hermes' sessions read and write memory as (its own layer "
                   "beside the shared one).")
@store_option
@command
def connect_hermes(agent: str, store_path: str | None) -> None:
    """Connect Hermes Agent: install filemem as its memory provider (a plugin in
    $HERMES_HOME/plugins/filemem/) and select it (memory.provider: filemem in
    $HERMES_HOME/config.yaml; comments and everything else in that file are kept).

    Each Hermes session then starts with this store's frozen snapshot in its system prompt
    and has filemem's memory_* tools; under your write policy's default `ask` their writes,
    and those of Hermes' own memory tool, wait for you as pending approvals (`filemem
    pending`). Running it again changes nothing; `filemem disconnect hermes` undoes it.
    """
    from filemem.owner import hermes

    if not agent.strip():
        raise click.BadParameter("must not be empty", param_hint="--agent")
    root, to_make = connect_store(store_path)  # the store it will use
    target = hermes.Target(hermes.hermes_home(), root, agent)
    changes = _recovered(hermes.connect(target))
    if to_make:
        make_store(store_path)
    where = (f"Hermes home {_shown(target.home)}, store {_shown(root)}, agent "
             f"{visible(agent)}")
    if all(c.action == "unchanged" for c in changes):
        click.echo(f"filemem was already connected to Hermes Agent ({where}): nothing changed.")
        return
    click.echo(f"Connected Hermes Agent to filemem ({where}):")
    for c in changes:
        click.echo(f"  {_shown(c.path)}: {c.action}" + (f" ({visible(c.note)})" if c.note
                                                         else ""))
    previous = hermes.read_settings(target.plugin_dir)
    before = hermes.Previous.from_json((previous or {}).get("previous"))
    if before is not None and before.had_key and before.value not in (None, "", hermes.PLUGIN):
        click.echo(f"Hermes runs one external memory provider at a time, so filemem replaces "
                   f"{visible(str(before.value))!r}; `filemem disconnect hermes` puts it back.")
    click.echo("Start a new Hermes session: its system prompt holds your memory snapshot "
               f"(recorded in `{location.command(root, 'audit')}`), its model has filemem's "
               "memory_* tools, and what it writes to memory, with those tools or with its own "
               f"memory tool, waits for you in `{location.command(root, 'pending')}`. Undo "
               "with `filemem disconnect hermes`.")
    memories = os.path.join(target.home, "memories")
    if any(os.path.isfile(os.path.join(memories, n)) for n in ("MEMORY.md", "USER.md")):
        left = _not_imported(root, memories, agent)
        if left == 0:
            click.echo(f"Hermes' own memory in {_shown(memories)} is already in filemem.")
            return
        command_line = location.command(root, "import", "--adapter", "hermes-memory-md",
                                        memories + os.sep, "--agent", agent)
        click.echo(f"Hermes already keeps memory in {_shown(memories)}: to bring it into "
                   f"filemem (one approval), run: {command_line}")


def _not_imported(root: str, memories: str, agent: str) -> int | None:
    """How many of Hermes' own memories `filemem import` would add (what is in memory
    already, or waits in a pending approval, is left out: filemem.owner.imports); None if
    that cannot be told (a file the adapter refuses: the import then says why)."""
    import filemem
    from filemem.adapters import default_registry
    from filemem.cli.adapters import read_payload
    from filemem.cli.common import write_ctx
    from filemem.owner import imports

    try:
        with filemem.open_store(root) as provider:
            entries = default_registry().adapt("hermes-memory-md",
                                               read_payload(memories + os.sep))
            todo, _skipped = imports.plan(provider, entries, write_ctx(None, agent, None),
                                          adapter_id="hermes-memory-md")
    except (errors.FilememError, OSError):
        return None
    return len(todo)


@disconnect.command("hermes", epilog=_home_help())
@command
def disconnect_hermes() -> None:
    """Undo `filemem connect hermes`: put memory.provider in $HERMES_HOME/config.yaml back
    as it was and remove the plugin folder $HERMES_HOME/plugins/filemem/. Your memories
    stay in the store."""
    from filemem.owner import hermes

    home = hermes.hermes_home()
    changes = _recovered(hermes.disconnect(home))
    if all(c.action in ("absent", "kept") for c in changes):
        click.echo(f"filemem was not connected to Hermes Agent (home {_shown(home)}): "
                   "nothing changed.")
        for c in changes:
            if c.note:
                click.echo(f"  {_shown(c.path)}: left alone ({visible(c.note)})")
        return
    click.echo(f"Disconnected Hermes Agent from filemem (home {_shown(home)}):")
    for c in changes:
        action = {"kept": "left alone", "absent": "was not there"}.get(c.action, c.action)
        click.echo(f"  {_shown(c.path)}: {action}" + (f" ({visible(c.note)})" if c.note
                                                       else ""))
    click.echo("Your memories stay in filemem; connect again with `filemem connect hermes`. "
               "Writes still waiting in `filemem pending` can be approved or rejected as "
               "before.")


@hook.command("hermes")
@click.option("--agent", default="hermes", show_default=True, metavar="NAME",
              help="The agent the session reads and writes memory as.")
@store_option
def hook_hermes(agent: str, store_path: str | None) -> None:
    """Serve the filemem plugin inside Hermes Agent (one JSON request per line on stdin,
    one answer per line on stdout). Hermes' plugin starts it; see `filemem connect
    hermes`."""
    from filemem.hermes import run

    if sys.stdin.isatty():
        raise click.UsageError("this command is run by the filemem plugin inside Hermes "
                               "Agent; see `filemem connect hermes`")
    sys.exit(run(store_path, agent))
