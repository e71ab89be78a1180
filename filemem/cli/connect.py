"""`filemem connect AGENT`, `filemem disconnect AGENT`, and `filemem hook ...`, the commands
agents run once connected. Each agent's commands are in a module of their own
(:mod:`filemem.cli.hermes`) and the work is on the owner's side (:mod:`filemem.owner`)."""

from __future__ import annotations

from filemem.cli.app import main


@main.group()
def connect() -> None:
    """Connect filemem to an agent, so that its sessions start with your memory snapshot
    and write memory through filemem's approval gate. `filemem disconnect` undoes it."""


@main.group()
def disconnect() -> None:
    """Undo `filemem connect`: remove exactly what it added to the agent's files."""


@main.group()
def hook() -> None:
    """Commands an agent runs by itself once connected (not for typing)."""
