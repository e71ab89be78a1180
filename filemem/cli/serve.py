"""Commands that serve the store to programs: `filemem bridge` (JSON-RPC over stdio) and
`filemem mcp` (the MCP server agents use)."""

from __future__ import annotations

import json
import sys

import click

from filemem import errors
from filemem.cli.app import main
from filemem.cli.common import EXIT_CODES, EXIT_NO_STORE, EXIT_PORT, EXIT_PROTOCOL, store_option


@main.command()
@click.option("--budgets", "budgets_json", metavar="JSON",
              help='Budgets for this process: {"user": {"userGlobal": N, "workspace": N}, '
                   '"agent": {...}} (overrides filemem.yaml).')
@click.option("--approval", type=click.Choice(["host", "auto", "off"]), default="host",
              show_default=True,
              help="host: under the ask policy, send the host an approval/request per write; "
                   "auto / off: allow / refuse every write without asking.")
@click.option("--source", metavar="NAME",
              help="The source this host's writes are for, as writePolicies' source:NAME "
                   "overrides see it (default: none; a host's input.source is recorded but "
                   "never chooses a policy).")
@store_option
def bridge(budgets_json: str | None, approval: str, source: str | None,
           store_path: str | None) -> None:
    """Serve the protocol's Provider face as JSON-RPC 2.0 over stdin/stdout (one JSON
    object per line, UTF-8; logs go to stderr) for hosts in other languages. The store is
    created if missing.

    \b
    Methods and params (requests are answered in order):
      add, replace, remove, consolidate   {"input": {...}, "write": {...}}
      seed                                {"inputs": [...], "write": {...}}
      import                              {"envelope": {...}, "write": {...}}
      query                               {"filter": {...}, "opts": {...}}, both optional
      auditList                           {"limit": N}
      snapshot                            {"session": {...}}
      budgets, listEntries, export        none
      describe                            none: the protocol, the store, the methods

    Inputs and results are the protocol's shapes; "write" is its write context, {"agent":
    {"session": {"id": "...", "header": {"cwd": "...", "agentPreset": "..."}}}}. A protocol
    error answers {"code": -32000, "message": "...", "data": {"code": "BUDGET_EXCEEDED",
    "details": {...}}}; -32001 is a store error (data.code STORE_BUSY, STORE_FULL, ...),
    -32601 an unknown method, -32602 params that do not fit, -32700 a line that is not JSON.

    With --approval host, a write under the ask policy first sends the host a request of
    its own, {"jsonrpc": "2.0", "id": "filemem-approval-N", "method": "approval/request",
    "params": {"payload": <everything the write would change>, "write": {...}}} (and
    "findings": [...] when the store's checks found hidden characters, planted instructions
    or secrets at level warn; at level block the write fails with INVALID_INPUT,
    details.reason "checks", before the host is asked). Answer it
    with the same id and {"result": {"outcome": "allowed-once"}} to let the write through;
    any other outcome refuses it (WRITE_DENIED), and an error answer or closing stdin stages
    it for the owner's `filemem pending`. When stdin closes, the bridge answers every
    request it has read and exits 0."""
    from filemem.bridge import run

    budgets_value = None
    if budgets_json:
        try:
            budgets_value = json.loads(budgets_json)
        except ValueError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="--budgets") from None
    try:
        code = run(store_path, budgets=budgets_value, approval=approval, source=source)
    except errors.FilememError as exc:
        click.echo(f"filemem bridge: {exc.code}: {exc.message}", err=True)
        sys.exit(EXIT_CODES.get(exc.code, EXIT_PROTOCOL))
    except OSError as exc:
        click.echo(f"filemem bridge: {exc}", err=True)
        sys.exit(EXIT_NO_STORE)
    sys.exit(code)


@main.command("mcp")
@click.option("--workspace", metavar="DIR",
              help="The session's workspace when the MCP client offers no roots "
                   "(default: the server's current directory).")
@click.option("--agent", metavar="NAME",
              help="The agent this server writes for (its own memory layer beside the shared "
                   "one); default: shared entries only.")
@click.option("--http", "http_port", type=click.IntRange(1, 65535), metavar="PORT",
              help="Serve streamable HTTP on 127.0.0.1:PORT (path /mcp) instead of stdio, to "
                   "clients that send the bearer token it prints at start (exit status 9 if "
                   "the port cannot be listened on).")
@store_option
def mcp_command(workspace: str | None, agent: str | None, http_port: int | None,
                store_path: str | None) -> None:
    """Serve the memory to an agent as an MCP server (stdio by default). Under the ask
    policy every write is shown to the person in the client (MCP elicitation); a client
    that cannot ask stages it for `filemem pending`. The store is created if missing."""
    from filemem.mcp.server import PortUnavailable, run

    # the store opens on the first call, after `initialize` is answered: a store that cannot
    # be opened is reported to the model as a tool error, not as a server that will not start
    try:
        code = run(store=store_path, workspace=workspace, agent=agent, http_port=http_port)
    except PortUnavailable as exc:
        click.echo(f"filemem mcp: {exc}", err=True)
        sys.exit(EXIT_PORT)
    sys.exit(code)
