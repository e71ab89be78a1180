"""The owner's commands: pending approvals (and, beside them, the other owner-only views)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, NoReturn

import click

from filemem import location
from filemem.cli.app import main
from filemem.cli.common import (
    command,
    emit_exact,
    emit_json,
    emit_json_items,
    json_option,
    one_line,
    open_owner,
    store_option,
)
from filemem.model import iso_ms
from filemem.shown import block, counted, json_text, them, visible
from filemem.shown import warning as shown_warning

if TYPE_CHECKING:  # the owner side loads when a command uses it, not at start-up
    from filemem.owner import Owner


def _show(record: dict[str, Any], notes: list[str]) -> str:
    p = record["payload"]
    session = (record.get("write") or {}).get("agent", {}).get("session") or {}
    who = f"session {session.get('id')}" if session.get("id") else "no session"
    head = (f"{record['id']}  {iso_ms(record['createdAt'])}  {p['action']} "
            f"{p['track']}/{p['scope']}" + (f" [source:{p['source']}]" if p.get("source") else "")
            + f"  ({who})")
    body = "\n".join(f"    {line}" for line in block(str(p["text"]))
                     + [visible(note) for note in notes])
    return f"{visible(head)}\n{body}"


@main.command(name="pending")
@store_option
@json_option
@command
def pending_(store_path: str | None, as_json: bool) -> None:
    """List writes waiting for your approval, with everything they would write."""
    with open_owner(store_path) as owner:
        records = owner.pending()
        notes = [owner.notes(str(r["payload"]["text"])) for r in records]
    if as_json:
        emit_json(records)
        return
    if not records:
        click.echo("No pending approvals.")
    for r, n in zip(records, notes, strict=True):
        click.echo(_show(r, n))


def _ids(owner: Owner, ids: tuple[str, ...], everything: bool) -> list[str]:
    if everything:
        return [r["id"] for r in owner.pending()]
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
    with open_owner(store_path) as owner:
        for pid in _ids(owner, ids, everything):
            result = owner.approve(pid)
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
    with open_owner(store_path) as owner:
        for pid in _ids(owner, ids, everything):
            record = owner.reject(pid, reason)
            done.append(record["id"])
            if not as_json:
                click.echo(f"Rejected {record['id']}: {one_line(record['payload']['text'], 60)}")
    if as_json:
        emit_json({"rejected": done})
    elif not done:
        click.echo("No pending approvals.")


# ---------------------------------------------------------------- hand edits


_AS_IS = ("adoptable as committed: adopting records it as your edit, and gives it an id "
          "and front-matter")


def _status_line(change: Any) -> str:
    mark = {"edited": "M", "added": "A", "deleted": "D"}[change.kind]
    label = change.path
    if change.target and change.target != change.path:
        label += " (gets an id and front-matter when adopted)"
    text = ""
    entry = change.after or change.before
    if entry is not None:
        text = f"  {one_line(entry.text, 60)}"
    line = f"  {mark} {visible(label)}{text}"
    if change.problem:
        line += f"\n      cannot adopt: {visible(change.problem)}"
    elif change.kind != "invalid":
        line += "".join(f"\n      {visible(note)}" for note in change.notes())
    return line


def _git_operation_lines(found: Any) -> list[str]:
    """A git merge, rebase, ... unfinished in the store, in memory terms."""
    op = found.op
    lines = [f"A {op.label} is in progress in this store ({op.marker}): agents still read the "
             "memory as last committed, but no memory can be written (by agents, `filemem "
             "add` and the other writes, adopt, discard, approve, sync) until it is finished "
             "or undone."]
    for path in found.conflicts:
        entry = found.entries.get(path)
        if entry is not None:
            lines.append(f"  entry {entry.id[:8]} ({entry.track}/{entry.scope}, "
                         f"\"{one_line(entry.text, 40)}\") has conflict markers: {visible(path)}")
        elif path == "filemem.yaml":
            lines.append("  the store's settings, filemem.yaml, have conflict markers")
        else:
            lines.append(f"  {visible(path)} has conflict markers")
    lines.append(f"{op.ways_out[0].upper()}{op.ways_out[1:]}.")
    return lines


@main.command()
@store_option
@json_option
@command
def status(store_path: str | None, as_json: bool) -> None:
    """Show what you changed in the store's files that is not committed yet: edited,
    added and deleted entries, and why a file could not be adopted. Files committed
    invalid (with git itself) come first, each with the commit that brought it and how to
    mend it: until then agents' memory reads and writes fail. Also says when a git
    merge, rebase, cherry-pick, revert, `git am` or bisect is unfinished in the store (on
    stderr with --json), and how to finish or undo it. Editors' swap, backup and
    temporary files (.x.md.swp, 4913, x.md~, ...) are not entries and are skipped."""
    with open_owner(store_path) as owner:
        root = owner.path
        found = owner.git_operation()
        changes = owner.status()
        bad = owner.invalid(changes)
    if found is not None:
        for line in _git_operation_lines(found):
            click.echo(line, err=as_json)
        if not as_json:
            click.echo()
    if as_json:
        emit_json([c.to_json() for c in bad if c.kind == "invalid"] +
                  [c.to_json() for c in changes])
        return
    if bad:
        click.echo("Invalid files committed at HEAD (memory reads and writes fail with "
                   "STORE_CORRUPT until each is mended):")
        for c in bad:
            assert c.at_head is not None
            click.echo(f"  ! {visible(c.path)}\n      {visible(c.at_head.message)}")
            adopt = location.command(root, "adopt", c.path)
            if c.kind != "invalid":
                click.echo(f"      you have changed it (below): `{visible(adopt)}` commits "
                           "your change")
            elif c.problem is None:
                click.echo(f"      `{visible(adopt)}`: {_AS_IS}")
        if changes:
            click.echo("")
    if not changes:
        if not bad:
            click.echo("Nothing to adopt: the working tree matches the memory agents see.")
        return
    click.echo("Changes agents do not see yet (M edited, A added, D deleted):")
    for c in changes:
        click.echo(_status_line(c))
    if found is not None:
        click.echo(f"\n`filemem adopt` and `filemem discard` wait until the {found.op.label} "
                   "is finished or undone (see above).")
        return
    click.echo("\n`filemem adopt [PATH...]` commits them (after showing the diff); "
               "`filemem discard [PATH...]` puts files back as committed.")


def _nothing(owner: Owner, verb: str, as_json: bool, matches: bool = True) -> None:
    """Nothing to do: say so (``matches``: no file differs from HEAD), and what mends the
    files invalid at HEAD."""
    if as_json:
        emit_json([])
        return
    bad = owner.invalid()
    as_is = [c.path for c in bad if c.kind == "invalid" and c.problem is None]
    click.echo(f"Nothing to {verb}" + (": the working tree matches HEAD." if matches else ".") + (
        f" Invalid at HEAD: {counted(len(bad), 'committed file')}; `filemem status` shows "
        "each and how to mend it." if bad else "") + (
        " Adoptable as committed: "
        f"`{visible(location.command(owner.path, 'adopt', *as_is))}`."
        if as_is and verb == "adopt" else ""))


def _not_confirmed(done: str, as_json: bool) -> NoReturn:
    """Nothing done: not confirmed (or nobody to ask). Exit 3, as a write not approved;
    with --json the error is on stdout too, as for any other refusal."""
    if as_json:
        emit_json({"error": {"code": "WRITE_DENIED", "message": f"nothing was {done}: not "
                             "confirmed (without a terminal, pass --yes)",
                             "details": {"outcome": "rejected"}}})
    click.echo(f"Nothing {done}.", err=True)
    sys.exit(3)


def _confirm(question: str, yes: bool) -> bool:
    if yes:
        return True
    if not (sys.stdin.isatty() and sys.stderr.isatty()):
        click.echo("filemem: no terminal to ask; pass --yes to confirm", err=True)
        return False
    return click.confirm(question, default=False, err=True)


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--yes", "-y", is_flag=True, help="Adopt without asking.")
@store_option
@json_option
@command
def adopt(paths: tuple[str, ...], yes: bool, store_path: str | None, as_json: bool) -> None:
    """Commit your edits of the files at PATHS (default: all) so agents see them.

    Shows the diff and asks (default No). Each file is validated; a file you wrote from
    scratch gets an id and front-matter. The text is what you typed: the final newline an
    editor adds is the file's, and a file saved with CRLF line ends throughout is read as
    LF. One commit, with an `edit` audit row per file. A file you committed with git
    itself that filemem could not read (bare text, say) is adopted as it is when PATHS
    name it.
    """
    with open_owner(store_path) as owner:
        owner.refuse_unfinished_git()  # a git merge's files are not hand edits
        # budgets: for what was picked, not everything
        changes = owner.changes(paths or None, as_is=True)
        left = [] if paths else [c for c in changes if c.left_alone]
        changes = [c for c in changes if c not in left]
        if not changes:
            _nothing(owner, "adopt", as_json, matches=not left)
            _left_alone(left, as_json)
            return
        bad = [c for c in changes if c.problem]
        if bad:  # refused before any diff is shown: one line each, and the code
            if as_json:
                emit_json({"error": {"code": "INVALID_INPUT", "message": "nothing was adopted",
                                     "details": {"problems": [c.to_json() for c in bad]}}})
            for c in bad:
                click.echo(f"filemem: cannot adopt {visible(c.path)}: {visible(c.problem or '')}",
                           err=True)
            if not as_json:
                click.echo("filemem: INVALID_INPUT: nothing was adopted", err=True)
            sys.exit(1)
        for c in changes:
            if not as_json:
                if c.kind == "invalid":
                    click.echo(f"{visible(c.path)}: {_AS_IS}", err=True)
                click.echo(visible(owner.diff(c), keep_newlines=True), nl=False, err=True)
                for note in c.notes():
                    click.echo(f"  {visible(note)}", err=True)
        if not _confirm(f"Adopt {counted(len(changes), 'change')}?", yes):
            _not_confirmed("adopted", as_json)
        done = owner.adopt([c.path for c in changes])
    if as_json:
        emit_json([c.to_json() for c in done])
    else:
        click.echo(f"Adopted {counted(len(done), 'change')} in one commit.")
    _left_alone(left, as_json)


def _left_alone(left: list[Any], as_json: bool) -> None:
    """Say which files a bare `filemem adopt` left as they are: not part of the store."""
    if left and not as_json:
        click.echo(f"Left alone, not part of the store (filemem never commits "
                   f"{them(len(left))}): "
                   f"{', '.join(visible(c.path) for c in left)}; `filemem status` says what "
                   "to do with each.", err=True)


@main.command()
@click.argument("paths", nargs=-1)
@click.option("--yes", "-y", is_flag=True, help="Discard without asking.")
@store_option
@json_option
@command
def discard(paths: tuple[str, ...], yes: bool, store_path: str | None, as_json: bool) -> None:
    """Throw away your uncommitted edits of the files at PATHS (default: all): they are put
    back as committed, and files you added are deleted (editors' swap, backup and temporary
    files are left alone). Asks first (default No)."""

    with open_owner(store_path) as owner:
        owner.refuse_unfinished_git()  # putting a conflicted file back would resolve it
        changes = owner.changes(paths or None)
        if not changes:
            _nothing(owner, "discard", as_json)
            return
        if not as_json:
            for c in changes:
                click.echo(_status_line(c), err=True)
        if not _confirm(f"Discard {counted(len(changes), 'change')}? This cannot be undone", yes):
            _not_confirmed("discarded", as_json)
        done = owner.discard([c.path for c in changes])
    if as_json:
        emit_json([c.to_json() for c in done])
    else:
        click.echo(f"Discarded {counted(len(done), 'change')}.")


# ---------------------------------------------------------------- history


@main.command(name="log")
@click.option("--entry", "entry_id", metavar="ID", help="Only this entry's history (an id or "
              "a unique prefix), with the version each step made.")
@click.option("--limit", type=click.IntRange(1), help="At most this many rows.")
@store_option
@json_option
@command
def log_(entry_id: str | None, limit: int | None, store_path: str | None, as_json: bool) -> None:
    """Show the memory's history from git: who changed what, when, and who approved it."""
    with open_owner(store_path) as owner:
        # printed as the history is walked: the newest at once, the rest as it comes
        items = owner.history(entry_id, limit)
        if as_json:
            emit_json_items(items)
            return
        shown = False
        for it in items:
            _print_history_item(it, entry_id)
            shown = True
        if not shown:
            click.echo("No history." if entry_id is None else f"No history for {entry_id}.")


def _print_history_item(it: dict[str, Any], entry_id: str | None) -> None:
    """One item of `filemem log`: the commit, when, what, whose; the outcome; the text."""
    layer = f" {it['track']}/{it['scope']}" if it.get("track") else ""
    version = f" v{it['version']}" if it.get("version") else ""
    who = f" session {it['sessionId']}" if it.get("sessionId") else ""
    subject = f' "{it["subject"]}"' if it.get("subject") is not None else ""
    click.echo(visible(f"{it['commit'][:10]} {iso_ms(it['ts'])} {it['action']}{layer}"
                       f"{version}{who}{subject}")
               + f"\n    {visible(it.get('outcome') or '')}")
    if it.get("text"):
        # one entry's history shows its texts whole: it is where the owner reads a
        # text withheld from snapshots
        click.echo(f"    {one_line(it['text'], 96 if entry_id is None else sys.maxsize)}")
        warning = shown_warning(it["text"])
        if warning:
            click.echo(f"    {warning}")


@main.command()
@click.option("--full", is_flag=True, help="Replay every commit, not only those made since "
              "the last clean verify.")
@store_option
@json_option
@command
def verify(full: bool, store_path: str | None, as_json: bool) -> None:
    """Replay the history and check that HEAD is exactly what the audited commits
    produce. Commits made outside filemem are reported, not failed; a file invalid at HEAD
    is a problem, named at the commit that brought it. After a clean run, the next one
    replays only the commits made since (from the commit it proved, whose entries are read
    from git); --full replays them all. A progress bar on a terminal. Exit 1 on a problem."""
    import contextlib
    import sys

    show = not as_json and sys.stderr.isatty()
    with open_owner(store_path) as owner, contextlib.ExitStack() as stack:
        bars: list[Any] = []
        shown = [0]

        def progress(done: int, total: int) -> None:
            if not bars:  # the total is known once the commits to replay are listed
                bars.append(stack.enter_context(click.progressbar(
                    length=total, label="Replaying history", file=sys.stderr,
                    hidden=not show)))
            if done == total or done - shown[0] >= max(1, total // 500):
                bars[0].update(done - shown[0])  # redrawn ~500 times, not once a commit
                shown[0] = done

        report = owner.verify(progress, full=full)
    if as_json:
        emit_json(report.to_json())
    else:
        click.echo(f"{counted(report.commits, 'commit')} ({report.filemem_commits} by "
                   f"filemem, {len(report.external)} made outside filemem, "
                   f"{counted(report.merges, 'merge')}), {counted(report.rows, 'audit row')}, "
                   f"{counted(report.entries, 'entry', 'entries')} at HEAD.")
        if report.resumed_from is not None:
            click.echo(f"Commits up to {report.resumed_from[:10]} were proved by an earlier "
                       "verify; `filemem verify --full` replays them all again.")
        for ext in report.external:
            click.echo(f"  outside filemem: {ext['commit'][:10]} {visible(ext['subject'])}")
        for p in report.problems:
            click.echo(f"  PROBLEM {p['commit'][:10]}: {visible(p['problem'])}")
        click.echo("OK: HEAD is exactly what the audited history produces." if report.ok
                   else f"{counted(len(report.problems), 'problem')} found.")
    if not report.ok:
        sys.exit(1)


# ---------------------------------------------------------------- watching


@main.command()
@store_option
@json_option
@command
def watch(store_path: str | None, as_json: bool) -> None:
    """Report hand edits as they happen and commits made with git (HEAD moving), until
    interrupted. With --json, one JSON object per line."""
    import signal
    import time

    def emit(event: dict[str, Any]) -> None:
        if as_json:
            emit_exact(json_text(event) + "\n")
            return
        stamp = time.strftime("%H:%M:%S")
        event = {k: visible(v) if isinstance(v, str) else v for k, v in event.items()}
        kind = event["event"]
        if kind == "head-moved":
            click.echo(f"{stamp} HEAD moved to {event['commit'][:10]}: {event['subject']} "
                       f"({counted(int(event['entries']), 'entry', 'entries')})")
        elif kind == "hand-edit":
            note = f" - cannot adopt: {event['problem']}" if event.get("problem") else \
                " - `filemem adopt` to commit it"
            click.echo(f"{stamp} {event['kind']} {event['path']}{note}")
        elif kind == "settled":
            click.echo(f"{stamp} {event['path']} now matches HEAD")
        elif kind == "invalid-at-head":  # the problem names the file and the way out
            click.echo(f"{stamp} INVALID at HEAD: {event['problem']}")
        else:
            click.echo(f"{stamp} {kind}: {event.get('message', '')}", err=True)

    # Ctrl-C and SIGTERM raise KeyboardInterrupt in the main thread, wherever it is (the
    # first scan, the wait below); a handler that took a lock could deadlock the code it
    # interrupted. Only the first signal raises: stopping is bounded, let it finish.
    interrupted = False

    def interrupt(signum: int, frame: Any) -> None:
        nonlocal interrupted
        if not interrupted:
            interrupted = True
            raise KeyboardInterrupt

    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        signal.signal(sig, interrupt)
    try:
        with open_owner(store_path) as owner:
            watcher = owner.watcher(emit)
            if not as_json:  # first: a signal may cut start() short
                click.echo(f"Watching {owner.path} (Ctrl-C to stop)", err=True)
            try:
                watcher.start()
                while not watcher.stopped.wait(1.0):  # timed: a signal gets in on any OS
                    pass
            finally:
                interrupted = True  # from here a signal must not cut stop() short
                watcher.stop()
    except KeyboardInterrupt:
        pass
    except RuntimeError as exc:  # the signal came while a class was being created
        if not isinstance(exc.__cause__, KeyboardInterrupt):
            raise
    finally:
        # stopped, and the process exits next: a further signal (Ctrl-C pressed again) is
        # ignored, not left to Python's shutdown, which puts back the default action that
        # kills the process with no message (exit status -2, not 0)
        for sig in signals:
            signal.signal(sig, signal.SIG_IGN)
