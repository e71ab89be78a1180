"""Commands that share the store between machines: remote add/list/remove, sync, clone.

A remote is the owner's own git repository (a bare repository on a USB disk, on a server
over ssh, ...). Sync errors exit with code 1 and print their code (with ``--json`` too).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

import click

from filemem.cli.app import main
from filemem.cli.common import (
    command,
    emit_json,
    json_option,
    open_owner,
    open_store,
    store_option,
    usage_line,
)
from filemem.shown import counted, visible

if TYPE_CHECKING:  # the owner side loads when a command uses it, not at start-up
    from filemem.owner import Prefer, Remote, SyncResult

F = TypeVar("F", bound=Callable[..., Any])


def _progress() -> Callable[[bytes], None] | None:
    """Transfer progress on stderr, as git shows it, when a person is watching."""
    if not sys.stderr.isatty():
        return None

    def write(data: bytes) -> None:
        sys.stderr.buffer.write(data)
        sys.stderr.flush()

    return write


# ---------------------------------------------------------------- remotes


@main.group()
def remote() -> None:
    """The git remotes that `filemem sync` uses.

    They live in the store's .git/config like any git remote, so `git remote -v` in the
    store shows them too. A remote is a bare repository: `git init --bare -b main
    /mnt/usb/memory.git`, or one on a server reached as ssh://host/path or host:path
    (another store's folder, with main checked out, is refused).
    """


@remote.command("add")
@click.argument("name")
@click.argument("url")
@store_option
@json_option
@command
def remote_add(name: str, url: str, store_path: str | None, as_json: bool) -> None:
    """Add remote NAME at URL (a local path is stored as an absolute path).

    If main tracks no remote yet, the one `filemem sync` would use (the only one, or
    origin) becomes its upstream, so `git pull` and `git push` work in the store too."""
    with open_owner(store_path, validate=True) as owner:
        added = owner.add_remote(name, url)
    if as_json:
        emit_json(added.to_json())
    else:
        click.echo(f"Added remote {added.name}: {added.url}")


@remote.command("list")
@store_option
@json_option
@command
def remote_list(store_path: str | None, as_json: bool) -> None:
    """List the remotes."""
    with open_owner(store_path, validate=True) as owner:
        known: list[Remote] = owner.remotes()
    if as_json:
        emit_json([r.to_json() for r in known])
        return
    if not known:
        click.echo("No remotes. Add one with `filemem remote add origin URL`.")
    for r in known:
        click.echo(f"{r.name}\t{r.url}")


@remote.command("remove")
@click.argument("name")
@store_option
@json_option
@command
def remote_remove(name: str, store_path: str | None, as_json: bool) -> None:
    """Forget remote NAME (the remote repository itself is not touched)."""
    with open_owner(store_path, validate=True) as owner:
        removed = owner.remove_remote(name)
    if as_json:
        emit_json({"removed": removed.to_json()})
    else:
        click.echo(f"Removed remote {removed.name} ({removed.url})")


# ---------------------------------------------------------------- sync


@main.command(name="sync")
@click.argument("name", required=False)
@click.option("--keep-config", "keep_config", type=click.Choice(["local", "remote"]),
              help="For keys of filemem.yaml that both sides changed differently: keep "
                   "this machine's values (local) or take the remote's (remote). Without "
                   "it such a key stops the sync (CONFIG_CONFLICT) before anything changes.")
@store_option
@json_option
@command
def sync_(name: str | None, keep_config: str | None, store_path: str | None,
          as_json: bool) -> None:
    """Fetch from remote NAME, merge, and push (default: the only remote, or origin).

    A store made with `filemem init` that holds nothing else yet takes the remote's store
    as it is (its entries, budgets and policies). Adds made on two machines merge cleanly.
    An entry changed on both sides is never lost: the version updated later keeps the id
    and the other becomes a new entry; a removal never wins over a change. filemem.yaml
    merges key by key; a key both sides changed differently stops the sync until you
    choose with --keep-config. Layers left over their budget are reported, never cut. A
    file with uncommitted hand edits that the sync would change stops it before anything
    changes (`filemem status`), and so does a git merge, rebase, ... left unfinished in
    the store (exit 8: finish or abort it with git first). Interrupted? Run it again.
    """
    with open_owner(store_path, validate=True) as owner:
        result = owner.sync(name, progress=_progress(),
                            keep_config=cast("Prefer | None", keep_config))
    if as_json:
        emit_json(result.to_json())
        return
    for line in describe(result):
        click.echo(line)


def _counts(entries: dict[str, int]) -> str:
    return (f"{entries['added']} added, {entries['replaced']} replaced, "
            f"{entries['removed']} removed")


def _commits(n: int) -> str:
    return counted(n, "commit")


def describe(result: SyncResult) -> list[str]:
    """The sync's report for a person, one line per step."""
    where = f"{result.remote}/main"
    lines: list[str] = []
    if result.up_to_date:
        lines.append(f"Already up to date with {result.remote} ({result.url}).")
    for step in result.steps:
        if step["kind"] == "join":
            n = step["entries"]["added"]
            lines.append(f"Took {where} as it is: this store held nothing yet but its "
                         f"creation ({_commits(step['commits'])}, "
                         f"{counted(n, 'entry', 'entries')}"
                         + (f"; files: {visible(', '.join(step['files']))}" if step["files"]
                            else "") + ").")
        elif step["kind"] == "fast-forward":
            lines.append(f"Fast-forwarded to {where}: {_commits(step['commits'])} "
                         f"(entries: {_counts(step['entries'])}"
                         + (f"; files: {visible(', '.join(step['files']))}" if step["files"]
                            else "") + ").")
        elif step["kind"] == "merge":
            lines.append(f"Merged {_commits(step['commits'])} from {where} as "
                         f"{step['commit'][:12]} (entries: {_counts(step['entries'])}"
                         + (f"; files: {visible(', '.join(step['files']))}" if step["files"]
                            else "")
                         + ").")
            lines += [f"  conflict: {visible(c['path'])}: {visible(c['message'])}"
                      for c in step["conflicts"]]
        elif step["kind"] == "push":
            span = f"{step['from'][:12]}..{step['to'][:12]}" if step["from"] \
                else f"new branch main at {step['to'][:12]}"
            lines.append(f"Pushed {_commits(step['commits'])} to {result.remote} ({span}).")
        elif step["kind"] == "push-redacted":
            lines.append(f"Pushed the redacted history to {result.remote} in place of its old "
                         f"one ({(step['from'] or 'none')[:12]} -> {step['to'][:12]}), only "
                         "because it still held that old value: nothing it received meanwhile "
                         "was overwritten.")
        elif step["kind"] == "take-redacted":
            lines.append(f"Took the redacted history of {where} ({step['to'][:12]}; entries: "
                         f"{_counts(step['entries'])}); the old history's objects are pruned "
                         "here. This machine's own ledger and pending approvals may still "
                         "hold the text: `filemem redact --text -` here removes it from "
                         "them (an entry id finds no text here any more).")
    if result.over_budget:
        lines.append("Over budget now (nothing was cut; consolidate or remove entries):")
        lines += [f"  {usage_line(u)}" for u in result.over_budget]
    notes = result.notes()
    if notes:
        lines.append("The store's checks found this in entries the sync brought in:")
        lines += [f"  {visible(line)}" for line in notes]
    return lines


# ---------------------------------------------------------------- clone


@main.command()
@click.argument("url")
@click.argument("path", required=False)
@store_option
@json_option
@command
def clone(url: str, path: str | None, store_path: str | None, as_json: bool) -> None:
    """Make a new store at PATH from the store published at URL (second machine set-up).

    PATH defaults like `filemem init` (--store, $FILEMEM_STORE, $FILEMEM_HOME, the user
    data dir). The remote is recorded as origin, and main tracks it, so `filemem sync`
    works right away, and so do `git pull` and `git push` in the store.
    """
    from filemem.location import resolve_store_path
    from filemem.owner import clone as clone_store
    from filemem.owner import normalize_url

    root = clone_store(url, resolve_store_path(path or store_path), progress=_progress())
    with open_store(root) as provider:
        entries = len(provider.list_entries())
    if as_json:
        emit_json({"path": root, "remote": "origin", "url": normalize_url(url), "entries": entries})
    else:
        click.echo(f"Cloned {url} into {root} ({counted(entries, 'entry', 'entries')})"
                   "; sync with `filemem sync`.")
