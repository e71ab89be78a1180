"""The owner's commands: pending approvals (and, beside them, the other owner-only views)."""

from __future__ import annotations

from typing import Any

import click

from .. import owner
from ..model import iso_ms
from .app import main
from .common import command, emit_json, json_option, one_line, open_store, store_option


def _show(record: dict[str, Any]) -> str:
    p = record["payload"]
    session = (record.get("write") or {}).get("agent", {}).get("session") or {}
    who = f"session {session.get('id')}" if session.get("id") else "no session"
    head = (f"{record['id']}  {iso_ms(record['createdAt'])}  {p['action']} "
            f"{p['track']}/{p['scope']}" + (f" [source:{p['source']}]" if p.get("source") else "")
            + f"  ({who})")
    body = "\n".join(f"    {line}" for line in str(p["text"]).split("\n"))
    return f"{head}\n{body}"


@main.command(name="pending")
@store_option
@json_option
@command
def pending_(store_path: str | None, as_json: bool) -> None:
    """List writes waiting for your approval, with everything they would write."""
    with open_store(store_path) as store:
        records = owner.pending(store)
    if as_json:
        emit_json(records)
        return
    if not records:
        click.echo("No pending approvals.")
    for r in records:
        click.echo(_show(r))


def _ids(store: Any, ids: tuple[str, ...], everything: bool) -> list[str]:
    if everything:
        return [r["id"] for r in owner.pending(store)]
    if not ids:
        raise click.UsageError("give pending ids (see `filemem pending`) or --all")
    return list(ids)


@main.command()
@click.argument("ids", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Approve every pending write.")
@store_option
@json_option
@command
def approve(ids: tuple[str, ...], everything: bool, store_path: str | None,
            as_json: bool) -> None:
    """Approve pending writes (by id or unique id prefix): each runs the full write
    pipeline again and is committed, unless its target changed since it was staged."""
    done = []
    with open_store(store_path) as store:
        for pid in _ids(store, ids, everything):
            result = owner.approve(store, pid)
            done.append(result)
            if not as_json:
                click.echo(f"Approved {result['id']}.")
    if as_json:
        emit_json(done)
    elif not done:
        click.echo("No pending approvals.")


@main.command()
@click.argument("ids", nargs=-1)
@click.option("--all", "everything", is_flag=True, help="Reject every pending write.")
@click.option("--reason", help="Why (recorded in the audit row).")
@store_option
@json_option
@command
def reject(ids: tuple[str, ...], everything: bool, reason: str | None, store_path: str | None,
           as_json: bool) -> None:
    """Reject pending writes: they are dropped and the audit records the rejection."""
    done = []
    with open_store(store_path) as store:
        for pid in _ids(store, ids, everything):
            record = owner.reject(store, pid, reason)
            done.append(record["id"])
            if not as_json:
                click.echo(f"Rejected {record['id']}: {one_line(record['payload']['text'], 60)}")
    if as_json:
        emit_json({"rejected": done})
    elif not done:
        click.echo("No pending approvals.")
