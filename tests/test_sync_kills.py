"""`filemem sync` and `filemem clone` killed at seeded random instants (tests/test_owner_kills.py
gives the other owner commands the same loop).

Real `filemem` processes, a real bare remote, two real stores, real SIGKILLs. Each kill's
delay is drawn from a range covering the command's run time (measured once first), so the
kills land anywhere from Python's start-up to the push. Whatever instant a kill lands at,
every outcome the test allows is checked in full, never which one it was:

- sync: the local store's HEAD is its old head, or the merge of it and what was fetched;
  the remote's ``main`` is its old value or that merge; after the next open the working tree
  is clean, `git fsck --strict` passes on both, `filemem verify` is OK, no entry is lost or
  doubled; the next `filemem sync` works, and after both machines sync every text written
  on either side is there exactly once.
- clone: the target does not exist (or is still the empty folder it was) or is a whole
  store (opens, verifies, fsck clean, the remote's entries and commit); no half-built
  ``.<name>.filemem-clone-*`` folder is left once the next clone to that path has run.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

import filemem
from filemem.owner import gitfetch
from filemem.owner import remotes as fremotes
from filemem.owner import sync as fsync
from filemem.owner.leftovers import STALE_TEMP_PACK
from tests.conftest import ctx, git
from tests.test_owner_kills import assert_sound, cli, run_and_kill

UG = {"track": "user", "scope": "user-global"}
SEED = 20270301
SYNC_ROUNDS = 12
CLONE_ROUNDS = 12
PER_ROUND = 50  # entries each side writes per round: a merge with real work to do


def head(path: Path, ref: str = "HEAD") -> str:
    return git(path, "rev-parse", ref).strip()


def is_ancestor(path: Path, old: str, new: str) -> bool:
    return subprocess.run(["git", "-C", str(path), "merge-base", "--is-ancestor", old, new],
                          capture_output=True).returncode == 0


def texts(store: Path) -> list[str]:
    with filemem.open_store(store) as p:
        return sorted(e["text"] for e in p.list_entries())


def write(store: Path, tag: str) -> list[str]:
    """Two commits: many entries seeded at once, then one more added."""
    many = [f"{tag} seeded {i}: " + "x" * 60 for i in range(PER_ROUND)]
    with filemem.open_store(store, write_policy="auto") as p:
        p.seed([{**UG, "text": t} for t in many], ctx("killed-sync"))
        p.add({**UG, "text": f"{tag} added"}, ctx("killed-sync"))
    return [*many, f"{tag} added"]


def sync_cli(store: Path) -> None:
    done = subprocess.run(cli("sync", "--store", str(store)), capture_output=True, text=True,
                          stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr


def spread(rng: random.Random, lo: float, hi: float, rounds: int) -> list[float]:
    """``rounds`` delays from ``lo`` to ``hi``, one drawn in each of as many equal slices
    (in random order), so that the kills land all over the run whatever the seed."""
    width = (hi - lo) / rounds
    delays = [lo + width * (i + rng.random()) for i in range(rounds)]
    rng.shuffle(delays)
    return delays


def timed(cmd: list[str]) -> float:
    start = time.monotonic()
    done = subprocess.run(cmd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stdout + done.stderr
    return time.monotonic() - start


@pytest.fixture
def two_machines(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A bare remote, machine A (which published its store there) and B (its clone)."""
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", str(remote))
    a_path, b_path = tmp_path / "A", tmp_path / "B"
    filemem.open_store(a_path, create=True).close()
    config = a_path / "filemem.yaml"  # room for the many entries the rounds write
    config.write_text(re.sub(r"(userGlobal|workspace): \d+", r"\1: 10000000",
                             config.read_text(encoding="utf-8")), encoding="utf-8")
    git(a_path, "commit", "-qam", "bigger budgets")
    with filemem.open_store(a_path, write_policy="auto") as a:
        a.seed([{**UG, "text": f"seeded {i}"} for i in range(20)], ctx("seeder"))
        fremotes.add_remote(a.store, "origin", str(remote))
        fsync.sync(a.store)
    fsync.clone(str(remote), str(b_path))
    return remote, a_path, b_path


def diverge(target: Path, other: Path, n: int, written: list[str]) -> None:
    """New commits on both sides, the other side's already on the remote: the target's
    sync fetches, merges and pushes."""
    for path in (other, target):
        written += write(path, f"{path.name} {n}")
    fsync_path(other)


def fsync_path(store: Path) -> None:
    with filemem.open_store(store) as p:
        fsync.sync(p.store)


def temp_files(git_dir: Path) -> list[str]:
    """Temporary files of a fetch or push (dulwich's ``tmp_pack_*``, ``tmp*.pack`` without
    an index, a pack's ``.idx.lock``, a ref's ``.lock``) in a git folder."""
    objects = git_dir / "objects"
    found = [p for p in [*objects.glob("tmp*"), *(objects / "pack").glob("tmp*")]
             if not p.with_suffix(".idx").exists()]
    found += list((objects / "pack").glob("pack-*.idx.lock"))  # an index being written
    found += list((git_dir / "refs").rglob("*.lock"))
    return sorted(str(p.relative_to(git_dir)) for p in found)


def judge_sync(target: Path, remote: Path, old: str, theirs: str, before: list[str],
               incoming: list[str]) -> str:
    """Which allowed state a killed sync left (or fail)."""
    subprocess.run(cli("status", "--store", str(target)), capture_output=True,
                   stdin=subprocess.DEVNULL, check=False)  # opening repairs; status reads
    assert git(target, "status", "--porcelain", "--untracked-files=all") == ""
    git(target, "fsck", "--strict")
    git(remote, "fsck", "--strict")
    assert_sound(target)
    now, remote_now = head(target), head(remote, "main")
    got = texts(target)
    assert [t for t, c in Counter(got).items() if c > 1] == [], "an entry doubled"
    if now == old:
        assert remote_now == theirs, "the remote moved, yet this store did not"
        assert got == before
        return "before"
    parents = git(target, "log", "-1", "--format=%P", now).split()
    assert sorted(parents) == sorted([old, theirs]), f"HEAD {now} is not the merge: {parents}"
    assert is_ancestor(target, old, now) and is_ancestor(target, theirs, now)
    assert got == sorted(set(before) | set(incoming)), "the merge lost or added entries"
    if remote_now == theirs:
        return "merged"
    assert remote_now == now, f"the remote's main is {remote_now}: neither old nor the merge"
    return "pushed"


# 12 rounds of a killed sync, each followed by two real syncs and full checks: about a
# minute alone, 3+ under heavy load, where the suite's 300 s guard against hangs could stop it
@pytest.mark.timeout(1200)
def test_killing_sync_leaves_before_or_after_and_the_next_sync_finishes(
        two_machines: tuple[Path, Path, Path]) -> None:
    remote, a_path, b_path = two_machines
    rng = random.Random(SEED)
    written = [f"seeded {i}" for i in range(20)]
    diverge(b_path, a_path, -1, written)
    took = timed(cli("sync", "--store", str(b_path)))  # a fetch, a merge, a push
    start = timed(cli("--help"))  # the interpreter starting: a kill before it is trivial
    fsync_path(a_path)
    seen: Counter[str] = Counter()
    failures: list[str] = []
    for n, delay in enumerate(spread(rng, 0.8 * start, 1.5 * took, SYNC_ROUNDS)):
        target, other = (a_path, b_path) if n % 2 else (b_path, a_path)
        diverge(target, other, n, written)
        old, theirs = head(target), head(remote, "main")
        before, incoming = texts(target), texts(other)
        code = run_and_kill(cli("sync", "--store", str(target)), delay)
        try:
            outcome = judge_sync(target, remote, old, theirs, before, incoming)
            seen[outcome] += 1
            print(f"round {n}: killed at {delay:.3f} s (exit {code}): {outcome}")
            for left in temp_files(remote):  # a killed push's: the next push removes them
                old_time = time.time() - 2 * STALE_TEMP_PACK  # once left that long
                os.utime(remote / left, (old_time, old_time))
            sync_cli(target)  # the next sync works (and finishes the push if it was cut)
            assert head(remote, "main") == head(target)
            sync_cli(other)
            assert head(other) == head(target) == head(remote, "main")
            for path in (target, other):
                got = texts(path)
                assert got == sorted(written), (
                    f"lost {sorted(set(written) - set(got))[:5]}, "
                    f"doubled {[t for t, c in Counter(got).items() if c > 1][:5]}")
                assert_sound(path)
                assert git(path, "status", "--porcelain", "--untracked-files=all") == ""
            git(remote, "fsck", "--strict")
            assert temp_files(target / ".git") == [] and temp_files(other / ".git") == []
            assert temp_files(remote) == [], "a killed push's temporary files were kept"
        except AssertionError as exc:
            seen["BROKEN"] += 1
            failures.append(f"round {n}: {str(exc)[:400]}")
    # where the kills landed (-s shows it)
    print(f"sync (start-up {start:.2f} s, run {took:.2f} s): {dict(seen)}")
    assert not failures, f"{dict(seen)}: " + "\n".join(failures)


# ---------------------------------------------------------------- clone


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".filemem-clone-" in p.name)


def judge_clone(target: Path, remote: Path, expected: list[str]) -> str:
    if not target.exists() or (target.is_dir() and not any(target.iterdir())):
        return "none"
    assert_sound(target)
    assert git(target, "status", "--porcelain", "--untracked-files=all") == ""
    assert head(target) == head(remote, "main")
    git(remote, "fsck", "--strict")
    assert texts(target) == expected
    assert git(target, "remote", "-v").split()[:2] == ["origin", str(remote)]
    return "whole"


def test_killing_clone_leaves_no_store_or_a_whole_one(
        two_machines: tuple[Path, Path, Path], tmp_path: Path) -> None:
    remote, a_path, _ = two_machines
    with filemem.open_store(a_path, write_policy="auto") as a:  # something to carry over
        a.seed([{**UG, "text": f"to clone {i}"} for i in range(300)], ctx("seeder"))
        fsync.sync(a.store)
    expected = texts(a_path)
    parent = tmp_path / "clones"
    parent.mkdir()
    took = timed(cli("clone", str(remote), str(parent / "measured")))
    rng = random.Random(SEED + 1)
    seen: Counter[str] = Counter()
    failures: list[str] = []
    start = timed(cli("--help"))
    for n, delay in enumerate(spread(rng, 0.8 * start, 1.1 * took, CLONE_ROUNDS)):
        target = parent / f"c{n}"
        if n % 3 == 2:
            target.mkdir()  # an empty folder is a fine target too
        code = run_and_kill(cli("clone", str(remote), str(target)), delay)
        try:
            outcome = judge_clone(target, remote, expected)
            seen[outcome] += 1
            print(f"round {n}: killed at {delay:.3f} s (exit {code}): {outcome}, "
                  f"left {leftovers(parent)}")
            if outcome == "none":  # cloning again to that path works, and tidies up
                timed(cli("clone", str(remote), str(target)))
                assert judge_clone(target, remote, expected) == "whole"
            assert leftovers(parent) == [], "a half-built clone was left"
        except AssertionError as exc:
            seen["BROKEN"] += 1
            failures.append(f"round {n}: {str(exc)[:400]}")
    print(f"clone (start-up {start:.2f} s, run {took:.2f} s): {dict(seen)}")
    assert not failures, f"{dict(seen)}: " + "\n".join(failures)


def test_only_dead_clones_half_builds_are_removed(tmp_path: Path,
                                                   two_machines: tuple[Path, Path, Path]) -> None:
    from filemem.store.pending import holder

    remote = two_machines[0]
    parent = tmp_path / "clones"
    dead = parent / ".x.filemem-clone-999999999-1-0123abcd"  # no such process
    pid, _, started = holder().partition("-")
    # this pid lives, but the process named there started at another time (a reused pid)
    reused = parent / f".y.filemem-clone-{pid}-{int(started or 0) + 1}-0123abcd"
    live = parent / f".z.filemem-clone-{holder()}-0123abcd"  # this process: still cloning
    other = parent / ".w.filemem-clone-999999999-1-not-ours"  # not a name clone makes
    folders = [dead, live, other, *([reused] if started else [])]  # start times: Linux
    for folder in folders:
        (folder / ".git").mkdir(parents=True)
    (dead / ".git" / "pack").write_bytes(b"half")
    fsync.clone(str(remote), str(parent / "store"))
    assert leftovers(parent) == sorted([live.name, other.name])
    assert judge_clone(parent / "store", remote, texts(two_machines[1])) == "whole"


def test_a_dead_pushs_temporary_packs_are_removed_from_a_local_remote_once_old(
        two_machines: tuple[Path, Path, Path]) -> None:
    remote, a_path, _ = two_machines
    pack_dir = remote / "objects" / "pack"
    old, young = pack_dir / "tmpabcd1234.pack", pack_dir / "tmpwxyz9876.pack"
    stale = remote / "objects" / "tmp_pack_q1w2e3"
    for f in (old, young, stale):
        f.write_bytes(b"PACK half written")
    then = time.time() - 2 * STALE_TEMP_PACK
    for f in (old, stale):
        os.utime(f, (then, then))
    write(a_path, "pushed")
    sync_cli(a_path)
    assert temp_files(remote) == ["objects/pack/tmpwxyz9876.pack"]  # maybe being written
    git(remote, "fsck", "--strict")


def test_a_sync_removes_the_half_made_pack_a_killed_sync_left(
        two_machines: tuple[Path, Path, Path]) -> None:
    """A sync killed while writing its merge's pack leaves the temp .pack and .idx in
    .git/objects/pack (no journal yet, so opening the store does not see them); the next
    sync removes them, even when it has nothing to merge."""
    _remote, a_path, _b_path = two_machines
    pack_dir = a_path / ".git" / "objects" / "pack"
    left = [pack_dir / f"tmp_pack-{'ab' * 20}.pack.4242.0.tmp",
            pack_dir / f"tmp_pack-{'ab' * 20}.idx.4242.1.tmp"]
    for path in left:
        path.write_bytes(b"PACK half of it")
    sync_cli(a_path)
    assert [p for p in left if p.exists()] == []
    assert temp_files(a_path / ".git") == []
    git(a_path, "fsck", "--strict")


# ---------------------------------------------------------------- killed writing a pack index

# runs a sync in a child that dies (os._exit, as a SIGKILL would leave it) while dulwich
# writes the index of the pack the sync received (fetch) or sent to a local remote (push):
# after ``pack-<sha>.pack`` is moved in, with ``pack-<sha>.idx.lock`` half written
_DIE_WRITING_INDEX = """
import os, sys
import dulwich.object_store
import filemem
from filemem.owner import sync

def dying(f, *args, **kwargs):
    f.write(b"\\377tOc")
    f.flush()
    os._exit(9)

dulwich.object_store.write_pack_index = dying
from filemem.owner import gitfetch, gitpush
gitfetch.fetch_local = lambda *args, **kwargs: None  # the fetch by dulwich is what is killed
gitpush.push_local = lambda *args, **kwargs: None  # and its push
with filemem.open_store(sys.argv[1]) as p:
    sync.sync(p.store)
"""


def sync_dying_in_index(store: Path) -> None:
    """The sync of ``store``, killed while writing a pack index."""
    done = subprocess.run([sys.executable, "-c", _DIE_WRITING_INDEX, str(store)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL)
    assert done.returncode == 9, done.stdout + done.stderr


def index_locks(git_dir: Path) -> list[Path]:
    return sorted((git_dir / "objects" / "pack").glob("pack-*.idx.lock"))


def test_a_fetch_killed_writing_its_pack_index_does_not_stop_the_next_sync(
        two_machines: tuple[Path, Path, Path]) -> None:
    remote, a_path, b_path = two_machines
    written = write(a_path, "from A")
    fsync_path(a_path)
    sync_dying_in_index(b_path)
    (lock,) = index_locks(b_path / ".git")  # what the kill left, with its pack
    assert lock.with_name(lock.name[:-len(".idx.lock")] + ".pack").exists()
    assert not lock.with_name(lock.name[:-len(".lock")]).exists()
    sync_cli(b_path)  # was dulwich.file.FileLocked on that lock
    assert index_locks(b_path / ".git") == [] and temp_files(b_path / ".git") == []
    assert head(b_path) == head(remote, "main") == head(a_path)
    assert set(written) <= set(texts(b_path))
    git(b_path, "fsck", "--strict")
    assert_sound(b_path)


def test_a_pack_index_lock_a_sync_cannot_clear_is_a_clean_error_naming_it(
        two_machines: tuple[Path, Path, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    _remote, a_path, b_path = two_machines
    write(a_path, "from A")
    fsync_path(a_path)
    sync_dying_in_index(b_path)
    (lock,) = index_locks(b_path / ".git")
    monkeypatch.setattr(fsync, "clear_stale_local", lambda git, remote: None)
    # dulwich's fetch (the git CLI's, used for a local remote when git is on PATH, does not
    # take dulwich's index locks)
    monkeypatch.setattr(gitfetch, "fetch_local", lambda *args, **kwargs: None)
    with filemem.open_store(b_path) as p, pytest.raises(filemem.errors.SyncError) as caught:
        fsync.sync(p.store)
    assert caught.value.code == "SYNC_BUSY"
    assert str(lock) in caught.value.message and "remove that file" in caught.value.message
    assert lock.exists()


def test_a_push_killed_writing_its_pack_index_in_a_local_remote(
        two_machines: tuple[Path, Path, Path]) -> None:
    """In a local remote another machine's push may be writing that index right now: a
    young lock is left there. Pushed by dulwich (no git on PATH), the push says so, naming
    it; pushed by the git CLI, which writes packs under names of its own, the push goes
    through beside it. Once old, the next sync removes it with its pack."""
    remote, a_path, _b_path = two_machines
    written = write(a_path, "pushed")
    before = head(remote, "main")
    sync_dying_in_index(a_path)  # nothing to fetch: the index was the remote's
    (lock,) = index_locks(remote)
    assert head(remote, "main") == before
    no_git = a_path.parent / "no-git"
    no_git.mkdir()
    done = subprocess.run(cli("sync", "--store", str(a_path)), capture_output=True,
                          text=True, stdin=subprocess.DEVNULL,
                          env={**os.environ, "PATH": str(no_git)})
    assert done.returncode != 0 and "REMOTE_BUSY" in done.stderr, done.stderr
    assert str(lock) in done.stderr and "Traceback" not in done.stderr
    assert lock.exists() and head(remote, "main") == before
    sync_cli(a_path)  # git push
    assert lock.exists() and head(remote, "main") == head(a_path)
    then = time.time() - 2 * STALE_TEMP_PACK
    os.utime(lock, (then, then))
    write(a_path, "pushed again")
    sync_cli(a_path)
    assert index_locks(remote) == [] and temp_files(remote) == []
    assert head(remote, "main") == head(a_path)
    git(remote, "fsck", "--strict")
    with filemem.open_store(a_path) as p:
        assert set(written) <= {e["text"] for e in p.list_entries()}
