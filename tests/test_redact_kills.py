"""`filemem redact` killed at any instant: the store is before it or after it, never between.

Real `filemem` processes and real SIGKILLs: at every step of the redaction (the process
sends SIGKILL to itself right after that step), and at seeded random instants. Afterwards
the store is opened (which repairs), and checked in full: before, the history, the ledger
and the pending approvals are exactly as they were (the text still there); after, no trace
of the text is left anywhere. Either way `git fsck --strict` is clean, the working tree
matches HEAD and `filemem verify` passes.
"""

from __future__ import annotations

import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import filemem
from tests.conftest import ctx, git, head, write_in_flight
from tests.test_owner_kills import run_and_kill
from tests.test_redact import traces, verify_ok

UG = {"track": "user", "scope": "user-global"}
SECRET = "AKIAREDACTKILLTEST0123"
SEED = 20261201
RANDOM_ROUNDS = 6

KILLER = r"""
import os, signal, sys
import filemem
from filemem.files import gitprune, gitrepo, worktree
from filemem.owner import Owner, redact
from filemem.store import core, redactstage

store, point, text = sys.argv[1], sys.argv[2], sys.argv[3]
calls = []

def die_after(owner, name, nth=1):
    real = getattr(owner, name)
    def dying(*a, **k):
        out = real(*a, **k)
        calls.append(name)
        if calls.count(name) >= nth:
            os.kill(os.getpid(), signal.SIGKILL)
        return out
    setattr(owner, name, dying)

POINTS = {
    "objects": (gitrepo.GitRepo, "write"),
    "journal": (worktree.Journal, "begin"),
    "staged": (redact, "_stage"),
    "manifest": (redactstage, "write_manifest"),
    "branch": (gitrepo.GitRepo, "cas_head"),
    "worktree": (worktree, "write"),
    "index": (core.Store, "_write_index"),
    "local": (redactstage, "finish_local"),
    "reflogs": (gitprune, "_run"),
    "repacked": (gitprune, "_run", 2),
    "pruned": (redactstage, "forget_old_history"),
    "done": (redactstage, "clear", 2),
}
die_after(*POINTS[point])
with Owner(filemem.open_store(store)) as owner:
    owner.redact(text=text)
sys.exit("finished without reaching the kill point")
"""
BEFORE = ["objects", "journal", "staged", "manifest"]
AFTER = ["branch", "worktree", "index", "local", "reflogs", "repacked", "pruned", "done"]


def make_store(path: Path) -> None:
    with filemem.open_store(path, create=True, write_policy="auto") as p:
        p.add({**UG, "text": "Prefers tea"}, ctx())
        p.add({**UG, "text": f"aws key {SECRET}"}, ctx())
        p.add({**UG, "text": "Uses vim"}, ctx())
        p.snapshot(ctx())
    with filemem.open_store(path, write_policy="ask") as p, \
            pytest.raises(filemem.ProtocolError):
        p.add({**UG, "text": f"again {SECRET}"}, ctx())


def snapshot_of(store: Path) -> dict[str, Any]:
    meta = store / ".filemem"
    return {"head": head(store), "log": git(store, "log", "-p", "--all"),
            "ledger": (meta / "audit.jsonl").read_bytes(),
            "pending": sorted(p.read_bytes() for p in (meta / "pending").glob("*.json"))}


def check_outcome(store: Path, before: dict[str, Any]) -> str:
    """Open the store (it repairs), then: 'before' or 'after', each checked in full."""
    with filemem.open_store(store):
        pass
    git(store, "fsck", "--strict")
    assert git(store, "status", "--porcelain") == ""
    assert not write_in_flight(store)
    assert not (store / ".filemem" / "redaction").exists()
    verify_ok(store)
    if head(store) == before["head"]:
        assert snapshot_of(store) == before
        return "before"
    assert traces(store, SECRET) == []
    assert "Audit-Action: redact" in git(store, "log", "-1", "--format=%B")
    return "after"


@pytest.mark.parametrize("point", BEFORE + AFTER)
def test_killed_after_each_step(point: str, tmp_path: Path) -> None:
    store = tmp_path / "store"
    make_store(store)
    before = snapshot_of(store)
    done = subprocess.run([sys.executable, "-c", KILLER, str(store), point, SECRET],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == -9, done.stderr  # killed where asked, not finished
    assert check_outcome(store, before) == ("before" if point in BEFORE else "after")
    if point in BEFORE:  # and it can be done afterwards
        with filemem.open_store(store) as p:
            from filemem.owner import redact

            redact.apply(p.store, text=SECRET)
        assert traces(store, SECRET) == []


def test_killed_at_random_instants(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    seen = []
    for i in range(RANDOM_ROUNDS):
        store = tmp_path / f"store{i}"
        make_store(store)
        before = snapshot_of(store)
        cmd = [sys.executable, "-m", "filemem.cli", "redact", "--text", SECRET, "--yes",
               "--store", str(store)]
        run_and_kill(cmd, rng.uniform(0.2, 1.6))
        seen.append(check_outcome(store, before))
    assert set(seen) <= {"before", "after"}
