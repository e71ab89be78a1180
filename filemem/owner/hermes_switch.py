"""Connecting Hermes all or nothing: the plugin folder staged, ``config.yaml`` the switch,
and a journal that lets the next run finish or roll back one that was killed.

Hermes uses filemem exactly when ``memory.provider`` in ``config.yaml`` says ``filemem``;
that one atomic replace is **the switch**: the last change of a connect, the first of a
disconnect. Everything else happens in ``$HERMES_HOME/.filemem-connect/`` (outside
``plugins/``, which Hermes scans), the work folder:

* ``journal.json``, written first: which operation, and whether it made ``plugins/``;
* ``plugin/``, the new plugin folder, written whole there, then put in place in one step: a
  ``rename`` when there is none yet, a ``renameat2(RENAME_EXCHANGE)`` swap with the old one
  (:mod:`filemem.files.exchange`) when there is, so Hermes sees the old folder or the new;
* ``old/``, the folder taken out of ``plugins/`` (the old one after a swap, or the one a
  disconnect removes), deleted with the work folder at the end.

A run killed at any point leaves the work folder behind; the next ``connect`` or
``disconnect`` (and :func:`look`, which only reads) recognises it by the journal and the
switch: when ``config.yaml`` says what the interrupted operation wanted, it is finished
(its leftovers removed, or the plugin folder put in or taken out as it would have been),
else it is rolled back (the plugin folder put back as it was). Either way the files
outside the work folder are then as they were before that operation, or as it leaves them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from dataclasses import dataclass
from typing import Any, Final

from filemem.files import atomic, exchange, stoppoint

WORK: Final = ".filemem-connect"
JOURNAL: Final = "journal.json"
BY: Final = "filemem connect hermes"


@dataclass(frozen=True)
class Journal:
    op: str  # "connect" | "disconnect"
    made_plugins: bool  # the operation made $HERMES_HOME/plugins/ (connect) or will drop it
    fresh: bool  # connect: there was no plugin folder before

    def render(self) -> bytes:
        return (json.dumps({"by": BY, "op": self.op, "madePluginsFolder": self.made_plugins,
                            "fresh": self.fresh}, indent=2) + "\n").encode("utf-8")


def work_dir(home: str) -> str:
    return os.path.join(home, WORK)


def read_journal(home: str) -> Journal | None:
    try:
        with open(os.path.join(work_dir(home), JOURNAL), "rb") as f:
            doc = json.loads(f.read().decode("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("by") != BY or doc.get("op") not in (
            "connect", "disconnect"):
        return None
    return Journal(str(doc["op"]), doc.get("madePluginsFolder") is True,
                   doc.get("fresh") is True)


def begin(home: str, journal: Journal) -> str:
    """Make the work folder and its journal (the first step of either operation)."""
    work = work_dir(home)
    stoppoint.reached(f"begin {journal.op}: {work}")
    os.makedirs(work, mode=0o700, exist_ok=True)
    atomic.atomic_write(os.path.join(work, JOURNAL), journal.render(), durable=True,
                        mode=0o600)
    return work


def end(home: str) -> None:
    """Remove the work folder: the operation is over."""
    work = work_dir(home)
    if os.path.lexists(work):
        stoppoint.reached(f"end: remove {work}")
        shutil.rmtree(work, ignore_errors=False)
        atomic.fsync_dir(home)


def put_in_place(work: str, plugin_dir: str) -> None:
    """Put the staged ``work/plugin`` at ``plugin_dir`` in one step where the system can
    (the old folder, if any, goes to ``work/old``)."""
    new, old = os.path.join(work, "plugin"), os.path.join(work, "old")
    stoppoint.reached(f"put {plugin_dir} in place")
    if not os.path.lexists(plugin_dir):
        os.makedirs(os.path.dirname(plugin_dir), mode=0o700, exist_ok=True)
        os.rename(new, plugin_dir)
    elif exchange.exchange(new, plugin_dir):
        os.rename(new, old)  # (`new` names the old folder now)
    else:  # two steps; a kill between them is finished from the journal
        os.rename(plugin_dir, old)
        stoppoint.reached(f"rename {new} to {plugin_dir}")
        os.rename(new, plugin_dir)
    atomic.fsync_dir(os.path.dirname(plugin_dir))


def take_out(work: str, plugin_dir: str, made_plugins: bool) -> None:
    """Move ``plugin_dir`` into ``work/old`` (one rename: it is gone, whole), and drop
    ``plugins/`` when connect made it and nothing else is in it."""
    if os.path.lexists(plugin_dir):
        stoppoint.reached(f"take {plugin_dir} out")
        old = os.path.join(work, "old")
        if os.path.lexists(old):
            shutil.rmtree(old)
        os.rename(plugin_dir, old)
    if made_plugins:
        with contextlib.suppress(OSError):  # something else is in it: it stays
            os.rmdir(os.path.dirname(plugin_dir))


def _put_back(work: str, plugin_dir: str) -> None:
    """The folder as it was before the interrupted operation: ``work/old`` if it was
    taken out (the new one, if it is in place, goes out first)."""
    old = os.path.join(work, "old")
    if not os.path.lexists(old):
        return
    if os.path.lexists(plugin_dir):
        if exchange.exchange(old, plugin_dir):
            return
        os.rename(plugin_dir, os.path.join(work, "undone"))
    os.makedirs(os.path.dirname(plugin_dir), mode=0o700, exist_ok=True)
    os.rename(old, plugin_dir)


def resolve(home: str, plugin_dir: str, switched_on: bool) -> str | None:
    """Finish or roll back an operation killed earlier (``switched_on``: ``config.yaml``
    selects filemem now); one line saying which, or None if there was none."""
    work = work_dir(home)
    if not os.path.lexists(work):
        return None
    j = read_journal(home)
    if j is None:  # killed while writing the journal: nothing else had changed
        end(home)
        return ("Removed what an interrupted `filemem connect/disconnect hermes` left in "
                f"{work} (it had changed nothing else).")
    wanted = j.op == "connect"
    if switched_on == wanted:  # the switch was made: finish the operation
        if wanted:
            staged = os.path.join(work, "plugin")
            if not os.path.lexists(plugin_dir) and os.path.lexists(staged):
                os.rename(staged, plugin_dir)
            elif not os.path.lexists(plugin_dir):
                _put_back(work, plugin_dir)
        else:
            take_out(work, plugin_dir, j.made_plugins)
        end(home)
        return (f"An interrupted `filemem {j.op} hermes` had already switched config.yaml: "
                "finished it.")
    if wanted and j.fresh:  # roll back a first connect: its plugin folder goes
        take_out(work, plugin_dir, j.made_plugins)
    else:
        _put_back(work, plugin_dir)
    end(home)
    return (f"An interrupted `filemem {j.op} hermes` had not switched config.yaml yet: "
            "rolled it back, every file is as it was before it.")


def look(home: str, switched_on: bool) -> str | None:
    """What :func:`resolve` would do, without doing it (for a read-only command)."""
    if not os.path.lexists(work_dir(home)):
        return None
    j = read_journal(home)
    if j is None:
        return (f"{work_dir(home)} holds what an interrupted `filemem connect/disconnect "
                "hermes` left (it had changed nothing else); the next connect or disconnect "
                "removes it.")
    verb = "finishes it" if switched_on == (j.op == "connect") else "rolls it back"
    return (f"A `filemem {j.op} hermes` was interrupted; the next `filemem connect hermes` "
            f"or `filemem disconnect hermes` {verb} first.")


def foreign(plugin_dir: str, ours: tuple[str, ...]) -> bool:
    """Whether the plugin folder holds something filemem did not put there (the person's:
    then it is never moved or deleted whole)."""
    try:
        names = os.listdir(plugin_dir)
    except OSError:
        return False
    return any(n not in ours and n != "__pycache__" for n in names)


def stage(work: str, files: list[tuple[str, bytes]], write: Any) -> None:
    """Write the whole new plugin folder into ``work/plugin``."""
    staged = os.path.join(work, "plugin")
    stoppoint.reached(f"stage the plugin in {staged}")
    if os.path.lexists(staged):
        shutil.rmtree(staged)
    os.mkdir(staged, 0o700)
    for name, data in files:
        write(os.path.join(staged, name), data, 0o600)


__all__ = ["Journal", "begin", "end", "foreign", "look", "put_in_place", "read_journal",
           "resolve", "stage", "take_out", "work_dir"]
