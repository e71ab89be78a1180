"""Several OS processes on one store: nothing lost, a linear history, no stale reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import filemem
from tests.conftest import assert_clean_repo, ctx, git

UG = {"track": "user", "scope": "user-global"}

# Every child waits for the "go" file, so they really run at the same time.
PRELUDE = """
import json, os, random, sys, time
import filemem
store, go, who = sys.argv[1], sys.argv[2], sys.argv[3]
deadline = time.time() + 30
while not os.path.exists(go):
    if time.time() > deadline:
        sys.exit("no go signal")
    time.sleep(0.002)
"""

ADDER = PRELUDE + """
n = int(sys.argv[4])
BIG = {t: {"userGlobal": 10**7, "workspace": 10**7} for t in ("user", "agent")}
p = filemem.open_store(store, write_policy="auto", budgets=BIG)
c = filemem.write_context(session_id=f"proc-{who}", cwd="/work/proj", agent=f"agent-{who}")
ids = []
for k in range(n):
    ids.append(p.add({"track": "agent", "scope": "workspace",
                      "text": f"fact {k} from process {who}"}, c)["entry"]["id"])
p.close()
print(json.dumps(ids))
"""

READER = PRELUDE + """
stop = sys.argv[4]
p = filemem.open_store(store)
counts = []
while not os.path.exists(stop):
    counts.append(len(p.list_entries()))
    p.query({"text": "fact"})
counts.append(len(p.list_entries()))
print(json.dumps(counts))
"""

REPLACER = PRELUDE + """
n = int(sys.argv[4])
def gate(request):
    time.sleep(random.uniform(0, 0.004))  # a person answering: no lock is held meanwhile
    return "allowed-once"
p = filemem.open_store(store, write_policy="ask", gate=gate)
c = filemem.write_context(session_id=f"proc-{who}", cwd="/work/proj")
done, refused = [], []
for k in range(n):
    text = f"shared entry, written by process {who} attempt {k}"
    try:
        r = p.replace({"track": "user", "scope": "user-global", "match": "shared entry",
                       "text": text}, c)
        done.append([r["entry"]["version"], r["previous"]["version"], text])
    except filemem.ProtocolError as exc:
        refused.append([exc.code, exc.message])
p.close()
print(json.dumps({"done": done, "refused": refused}))
"""


def spawn(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(proc: subprocess.Popen[str], timeout: float = 90) -> Any:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err
    return json.loads(out)


def commit_count(path: Path) -> int:
    return int(git(path, "rev-list", "--count", "HEAD"))


def test_four_processes_adding_at_once_lose_nothing(provider: filemem.Provider,
                                                    store_path: Path, tmp_path: Path) -> None:
    go, stop = tmp_path / "go", tmp_path / "stop"
    start = commit_count(store_path)
    adders = [spawn(ADDER, str(store_path), str(go), str(i), "50") for i in range(4)]
    reader = spawn(READER, str(store_path), str(go), "r", str(stop))
    go.touch()
    try:
        ids = [i for proc in adders for i in finish(proc)]
    finally:
        stop.touch()
    counts = finish(reader)
    assert len(ids) == len(set(ids)) == 200
    listed = provider.list_entries()
    assert sorted(e["id"] for e in listed) == sorted(ids)
    texts = {e["text"] for e in listed}
    assert texts == {f"fact {k} from process {i}" for i in range(4) for k in range(50)}
    # one commit per add, in a straight line
    assert commit_count(store_path) == start + 200
    assert git(store_path, "rev-list", "--merges", "--count", "HEAD").strip() == "0"
    parents = [line.split() for line in git(store_path, "rev-list", "--parents", "HEAD")
               .splitlines()]
    assert all(len(p) == 2 for p in parents[:-1]) and len(parents[-1]) == 1
    committed = git(store_path, "log", f"-{200}", "--format=%(trailers:key=Audit-Entry,"
                    "valueonly)").split()
    assert sorted(committed) == sorted(ids)
    assert_clean_repo(store_path)
    # a reader that ran alongside never failed and never saw the store shrink
    assert counts == sorted(counts) and counts[-1] == 200


def test_two_processes_replacing_one_entry(make_provider: Any, store_path: Path,
                                           tmp_path: Path) -> None:
    p = make_provider()
    entry = p.add({**UG, "text": "shared entry, first version"}, ctx())["entry"]
    go = tmp_path / "go"
    procs = [spawn(REPLACER, str(store_path), str(go), str(i), "25") for i in range(2)]
    go.touch()
    results = [finish(proc) for proc in procs]
    done = [d for r in results for d in r["done"]]
    # every attempt either succeeded or was refused for a stale target, nothing else
    assert len(done) + sum(len(r["refused"]) for r in results) == 50
    for r in results:
        for code, message in r["refused"]:
            assert code == "ENTRY_NOT_FOUND" and "changed while approval was pending" in message
        versions = [v for v, _, _ in r["done"]]
        assert versions == sorted(set(versions))  # strictly increasing within a process
    # one success per version, each built on the version before it: none lost
    assert sorted(v for v, _, _ in done) == list(range(2, 2 + len(done)))
    assert all(prev == v - 1 for v, prev, _ in done)
    final = next(e for e in p.list_entries() if e["id"] == entry["id"])
    assert final["version"] == 1 + len(done)
    assert final["text"] == max(done)[2]
    # every successful write is a commit, and the file's history has each version once
    log = git(store_path, "log", "--format=%(trailers:key=Audit-Action,valueonly)%x00"
              "%(trailers:key=Audit-Text,valueonly)%x01")
    replaced = [json.loads(chunk.split("\x00")[1].strip())
                for chunk in log.split("\x01") if chunk.strip().startswith("replace\n")]
    assert sorted(replaced) == sorted(t for _, _, t in done)
    rel = git(store_path, "ls-files", "user").strip()
    assert len(git(store_path, "log", "--format=%H", "--", rel).split()) == 1 + len(done)
    assert git(store_path, "rev-list", "--merges", "--count", "HEAD").strip() == "0"
    assert_clean_repo(store_path)


@pytest.mark.parametrize("meanwhile", ["replace", "remove"])
def test_a_write_prepared_before_another_commit_is_not_a_hand_edit(
        make_provider: Any, store_path: Path, meanwhile: str) -> None:
    """Another process commits between the moment a write reads its view of the store and
    the up-front check of the target's file: the file now holds that newer commit (or is
    gone). That is no hand edit: the write fails as a stale target, ENTRY_NOT_FOUND, as
    after any race (it used to be WRITE_DENIED hand-edit-pending, seen under load in
    test_two_processes_replacing_one_entry)."""
    asked: list[Any] = []
    a = make_provider(write_policy="ask", gate=lambda req: asked.append(req) or "allowed-once")
    b = make_provider()  # its own view of the store, as another process has
    e = a.add({**UG, "text": "shared entry, first version"}, ctx())["entry"]
    precheck = a.store.precheck

    def other_process_first(*args: Any) -> None:
        if meanwhile == "replace":
            b.replace({**UG, "match": "shared entry", "text": "shared entry, by b"}, ctx())
        else:
            b.remove({**UG, "match": "shared entry"}, ctx())
        precheck(*args)

    a.store.precheck = other_process_first  # type: ignore[method-assign]
    with pytest.raises(filemem.ProtocolError) as info:
        a.replace({**UG, "match": "first version", "text": "shared entry, by a"}, ctx())
    assert info.value.code == "ENTRY_NOT_FOUND", info.value.message
    assert "changed while approval was pending" in info.value.message
    a.store.precheck = precheck  # type: ignore[method-assign]
    left = [x["text"] for x in a.list_entries()]
    assert left == (["shared entry, by b"] if meanwhile == "replace" else [])
    assert_clean_repo(store_path)
    if meanwhile == "replace":  # a real hand edit is still refused before anyone is asked
        path = next(store_path.glob(f"user/user-global/_shared/{e['id']}.md"))
        path.write_bytes(path.read_bytes().replace(b"by b", b"by hand"))
        before = len(asked)
        with pytest.raises(filemem.ProtocolError) as info:
            a.replace({**UG, "match": "shared entry", "text": "by a again"}, ctx())
        assert info.value.details["outcome"] == "hand-edit-pending"
        assert len(asked) == before


def test_an_open_provider_sees_other_processes_writes(provider: filemem.Provider,
                                                      store_path: Path,
                                                      tmp_path: Path) -> None:
    provider.add({**UG, "text": "written here first"}, ctx())
    assert provider.query({"text": "fact"})["total"] == 0
    go = tmp_path / "go"
    go.touch()
    ids = finish(spawn(ADDER, str(store_path), str(go), "7", "3"))
    # no reopening: the next call of the provider opened before sees the new HEAD
    seen = provider.query({"text": "from process 7"})
    assert sorted(e["id"] for e in seen["entries"]) == sorted(ids)
    assert len(provider.list_entries()) == 4
    usage = {(r["track"], r["scope"]): r["used"] for r in provider.budgets()}
    assert usage[("agent", "workspace")] == sum(len(f"fact {k} from process 7")
                                                for k in range(3))
    assert provider.audit_list(1)[0]["entryId"] == ids[-1]
    # and it writes on top of them, never over them
    provider.remove({"track": "agent", "scope": "workspace", "match": "fact 1 from"},
                    ctx(agent="agent-7"))
    assert sorted(e["text"] for e in provider.list_entries()) == [
        "fact 0 from process 7", "fact 2 from process 7", "written here first"]
    other = filemem.open_store(store_path)
    try:
        assert other.list_entries() == provider.list_entries()
    finally:
        other.close()
    assert_clean_repo(store_path)
