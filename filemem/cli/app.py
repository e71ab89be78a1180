"""The `filemem` command group; the commands live in the modules beside this one.

The options most commands share may also come before the command's name, as people used to
``git -C`` type them: ``filemem --store S list`` is ``filemem list --store S``.

A command's module is imported when the command is used (:data:`COMMANDS`): a cold
``filemem query`` does not pay for the modules of ``connect``, ``sync`` or ``adapters``.
"""

from __future__ import annotations

import atexit
import gc
import importlib
from typing import Final

import click

VALUED: Final = ("--store", "--workspace", "--agent", "--session")  # each takes a value
FLAGS: Final = ("--json", "--yes", "-y")
# each command and the modules (of filemem.cli) that define it and its subcommands;
# tests/test_cli_options.py checks this against what the modules register
COMMANDS: Final = {
    **dict.fromkeys(("init", "path", "add", "replace", "remove", "consolidate", "query",
                     "list", "budgets", "audit", "export", "import", "snapshot"),
                    ("entries",)),
    **dict.fromkeys(("pending", "approve", "reject", "discard", "adopt", "status", "log",
                     "verify", "watch"), ("owner",)),
    **dict.fromkeys(("clone", "remote", "sync"), ("sync",)),
    **dict.fromkeys(("connect", "disconnect", "hook"), ("connect", "hermes")),
    "adapters": ("adapters",),
    "redact": ("redact",),
    "connections": ("connections",),
    "bridge": ("serve",),
    "mcp": ("serve",),
}


def _leading(args: list[str]) -> tuple[list[str], list[str]]:
    """The shared options at the start of ``args`` (with their values), and the rest."""
    lead: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        name = arg.split("=", 1)[0] if arg.startswith("--") else arg
        whole = arg in FLAGS or (name in VALUED and "=" in arg)  # a flag, or --option=value
        if whole:
            lead.append(arg)
            i += 1
        elif name in VALUED and i + 1 < len(args):
            lead += [arg, args[i + 1]]
            i += 2
        else:
            break
    return lead, args[i:]


class Filemem(click.Group):
    """The command group, moving the shared options typed before a command to after it, and
    importing each command's module on first use."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            # an unknown name loads every module, so "did you mean" sees every command
            for module in COMMANDS.get(cmd_name, sorted({m for ms in COMMANDS.values()
                                                         for m in ms})):
                importlib.import_module(f"filemem.cli.{module}")
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*self.commands, *COMMANDS})

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        lead, rest = _leading(args)
        if lead:
            args = self._hoisted(ctx, lead, rest) or args
        return super().parse_args(ctx, args)

    def _hoisted(self, ctx: click.Context, lead: list[str], rest: list[str]) -> list[str] | None:
        """``rest`` with ``lead`` moved behind the command it names (``remote add``: behind
        both words), or None when no command follows (the group's own options take them:
        `filemem --store S` says a command is missing)."""
        cmd: click.Command = self
        depth = 0
        while isinstance(cmd, click.Group) and depth < len(rest):
            sub = cmd.get_command(ctx, rest[depth])
            if sub is None:
                break
            cmd, depth = sub, depth + 1
        if depth == 0 or isinstance(cmd, click.Group):
            return None
        named = " ".join(rest[:depth])
        accepted = {o for p in cmd.params for o in (*p.opts, *p.secondary_opts)}
        for arg in lead:
            name = arg.split("=", 1)[0]
            if name.startswith("-") and name in (*VALUED, *FLAGS) and name not in accepted:
                raise click.UsageError(
                    f"{name} does not apply to `filemem {named}` (see `filemem {named} "
                    "--help` for its options)", ctx)
        return [*rest[:depth], *lead, *rest[depth:]]


def _shared(help_text: str, *, flag: bool = False, metavar: str | None = None
            ) -> click.Parameter:
    names = help_text.split(":", 1)[0].split(", ")
    return click.Option(names, is_flag=flag, metavar=metavar, expose_value=False,
                        help=help_text.split(": ", 1)[1])


@click.group(cls=Filemem,
             context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
             params=[
                 _shared("--store: The store folder, for every command (default: "
                         "$FILEMEM_STORE, $FILEMEM_HOME, else the user data dir).",
                         metavar="PATH"),
                 _shared("--json: Print JSON (commands that have --json).", flag=True),
                 _shared("--workspace: The session's workspace folder (writes, query, "
                         "snapshot, mcp).", metavar="DIR"),
                 _shared("--agent: The session's agent preset (writes, query, snapshot, mcp).",
                         metavar="NAME"),
                 _shared("--session: The session id recorded (writes, query, snapshot).",
                         metavar="ID"),
                 _shared("--yes, -y: Approve the write without a prompt (writes).", flag=True),
             ])
@click.version_option(package_name="filemem")
def main() -> None:
    """filemem: a memory store for coding agents, kept as Markdown files in git.

    Every change an agent makes is approved by you and recorded as one git commit.
    Start with `filemem init`, then `filemem add`, `filemem query`, `filemem snapshot`.

    The options below may come before the command, as with `git -C`: `filemem --store S
    list` is `filemem list --store S`.
    """
    # the modules imported so far live as long as this short process: keep them out of the
    # collector's full passes (a third of a cold `filemem list`'s view-cache load otherwise);
    # given back when the command ends, for a caller that runs it in its own process
    gc.freeze()
    click.get_current_context().call_on_close(gc.unfreeze)
    # and when the process exits, out of the collections Python makes then: they walked
    # every object once more (~5% of a cold `filemem query`) to free what the OS frees anyway
    atexit.unregister(gc.freeze)  # once, however often a caller runs a command in-process
    atexit.register(gc.freeze)
