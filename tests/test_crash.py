"""Writes killed at any instant: the next open leaves the store before or after the write.

Real processes, real SIGKILLs (and `os._exit` at chosen points of the commit), then the
checks a person would make: `git fsck`, `git status`, every entry readable, and the number
of entries equal to what the audited history adds up to. A hand-edited file planted in the
store must come through every crash and repair byte for byte.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import filemem
from filemem.files import wal
from filemem.files.layout import key_dir
from filemem.files.worktree import TMP_SUFFIX
from tests import orphans
from tests.conftest import BIG, ctx, git, write_in_flight

UG = {"track": "user", "scope": "user-global"}
ROUNDS = 18

WORKER = """
import random, sys, uuid
import filemem
store, seed = sys.argv[1], int(sys.argv[2])
BIG = {t: {"userGlobal": 10**7, "workspace": 10**7} for t in ("user", "agent")}
p = filemem.open_store(store, write_policy="auto", budgets=BIG)
c = filemem.write_context(session_id="crash", cwd="/work/proj")
rng = random.Random(seed)
LAYERS = [(t, s) for t in ("user", "agent") for s in ("user-global", "workspace")]
def tok():
    return "w " + uuid.uuid4().hex
print("ready", flush=True)
while True:
    mine = [e for e in p.list_entries() if e["text"].startswith("w ")]
    r = rng.random()
    try:
        if r < 0.3 or not mine:
            t, s = rng.choice(LAYERS)
            p.add({"track": t, "scope": s, "text": tok()}, c)
        elif r < 0.55:
            e = rng.choice(mine)
            p.replace({"track": e["track"], "scope": e["scope"], "match": e["text"],
                       "text": tok() + "\\r\\n---\\nsecond line"}, c)
        elif r < 0.7:
            e = rng.choice(mine)
            p.remove({"track": e["track"], "scope": e["scope"], "match": e["text"]}, c)
        elif r < 0.85:
            n = rng.choice([1, 3, 30])  # 30 entries take the pack-file path
            p.seed([{"track": "agent", "scope": "workspace", "text": tok()}
                    for _ in range(n)], c)
        elif r < 0.95:
            t, s = rng.choice(LAYERS)
            group = [e for e in mine if (e["track"], e["scope"]) == (t, s)][:2]
            if group:
                p.consolidate({"track": t, "scope": s, "matches": [e["text"] for e in group],
                               "text": tok()}, c)
        else:
            p.query({"text": "w "}, {"sessionId": "crash"})
            p.snapshot({"id": uuid.uuid4().hex, "header": {"cwd": "/work/proj"}})
    except filemem.ProtocolError:
        pass
"""

# A child that dies (exit 9, no clean-up of any kind) at one chosen point of a write.
TARGETED = """
import os, sys
import filemem, filemem.files.worktree, filemem.files.gitrepo, filemem.files.gitindex
store, point, op = sys.argv[1], sys.argv[2], sys.argv[3]
BIG = {t: {"userGlobal": 10**7, "workspace": 10**7} for t in ("user", "agent")}
p = filemem.open_store(store, write_policy="auto", budgets=BIG)
c = filemem.write_context(session_id="crash", cwd="/work/proj")
real_write = filemem.files.worktree.write
calls = []

def torn_write(root, path, data, *, new=False, **kwargs):
    calls.append(path)
    if len(calls) == 1:
        return real_write(root, path, data, new=new, **kwargs)  # the first file makes it
    target = filemem.files.worktree.full_path(root, path)
    if new:  # half of a new file, written in place
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "wb") as f:
            f.write(data[: len(data) // 2])
    else:  # half of the temp file, never renamed into place
        folder, name = os.path.split(target)
        with open(os.path.join(folder, f".{name}.{os.getpid()}.filemem-tmp"), "wb") as f:
            f.write(data[: len(data) // 2])
    os._exit(9)

def die(*args, **kwargs):
    os._exit(9)

real_cas = filemem.files.gitrepo.GitRepo.cas_head

def die_before_cas(self, old, new, message, durable=True, then=None):
    print(new, flush=True)  # the commit object that was written but never referenced
    os._exit(9)

real_replace = os.replace

def die_renaming_a_pack(src, dst, *args, **kwargs):
    if os.path.join("objects", "pack") in str(dst):
        os._exit(9)  # the temp .pack and .idx are written and fsynced, not yet renamed
    return real_replace(src, dst, *args, **kwargs)

real_create = filemem.files.atomic.create_new
created = []

def torn_create(path, data, *, durable, mode=0o600, dir_fd=None):
    created.append(path)
    if dir_fd is None or len(created) < 40:
        return real_create(path, data, durable=durable, mode=mode, dir_fd=dir_fd)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600, dir_fd=dir_fd)
    os.write(fd, data[: len(data) // 2])  # half of the 40th new file, by its folder
    os._exit(9)

def torn_index(self, timeout=5.0, lock=None, meanwhile=None):
    with open(self.path + ".lock", "wb") as f:
        f.write(b"DIRC\\0\\0\\0")
    os._exit(9)

if point == "worktree-write":
    filemem.files.worktree.write = torn_write
elif point == "create-in-folder":
    filemem.files.atomic.create_new = torn_create
elif point == "worktree-remove":
    filemem.files.worktree.remove = die
elif point == "before-cas":
    filemem.files.gitrepo.GitRepo.cas_head = die_before_cas
elif point == "pack-rename":
    os.replace = die_renaming_a_pack
elif point == "index-write":
    filemem.files.gitindex.GitIndex.write = torn_index
else:
    sys.exit("unknown point " + point)

if op == "seed":
    p.seed([{"track": "agent", "scope": "workspace", "text": f"seeded {i}"} for i in range(5)],
           c)
elif op == "big-seed":  # more objects than go loose: one pack
    p.seed([{"track": "agent", "scope": "workspace", "text": f"packed {i}"} for i in range(80)],
           c)
elif op == "replace":
    p.add({"track": "user", "scope": "user-global", "text": "other"}, c)
    p.replace({"track": "user", "scope": "user-global", "match": "target entry",
               "text": "target entry, version 2"}, c)
elif op == "remove":
    p.remove({"track": "user", "scope": "user-global", "match": "target entry"}, c)
elif op == "add":
    p.add({"track": "user", "scope": "workspace", "text": "added entry"}, c)
sys.exit("the write finished without reaching the crash point")
"""


def entry_file(store: Path, entry: dict[str, object]) -> Path:
    parts = [str(entry["track"]), str(entry["scope"])]
    if entry["scope"] == "workspace":
        parts.append(key_dir(str(entry["workspaceKey"])) if entry["workspaceKey"] else "_none")
    parts.append(key_dir(str(entry["agentKey"])) if entry["agentKey"] else "_shared")
    return store.joinpath(*parts, f"{entry['id']}.md")


def history_count(store: Path) -> int:
    """Entries the audited history adds up to: adds minus removes over every commit."""
    actions = git(store, "log", "--format=%(trailers:key=Audit-Action,valueonly)").split()
    added = sum(a in ("add", "consolidate-add") for a in actions)
    removed = sum(a in ("remove", "consolidate-remove") for a in actions)
    return added - removed


def head_entry_files(store: Path) -> list[str]:
    out = git(store, "ls-tree", "-r", "--name-only", "HEAD")
    return [p for p in out.splitlines() if p.startswith(("user/", "agent/")) and p.endswith(".md")]


class Planted:
    """An entry with an uncommitted hand edit that every repair must leave alone."""

    def __init__(self, store: Path, provider: filemem.Provider) -> None:
        entry = provider.add({**UG, "text": "planted entry"}, ctx())["entry"]
        self.path = entry_file(store, entry)
        self.rel = self.path.relative_to(store).as_posix()
        self.data = self.path.read_bytes().replace(b"planted entry", b"planted, then edited\n")
        self.path.write_bytes(self.data)


def assert_repaired(store: Path, planted: Planted) -> filemem.Provider:
    """Open the store (which repairs it) and check everything a person would check."""
    p = filemem.open_store(store, budgets=BIG)
    assert not write_in_flight(store)
    git(store, "fsck", "--strict")
    assert git(store, "status", "--porcelain") == f" M {planted.rel}\n"
    assert planted.path.read_bytes() == planted.data
    entries = p.list_entries()  # raises STORE_CORRUPT if any file at HEAD is invalid
    assert len(entries) == len(head_entry_files(store)) == history_count(store)
    assert len({e["id"] for e in entries}) == len(entries)
    leftovers = [os.path.join(d, n) for d, _, names in os.walk(store)
                 for n in names if n.endswith(TMP_SUFFIX)]
    assert leftovers == []
    for lock in (".git/index.lock", ".git/refs/heads/main.lock"):
        assert not (store / lock).exists()
    p.audit_list(20)  # the ledger and every commit message still parse
    return p


@pytest.fixture
def planted(provider: filemem.Provider, store_path: Path) -> Iterator[Planted]:
    yield Planted(store_path, provider)


def test_random_kills_never_leave_a_half_write(planted: Planted, store_path: Path) -> None:
    rng = random.Random(20261130)
    start = int(git(store_path, "rev-list", "--count", "HEAD"))
    for round_no in range(ROUNDS):
        child = orphans.start([sys.executable, "-c", WORKER, str(store_path), str(round_no)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        assert child.stdout is not None
        line = child.stdout.readline()
        assert line == b"ready\n", child.stderr.read() if child.stderr else b""
        time.sleep(rng.uniform(0.05, 0.6))
        assert child.poll() is None, child.stderr.read() if child.stderr else b""
        assert orphans.kill(child) == -signal.SIGKILL  # and a `git repack` it started ended
        child.stdout.close()
        if child.stderr:
            child.stderr.close()
        p = assert_repaired(store_path, planted)
        p.close()
    assert int(git(store_path, "rev-list", "--count", "HEAD")) > start + ROUNDS  # work was done


def run_targeted(store: Path, point: str, op: str) -> str:
    out = subprocess.run([sys.executable, "-c", TARGETED, str(store), point, op],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 9, out.stderr
    return out.stdout.strip()


def test_kill_after_the_ref_moved_mid_seed(planted: Planted, store_path: Path) -> None:
    before = git(store_path, "rev-parse", "HEAD").strip()
    run_targeted(store_path, "worktree-write", "seed")
    # the commit is the commit point: it stands, with all five entries
    assert git(store_path, "rev-parse", "HEAD~1").strip() == before
    assert len(head_entry_files(store_path)) == 6
    assert write_in_flight(store_path)
    assert git(store_path, "status", "--porcelain").count("\n") > 1  # half mirrored
    p = assert_repaired(store_path, planted)
    assert sorted(e["text"] for e in p.list_entries())[-5:] == [f"seeded {i}" for i in range(5)]
    p.close()


def test_kill_mid_big_seed_while_its_files_go_into_their_folder(planted: Planted,
                                                                 store_path: Path) -> None:
    """80 new files into one folder are created by name in the folder, opened once: a
    kill at the 40th (torn) leaves the commit standing and is repaired like any other."""
    before = git(store_path, "rev-parse", "HEAD").strip()
    run_targeted(store_path, "create-in-folder", "big-seed")
    assert git(store_path, "rev-parse", "HEAD~1").strip() == before
    assert write_in_flight(store_path)
    folder = next((store_path / "agent" / "workspace").rglob("_shared"))
    on_disk = list(folder.glob("*.md"))
    assert 40 <= len(on_disk) < 80  # half mirrored, the last one torn
    p = assert_repaired(store_path, planted)
    assert sorted(e["text"] for e in p.list_entries() if e["text"].startswith("packed ")) == \
        sorted(f"packed {i}" for i in range(80))
    assert len(list(folder.glob("*.md"))) == 80
    p.close()


def test_kill_mid_replace_leaves_the_new_version_after_repair(planted: Planted,
                                                              provider: filemem.Provider,
                                                              store_path: Path) -> None:
    target = provider.add({**UG, "text": "target entry"}, ctx())["entry"]
    f = entry_file(store_path, target)
    old = f.read_bytes()
    run_targeted(store_path, "worktree-write", "replace")
    assert f.read_bytes() == old  # the rename never happened
    assert list(f.parent.glob(f".{f.name}.*{TMP_SUFFIX}"))  # a torn temp file is left
    p = assert_repaired(store_path, planted)
    assert b"target entry, version 2" in f.read_bytes()
    assert next(e for e in p.list_entries() if e["id"] == target["id"])["version"] == 2
    p.close()


def test_kill_mid_remove_finishes_the_remove(planted: Planted, provider: filemem.Provider,
                                             store_path: Path) -> None:
    target = provider.add({**UG, "text": "target entry"}, ctx())["entry"]
    f = entry_file(store_path, target)
    run_targeted(store_path, "worktree-remove", "remove")
    assert f.exists()  # still in the working tree, gone at HEAD
    assert f.relative_to(store_path).as_posix() not in head_entry_files(store_path)
    p = assert_repaired(store_path, planted)
    assert not f.exists()
    assert "target entry" not in [e["text"] for e in p.list_entries()]
    p.close()


def test_kill_while_writing_the_index(planted: Planted, store_path: Path) -> None:
    run_targeted(store_path, "index-write", "add")
    assert (store_path / ".git" / "index.lock").exists()
    p = assert_repaired(store_path, planted)
    assert "added entry" in [e["text"] for e in p.list_entries()]
    p.close()


@pytest.mark.parametrize("op", ["big-seed", "add"])
def test_a_pack_half_made_by_a_killed_write_is_removed_by_the_next(op: str, planted: Planted,
                                                                  store_path: Path) -> None:
    """A write killed while making a pack leaves its temp .pack and .idx (as big as the
    write) in .git/objects/pack; the next write, under the store lock, removes them. A
    small write makes its pack while its log record is flushed: the record is there,
    unsettled, its branch never moved, and the next open undoes it."""
    before = git(store_path, "rev-parse", "HEAD").strip()
    listed = [e["text"] for e in filemem.open_store(store_path).list_entries()]
    run_targeted(store_path, "pack-rename", op)
    pack_dir = store_path / ".git" / "objects" / "pack"
    left = sorted(p.name for p in pack_dir.glob("tmp_pack-*"))
    assert len(left) == 2 and left[0].endswith(".tmp"), left
    assert git(store_path, "rev-parse", "HEAD").strip() == before
    assert write_in_flight(store_path) == (op == "add" and wal.boot_id() is not None)
    p = assert_repaired(store_path, planted)
    assert [e["text"] for e in p.list_entries()] == listed
    p.close()
    p = filemem.open_store(store_path, write_policy="auto")
    p.add({**UG, "text": "the next write"}, ctx())
    p.close()
    assert list(pack_dir.glob("tmp_pack-*")) == []
    git(store_path, "fsck", "--strict")


@pytest.mark.parametrize("op", ["add", "seed", "remove"])
def test_kill_before_the_ref_moves_changes_nothing(op: str, planted: Planted,
                                                   provider: filemem.Provider,
                                                   store_path: Path) -> None:
    provider.add({**UG, "text": "target entry"}, ctx())
    before = git(store_path, "rev-parse", "HEAD").strip()
    listed = provider.list_entries()
    orphan = run_targeted(store_path, "before-cas", op)
    # the objects were written (durably) but nothing refers to them
    assert git(store_path, "cat-file", "-t", orphan).strip() == "commit"
    assert git(store_path, "rev-parse", "HEAD").strip() == before
    p = assert_repaired(store_path, planted)
    assert p.list_entries() == listed
    assert git(store_path, "rev-parse", "HEAD").strip() == before
    # and the store takes the same write again afterwards
    p.close()
    again = filemem.open_store(store_path, write_policy="auto")
    again.add({**UG, "text": "after the crash"}, ctx())
    assert again.list_entries()[-1]["text"] == "after the crash"
    again.close()


def test_the_repair_leaves_a_git_commands_temp_files(planted: Planted,
                                                     store_path: Path) -> None:
    """Repairing a killed write removes the temp files filemem's writes make in .git, never
    a git command's: that command may be running now (a `git fetch` that a killed
    `filemem sync` started goes on by itself, and fails if they vanish)."""
    run_targeted(store_path, "before-cas", "add")
    objects = store_path / ".git" / "objects"
    (objects / "ab").mkdir(exist_ok=True)
    gits = [objects / "pack" / "tmp_pack_Ab12Cd", objects / "pack" / "tmp_idx_Ab12Cd",
            objects / "ab" / "tmp_obj_Q1w2E3"]
    ours = [objects / "pack" / f"tmp_pack-{'cd' * 20}.pack.4242.0.tmp",
            objects / "ab" / f"tmp_obj_{'ef' * 19}.4242.1.tmp"]
    for path in [*gits, *ours]:
        path.write_bytes(b"being written")
    assert write_in_flight(store_path) == (wal.boot_id() is not None)
    assert_repaired(store_path, planted).close()
    assert [path for path in ours if path.exists()] == []
    assert [path for path in gits if not path.exists()] == []
