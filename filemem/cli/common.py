"""Shared pieces of the `filemem` command: options, approval at the terminal, output, errors.

Exit codes (:data:`EXIT_CODES`, the one table): 0 success, 1 an error (its code is printed),
2 usage error, 3 the write was not approved (WRITE_DENIED), 4 no store at the path (or it
cannot be created there), 5 the store is busy (another process holds it; try again), 6 the
disk holding the store is full, 7 the store is read-only (a write or sync to a store this
process cannot write; reads work), 8 a git merge, rebase, cherry-pick, revert, ``git am`` or
bisect is unfinished in the store (finish or abort it with git; reads work), 9 `filemem mcp
--http PORT` cannot listen on PORT (another program holds it, or it needs privileges).
"""

from __future__ import annotations

import functools
import os
import shlex
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from filemem import errors
from filemem.shown import json_text, visible, warning

if TYPE_CHECKING:
    from filemem.approval import ApprovalRequest
    from filemem.owner import Owner

F = TypeVar("F", bound=Callable[..., Any])
EXIT_PROTOCOL, EXIT_DENIED, EXIT_NO_STORE, EXIT_BUSY, EXIT_FULL, EXIT_READ_ONLY = 1, 3, 4, 5, 6, 7
EXIT_GIT_IN_PROGRESS = 8
EXIT_PORT = 9  # `filemem mcp --http PORT`: the port cannot be listened on
EXIT_CODES: dict[str, int] = {  # error code -> exit status; any other error exits 1
    errors.WRITE_DENIED: EXIT_DENIED,
    errors.NO_STORE: EXIT_NO_STORE,
    errors.STORE_EXISTS: EXIT_NO_STORE,
    errors.STORE_BUSY: EXIT_BUSY,
    errors.STORE_FULL: EXIT_FULL,
    errors.STORE_READ_ONLY: EXIT_READ_ONLY,
    errors.GIT_OPERATION_IN_PROGRESS: EXIT_GIT_IN_PROGRESS,
}
TRACKS = click.Choice(["user", "agent"])
SCOPES = click.Choice(["user-global", "workspace"])


# ---------------------------------------------------------------- approval at the terminal


class TerminalPrompt:
    """Ask the person at the terminal, showing everything that would be written."""

    name = "terminal prompt"

    def __call__(self, request: ApprovalRequest) -> str:
        from filemem.approval import describe  # the write side: not loaded for a read

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


def emit_json(value: Any) -> None:
    emit_exact(json_text(value, indent=2) + "\n")


def emit_json_items(items: Iterator[Any]) -> None:
    """:func:`emit_json` of a list given as an iterator, each item printed as it comes (the
    same text as the whole list at once)."""
    n = -1
    for n, item in enumerate(items):
        emit_exact(("[\n" if n == 0 else ",\n") + "  "
                   + json_text(item, indent=2).replace("\n", "\n  "))
    emit_exact("[]\n" if n < 0 else "\n]\n")


def emit_exact(text: str) -> None:
    """Write ``text`` to stdout as UTF-8, byte for byte: for output a program reads (JSON,
    an export, the snapshot to a pipe). ``click.echo`` drops ANSI escape sequences when
    stdout is not a terminal, and encodes with the locale's codec."""
    sys.stdout.flush()  # anything click.echo wrote before goes first
    sys.stdout.buffer.write(text.encode("utf-8", "backslashreplace"))  # lone surrogate: seen
    sys.stdout.buffer.flush()


def warn_hidden(texts: Iterable[str]) -> None:
    """After a listing (one line per entry): the one :func:`filemem.shown.warning` line
    for what it showed as escapes, on stderr, so stdout stays one line per entry."""
    line = warning("\n".join(texts), several=True)
    if line is not None:
        click.echo(line, err=True)


def fail(exc: errors.FilememError, as_json: bool) -> NoReturn:
    """Print an error (JSON with ``--json``) and exit with its status from EXIT_CODES."""
    if as_json:
        emit_json({"error": exc.to_dict()})
    else:
        click.echo(f"filemem: {exc.code}: {visible(exc.message, keep_newlines=True)}", err=True)
        if exc.details.get("outcome") == "unavailable":
            click.echo("filemem: no terminal to ask for approval: run the command in a "
                       "terminal, or pass --yes to approve it yourself", err=True)
        for line in retry_hints(exc) + way_out(exc):
            click.echo(line, err=True)
    sys.exit(EXIT_CODES.get(exc.code, EXIT_PROTOCOL))


def way_out(exc: errors.FilememError) -> list[str]:
    """Where the protocol's own advice (its message, the reference's words) cannot lead out
    for the owner: a text larger than its whole budget; a MATCH that is another entry's whole
    text, inside a longer one's (no MATCH then picks it alone)."""
    d = exc.details
    if exc.code == errors.BUDGET_EXCEEDED:
        grows = errors.grows_past_budget(d)
        if grows is not None:
            from filemem.config import budget_key

            return [f"filemem: this write alone adds {grows} chars, more than the whole "
                    f"{d['track']}/{d['scope']} budget of {d['limit']}: removing entries "
                    "cannot make room; shorten the text, or raise "
                    f"{budget_key(str(d['track']), str(d['scope']))} in filemem.yaml and "
                    "`filemem adopt filemem.yaml`"]
    if exc.code == errors.AMBIGUOUS_MATCH and d.get("match") in (d.get("sample") or ()):
        return ["filemem: that is one entry's whole text, and other entries contain it too, "
                "so no MATCH picks it alone: delete its file (`filemem list --json` shows its "
                "id; the file is <id>.md under `filemem path`) and `filemem adopt` that"]
    return []


def retry_hints(exc: errors.FilememError) -> list[str]:
    """For a match found in other layers than the one searched (ENTRY_NOT_FOUND's
    ``details.elsewhere``): the options that point the same command at each of them."""
    places = exc.details.get("elsewhere") if exc.code == errors.ENTRY_NOT_FOUND else None
    if not isinstance(places, list):
        return []
    lines = []
    for p in places[:3]:
        opts = ["--track", p["track"], "--scope", p["scope"]]
        if p["workspaceKey"] is not None and p["workspaceKey"] != exc.details.get("workspaceKey"):
            opts += ["--workspace", p["workspaceKey"]]
        if p["agentKey"] and p["agentKey"] != exc.details.get("agentKey"):
            opts += ["--agent", p["agentKey"]]
        shown = " ".join(shlex.quote(visible(o)) for o in opts)
        # an agent's session sees the shared layer too: where that holds a match as well,
        # the same MATCH would be ambiguous there
        shared_too = p["agentKey"] and any(
            q["agentKey"] == "" and (q["track"], q["scope"], q["workspaceKey"]) ==
            (p["track"], p["scope"], p["workspaceKey"]) for q in places)
        lines.append(f"filemem: to change it in {p['track']}/{p['scope']}, run the command "
                     f"again with {shown}"
                     + (" and a longer MATCH (the shared layer there has a match too)"
                        if shared_too else ""))
    return lines


def one_line(text: str, width: int = 100) -> str:
    """A stored text on one line: newlines as \u21b5, control characters as visible escapes
    (:func:`filemem.shown.visible`), cut at ``width``."""
    line = " \u21b5 ".join(visible(part) for part in text.split("\n"))
    return line if len(line) <= width else line[: width - 1] + "\u2026"


def workspace_shown(key: str, home: str | None = None) -> str:
    """A workspace key for a person: the home folder (``home``, else looked up) as ``~``."""
    if home is None:
        home = os.path.expanduser("~")
    if home not in ("", "/", "~") and (key == home or key.startswith(home + os.sep)):
        key = "~" + key[len(home):]
    return visible(key)


def entry_lines(entries: list[dict[str, Any]]) -> list[str]:
    """One line per entry: id, track/scope, workspace, agent layer, text and tags, in
    columns (``filemem list`` and ``query``)."""
    rows = []
    home = os.path.expanduser("~")
    shown: dict[str, str] = {}  # a workspace key as shown: most entries share a few
    for e in entries:
        ws = "all workspaces"
        if e["scope"] == "workspace":
            key = e["workspaceKey"] or "(none)"
            if key not in shown:
                shown[key] = workspace_shown(key, home)
            ws = shown[key]
        agent = f"agent {visible(e['agentKey'])}" if e["agentKey"] else "shared"
        tags = f" [{visible(', '.join(e['tags']))}]" if e["tags"] else ""
        rows.append((e["id"][:8], f"{e['track']}/{e['scope']}", ws, agent,
                     one_line(e["text"]) + tags))
    wide = min(max((len(r[2]) for r in rows), default=0), 40)
    agents = min(max((len(r[3]) for r in rows), default=0), 24)
    return [f"{i}  {layer:<16}  {ws:<{wide}}  {agent:<{agents}}  {text}"
            for i, layer, ws, agent, text in rows]


def entry_fields(e: dict[str, Any]) -> list[str]:
    """What :func:`entry_lines` shows of an entry that may hold hidden characters."""
    return [e["text"], *e["tags"], e["agentKey"] or "", e["workspaceKey"] or ""]


def usage_line(u: Mapping[str, Any]) -> str:
    return f"{u['track']}/{u['scope']}: {u['used']}/{u['limit']} chars used"


# ---------------------------------------------------------------- shared options


def session_options(f: F) -> F:
    f = click.option("--session", "session_id", metavar="ID",
                     help="Session id recorded with the write or read.")(f)
    f = click.option("--agent", metavar="NAME",
                     help="Agent preset: writes go to that agent's layer; reads see shared "
                          "entries plus that agent's.")(f)
    f = click.option("--workspace", metavar="DIR",
                     help="Workspace folder (default: the current directory for writes).")(f)
    return f


def store_option(f: F) -> F:
    return click.option(
        "--store", "store_path", metavar="PATH", envvar="FILEMEM_STORE",
        help="Store folder (default: $FILEMEM_STORE, $FILEMEM_HOME, else the user data dir).",
    )(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(f)


def yes_option(f: F) -> F:
    return click.option("--yes", "-y", is_flag=True,
                        help="Approve the write without a prompt (for scripts).")(f)


def layer_options(f: F) -> F:
    """--track and --scope of a write, with the reference's defaults (user/workspace)."""
    f = click.option("--scope", type=SCOPES, default="workspace", show_default=True,
                     help="user-global: everywhere; workspace: this workspace only.")(f)
    return click.option("--track", type=TRACKS, default="user", show_default=True,
                        help="user: about the person; agent: about the environment.")(f)


def write_options(f: F) -> F:
    """What every write command takes: the session, --yes, --store, --json; and errors
    mapped to messages and exit codes."""
    return session_options(yes_option(store_option(json_option(command(f)))))


def report(result: dict[str, Any], as_json: bool, line: str) -> None:
    """A write's result: JSON, or a line and the layer's budget usage."""
    if as_json:
        emit_json(result)
    else:
        click.echo(line)
        click.echo(usage_line(result["usage"]))


def open_store(store_path: str | None, *, yes: bool = False, validate: bool = True) -> Any:
    """The store with the CLI's approval transport: --yes, else the terminal if there is
    one, else none (under `ask` the write is then staged as a pending approval)."""
    import filemem

    if yes:
        gate: Any = PreApproved()
    elif sys.stdin.isatty() and sys.stderr.isatty():
        gate = TerminalPrompt()
    else:
        gate = None
    # the owner sees every entry, so a match not found is named wherever it is
    return filemem.open_store(store_path, gate=gate, validate=validate, reveal_matches=True)


def open_owner(store_path: str | None, *, validate: bool = False, yes: bool = False) -> Owner:
    """The owner's facade over the store; by default opened even with invalid files at
    HEAD (the owner's commands are how a person repairs them). ``yes``: as for
    :func:`open_store`."""
    from filemem.owner import Owner

    return Owner(open_store(store_path, yes=yes, validate=validate))


def write_ctx(workspace: str | None, agent: str | None, session_id: str | None) -> dict[str, Any]:
    from filemem.provider import write_context

    return write_context(session_id=session_id, cwd=workspace or os.getcwd(), agent=agent)


def command(f: F) -> F:
    """Run with the store open; map errors to messages and exit codes."""

    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        as_json = bool(kwargs.get("as_json"))
        try:
            return f(*args, **kwargs)
        except errors.FilememError as exc:
            fail(exc, as_json)

    return wrapper  # type: ignore[return-value]


# ---------------------------------------------------------------- commands

def text_arg(text: tuple[str, ...]) -> str:
    if text == ("-",):
        data = sys.stdin.buffer.read()
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise errors.invalid_input(f"stdin is not valid UTF-8 ({exc.reason})") from None
    return " ".join(text)

