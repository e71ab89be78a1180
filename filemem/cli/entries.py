"""Commands on memory entries: the Provider face for the owner (init, add, query, ...)."""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import click

from filemem import errors
from filemem.cli.app import main
from filemem.cli.common import (
    SCOPES,
    TRACKS,
    command,
    emit_exact,
    emit_json,
    entry_fields,
    entry_lines,
    json_option,
    layer_options,
    one_line,
    open_store,
    report,
    session_options,
    store_option,
    text_arg,
    usage_line,
    warn_hidden,
    write_ctx,
    write_options,
)
from filemem.shown import counted, json_text, visible


@main.command()
@click.argument("path", required=False)
@store_option
@json_option
@command
def init(path: str | None, store_path: str | None, as_json: bool) -> None:
    """Create a store at PATH (default: --store, $FILEMEM_STORE, $FILEMEM_HOME, user data dir).

    Lays down filemem.yaml, a README, .gitignore and .gitattributes and makes the first
    commit. Running it on an existing store changes nothing.
    """
    import filemem
    from filemem.location import resolve_store_path

    root = resolve_store_path(path or store_path)
    created = False
    try:
        store = filemem.open_store(root)  # already a store: nothing changes
    except errors.StoreNotFound:  # anything else: a new store, if the folder can hold one
        store = filemem.init_store(root)
        created = True
    store.close()
    if as_json:
        emit_json({"path": root, "created": created})
    elif created:
        click.echo(f"Created a filemem store at {root}")
    else:
        click.echo(f"{root} is already a filemem store; nothing changed")


@main.command()
@store_option
@json_option
def path(store_path: str | None, as_json: bool) -> None:
    """Print the store's folder (e.g. for `git -C "$(filemem path)" log`); nothing is
    opened or created, so it also says where `filemem init` would make the store."""
    from filemem.location import resolve_store_path

    root = resolve_store_path(store_path)
    if as_json:
        emit_json({"path": root})
    else:
        click.echo(root)


@main.command()
@click.argument("text", nargs=-1, required=True)
@layer_options
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable; <= 16 tags of <= 32 chars).")
@click.option("--source", help="Provenance label (default: filemem).")
@write_options
def add(text: tuple[str, ...], track: str, scope: str, tags: tuple[str, ...], source: str | None,
        workspace: str | None, agent: str | None, session_id: str | None, yes: bool,
        store_path: str | None, as_json: bool) -> None:
    """Add an entry. TEXT is joined with spaces; a single `-` reads it from stdin as is."""
    body = text_arg(text)
    with open_store(store_path, yes=yes) as store:
        inp: dict[str, Any] = {"track": track, "scope": scope, "text": body}
        if tags:
            inp["tags"] = list(tags)
        if source:
            inp["source"] = source
        result = store.add(inp, write_ctx(workspace, agent, session_id))
    report(result, as_json, f"Added {result['entry']['id']} to {track}/{scope}.")



@main.command()
@click.argument("match")
@click.argument("text", nargs=-1, required=True)
@layer_options
@click.option("--tag", "tags", multiple=True,
              help="New tags (repeatable); omit to keep the old ones.")
@click.option("--clear-tags", is_flag=True, help="Remove all tags.")
@write_options
def replace(match: str, text: tuple[str, ...], track: str, scope: str, tags: tuple[str, ...],
            clear_tags: bool, workspace: str | None, agent: str | None, session_id: str | None,
            yes: bool, store_path: str | None, as_json: bool) -> None:
    """Replace the one entry whose text contains MATCH with TEXT (`-` reads stdin)."""
    body = text_arg(text)
    with open_store(store_path, yes=yes) as store:
        inp: dict[str, Any] = {"track": track, "scope": scope, "match": match, "text": body}
        if tags or clear_tags:
            inp["tags"] = list(tags)
        result = store.replace(inp, write_ctx(workspace, agent, session_id))
    report(result, as_json,
           f"Replaced {result['entry']['id']} (now version {result['entry']['version']}).")


@main.command()
@click.argument("match")
@layer_options
@write_options
def remove(match: str, track: str, scope: str, workspace: str | None, agent: str | None,
           session_id: str | None, yes: bool, store_path: str | None, as_json: bool) -> None:
    """Remove the one entry whose text contains MATCH."""
    with open_store(store_path, yes=yes) as store:
        result = store.remove({"track": track, "scope": scope, "match": match},
                              write_ctx(workspace, agent, session_id))
    report(result, as_json,
           f"Removed {result['entry']['id']}: {one_line(result['entry']['text'])}")


@main.command()
@click.argument("matches", nargs=-1, required=True)
@click.option("--into", "text", required=True, help="The text of the new entry.")
@layer_options
@click.option("--tag", "tags", multiple=True,
              help="A tag of the new entry (repeatable; <= 16 tags of <= 32 chars).")
@write_options
def consolidate(matches: tuple[str, ...], text: str, track: str, scope: str, tags: tuple[str, ...],
                workspace: str | None, agent: str | None, session_id: str | None, yes: bool,
                store_path: str | None, as_json: bool) -> None:
    """Replace the entries matching each of MATCHES (1..20) by one new entry, in one commit."""
    with open_store(store_path, yes=yes) as store:
        result = store.consolidate(
            {"track": track, "scope": scope, "matches": list(matches), "text": text,
             "tags": list(tags)}, write_ctx(workspace, agent, session_id))
    report(result, as_json,
           f"Consolidated {counted(len(result['removed']), 'entry', 'entries')} into "
           f"{result['entry']['id']}.")


@main.command()
@click.argument("text", nargs=-1)
@click.option("--track", type=TRACKS, help="Only entries of this track.")
@click.option("--scope", type=SCOPES, help="Only entries of this scope.")
@click.option("--limit", type=int, help="Page size (default from filemem.yaml; more than 1000 "
                                         "is taken as 1000, as the protocol says).")
@session_options
@store_option
@json_option
@command
def query(text: tuple[str, ...], track: str | None, scope: str | None, limit: int | None,
          workspace: str | None, agent: str | None, session_id: str | None,
          store_path: str | None, as_json: bool) -> None:
    """Find entries containing TEXT (ASCII letters match without case).

    With --workspace or --agent, shows only what that session would see. Counts as a
    recall: the entries shown rank higher next time.
    """
    filt: dict[str, Any] = {}
    if text:
        filt["text"] = " ".join(text)
    if track:
        filt["track"] = track
    if scope:
        filt["scope"] = scope
    if limit is not None:
        filt["limit"] = limit
    opts: dict[str, Any] = {}
    if workspace is not None or agent is not None:
        from filemem.model import agent_key_of, workspace_key_of

        opts["workspaceKey"] = workspace_key_of(workspace or os.getcwd())
        opts["agentKey"] = agent_key_of(agent)
    if session_id is not None:
        opts["sessionId"] = session_id
    with open_store(store_path) as store:
        result = store.query(filt, opts)
    if as_json:
        emit_json(result)
        return
    if not result["entries"]:
        click.echo("No entry matched.")
        return
    click.echo("\n".join(entry_lines(result["entries"])))  # one write, not one a line
    if result["truncated"]:
        click.echo(f"({len(result['entries'])} of {result['total']}; use --limit for more)")
    warn_hidden(f for e in result["entries"] for f in entry_fields(e))


@main.command(name="list")
@click.option("--track", type=TRACKS, help="Only entries of this track.")
@click.option("--scope", type=SCOPES, help="Only entries of this scope.")
@store_option
@json_option
@command
def list_(track: str | None, scope: str | None, store_path: str | None, as_json: bool) -> None:
    """List every entry, oldest first (does not count as a recall)."""
    with open_store(store_path) as store:
        entries = [e for e in store.list_entries()
                   if (track is None or e["track"] == track)
                   and (scope is None or e["scope"] == scope)]
    if as_json:
        emit_json(entries)
        return
    if not entries:
        click.echo("Memory is empty.")
    else:
        click.echo("\n".join(entry_lines(entries)))
        warn_hidden(f for e in entries for f in entry_fields(e))


@main.command()
@store_option
@json_option
@command
def budgets(store_path: str | None, as_json: bool) -> None:
    """Show how much of each track/scope budget is used."""
    with open_store(store_path) as store:
        rows = store.budgets()
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        click.echo(usage_line(r))


@main.command()
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True,
              help="The newest this many audit rows.")
@store_option
@json_option
@command
def audit(limit: int, store_path: str | None, as_json: bool) -> None:
    """Show the newest audit rows: approved writes, denials, recalls and snapshots."""
    from filemem.model import iso_ms

    with open_store(store_path) as store:
        rows = store.audit_list(limit)
    if as_json:
        emit_json(rows)
        return
    for r in rows:
        layer = f" {r['track']}/{r['scope']}" if r["track"] else ""
        text = f"  {one_line(r['text'], 60)}" if r["text"] else ""
        click.echo(visible(f"{iso_ms(r['ts'])} {r['action']}{layer} {r['outcome'] or ''} "
                           f"({r['source'] or ''})") + text)
    warn_hidden(str(r[k] or "") for r in rows for k in ("action", "outcome", "source", "text"))


@main.command()
@click.option("--out", type=click.Path(),
              help="Write to this file (a folder for directory formats) instead of stdout.")
@click.option("--adapter", "adapter_id", metavar="ID",
              help="Write another tool's format instead (see `filemem adapters`).")
@click.option("--track", type=TRACKS, help="With --adapter: only entries of this track.")
@click.option("--scope", type=SCOPES, help="With --adapter: only entries of this scope.")
@click.option("--force", is_flag=True,
              help="With --adapter: overwrite files that exist and would change.")
@store_option
@command
def export(out: str | None, adapter_id: str | None, track: str | None, scope: str | None,
           force: bool, store_path: str | None) -> None:
    """Print every entry as a memory-export-v1 envelope (JSON). It changes no memory;
    --out writes the envelope (or the adapter's files) there instead of printing it.

    With --adapter ID, write the entries in that tool's format instead, e.g.
    `filemem export --adapter hermes-memory-md --out ~/.hermes/memories` (directory
    formats need --out DIR; existing files are only replaced with --force, files that would
    not change are left as they are, other files in the folder too). What came in through
    the adapter goes back as it came while it is unchanged in filemem.
    """
    if adapter_id is not None:
        from filemem.cli.adapters import export_with_adapter

        export_with_adapter(adapter_id, out, track, scope, force, store_path)
        return
    if track or scope or force:
        raise click.UsageError("--track, --scope and --force go with --adapter; the "
                               "memory-export-v1 envelope holds every entry")
    if out is not None and os.path.isdir(out):
        raise click.UsageError(f"--out {out} is a folder; the envelope is one file")
    with open_store(store_path) as store:
        doc = store.export()
    text = json_text(doc, indent=2) + "\n"
    if out:
        from filemem.owner import write_export  # the owner side loads only when needed

        write_export(out, text.encode("utf-8"))
        click.echo(f"Wrote {counted(len(doc['entries']), 'entry', 'entries')} to {out}", err=True)
    else:
        emit_exact(text)


@main.command(name="import")
@click.argument("path", type=click.Path(exists=True, allow_dash=True))
@click.option("--adapter", "adapter_id", metavar="ID",
              help="Read another tool's memory (see `filemem adapters`); PATH may be a folder.")
@click.option("--keep-duplicates", is_flag=True,
              help="With --adapter: import entries whose text is already in that layer too.")
@write_options
def import_(path: str, adapter_id: str | None, keep_duplicates: bool, workspace: str | None,
            agent: str | None, session_id: str | None, yes: bool, store_path: str | None,
            as_json: bool) -> None:
    """Import a memory-export-v1 envelope (PATH or `-`): one approval, one commit.

    Entries get new ids, version 1 and fresh timestamps; texts, layers, keys, sources and
    tags are kept. At most 1,000 entries per import.

    With --adapter ID, PATH is another tool's memory, e.g. `filemem import --adapter
    hermes-memory-md ~/.hermes/memories/`; --workspace DIR then also places the entries
    the adapter puts in a workspace. Entries whose text is already in the layer they would
    go to (or earlier in the same import), and memories the adapter imported before (the
    same file or id, in the same layer, as filemem has it or as it was imported), are
    skipped and counted, so importing the same memory twice adds nothing;
    --keep-duplicates imports them anyway.
    """
    if adapter_id is not None:
        from filemem.cli.adapters import import_with_adapter

        import_with_adapter(adapter_id, path, workspace, agent, session_id, yes, store_path,
                            as_json, keep_duplicates)
        return
    if keep_duplicates:
        raise click.UsageError("--keep-duplicates goes with --adapter; a memory-export-v1 "
                               "import writes every entry of the envelope")
    if path != "-" and os.path.isdir(path):
        raise click.UsageError(f"{path} is a folder; plain import reads a memory-export-v1 "
                               "file (use --adapter ID for another tool's folder)")
    if path == "-":
        raw, name = sys.stdin.buffer.read(), "stdin"
    else:
        with open(path, "rb") as f:
            raw, name = f.read(), path
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise errors.invalid_input(f"import: {name} is not JSON ({exc}); nothing was "
                                   "imported") from None
    with open_store(store_path, yes=yes) as store:
        result = store.import_envelope(doc, write_ctx(workspace, agent, session_id))
    if as_json:
        emit_json(result)
    else:
        click.echo(f"Imported {counted(result['added'], 'entry', 'entries')} in one commit.")


@main.command()
@click.option("--language", type=click.Choice(["en", "zh"]),
              help="Snapshot language (default from filemem.yaml).")
@click.option("--tools", metavar="NAME,...",
              help="The tools its first line tells the model to change memory with (default: "
                   "filemem mcp's memory_add, memory_replace, memory_remove, "
                   "memory_consolidate).")
@session_options
@store_option
@json_option
@command
def snapshot(language: str | None, tools: str | None, workspace: str | None, agent: str | None,
             session_id: str | None, store_path: str | None, as_json: bool) -> None:
    """Print the frozen snapshot a session in WORKSPACE (default: here) as AGENT would get.

    It is what `filemem mcp` gives such a session; --tools names another host's tools
    instead (e.g. for a session-start hook). The exact text is recorded as a `snapshot`
    audit row. With no memories visible there it is one line saying so, as an MCP client
    gets it.
    """
    from filemem.toolspec import WRITE_TOOL_NAMES

    names = WRITE_TOOL_NAMES if tools is None else [t.strip() for t in tools.split(",")]
    session = {"id": session_id, "header": {"cwd": workspace or os.getcwd(),
                                            "agentPreset": agent}}
    with open_store(store_path) as store:
        text = store.snapshot(session, language=language, say_empty=True, tools=names)
    if as_json:
        emit_json({"text": text, "sessionId": session_id})
    elif sys.stdout.isatty():  # a person reads it: nothing in it acts on the screen
        click.echo(visible(text, keep_newlines=True))
    else:  # a hook or a pipe: the exact text (click.echo would drop its ANSI sequences)
        emit_exact(text if text.endswith("\n") else text + "\n")
