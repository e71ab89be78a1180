"""``filemem redact``: the owner's removal of a text from the whole history.

Only here: no agent tool, bridge method or MCP tool reaches it."""

from __future__ import annotations

import io
import os
import sys

import click

from filemem import errors
from filemem.cli.app import main
from filemem.cli.common import (
    EXIT_DENIED,
    command,
    emit_json,
    json_option,
    open_owner,
    store_option,
)
from filemem.shown import counted


@main.command()
@click.argument("entry_id", metavar="[ENTRY-ID]", required=False)
@click.option("--text", "text", metavar="SUBSTRING",
              help="Redact this text wherever it occurs (instead of an entry). Use `-` to "
                   "read it from stdin, so that it stays out of your shell history.")
@click.option("--yes", "-y", is_flag=True, help="Redact without asking (for scripts).")
@store_option
@json_option
@command
def redact(entry_id: str | None, text: str | None, yes: bool, store_path: str | None,
           as_json: bool) -> None:
    """Remove an entry's every text (ENTRY-ID, or a unique start of it), or a text
    (--text), from the whole history: every commit's files and message, the read-side
    ledger, pending approvals and caches. Each rewritten commit keeps its audit row, with
    the text replaced by [redacted]; one new audit row records what was redacted (the
    entry id and a salted hash, never the text), when and by whom. Old objects are pruned
    from .git. Asks first (shows how many commits are rewritten) unless --yes. On a
    terminal, a line counts the commits as the history is read and rewritten.

    Copies made before the redaction (other clones, backups) still hold the text. A
    remote is rewritten by the next `filemem sync`."""
    from_stdin = text == "-"
    if from_stdin:
        text = sys.stdin.read()
        text = text[:-1] if text.endswith("\n") else text
    if (entry_id is None) == (text is None):
        raise errors.invalid_input("give an ENTRY-ID or --text SUBSTRING (one of them)")
    with open_owner(store_path) as owner:
        with _Progress("Reading the history") as progress:
            plan = owner.redact_plan(entry_id, text, progress.show)
        summary = plan.to_json()
        if not plan.found:
            raise errors.invalid_input(f"{plan.what} is nowhere in this store (its history, "
                                       "ledger, pending approvals); nothing was changed")
        if not yes and not _confirm(_describe(summary), from_stdin):
            click.echo("Nothing was changed.", err=True)
            sys.exit(EXIT_DENIED)  # not approved, as a declined write
        with _Progress("Rewriting the history") as progress:
            result = owner.redact(entry_id, text, progress.show)
    if as_json:
        emit_json(result)
        return
    click.echo(f"Redacted {result['what']}: {result['commitsRewritten']} of "
               f"{counted(result['commits'], 'commit')} rewritten, "
               f"{counted(result['ledgerRows'], 'ledger row')}, "
               f"{counted(result['pendingApprovals'], 'pending approval')}; record "
               f"{result['record'][:12]}.")
    for name in result["remotesToPush"]:
        click.echo(f"  {name} still holds the old history: `filemem sync {name}` rewrites it.")
    click.echo("Copies made before now (other clones, backups) still hold the text.")


class _Progress:
    """On a terminal, one line of stderr saying how many commits are done, rewritten in
    place every thousand commits and wiped at the end (a long history takes a minute)."""

    def __init__(self, doing: str) -> None:
        self.doing = doing
        self.width = 0
        self.show = self._show if sys.stderr.isatty() else None

    def _show(self, done: int) -> None:
        line = f"{self.doing}: {done:,} commits..."
        self.width = max(self.width, len(line))
        click.echo(f"\r{line}", err=True, nl=False)

    def __enter__(self) -> _Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.width:
            click.echo("\r" + " " * self.width + "\r", err=True, nl=False)


_QUESTION = "Redact it? The old history is then gone from this store"


def _no_terminal(why: str) -> errors.ProtocolError:
    return errors.invalid_input(f"redact asks before it rewrites the history, and there is no "
                                f"terminal to ask on ({why}); pass --yes to redact without "
                                "asking")


def _confirm(summary: str, from_stdin: bool) -> bool:
    """Ask the person at the terminal. A text read from stdin took stdin, so the question
    goes to the controlling terminal (/dev/tty), as git and ssh ask for a password."""
    if not from_stdin:
        if not (sys.stdin.isatty() and sys.stderr.isatty()):
            raise _no_terminal("stdin or stderr is not one")
        click.echo(summary, err=True)
        return click.confirm(_QUESTION, default=False, err=True)
    try:
        fd = os.open("/dev/tty", os.O_RDWR | os.O_NOCTTY)
    except OSError:  # ENXIO: this process has no controlling terminal
        raise _no_terminal("the text came from stdin, and this process has no "
                           "controlling terminal") from None
    with io.FileIO(fd, "r+") as tty:  # unbuffered: a terminal is not seekable
        tty.write(f"{summary}\n{_QUESTION} [y/N]: ".encode())
        answer = tty.readline().decode("utf-8", "replace")
    return answer.strip().lower() in ("y", "yes")


def _describe(summary: dict[str, object]) -> str:
    files = summary["files"]
    assert isinstance(files, list)
    return (f"This removes {summary['what']} from the whole history:\n"
            f"  {summary['commitsRewritten']} of {counted(int(str(summary['commits'])), 'commit')} "
            "rewritten "
            f"(files: {', '.join(files[:8]) or 'none'}{', ...' if len(files) > 8 else ''})\n"
            f"  {counted(int(str(summary['ledgerRows'])), 'ledger row')}, "
            f"{counted(int(str(summary['pendingApprovals'])), 'pending approval')}")
