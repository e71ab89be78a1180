"""Commands that serve the store to programs: `filemem bridge` (JSON-RPC over stdio)."""

from __future__ import annotations

import json
import sys

import click

from .. import errors
from ..store import StoreNotFound
from .app import main
from .common import EXIT_NO_STORE, EXIT_PROTOCOL, store_option


@main.command()
@click.option("--budgets", "budgets_json", metavar="JSON",
              help='Budgets for this process: {"user": {"userGlobal": N, "workspace": N}, '
                   '"agent": {...}} (overrides filemem.yaml).')
@click.option("--approval", type=click.Choice(["host", "auto", "off"]), default="host",
              show_default=True,
              help="host: under the ask policy, send the host an approval/request per write; "
                   "auto / off: allow / refuse every write without asking.")
@store_option
def bridge(budgets_json: str | None, approval: str, store_path: str | None) -> None:
    """Serve the protocol's Provider face as JSON-RPC 2.0 over stdin/stdout (one JSON
    object per line) for hosts in other languages. The store is created if missing.
    See schemas/bridge.md for the messages."""
    from ..bridge import run

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
    except (OSError, TimeoutError, StoreNotFound) as exc:
        click.echo(f"filemem bridge: {exc}", err=True)
        sys.exit(EXIT_NO_STORE)
    sys.exit(code)
