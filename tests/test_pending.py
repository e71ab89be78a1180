"""Pending approvals: writes staged when nobody can be asked, decided by the owner only."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.owner import Owner
from tests.conftest import BIG, assert_clean_repo, ctx, git, run_cli

UG = {"track": "user", "scope": "user-global"}
AW = {"track": "agent", "scope": "workspace"}
MakeProvider = Callable[..., filemem.Provider]


def staged(call: Callable[[], Any]) -> str:
    with pytest.raises(filemem.ProtocolError) as info:
        call()
    err = info.value
    assert err.code == "WRITE_DENIED"
    assert err.details["outcome"] == "pending"
    assert set(err.details) == {"outcome", "pendingId"}
    assert f"filemem approve {err.details['pendingId']}" in err.message
    assert err.message.endswith("nothing was written")
    return str(err.details["pendingId"])


def texts(p: filemem.Provider) -> list[str]:
    return [e["text"] for e in p.list_entries()]


def head(store: Path) -> str:
    return git(store, "rev-parse", "HEAD").strip()


def test_ask_with_nobody_to_ask_stages_every_kind_of_write(make_provider: MakeProvider,
                                                           store_path: Path) -> None:
    auto = make_provider(write_policy="auto")
    auto.add({**UG, "text": "likes tea"}, ctx())
    auto.add({**AW, "text": "part one"}, ctx())
    auto.add({**AW, "text": "part two"}, ctx())
    p = make_provider(write_policy="ask")
    before = texts(p)
    ids = [
        staged(lambda: p.add({**UG, "text": "likes coffee", "tags": ["drinks"]}, ctx("s9"))),
        staged(lambda: p.replace({**UG, "match": "tea", "text": "likes green tea"}, ctx())),
        staged(lambda: p.remove({**UG, "match": "tea"}, ctx())),
        staged(lambda: p.consolidate({**AW, "matches": ["one", "two"], "text": "whole"},
                                     ctx())),
        staged(lambda: p.seed([{**UG, "text": "s1"}, {**AW, "text": "s2"}], ctx())),
    ]
    assert texts(p) == before  # nothing written
    records = Owner(p).pending()
    assert [r["id"] for r in records] == ids
    assert [r["payload"]["action"] for r in records] == [
        "add", "replace", "remove", "consolidate", "seed"]
    # the full approve-what-you-see payload is kept
    assert records[1]["payload"]["text"] == "from:\nlikes tea\n\nto:\nlikes green tea"
    assert records[4]["payload"]["count"] == 2
    assert records[0]["write"]["agent"]["session"]["id"] == "s9"
    # every staging left an audit-only commit with a `<action>-pending` row
    rows = p.audit_list(5)
    assert [r["action"] for r in rows] == [
        "seed-pending", "consolidate-pending", "remove-pending", "replace-pending",
        "add-pending"]
    assert all(r["outcome"].startswith("pending (via approval, writePolicy ask; no approver; "
                                       "no person can be asked") for r in rows)
    assert all("; staged as " in r["outcome"] for r in rows)
    assert rows[-1]["text"] == "likes coffee" and rows[-1]["sessionId"] == "s9"
    assert_clean_repo(store_path)
    # the pending file is private and outside the repository
    folder = store_path / ".filemem" / "pending"
    assert sorted(f.name for f in folder.iterdir()) == sorted(f"{i}.json" for i in ids)
    assert all((f.stat().st_mode & 0o077) == 0 for f in folder.iterdir())


def test_a_transport_that_cannot_ask_stages_too(make_provider: MakeProvider) -> None:
    def broken(request: filemem.ApprovalRequest) -> str:
        raise RuntimeError("the terminal went away")

    p = make_provider(write_policy="ask", gate=lambda r: "unavailable")
    staged(lambda: p.add({**UG, "text": "first"}, ctx()))
    q = make_provider(write_policy="ask", gate=broken)
    staged(lambda: q.add({**UG, "text": "second"}, ctx()))
    assert [r["payload"]["text"] for r in Owner(q).pending()] == ["first", "second"]


@pytest.mark.parametrize("answer", ["rejected", "cancelled"])
def test_a_person_saying_no_is_not_staged(make_provider: MakeProvider, answer: str) -> None:
    p = make_provider(write_policy="ask", gate=lambda r: answer)
    with pytest.raises(filemem.ProtocolError) as info:
        p.add({**UG, "text": "no thanks"}, ctx())
    assert info.value.details == {"outcome": answer}
    assert Owner(p).pending() == []
    assert p.audit_list(1)[0]["action"] == "add-denied"


def test_policy_off_is_not_staged(make_provider: MakeProvider) -> None:
    p = make_provider(write_policy="off")
    with pytest.raises(filemem.ProtocolError) as info:
        p.add({**UG, "text": "never"}, ctx())
    assert info.value.details == {"outcome": "rejected"}
    assert Owner(p).pending() == []


def test_approve_runs_the_write_and_labels_who_approved(make_provider: MakeProvider,
                                                       store_path: Path) -> None:
    p = make_provider(write_policy="ask")
    pid = staged(lambda: p.add({**UG, "text": "likes coffee", "tags": ["drinks"]}, ctx("s9")))
    out = Owner(p).approve(pid[:6])  # a unique prefix is enough
    entry = out["result"]["entry"]
    assert out["id"] == pid
    assert (entry["text"], entry["tags"], entry["sessionId"]) == ("likes coffee", ["drinks"], "s9")
    assert texts(p) == ["likes coffee"]
    row = p.audit_list(1)[0]
    assert row["action"] == "add" and row["entryId"] == entry["id"]
    assert row["outcome"] == ("allowed-once (via approval, writePolicy ask; answered by the "
                              f"owner's `filemem approve` of pending {pid})")
    assert Owner(p).pending() == []
    assert_clean_repo(store_path)
    with pytest.raises(filemem.ProtocolError) as info:
        Owner(p).approve(pid)
    assert info.value.code == "PROPOSAL_NOT_FOUND" and info.value.details == {"id": pid}


def test_approve_replays_replace_remove_consolidate_and_seed(make_provider: MakeProvider) -> None:
    auto = make_provider(write_policy="auto")
    auto.add({**UG, "text": "likes tea"}, ctx())
    auto.add({**AW, "text": "part one"}, ctx())
    auto.add({**AW, "text": "part two"}, ctx())
    auto.add({**UG, "text": "to be removed"}, ctx())
    p = make_provider(write_policy="ask")
    ids = [staged(lambda: p.replace({**UG, "match": "tea", "text": "likes green tea"}, ctx())),
           staged(lambda: p.remove({**UG, "match": "removed"}, ctx())),
           staged(lambda: p.consolidate({**AW, "matches": ["one", "two"], "text": "whole"},
                                        ctx())),
           staged(lambda: p.seed([{**UG, "text": "s1"}, {**AW, "text": "s2"}], ctx()))]
    for pid in ids:
        Owner(p).approve(pid)
    assert sorted(texts(p)) == ["likes green tea", "s1", "s2", "whole"]
    assert [e["version"] for e in p.list_entries() if e["text"] == "likes green tea"] == [2]


def test_approve_refuses_when_the_target_changed_since_staging(make_provider: MakeProvider,
                                                              store_path: Path) -> None:
    auto = make_provider(write_policy="auto")
    auto.add({**UG, "text": "likes tea"}, ctx())
    p = make_provider(write_policy="ask")
    pid = staged(lambda: p.replace({**UG, "match": "tea", "text": "likes green tea"}, ctx()))
    auto.replace({**UG, "match": "tea", "text": "likes black tea"}, ctx())  # meanwhile
    before = head(store_path)
    with pytest.raises(filemem.ProtocolError) as info:
        Owner(p).approve(pid)
    assert info.value.code == "ENTRY_NOT_FOUND"
    assert "changed since it was staged" in info.value.message
    assert head(store_path) == before and texts(p) == ["likes black tea"]
    assert [r["id"] for r in Owner(p).pending()] == [pid]  # still pending: the owner decides
    Owner(p).reject(pid, "stale")
    assert Owner(p).pending() == []


def test_approve_rechecks_the_budget(make_provider: MakeProvider) -> None:
    small = {"user": {"userGlobal": 20}}
    p = make_provider(write_policy="ask", budgets=small)
    pid = staged(lambda: p.add({**UG, "text": "0123456789"}, ctx()))
    make_provider(write_policy="auto", budgets=small).add({**UG, "text": "abcdefghijkl"}, ctx())
    with pytest.raises(filemem.ProtocolError) as info:
        Owner(p).approve(pid)
    assert info.value.code == "BUDGET_EXCEEDED"
    assert info.value.details["needed"] == 22
    assert [r["id"] for r in Owner(p).pending()] == [pid]


def test_reject_drops_it_and_leaves_a_row(make_provider: MakeProvider, store_path: Path) -> None:
    p = make_provider(write_policy="ask")
    pid = staged(lambda: p.add({**UG, "text": "maybe not"}, ctx("s3")))
    record = Owner(p).reject(pid, reason="duplicate")
    assert record["id"] == pid
    assert Owner(p).pending() == [] and texts(p) == []
    row = p.audit_list(1)[0]
    assert (row["action"], row["text"], row["sessionId"]) == ("add-denied", "maybe not", "s3")
    assert row["outcome"] == f"rejected (via the owner's `filemem reject` of pending {pid}: " \
                             "duplicate)"
    assert_clean_repo(store_path)
    with pytest.raises(filemem.ProtocolError) as info:
        Owner(p).reject(pid)
    assert info.value.code == "PROPOSAL_NOT_FOUND"


@pytest.mark.parametrize("bad", ["nope", "", "../pending", ".", "/etc/passwd"])
def test_unknown_ids_are_proposal_not_found(make_provider: MakeProvider, bad: str) -> None:
    # filemem choice 15: a write nobody could be asked about is staged; unknown ids are refused
    p = make_provider(write_policy="ask")
    staged(lambda: p.add({**UG, "text": "x"}, ctx()))
    for fn in (Owner(p).approve, Owner(p).reject):
        with pytest.raises(filemem.ProtocolError) as info:
            fn(bad)
        assert info.value.code == "PROPOSAL_NOT_FOUND"
    assert len(Owner(p).pending()) == 1


def test_the_commands_a_staged_write_names_work_as_printed(
        make_provider: MakeProvider, store_path: Path, tmp_path: Path) -> None:
    """A store that is not the default one is named in the `filemem approve` a staged write
    prints, so that running it as printed, from another folder, approves it; an id looked
    for in the wrong store is refused naming the store looked in."""
    p = make_provider(write_policy="ask")
    with pytest.raises(filemem.ProtocolError) as info:
        p.add({**UG, "text": "staged for later"}, ctx())
    pid = str(info.value.details["pendingId"])
    printed = f"filemem approve {pid} --store {store_path}"
    assert f"the owner can run `{printed}`" in info.value.message
    elsewhere = tmp_path / "elsewhere"  # not a store: the default one for the commands below
    elsewhere.mkdir()
    env = {**os.environ, "FILEMEM_HOME": str(elsewhere / "default-store")}
    env.pop("FILEMEM_STORE", None)
    wrong = subprocess.run([sys.executable, "-m", "filemem.cli", "approve", pid], env=env,
                           capture_output=True, text=True, cwd=elsewhere)
    assert wrong.returncode != 0 and "NO_STORE" in wrong.stderr  # the default store: none
    out = subprocess.run([sys.executable, "-m", "filemem.cli", *shlex.split(printed)[1:]],
                         env=env, capture_output=True, text=True, cwd=elsewhere)
    assert out.returncode == 0, out.stderr
    assert texts(p) == ["staged for later"]
    with pytest.raises(filemem.ProtocolError) as gone:
        Owner(p).approve(pid)
    assert gone.value.code == "PROPOSAL_NOT_FOUND"
    assert f"is not a pending approval of the store {store_path}" in gone.value.message
    assert f"`filemem pending --store {store_path}` lists them" in gone.value.message


def test_two_owners_approving_at_once_write_once(make_provider: MakeProvider) -> None:
    p = make_provider(write_policy="ask", budgets=BIG)
    pid = staged(lambda: p.add({**UG, "text": "only once"}, ctx()))
    results: list[str] = []

    def go() -> None:
        try:
            Owner(make_provider(write_policy="ask", budgets=BIG)).approve(pid)
            results.append("ok")
        except filemem.ProtocolError as exc:
            results.append(exc.code)

    threads = [threading.Thread(target=go) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results) == ["PROPOSAL_NOT_FOUND"] * 3 + ["ok"]
    assert texts(p) == ["only once"]


def test_agents_cannot_reach_pending_approvals() -> None:
    """Approving is not part of the Provider face, the bridge or the protocol."""
    from filemem.bridge import METHODS

    assert not any("approve" in name or "pending" in name or "reject" in name
                   for name in dir(filemem.Provider) if not name.startswith("_"))
    assert not any(word in m for m in METHODS for word in ("approve", "pending", "reject"))


def test_the_cli_lists_approves_and_rejects(store_path: Path) -> None:
    def cli(*args: str) -> Any:
        out = run_cli(*args, store=store_path)
        assert out.returncode == 0, out.stderr
        return out

    cli("init")
    for text in ("one", "two", "three"):
        denied = run_cli("add", "--track", "user", "--scope", "user-global", text,
                         store=store_path)
        assert denied.returncode == 3 and "pending" in denied.stderr
    listed = json.loads(cli("pending", "--json").stdout)
    assert [r["payload"]["text"] for r in listed] == ["one", "two", "three"]
    human = cli("pending").stdout
    assert all(r["id"] in human for r in listed) and "add user/user-global" in human
    cli("approve", listed[0]["id"])
    cli("reject", listed[1]["id"], "--reason", "not now")
    assert [r["id"] for r in json.loads(cli("pending", "--json").stdout)] == [listed[2]["id"]]
    cli("approve", "--all")
    entries = json.loads(cli("list", "--json").stdout)
    assert sorted(e["text"] for e in entries) == ["one", "three"]
    assert "No pending approvals." in cli("pending").stdout
    missing = run_cli("approve", "deadbeef0000", store=store_path)
    assert missing.returncode == 1 and "PROPOSAL_NOT_FOUND" in missing.stderr
    usage = run_cli("approve", store=store_path)
    assert usage.returncode == 2
    assert_clean_repo(store_path)
