"""The ``filemem`` command: the owner's side of the store, a thin layer over the Provider.

Exit codes: 0 success, 1 protocol error (the code is printed), 2 usage error, 3 the write
was not approved (WRITE_DENIED), 4 no store at the path (or it cannot be created there).
"""

from __future__ import annotations

import functools
import json
import os
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import click

from . import errors
from .approval import ApprovalRequest, describe

F = TypeVar("F", bound=Callable[..., Any])
EXIT_PROTOCOL, EXIT_USAGE, EXIT_DENIED, EXIT_NO_STORE = 1, 2, 3, 4
TRACKS = click.Choice(["user", "agent"])
SCOPES = click.Choice(["user-global", "workspace"])


# ---------------------------------------------------------------- approval at the terminal


class TerminalPrompt:
    """Ask the person at the terminal, showing everything that would be written."""

    name = "terminal prompt"

    def __call__(self, request: ApprovalRequest) -> str:
        click.echo(describe(request), err=True)
        try:
            ok = click.confirm("Approve this write?", default=False, err=True)
        except (click.Abort, EOFError):
            click.echo("", err=True)
            return "cancelled"
        return "allowed-once" if ok else "rejected"


class PreApproved:
    """``--yes``: the owner approved on the command line, having written the payload."""

    name = "--yes on the command line"

    def __call__(self, request: ApprovalRequest) -> str:
        return "allowed-once"


# ---------------------------------------------------------------- output


def _emit_json(value: Any) -> None:
    click.echo(json.dumps(value, ensure_ascii=False, indent=2))


def _fail(exc: BaseException, as_json: bool) -> NoReturn:
    if isinstance(exc, errors.ProtocolError):
        if as_json:
            _emit_json({"error": exc.to_dict()})
        else:
            click.echo(f"filemem: {exc.code}: {exc.message}", err=True)
            if exc.details.get("outcome") == "unavailable":
                click.echo("filemem: no terminal to ask for approval: run the command in a "
                           "terminal, or pass --yes to approve it yourself", err=True)
        sys.exit(EXIT_DENIED if exc.code == errors.WRITE_DENIED else EXIT_PROTOCOL)
    message = str(exc)
    if as_json:
        _emit_json({"error": {"code": "NO_STORE", "message": message, "details": {}}})
    else:
        click.echo(f"filemem: {message}", err=True)
    sys.exit(EXIT_NO_STORE)


def _one_line(text: str, width: int = 100) -> str:
    line = text.replace("\r", "").replace("\n", " \u21b5 ")
    return line if len(line) <= width else line[: width - 1] + "\u2026"


def _entry_line(e: dict[str, Any]) -> str:
    where = f"{e['track']}/{e['scope']}"
    if e["agentKey"]:
        where += f" #{e['agentKey']}"
    tags = f" [{', '.join(e['tags'])}]" if e["tags"] else ""
    return f"{e['id'][:8]}  {where:<22} {_one_line(e['text'])}{tags}"


def _usage_line(u: dict[str, Any]) -> str:
    return f"{u['track']}/{u['scope']}: {u['used']}/{u['limit']} chars used"


# ---------------------------------------------------------------- shared options


def _session_options(f: F) -> F:
    f = click.option("--session", "session_id", metavar="ID",
                     help="Session id recorded with the write or read.")(f)
    f = click.option("--agent", metavar="NAME",
                     help="Agent preset: writes go to that agent's layer; reads see shared "
                          "entries plus that agent's.")(f)
    f = click.option("--workspace", metavar="DIR",
                     help="Workspace folder (default: the current directory for writes).")(f)
    return f


def _store_option(f: F) -> F:
    return click.option(
        "--store", "store_path", metavar="PATH", envvar="FILEMEM_STORE",
        help="Store folder (default: $FILEMEM_STORE, $FILEMEM_HOME, else the user data dir).",
    )(f)


def _json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(f)


def _yes_option(f: F) -> F:
    return click.option("--yes", "-y", is_flag=True,
                        help="Approve the write without a prompt (for scripts).")(f)


def _open(store_path: str | None, *, yes: bool = False) -> Any:
    import filemem

    if yes:
        gate: Any = PreApproved()
    elif sys.stdin.isatty() and sys.stderr.isatty():
        gate = TerminalPrompt()
    else:
        gate = None  # nobody to ask: under `ask` the write fails closed (unavailable)
    return filemem.open_store(store_path, gate=gate)


def _write_ctx(workspace: str | None, agent: str | None, session_id: str | None) -> dict[str, Any]:
    from .provider import write_context

    return write_context(session_id=session_id, cwd=workspace or os.getcwd(), agent=agent)


def _command(f: F) -> F:
    """Run with the store open; map errors to messages and exit codes."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from .store import StoreNotFound

        as_json = bool(kwargs.get("as_json"))
        try:
            return f(*args, **kwargs)
        except (errors.ProtocolError, StoreNotFound, FileExistsError, TimeoutError) as exc:
            _fail(exc, as_json)

    return wrapper  # type: ignore[return-value]


# ---------------------------------------------------------------- commands


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="filemem")
def main() -> None:
    """filemem: a memory store for coding agents, kept as Markdown files in git.

    Every change an agent makes is approved by you and recorded as one git commit.
    Start with `filemem init`, then `filemem add`, `filemem query`, `filemem snapshot`.
    """


@main.command()
@click.argument("path", required=False)
@_store_option
@_json_option
@_command
def init(path: str | None, store_path: str | None, as_json: bool) -> None:
    """Create a store at PATH (default: --store, $FILEMEM_STORE, $FILEMEM_HOME, user data dir).

    Lays down filemem.yaml, a README, .gitignore and .gitattributes and makes the first
    commit. Running it on an existing store changes nothing.
    """
    import filemem

    from .location import resolve_store_path
    from .store import Store

    root = resolve_store_path(path or store_path)
    created = False
    if os.path.isdir(os.path.join(root, ".git")):
        store = filemem.open_store(root)
    else:
        store = filemem.Provider(Store.create(root))
        created = True
    store.close()
    if as_json:
        _emit_json({"path": root, "created": created})
    elif created:
        click.echo(f"Created a filemem store at {root}")
    else:
        click.echo(f"{root} is already a filemem store; nothing changed")


@main.command()
@_store_option
def path(store_path: str | None) -> None:
    """Print the store's folder (e.g. for `git -C "$(filemem path)" log`)."""
    from .location import resolve_store_path

    click.echo(resolve_store_path(store_path))


@main.command()
@click.argument("text", nargs=-1, required=True)
@click.option("--track", type=TRACKS, default="user", show_default=True,
              help="user: about the person; agent: about the environment.")
@click.option("--scope", type=SCOPES, default="workspace", show_default=True,
              help="user-global: everywhere; workspace: this workspace only.")
@click.option("--tag", "tags", multiple=True, help="A tag (repeatable; <= 16 tags of <= 32 chars).")
@click.option("--source", help="Provenance label (default: dsh-memento).")
@_session_options
@_yes_option
@_store_option
@_json_option
@_command
def add(text: tuple[str, ...], track: str, scope: str, tags: tuple[str, ...], source: str | None,
        workspace: str | None, agent: str | None, session_id: str | None, yes: bool,
        store_path: str | None, as_json: bool) -> None:
    """Add an entry. TEXT is joined with spaces; a single `-` reads it from stdin as is."""
    body = _text_arg(text)
    with _open(store_path, yes=yes) as store:
        inp: dict[str, Any] = {"track": track, "scope": scope, "text": body}
        if tags:
            inp["tags"] = list(tags)
        if source:
            inp["source"] = source
        result = store.add(inp, _write_ctx(workspace, agent, session_id))
    if as_json:
        _emit_json(result)
    else:
        click.echo(f"Added {result['entry']['id']} to {track}/{scope}.")
        click.echo(_usage_line(result["usage"]))


def _text_arg(text: tuple[str, ...]) -> str:
    if text == ("-",):
        data = sys.stdin.buffer.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise errors.invalid_input(f"stdin is not valid UTF-8 ({exc.reason})") from None
    return " ".join(text)


@main.command()
@click.argument("match")
@click.argument("text", nargs=-1, required=True)
@click.option("--track", type=TRACKS, default="user", show_default=True)
@click.option("--scope", type=SCOPES, default="workspace", show_default=True)
@click.option("--tag", "tags", multiple=True,
              help="New tags (repeatable); omit to keep the old ones.")
@click.option("--clear-tags", is_flag=True, help="Remove all tags.")
@_session_options
@_yes_option
@_store_option
@_json_option
@_command
def replace(match: str, text: tuple[str, ...], track: str, scope: str, tags: tuple[str, ...],
            clear_tags: bool, workspace: str | None, agent: str | None, session_id: str | None,
            yes: bool, store_path: str | None, as_json: bool) -> None:
    """Replace the one entry whose text contains MATCH with TEXT (`-` reads stdin)."""
    body = _text_arg(text)
    with _open(store_path, yes=yes) as store:
        inp: dict[str, Any] = {"track": track, "scope": scope, "match": match, "text": body}
        if tags or clear_tags:
            inp["tags"] = list(tags)
        result = store.replace(inp, _write_ctx(workspace, agent, session_id))
    if as_json:
        _emit_json(result)
    else:
        click.echo(f"Replaced {result['entry']['id']} (now version {result['entry']['version']}).")
        click.echo(_usage_line(result["usage"]))


@main.command()
@click.argument("match")
@click.option("--track", type=TRACKS, default="user", show_default=True)
@click.option("--scope", type=SCOPES, default="workspace", show_default=True)
@_session_options
@_yes_option
@_store_option
@_json_option
@_command
def remove(match: str, track: str, scope: str, workspace: str | None, agent: str | None,
           session_id: str | None, yes: bool, store_path: str | None, as_json: bool) -> None:
    """Remove the one entry whose text contains MATCH."""
    with _open(store_path, yes=yes) as store:
        result = store.remove({"track": track, "scope": scope, "match": match},
                              _write_ctx(workspace, agent, session_id))
    if as_json:
        _emit_json(result)
    else:
        click.echo(f"Removed {result['entry']['id']}: {_one_line(result['entry']['text'])}")
        click.echo(_usage_line(result["usage"]))


@main.command()
@click.argument("matches", nargs=-1, required=True)
@click.option("--into", "text", required=True, help="The text of the new entry.")
@click.option("--track", type=TRACKS, default="user", show_default=True)
@click.option("--scope", type=SCOPES, default="workspace", show_default=True)
@click.option("--tag", "tags", multiple=True)
@_session_options
@_yes_option
@_store_option
@_json_option
@_command
def consolidate(matches: tuple[str, ...], text: str, track: str, scope: str, tags: tuple[str, ...],
                workspace: str | None, agent: str | None, session_id: str | None, yes: bool,
                store_path: str | None, as_json: bool) -> None:
    """Replace the entries matching each of MATCHES (1..20) by one new entry, in one commit."""
    with _open(store_path, yes=yes) as store:
        result = store.consolidate(
            {"track": track, "scope": scope, "matches": list(matches), "text": text,
             "tags": list(tags)}, _write_ctx(workspace, agent, session_id))
    if as_json:
        _emit_json(result)
    else:
        click.echo(f"Consolidated {len(result['removed'])} entries into {result['entry']['id']}.")
        click.echo(_usage_line(result["usage"]))


@main.command()
@click.argument("text", nargs=-1)
@click.option("--track", type=TRACKS)
@click.option("--scope", type=SCOPES)
@click.option("--limit", type=int, help="Page size (default from filemem.yaml; at most 1000).")
@_session_options
@_store_option
@_json_option
@_command
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
        from .model import agent_key_of, workspace_key_of

        opts["workspaceKey"] = workspace_key_of(workspace or os.getcwd())
        opts["agentKey"] = agent_key_of(agent)
    if session_id is not None:
        opts["sessionId"] = session_id
    with _open(store_path) as store:
        result = store.query(filt, opts)
    if as_json:
        _emit_json(result)
        return
    if not result["entries"]:
        click.echo("No entry matched.")
        return
    for e in result["entries"]:
        click.echo(_entry_line(e))
    if result["truncated"]:
        click.echo(f"({len(result['entries'])} of {result['total']}; use --limit for more)")


@main.command(name="list")
@click.option("--track", type=TRACKS)
@click.option("--scope", type=SCOPES)
@_store_option
@_json_option
@_command
def list_(track: str | None, scope: str | None, store_path: str | None, as_json: bool) -> None:
    """List every entry, oldest first (does not count as a recall)."""
    with _open(store_path) as store:
        entries = [e for e in store.list_entries()
                   if (track is None or e["track"] == track)
                   and (scope is None or e["scope"] == scope)]
    if as_json:
        _emit_json(entries)
        return
    if not entries:
        click.echo("Memory is empty.")
    for e in entries:
        click.echo(_entry_line(e))


@main.command()
@_store_option
@_json_option
@_command
def budgets(store_path: str | None, as_json: bool) -> None:
    """Show how much of each track/scope budget is used."""
    with _open(store_path) as store:
        rows = store.budgets()
    if as_json:
        _emit_json(rows)
        return
    for r in rows:
        click.echo(_usage_line(r))


@main.command()
@click.option("--limit", type=click.IntRange(1, 10_000), default=20, show_default=True)
@_store_option
@_json_option
@_command
def audit(limit: int, store_path: str | None, as_json: bool) -> None:
    """Show the newest audit rows: approved writes, denials, recalls and snapshots."""
    from .model import iso_ms

    with _open(store_path) as store:
        rows = store.audit_list(limit)
    if as_json:
        _emit_json(rows)
        return
    for r in rows:
        layer = f" {r['track']}/{r['scope']}" if r["track"] else ""
        text = f"  {_one_line(r['text'], 60)}" if r["text"] else ""
        click.echo(f"{iso_ms(r['ts'])} {r['action']}{layer} {r['outcome'] or ''} "
                   f"({r['source'] or ''}){text}")


@main.command()
@click.option("--out", type=click.Path(dir_okay=False, writable=True),
              help="Write to this file instead of stdout.")
@_store_option
@_command
def export(out: str | None, store_path: str | None) -> None:
    """Print every entry as a memory-export-v1 envelope (JSON). Read-only."""
    with _open(store_path) as store:
        doc = store.export()
    text = json.dumps(doc, ensure_ascii=False, indent=2) + "\n"
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
        click.echo(f"Wrote {len(doc['entries'])} entries to {out}", err=True)
    else:
        click.echo(text, nl=False)


@main.command(name="import")
@click.argument("file", type=click.File("rb"))
@_session_options
@_yes_option
@_store_option
@_json_option
@_command
def import_(file: Any, workspace: str | None, agent: str | None, session_id: str | None,
            yes: bool, store_path: str | None, as_json: bool) -> None:
    """Import a memory-export-v1 envelope (FILE or `-`): one approval, one commit.

    Entries get new ids, version 1 and fresh timestamps; texts, layers, keys, sources and
    tags are kept. At most 1,000 entries per import.
    """
    raw = file.read()
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise errors.invalid_input(f"import: {file.name} is not JSON ({exc}); nothing was "
                                   "imported") from None
    with _open(store_path, yes=yes) as store:
        result = store.import_envelope(doc, _write_ctx(workspace, agent, session_id))
    if as_json:
        _emit_json(result)
    else:
        click.echo(f"Imported {result['added']} entries in one commit.")


@main.command()
@click.option("--language", type=click.Choice(["en", "zh"]),
              help="Snapshot language (default from filemem.yaml).")
@_session_options
@_store_option
@_json_option
@_command
def snapshot(language: str | None, workspace: str | None, agent: str | None,
             session_id: str | None, store_path: str | None, as_json: bool) -> None:
    """Print the frozen snapshot a session in WORKSPACE (default: here) as AGENT would get.

    The exact text is recorded as a `snapshot` audit row.
    """
    session = {"id": session_id, "header": {"cwd": workspace or os.getcwd(),
                                            "agentPreset": agent}}
    with _open(store_path) as store:
        text = store.snapshot(session, language=language)
    if as_json:
        _emit_json({"text": text, "sessionId": session_id})
    elif text:
        click.echo(text, nl=sys.stdout.isatty() or not text.endswith("\n"))
    else:
        click.echo("(memory is empty for this workspace and agent: the snapshot is empty)",
                   err=True)


@main.command()
@click.option("--budgets", "budgets_json", metavar="JSON",
              help='Budgets for this process: {"user": {"userGlobal": N, "workspace": N}, '
                   '"agent": {...}} (overrides filemem.yaml).')
@click.option("--approval", type=click.Choice(["host", "auto", "off"]), default="host",
              show_default=True,
              help="host: under the ask policy, send the host an approval/request per write; "
                   "auto / off: allow / refuse every write without asking.")
@_store_option
def bridge(budgets_json: str | None, approval: str, store_path: str | None) -> None:
    """Serve the protocol's Provider face as JSON-RPC 2.0 over stdin/stdout (one JSON
    object per line) for hosts in other languages. The store is created if missing.
    See schemas/bridge.md for the messages."""
    from .bridge import run

    budgets_value = None
    if budgets_json:
        try:
            budgets_value = json.loads(budgets_json)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--budgets") from None
    try:
        code = run(store_path, budgets=budgets_value, approval=approval)
    except errors.ProtocolError as exc:
        click.echo(f"filemem bridge: {exc.code}: {exc.message}", err=True)
        sys.exit(EXIT_PROTOCOL)
    except (OSError, TimeoutError) as exc:
        click.echo(f"filemem bridge: {exc}", err=True)
        sys.exit(EXIT_NO_STORE)
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
