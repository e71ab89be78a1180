"""Owner commands killed at any instant: afterwards the store is exactly before or after.

The agent writes already pass this (tests/test_crash.py); here the owner's commands get the
same treatment, with real `filemem` processes and real SIGKILLs at seeded random instants,
and `os._exit` at chosen points. Whatever instant a kill lands at, every outcome the test
allows is checked in full: a staged write is still pending (and approvable again) or
committed/rejected with exactly one audit row naming it; hand edits are still exactly as
the person left them or adopted/discarded; `git fsck`, `git status` and `filemem verify`
pass. Correctness never depends on the timing, only which of the allowed outcomes is seen.
"""

from __future__ import annotations

import random
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.owner import Owner
from tests import orphans
from tests.conftest import ctx, git, write_in_flight

UG = {"track": "user", "scope": "user-global"}
AW = {"track": "agent", "scope": "workspace"}
SEED = 20270214
APPROVE_ROUNDS = 12
REJECT_ROUNDS = 8
ADOPT_ROUNDS = 10
SMALL_ROUNDS = 6
HAND_FILES = 60


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "filemem.cli", *args]


def run_and_kill(cmd: list[str], delay: float) -> int:
    """Start ``cmd``, SIGKILL it after ``delay`` seconds (if still running), then wait for
    the git commands it left running (tests/orphans.py); its exit code."""
    child = orphans.start(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
    try:
        child.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        return orphans.kill(child)
    orphans.wait_for_group(child.pid)  # ended by itself: what it started ended first
    return child.returncode


def rows_naming(p: filemem.Provider, pid: str) -> list[dict[str, Any]]:
    """Audit rows that settle pending ``pid``: its approval's rows or its rejection's."""
    out = []
    for r in p.audit_list(10_000):
        o = str(r["outcome"])
        if f"`filemem approve` of pending {pid})" in o or \
                f"`filemem reject` of pending {pid}" in o:
            out.append(r)
    return out


def assert_sound(store: Path) -> None:
    git(store, "fsck", "--strict")
    assert not write_in_flight(store)
    done = subprocess.run(cli("verify", "--store", str(store)), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr


def claimed_left(store: Path, pid: str = "") -> list[str]:
    """Claimed records left in the pending folder (of ``pid``, or of any)."""
    folder = store / ".filemem" / "pending"
    return sorted(n.name for n in folder.iterdir()
                  if n.name.startswith(pid) and ".claimed" in n.name) \
        if folder.is_dir() else []


@pytest.fixture
def ask_store(store_path: Path) -> Path:
    filemem.open_store(store_path, create=True).close()
    return store_path


def stage(store: Path, text: str) -> str:
    # no gate, no terminal: staged
    with filemem.open_store(store, write_policy="ask") as p, \
            pytest.raises(filemem.ProtocolError) as info:
        p.add({**UG, "text": text}, ctx("killed"))
    assert info.value.details["outcome"] == "pending"
    return str(info.value.details["pendingId"])


def judge_pending(store: Path, pid: str, text: str, verb: str) -> str:
    """Open the store after a kill and say which allowed outcome it is in (or fail)."""
    with filemem.open_store(store) as p:
        owner = Owner(p)
        pending = [r["id"] for r in owner.pending()]
        rows = rows_naming(p, pid)
        texts = [e["text"] for e in p.list_entries()]
        left = claimed_left(store, pid)
        if pid in pending:
            assert rows == [], f"{pid} is pending but already has {rows}"
            assert text not in texts
            return "pending"
        assert left == [], f"{pid} neither pending nor settled; claims left: {left}"
        assert len(rows) == 1, f"{pid} is neither pending nor settled once: {rows} (lost)"
        if verb == "approve":
            assert rows[0]["action"] == "add"
            assert texts.count(text) == 1
            return "approved"
        assert rows[0]["action"] == "add-denied"
        assert text not in texts
        return "rejected"


def finish_pending(store: Path, pid: str, text: str, verb: str) -> None:
    """A write left pending is approvable (rejectable) again, exactly once."""
    with filemem.open_store(store) as p:
        owner = Owner(p)
        if verb == "approve":
            owner.approve(pid)
        else:
            owner.reject(pid)
        assert len(rows_naming(p, pid)) == 1
        assert [e["text"] for e in p.list_entries()].count(text) == (verb == "approve")
        assert pid not in [r["id"] for r in owner.pending()]


@pytest.mark.parametrize("verb,rounds", [("approve", APPROVE_ROUNDS),
                                         ("reject", REJECT_ROUNDS)])
def test_killing_approve_or_reject_never_loses_the_staged_write(verb: str, rounds: int,
                                                                ask_store: Path) -> None:
    rng = random.Random(SEED + rounds)
    seen: Counter[str] = Counter()
    failures: list[str] = []
    for n in range(rounds):
        text = f"staged write {n}"
        pid = stage(ask_store, text)
        run_and_kill(cli(verb, pid, "--store", str(ask_store)), rng.uniform(0.15, 0.9))
        try:
            outcome = judge_pending(ask_store, pid, text, verb)
            seen[outcome] += 1
            if outcome == "pending":
                finish_pending(ask_store, pid, text, verb)
            assert_sound(ask_store)
            assert git(ask_store, "status", "--porcelain") == ""
        except AssertionError as exc:
            seen["LOST"] += 1
            failures.append(f"round {n}: {exc}")
    print(f"{verb}: {dict(seen)}")  # which outcomes the kills landed in (-s shows it)
    assert not failures, f"{dict(seen)}: " + "\n".join(failures)


# A child that dies (exit 9, no clean-up) at one chosen point of `approve` / `reject`.
TARGETED = """
import os, sys
import filemem, filemem.store.pending, filemem.provider, filemem.store.core
from filemem.owner import Owner
store, point, verb, pid = sys.argv[1:5]
PS = filemem.store.pending.PendingStore

def after(cls, name):
    real = getattr(cls, name)
    def dying(*a, **k):
        real(*a, **k)
        os._exit(9)
    setattr(cls, name, dying)

def before(cls, name):
    setattr(cls, name, lambda *a, **k: os._exit(9))

if point == "after-claim":
    after(PS, "claim")
elif point == "after-commit":
    if verb == "approve":
        after(filemem.provider.Provider, "_run_pending")
    else:
        after(filemem.store.core.Store, "record")
elif point == "before-drop":
    before(PS, "drop")
else:
    sys.exit("unknown point " + point)
owner = Owner(filemem.open_store(store))
getattr(owner, verb)(pid)
sys.exit("finished without reaching the kill point")
"""


@pytest.mark.parametrize("verb", ["approve", "reject"])
@pytest.mark.parametrize("point,expected", [("after-claim", "pending"),
                                            ("after-commit", "settled"),
                                            ("before-drop", "settled")])
def test_approve_or_reject_killed_at_chosen_points(verb: str, point: str, expected: str,
                                                  ask_store: Path) -> None:
    text = f"chosen point {point}"
    pid = stage(ask_store, text)
    out = subprocess.run([sys.executable, "-c", TARGETED, str(ask_store), point, verb, pid],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 9, out.stderr
    outcome = judge_pending(ask_store, pid, text, verb)
    assert outcome == ("pending" if expected == "pending" else
                       "approved" if verb == "approve" else "rejected")
    if outcome == "pending":
        finish_pending(ask_store, pid, text, verb)
    assert claimed_left(ask_store) == []
    assert_sound(ask_store)
    assert git(ask_store, "status", "--porcelain") == ""


def test_a_claim_held_by_a_live_approver_is_left_alone(ask_store: Path) -> None:
    pid = stage(ask_store, "held by a live process")
    with filemem.open_store(ask_store) as p:
        p.store.pending.claim(pid)  # this process holds it, and is alive
        with filemem.open_store(ask_store) as other:
            assert Owner(other).pending() == []
            with pytest.raises(filemem.ProtocolError) as info:
                Owner(other).approve(pid)
            assert info.value.code == "PROPOSAL_NOT_FOUND"
        p.store.pending.release(pid)
        assert [r["id"] for r in Owner(p).pending()] == [pid]


# ---------------------------------------------------------------- hand edits


def hand_edit(store: Path, rng: random.Random, round_no: int) -> dict[str, bytes]:
    """Many hand edits: edited entries, files written from scratch, deleted entries.
    Returns what each edited or added file holds (the text that must never be lost)."""
    with filemem.open_store(store, write_policy="auto") as p:
        if len(p.list_entries()) < HAND_FILES:
            p.seed([{**AW, "text": f"entry {round_no}.{i}"} for i in range(HAND_FILES)],
                   ctx("seeder"))
        entries = p.list_entries()
    from tests.test_crash import entry_file

    edits: dict[str, bytes] = {}
    picked = rng.sample(entries, HAND_FILES // 2)
    for i, e in enumerate(picked):
        f = entry_file(store, e)
        rel = f.relative_to(store).as_posix()
        if i % 6 == 5:
            f.unlink()
            continue
        data = f.read_bytes().replace(e["text"].encode(), f"hand {round_no}.{i}".encode())
        f.write_bytes(data)
        edits[rel] = data
    folder = store / "agent" / "user-global" / "_shared"
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(HAND_FILES // 3):
        f = folder / f"note-{round_no}-{i}.md"
        f.write_bytes(f"new hand note {round_no}.{i}\n".encode())
        edits[f.relative_to(store).as_posix()] = f.read_bytes()
    return edits


def hand_texts(edits: dict[str, bytes]) -> set[str]:
    out = set()
    for data in edits.values():
        last = data.decode().rstrip("\n").split("\n")[-1]
        out.add(last)
    return out


def judge_hand_edits(store: Path, before: str, edits: dict[str, bytes],
                     verb: str) -> str:
    subprocess.run(cli("status", "--store", str(store)), capture_output=True,
                   stdin=subprocess.DEVNULL, check=False)  # opening repairs; status reads
    now = git(store, "status", "--porcelain", "--untracked-files=all")
    with filemem.open_store(store) as p:
        texts = {e["text"].rstrip("\n") for e in p.list_entries()}
    if now == before:
        for rel, data in edits.items():
            assert (store / rel).read_bytes() == data, f"{rel} changed, yet not {verb}ed"
        return "before"
    assert now == "", f"neither before nor after {verb}:\n{now}"
    if verb == "adopt":
        lost = hand_texts(edits) - texts
        assert not lost, f"hand text lost: {sorted(lost)[:5]} of {sorted(texts)[-3:]}"
    else:
        assert not hand_texts(edits) & texts
    return "after"


@pytest.mark.parametrize("verb,rounds", [("adopt", ADOPT_ROUNDS), ("discard", SMALL_ROUNDS)])
def test_killing_adopt_or_discard_leaves_before_or_after(verb: str, rounds: int,
                                                         ask_store: Path) -> None:
    rng = random.Random(SEED + 7 * rounds)
    seen: Counter[str] = Counter()
    failures: list[str] = []
    for n in range(rounds):
        edits = hand_edit(ask_store, rng, n)
        before = git(ask_store, "status", "--porcelain", "--untracked-files=all")
        assert before.count("\n") >= HAND_FILES // 2
        run_and_kill(cli(verb, "--yes", "--store", str(ask_store)), rng.uniform(0.3, 1.5))
        try:
            seen[judge_hand_edits(ask_store, before, edits, verb)] += 1
            assert_sound(ask_store)
        except AssertionError as exc:
            seen["BROKEN"] += 1
            failures.append(f"round {n}: {str(exc)[:300]}")
        with filemem.open_store(ask_store) as p:  # finish, so the next round starts clean
            owner = Owner(p)
            if owner.status():
                owner.adopt() if verb == "adopt" else owner.discard()
        assert git(ask_store, "status", "--porcelain", "--untracked-files=all") == ""
    print(f"{verb}: {dict(seen)}")  # which outcomes the kills landed in (-s shows it)
    assert not failures, f"{dict(seen)}: " + "\n".join(failures)


MIRROR_KILL = """
import os, sys
import filemem, filemem.files.worktree as wt
from filemem.owner import Owner
store, verb, after = sys.argv[1], sys.argv[2], int(sys.argv[3])
calls = []
for name in ("write", "remove"):
    real = getattr(wt, name)
    def dying(*a, _real=real, **k):
        calls.append(1)
        if len(calls) > after:
            os._exit(9)
        return _real(*a, **k)
    setattr(wt, name, dying)
owner = Owner(filemem.open_store(store))
getattr(owner, verb)()
sys.exit("finished without reaching the kill point")
"""


@pytest.mark.parametrize("verb", ["adopt", "discard"])
@pytest.mark.parametrize("after", [0, 7, 29])
def test_adopt_or_discard_killed_while_mirroring(verb: str, after: int,
                                                 ask_store: Path) -> None:
    edits = hand_edit(ask_store, random.Random(after), 0)
    before = git(ask_store, "status", "--porcelain", "--untracked-files=all")
    out = subprocess.run([sys.executable, "-c", MIRROR_KILL, str(ask_store), verb, str(after)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 9, out.stderr
    assert judge_hand_edits(ask_store, before, edits, verb) == "after"
    assert_sound(ask_store)


SWAP_KILL = """
import os, sys
import filemem
from filemem.owner import Owner
from filemem.store.transaction import Transaction
store, verb = sys.argv[1], sys.argv[2]
Transaction._swap = lambda *a, **k: os._exit(9)  # killed just before the branch moves
owner = Owner(filemem.open_store(store))
getattr(owner, verb)()
sys.exit("finished without reaching the kill point")
"""


def test_adopt_killed_before_its_commit_leaves_every_hand_edit(ask_store: Path) -> None:
    """An adopt killed after its journal is written but before the branch moves has
    changed nothing: the next open leaves every file as the person left it, a deleted
    entry included (it used to be written back from HEAD, seen in the kill loop above)."""
    edits = hand_edit(ask_store, random.Random(5), 0)
    before = git(ask_store, "status", "--porcelain", "--untracked-files=all")
    assert " D " in before and " M " in before and "?? " in before
    out = subprocess.run([sys.executable, "-c", SWAP_KILL, str(ask_store), "adopt"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 9, out.stderr
    assert write_in_flight(ask_store)  # killed mid-write
    assert judge_hand_edits(ask_store, before, edits, "adopt") == "before"
    assert not write_in_flight(ask_store)  # repaired by the open
    assert_sound(ask_store)


# ---------------------------------------------------------------- import


def test_killing_an_adapter_import_leaves_none_or_all(ask_store: Path, tmp_path: Path) -> None:
    rng = random.Random(SEED + 3)
    memory = tmp_path / "MEMORY.md"
    seen: Counter[str] = Counter()
    for n in range(SMALL_ROUNDS):
        notes = [f"imported {n}-{i}-x" for i in range(40)]
        memory.write_text("\n§\n".join(notes) + "\n", encoding="utf-8")
        with filemem.open_store(ask_store) as p:
            count = len(p.list_entries())
        run_and_kill(cli("import", "--adapter", "hermes-memory-md", str(memory), "--yes",
                         "--store", str(ask_store)), rng.uniform(0.2, 1.5))
        with filemem.open_store(ask_store) as p:
            texts = [e["text"] for e in p.list_entries()]
        got = [t for t in texts if t in notes]
        assert len(got) in (0, len(notes)), f"round {n}: {len(got)} of {len(notes)} imported"
        assert len(texts) == count + len(got)
        seen["all" if got else "none"] += 1
        assert git(ask_store, "status", "--porcelain", "--untracked-files=all") == ""
        assert_sound(ask_store)
        if got:  # keep the budget free for the next round
            with filemem.open_store(ask_store, write_policy="auto") as p:
                for e in [e for e in p.list_entries() if e["text"] in notes]:
                    p.remove({"track": e["track"], "scope": e["scope"], "match": e["text"]},
                             ctx())
    print(f"import: {dict(seen)}")
    assert sum(seen.values()) == SMALL_ROUNDS, dict(seen)
