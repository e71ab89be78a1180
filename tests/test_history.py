"""The memory's history from git: `filemem log` and `filemem verify`.

Histories are made the ways they are made in life: writes through the API (allowed,
denied, failed, pending, approved, rejected, seeds, imports, consolidates), hand edits
adopted with `filemem adopt`, a person's own `git commit`, `git revert` and `git merge`,
and tampering that reuses filemem's trailers. A long history is written straight into git
with `git fast-import`, commit by commit in filemem's own format.
"""

from __future__ import annotations

import json
import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.files import codec
from filemem.files.layout import entry_path
from filemem.model import Entry, iso_ms, new_id
from filemem.owner import Owner, history
from filemem.store.auditlog import commit_message, next_seq, row
from tests.conftest import BIG, assert_clean_repo, ctx, file_of, git, head, rel, set_text

UG = {"track": "user", "scope": "user-global"}
AW = {"track": "agent", "scope": "workspace"}
ITEM_FIELDS = {"commit", "seq", "ts", "action", "track", "scope", "entryId", "text", "outcome",
               "source", "sessionId"}
MakeProvider = Callable[..., filemem.Provider]


def fm(*args: str, store: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "filemem", *args, "--store", str(store)],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL,
                          cwd=str(store.parent))


def ok(*args: str, store: Path) -> str:
    out = fm(*args, store=store)
    assert out.returncode == 0, (args, out.returncode, out.stdout, out.stderr)
    return out.stdout


def verify_json(store: Path, expect_exit: int = 0) -> dict[str, Any]:
    """The report of `filemem verify --json`, which resumes from the last clean verify when
    it can; `verify --full` (every commit replayed) must give the same report."""
    reports = []
    for args in (("verify", "--json"), ("verify", "--full", "--json")):
        out = fm(*args, store=store)
        assert out.returncode == expect_exit, (out.stdout, out.stderr)
        report: dict[str, Any] = json.loads(out.stdout)
        assert set(report) == {"ok", "commits", "filememCommits", "externalCommits", "merges",
                               "auditRows", "entriesAtHead", "problems", "resumedFrom"}
        assert report["ok"] is (expect_exit == 0)
        reports.append(report)
    resumed, full = reports
    assert full["resumedFrom"] is None
    assert {**resumed, "resumedFrom": None} == full
    return resumed


def person_commits(store: Path, message: str, *paths: str) -> str:
    """`git add` + `git commit` as the person would, with the message given exactly."""
    if paths:
        git(store, "add", "--", *paths)
    msg = store.parent / "msg.txt"
    msg.write_text(message, encoding="utf-8")
    git(store, "commit", "-q", "--allow-empty", "--cleanup=verbatim", "-F", str(msg))
    return head(store)


def message_of(store: Path, rev: str = "HEAD") -> str:
    return git(store, "log", "-1", "--format=%B", rev)


@pytest.fixture
def p(make_provider: MakeProvider) -> filemem.Provider:
    return make_provider()


# ---------------------------------------------------------------- log


def test_log_lists_rows_newest_first_with_who_what_when_outcome(p: filemem.Provider,
                                                                store_path: Path) -> None:
    started = int(time.time() * 1000)
    tea = p.add({**UG, "text": "likes tea", "source": "claude"}, ctx("s1"))["entry"]
    p.replace({**UG, "match": "tea", "text": "likes green tea"}, ctx("s2"))
    p.add({**AW, "text": "runs make"}, ctx("s3", agent="coder"))
    p.remove({**UG, "match": "green", "source": "claude"}, ctx("s4"))
    (store_path / "README.md").write_text("my own readme\n", encoding="utf-8")
    person_commits(store_path, "My own README", "README.md")

    items = json.loads(ok("log", "--json", store=store_path))
    assert all(set(i) == ITEM_FIELDS for i in items)
    assert [i["action"] for i in items] == ["external-commit", "remove", "add", "replace", "add",
                                            "init"]
    assert [i["seq"] for i in items] == sorted((i["seq"] for i in items), reverse=True)
    shas = git(store_path, "rev-list", "HEAD").split()
    assert [i["commit"] for i in items] == shas  # one row per commit here, newest first
    ext, removed, added_code, replaced, added_tea, init = items
    assert (ext["text"], ext["source"]) == ("My own README", "git")
    assert ext["outcome"] == f"committed outside filemem ({shas[0][:12]})"
    assert (added_tea["entryId"], added_tea["text"], added_tea["source"],
            added_tea["sessionId"]) == (tea["id"], "likes tea", "claude", "s1")
    assert added_tea["outcome"] == "allowed-once (via approval, writePolicy auto)"
    assert (replaced["text"], replaced["sessionId"]) == ("likes green tea", "s2")
    assert (added_code["track"], added_code["scope"]) == ("agent", "workspace")
    assert (removed["text"], removed["entryId"]) == ("likes green tea", tea["id"])
    assert all(started - 1000 <= i["ts"] <= int(time.time() * 1000) + 1000 for i in items[:5])
    assert init["action"] == "init"

    text = ok("log", store=store_path)
    lines = text.split("\n")
    assert lines[0].startswith(f"{shas[0][:10]} ") and " external-commit" in lines[0]
    assert f"{shas[4][:10]} {iso_ms(added_tea['ts'])} add user/user-global session s1" in text
    assert "    allowed-once (via approval, writePolicy auto)" in text
    assert "    likes green tea" in text and "    My own README" in text
    assert text.index("remove user/user-global") < text.index("replace user/user-global")
    limited = json.loads(ok("log", "--json", "--limit", "2", store=store_path))
    assert limited == items[:2]
    assert fm("log", "--limit", "0", store=store_path).returncode == 2


def test_log_of_one_entry_lists_its_versions(p: filemem.Provider, store_path: Path) -> None:
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    other = p.add({**UG, "text": "likes cake"}, ctx())["entry"]
    p.replace({**UG, "match": "tea", "text": "likes green tea"}, ctx())
    p.replace({**UG, "match": "cake", "text": "likes carrot cake"}, ctx())
    set_text(file_of(store_path, tea["id"]), "likes black tea")
    ok("adopt", "--yes", store=store_path)
    p.replace({**UG, "match": "black", "text": "likes oolong"}, ctx())
    p.remove({**UG, "match": "oolong"}, ctx())

    for key in (tea["id"], tea["id"][:8]):
        items = json.loads(ok("log", "--json", "--entry", key, store=store_path))
        assert [(i["action"], i["version"], i["text"]) for i in items] == [
            ("remove", None, "likes oolong"),
            ("replace", 4, "likes oolong"),
            ("edit", 3, "likes black tea"),
            ("replace", 2, "likes green tea"),
            ("add", 1, "likes tea")]
        assert all(i["entryId"] == tea["id"] for i in items)
    assert other["id"] not in ok("log", "--entry", tea["id"], store=store_path)
    text = ok("log", "--entry", tea["id"][:8], store=store_path)
    assert " replace user/user-global v4" in text and " edit user/user-global v3" in text
    assert "adopted (the owner's file edit, via filemem adopt): edited" in text
    missing = ok("log", "--entry", "ffffffff-nothing", store=store_path)
    assert missing.strip() == "No history for ffffffff-nothing."


def test_log_entry_with_an_ambiguous_prefix_says_so(p: filemem.Provider,
                                                    store_path: Path) -> None:
    ids = [p.add({**UG, "text": f"entry {i}"}, ctx())["entry"]["id"] for i in range(17)]
    firsts = [i[0] for i in ids]
    shared = next(c for c in firsts if firsts.count(c) > 1)  # 17 ids, 16 hex digits
    out = fm("log", "--json", "--entry", shared, store=store_path)
    assert out.returncode == 1, out.stdout
    assert "ambiguous" in out.stderr or "ambiguous" in out.stdout


def test_log_of_an_empty_history_and_json_everywhere(store_path: Path) -> None:
    ok("init", store=store_path)
    items = json.loads(ok("log", "--json", store=store_path))
    assert [i["action"] for i in items] == ["init"]
    assert ok("log", "--entry", "abc", store=store_path).strip() == "No history for abc."
    assert json.loads(ok("log", "--json", "--entry", "abc", store=store_path)) == []


def test_log_comes_as_the_history_is_walked(p: filemem.Provider, store_path: Path,
                                             monkeypatch: pytest.MonkeyPatch,
                                             capsysbinary: pytest.CaptureFixture[bytes]
                                             ) -> None:
    """The newest items are there before the rest of the history is read (a history of
    100,000 commits takes seconds to read whole), and `log --json` prints the same text as
    the whole list at once."""
    from filemem.cli.common import emit_json_items
    from filemem.shown import json_text

    for i in range(30):
        p.add({**UG, "text": f"fact {i} \u00e9\u200b\U0001F600 \"quoted\""}, ctx())
    owner = Owner(p)
    real = p.store.git.newest_first
    read: list[str] = []

    def counted(head: str) -> Any:
        for info in real(head):
            read.append(info.sha)
            yield info

    monkeypatch.setattr(p.store.git, "newest_first", counted)
    items = owner.history()
    first = next(items)
    assert first["text"].startswith("fact 29") and len(read) <= 2
    assert [first, *items] == owner.log() and len(read) == 2 * 31  # all of it, read twice
    read.clear()
    assert [i["text"] for i in owner.history(limit=3)] == [f"fact {i} \u00e9\u200b\U0001F600 "
                                                          '"quoted"' for i in (29, 28, 27)]
    assert len(read) <= 4
    whole = json_text(owner.log(), indent=2) + "\n"
    assert ok("log", "--json", store=store_path) == whole

    capsysbinary.readouterr()
    for given in ([], owner.log()[:1], owner.log()):
        emit_json_items(iter(given))
        printed = capsysbinary.readouterr().out.decode("utf-8")
        assert printed == json_text(given, indent=2) + "\n" and json.loads(printed) == given


# ---------------------------------------------------------------- verify: clean histories


def test_verify_a_history_of_every_kind_of_write(make_provider: MakeProvider,
                                                 store_path: Path) -> None:
    auto = make_provider(budgets=BIG)
    auto.add({**UG, "text": "likes tea"}, ctx())
    auto.add({**AW, "text": "part one"}, ctx(agent="coder"))
    auto.add({**AW, "text": "part two"}, ctx(agent="coder"))
    auto.replace({**UG, "match": "tea", "text": "likes green tea"}, ctx())
    auto.consolidate({**AW, "matches": ["one", "two"], "text": "both parts"},
                     ctx(agent="coder"))
    auto.seed([{**UG, "text": "seeded 1"}, {**AW, "text": "seeded 2"}], ctx())
    auto.import_envelope(auto.export(), ctx())
    # denied (policy off), pending (ask with nobody to ask), then approved and rejected
    with pytest.raises(filemem.ProtocolError):
        make_provider(write_policy="off").add({**UG, "text": "never"}, ctx())
    asker = make_provider(write_policy="ask")
    pending = []
    for text in ("approve me", "reject me"):
        with pytest.raises(filemem.ProtocolError) as info:
            asker.add({**UG, "text": text}, ctx())
        pending.append(info.value.details["pendingId"])
    Owner(asker).approve(pending[0])
    Owner(asker).reject(pending[1], "no")
    # failed after approval: the budget filled up while the person was being asked
    used = auto.budgets()[0]["used"]
    small = {"user": {"userGlobal": used + 100}}  # room for one of the two, not both

    def fill_then_allow(request: filemem.ApprovalRequest) -> str:
        make_provider(budgets=BIG).add({**UG, "text": "x" * 60}, ctx())
        return "allowed-once"

    slow = make_provider(write_policy="ask", budgets=small, gate=fill_then_allow)
    with pytest.raises(filemem.ProtocolError) as info:
        slow.add({**UG, "text": "y" * 60}, ctx())
    assert info.value.code == "BUDGET_EXCEEDED"
    # a hand edit adopted, a hand-written file adopted, a store file edited
    tea = next(e for e in auto.list_entries() if e["text"] == "likes green tea")
    set_text(file_of(store_path, tea["id"]), "likes black tea")
    (store_path / "user" / "user-global" / "_shared" / "new.md").write_text("by hand",
                                                                            encoding="utf-8")
    with open(store_path / "README.md", "a", encoding="utf-8") as f:
        f.write("\nmine\n")
    ok("adopt", "--yes", store=store_path)
    auto.remove({**UG, "match": "black"}, ctx())

    actions = set(git(store_path, "log", "--format=%(trailers:key=Audit-Action,valueonly)")
                  .split())
    assert {"init", "add", "replace", "remove", "consolidate-remove", "consolidate-add", "seed",
            "add-denied", "add-pending", "add-failed", "edit"} <= actions
    report = verify_json(store_path)
    assert report["problems"] == [] and report["externalCommits"] == []
    commits = int(git(store_path, "rev-list", "--count", "HEAD"))
    assert report["commits"] == report["filememCommits"] == commits
    assert report["merges"] == 0
    assert report["entriesAtHead"] == len(auto.list_entries())
    trailer_rows = git(store_path, "log", "--format=%(trailers:key=Audit-Seq,valueonly)").split()
    assert report["auditRows"] == len(trailer_rows)
    text = ok("verify", store=store_path)
    assert f"{commits} commits ({commits} by filemem, 0 made outside filemem, 0 merges)" in text
    assert text.rstrip().endswith("OK: HEAD is exactly what the audited history produces.")
    assert_clean_repo(store_path)


def test_a_persons_own_commits_are_reported_not_failed(p: filemem.Provider,
                                                      store_path: Path) -> None:
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    p.add({**UG, "text": "likes cake"}, ctx())
    path = file_of(store_path, tea["id"])
    set_text(path, "likes tea, really")
    mine = person_commits(store_path, "Fix my tea note\n\nby hand", rel(store_path, path))
    p.replace({**UG, "match": "cake", "text": "likes carrot cake"}, ctx())
    to_revert = head(store_path)
    git(store_path, "revert", "--no-edit", to_revert)
    reverted = head(store_path)
    cfg = store_path / "filemem.yaml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("language: en", "language: zh"),
                   encoding="utf-8")
    person_commits(store_path, "Snapshots in Chinese", "filemem.yaml")
    p.add({**UG, "text": "after all that"}, ctx())

    report = verify_json(store_path)
    assert report["problems"] == []
    assert [(e["commit"], e["subject"]) for e in report["externalCommits"]] == [
        (mine, "Fix my tea note"),
        (reverted, git(store_path, "log", "-1", "--format=%s", reverted).strip()),
        (git(store_path, "rev-parse", "HEAD~1").strip(), "Snapshots in Chinese")]
    assert report["filememCommits"] == report["commits"] - 3
    text = ok("verify", store=store_path)
    assert f"  outside filemem: {mine[:10]} Fix my tea note" in text
    assert "3 made outside filemem" in text and "OK:" in text
    assert sorted(e["text"] for e in p.list_entries()) == ["after all that", "likes cake",
                                                           "likes tea, really"]


def test_an_entry_removed_with_git_then_brought_back_is_no_problem_when_filemem_removes_it(
        p: filemem.Provider, store_path: Path) -> None:
    """`git revert` of an add is flagged (an audited entry gone outside filemem); the way out
    the problem names (revert the revert) clears it, and stays cleared once the entry is
    removed through filemem, an audited removal."""
    p.add({**UG, "text": "temp note"}, ctx())
    git(store_path, "revert", "--no-edit", "HEAD")
    removal = head(store_path)
    report = verify_json(store_path, expect_exit=1)
    [problem] = report["problems"]
    assert problem["commit"] == removal and "removes 1 audited entry" in problem["problem"]
    assert f"`git revert {removal[:12]}` brings it back" in problem["problem"]
    git(store_path, "revert", "--no-edit", "HEAD")
    assert verify_json(store_path)["problems"] == []
    p.remove({**UG, "match": "temp note"}, ctx())
    assert verify_json(store_path)["problems"] == []
    assert p.list_entries() == []


def test_merges_are_reported(p: filemem.Provider, store_path: Path) -> None:
    p.add({**UG, "text": "on main"}, ctx())
    branch = git(store_path, "branch", "--show-current").strip()
    git(store_path, "checkout", "-q", "-b", "side")
    notes = store_path / "NOTES.txt"
    notes.write_text("side work\n", encoding="utf-8")
    person_commits(store_path, "Side notes", "NOTES.txt")
    git(store_path, "checkout", "-q", branch)
    p.add({**UG, "text": "also on main"}, ctx())
    git(store_path, "merge", "-q", "--no-ff", "-m", "Merge side", "side")
    merge = head(store_path)
    p.add({**UG, "text": "after the merge"}, ctx())
    report = verify_json(store_path)
    assert report["merges"] == 1 and report["problems"] == []
    assert {e["subject"] for e in report["externalCommits"]} == {"Side notes", "Merge side"}
    assert merge in {e["commit"] for e in report["externalCommits"]}
    assert report["entriesAtHead"] == 3
    assert "1 merge)" in ok("verify", store=store_path)


def test_verify_shows_a_progress_bar_at_a_terminal(p: filemem.Provider,
                                                   store_path: Path) -> None:
    p.add({**UG, "text": "likes tea"}, ctx())
    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "filemem", "verify", "--store",
                             str(store_path)], stdin=slave, stdout=slave, stderr=slave,
                            env={**os.environ, "TERM": "dumb", "COLUMNS": "120"})
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.1)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=10) == 0, seen
    finally:
        os.close(master)
    screen = seen.decode("utf-8", "replace")
    assert "Replaying history" in screen and "OK: HEAD is exactly" in screen


# ---------------------------------------------------------------- verify: real inconsistencies


def test_a_commit_reusing_trailers_for_a_different_text_is_caught(p: filemem.Provider,
                                                                  store_path: Path) -> None:
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    p.replace({**UG, "match": "tea", "text": "likes green tea"}, ctx())
    copied = message_of(store_path)
    path = file_of(store_path, tea["id"])
    # the next version, well-formed, but not the text the trailers claim
    data = path.read_text(encoding="utf-8").replace("version: 2", "version: 3")
    path.write_text(data.replace("likes green tea", "likes no tea at all"), encoding="utf-8")
    forged = person_commits(store_path, copied, rel(store_path, path))
    assert fm("list", "--json", store=store_path).returncode == 0  # a valid file at HEAD
    report = verify_json(store_path, expect_exit=1)
    problems = [x for x in report["problems"] if x["commit"] == forged]
    assert any(f"replace row for {tea['id']}" in x["problem"] for x in problems), problems
    assert forged not in {e["commit"] for e in report["externalCommits"]}
    out = fm("verify", store=store_path)
    assert out.returncode == 1
    assert f"  PROBLEM {forged[:10]}: replace row for {tea['id']}" in out.stdout
    assert re.search(r"\d+ problems? found\.", out.stdout) and "OK:" not in out.stdout


def test_an_entry_changed_under_a_copied_audit_message_is_caught(p: filemem.Provider,
                                                                 store_path: Path) -> None:
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    copied = message_of(store_path)  # the add of tea
    cake = p.add({**UG, "text": "likes cake"}, ctx())["entry"]
    path = file_of(store_path, cake["id"])
    set_text(path, "likes no cake")
    forged = person_commits(store_path, copied, rel(store_path, path))
    report = verify_json(store_path, expect_exit=1)
    found = {x["problem"] for x in report["problems"] if x["commit"] == forged}
    assert any(x.startswith(f"entry {cake['id']} changed without an audit row claiming it")
               and f"`git revert {forged[:12]}`" in x for x in found), found
    assert any(x.startswith(f"add row for {tea['id']}") for x in found), found
    # replaying the trailers does not give HEAD either
    assert any("replaying history does not give the entries at HEAD" in x["problem"]
               for x in report["problems"])


def test_a_denial_that_changes_a_file_is_caught(make_provider: MakeProvider,
                                                store_path: Path) -> None:
    p = make_provider()
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    with pytest.raises(filemem.ProtocolError):
        make_provider(write_policy="off").add({**UG, "text": "nope"}, ctx())
    copied = message_of(store_path)
    assert "Audit-Action: add-denied" in copied
    path = file_of(store_path, tea["id"])
    set_text(path, "likes coffee")
    forged = person_commits(store_path, copied, rel(store_path, path))
    report = verify_json(store_path, expect_exit=1)
    assert any(x["commit"] == forged and x["problem"].startswith(
        f"entry {tea['id']} changed without an audit row claiming it (`git show {forged[:12]}`")
        for x in report["problems"]), report["problems"]


def test_a_store_file_changed_under_an_add_row_is_caught(p: filemem.Provider,
                                                         store_path: Path) -> None:
    p.add({**UG, "text": "likes tea"}, ctx())
    copied = message_of(store_path)
    p.remove({**UG, "match": "tea"}, ctx())
    # re-create the same file and slip a config change into the same commit
    git(store_path, "revert", "--no-commit", "HEAD")
    cfg = store_path / "filemem.yaml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("writePolicy: ask",
                                                           "writePolicy: auto"),
                   encoding="utf-8")
    forged = person_commits(store_path, copied, "filemem.yaml")
    report = verify_json(store_path, expect_exit=1)
    found = [x["problem"] for x in report["problems"] if x["commit"] == forged]
    assert any(x.startswith("filemem.yaml changed without an audit row naming it")
               for x in found), found


def _policy_to_auto(store: Path) -> None:
    cfg = store / "filemem.yaml"
    text = cfg.read_text(encoding="utf-8")
    assert "writePolicy: ask" in text
    cfg.write_text(text.replace("writePolicy: ask", "writePolicy: auto"), encoding="utf-8")


def test_a_config_change_under_a_copied_init_row_is_caught(p: filemem.Provider,
                                                           store_path: Path) -> None:
    p.add({**UG, "text": "likes tea"}, ctx())
    root = git(store_path, "rev-list", "--max-parents=0", "HEAD").strip()
    _policy_to_auto(store_path)
    forged = person_commits(store_path, message_of(store_path, root), "filemem.yaml")
    report = verify_json(store_path, expect_exit=1)
    assert forged in {x["commit"] for x in report["problems"]}


def test_a_config_change_under_a_copied_readme_edit_row_is_caught(p: filemem.Provider,
                                                                  store_path: Path) -> None:
    with open(store_path / "README.md", "a", encoding="utf-8") as f:
        f.write("\nmine\n")
    ok("adopt", "--yes", store=store_path)
    copied = message_of(store_path)
    assert 'Audit-Text: "edited README.md"' in copied
    _policy_to_auto(store_path)
    forged = person_commits(store_path, copied, "filemem.yaml")
    report = verify_json(store_path, expect_exit=1)
    assert forged in {x["commit"] for x in report["problems"]}


def test_an_entry_changed_in_a_merge_with_copied_trailers_is_caught(p: filemem.Provider,
                                                                    store_path: Path) -> None:
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    copied = message_of(store_path)
    branch = git(store_path, "branch", "--show-current").strip()
    git(store_path, "checkout", "-q", "-b", "side")
    (store_path / "NOTES.txt").write_text("side\n", encoding="utf-8")
    person_commits(store_path, "Side notes", "NOTES.txt")
    git(store_path, "checkout", "-q", branch)
    git(store_path, "merge", "-q", "--no-ff", "--no-commit", "side")
    path = file_of(store_path, tea["id"])
    set_text(path, "likes poison")  # still version 1, no row says so
    forged = person_commits(store_path, copied, rel(store_path, path))
    assert [e["text"] for e in p.list_entries()] == ["likes poison"]
    report = verify_json(store_path, expect_exit=1)
    assert forged in {x["commit"] for x in report["problems"]}


@pytest.mark.parametrize("trailers", [
    "Audit-Seq: 1\nAudit-Ts: 1\nAudit-Action: add\nAudit-Bogus: x",
    "Audit-Seq: one\nAudit-Ts: 1\nAudit-Action: add",
    "Audit-Seq: 1\nAudit-Action: add",
    'Audit-Seq: 1\nAudit-Ts: 1\nAudit-Action: add\nAudit-Text: "unterminated',
], ids=["unknown key", "seq not a number", "no ts", "bad json"])
def test_a_trailer_block_that_does_not_parse_is_caught(trailers: str, p: filemem.Provider,
                                                       store_path: Path) -> None:
    p.add({**UG, "text": "likes tea"}, ctx())
    forged = person_commits(store_path, f"add user/user-global: x\n\nx\n\n{trailers}\n")
    p.add({**UG, "text": "likes cake"}, ctx())  # writes still work on top of it
    report = verify_json(store_path, expect_exit=1)
    assert [x["commit"] for x in report["problems"]] == [forged]
    assert report["problems"][0]["problem"].startswith("audit trailers do not parse")
    out = fm("verify", store=store_path)
    assert out.returncode == 1 and f"PROBLEM {forged[:10]}: audit trailers" in out.stdout
    # log still shows the commit, saying its trailers are unreadable
    items = json.loads(ok("log", "--json", store=store_path))
    odd = [i for i in items if i["commit"] == forged]
    assert len(odd) == 1 and odd[0]["action"] == "external-commit"
    assert odd[0]["outcome"].startswith("unreadable audit trailers")


def test_an_invalid_entry_at_head_is_a_problem(p: filemem.Provider, store_path: Path) -> None:
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    path = file_of(store_path, tea["id"])
    path.write_text(path.read_text(encoding="utf-8").replace("track: user", "track: robot"),
                    encoding="utf-8")
    bad = person_commits(store_path, "Break it", rel(store_path, path))
    report = verify_json(store_path, expect_exit=1)
    # one problem, at the commit that brought the file: the file, why, the way out (not
    # also "removes an audited entry" or "replaying history does not give HEAD")
    [problem] = report["problems"]
    assert problem["commit"] == bad
    assert problem["problem"].startswith(f"memory store file {path} is corrupt: track must "
                                         "be one of user|agent (got 'robot'); it came in "
                                         f'with commit {bad[:10]} "Break it"')
    assert f"`git -C {store_path} revert {bad[:10]}`" in problem["problem"]
    assert [e["subject"] for e in report["externalCommits"]] == ["Break it"]
    # mended by a commit of the fix, history verifies again
    path.write_text(path.read_text(encoding="utf-8").replace("track: robot", "track: user"),
                    encoding="utf-8")
    person_commits(store_path, "Mend it", rel(store_path, path))
    assert verify_json(store_path)["ok"] is True


def test_an_entry_removed_by_git_and_brought_back_is_no_problem(p: filemem.Provider,
                                                                store_path: Path) -> None:
    tea = p.add({**UG, "text": "likes tea"}, ctx())["entry"]
    git(store_path, "rm", "-q", rel(store_path, file_of(store_path, tea["id"])))
    gone = person_commits(store_path, "Drop it")
    report = verify_json(store_path, expect_exit=1)
    assert [pr["commit"] for pr in report["problems"]] == [gone]
    assert f"`git revert {gone[:12]}` brings it back" in report["problems"][0]["problem"]
    git(store_path, "revert", "--no-edit", gone)  # as that problem says
    assert verify_json(store_path)["ok"] is True


def test_verify_json_of_a_new_store(store_path: Path) -> None:
    ok("init", store=store_path)
    report = verify_json(store_path)
    assert report == {"ok": True, "commits": 1, "filememCommits": 1, "externalCommits": [],
                      "merges": 0, "auditRows": 1, "entriesAtHead": 0, "problems": [],
                      "resumedFrom": None}


# ---------------------------------------------------------------- a long history, quickly


def fast_history(store: Path, entries: int, replaces: int) -> int:
    """Append ``entries`` adds then ``replaces`` replaces to the store's branch, one commit
    each, in exactly filemem's format, through `git fast-import`. Returns the commit count."""
    git_cli = shutil.which("git")
    if git_cli is None:
        pytest.skip("git CLI not installed")
    branch = git(store, "symbolic-ref", "HEAD").strip()
    parent = head(store)
    seq = int(git(store, "log", "-1", "--format=%(trailers:key=Audit-Seq,valueonly)")
              .split()[0])
    ts = int(time.time() * 1000) - (entries + replaces) * 10
    live: list[Entry] = []
    chunks: list[bytes] = []

    def commit(message: str, path: str, data: bytes, first: bool) -> None:
        msg = message.encode("utf-8")
        chunks.append(f"commit {branch}\ncommitter filemem <filemem@localhost> {ts // 1000} "
                      f"+0000\ndata {len(msg)}\n".encode() + msg + b"\n")
        if first:
            chunks.append(f"from {parent}\n".encode())
        chunks.append(f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n")

    for i in range(entries + replaces):
        ts += 10
        seq = next_seq(ts, seq)
        if i < entries:
            e = Entry(new_id(), "agent", "workspace", f"/work/p{i % 3}", f"a{i % 2}",
                      f"note {i} v1", "bench", (f"t{i % 5}",), 1, ts, ts, "s1")
            live.append(e)
            action, subject = "add", f"add agent/workspace: {e.text}"
        else:
            old = live[i % entries]
            e = old.revised(text=f"note {i % entries} v{old.version + 1}",
                            version=old.version + 1, updated_at=ts)
            live[i % entries] = e
            action, subject = "replace", f"replace agent/workspace: {e.text}"
        r = row(action, track=e.track, scope=e.scope, entry_id=e.id, text=e.text,
                outcome="allowed-once (via approval, writePolicy auto)", source=e.source,
                session_id="s1")
        r.update(seq=seq, ts=ts)
        commit(commit_message(subject, e.text, [r]), entry_path(e), codec.encode(e), i == 0)
    stream = b"".join(chunks)
    out = subprocess.run([git_cli, "-C", str(store), "fast-import", "--quiet"], input=stream,
                         capture_output=True)
    assert out.returncode == 0, out.stderr
    git(store, "reset", "-q", "--hard")  # the working tree and index follow the new HEAD
    return entries + replaces


def test_verify_a_long_history(p: filemem.Provider, store_path: Path) -> None:
    added = fast_history(store_path, entries=100, replaces=2900)
    total = added + 1
    assert int(git(store_path, "rev-list", "--count", "HEAD")) == total
    assert_clean_repo(store_path)
    # the API sees the history written behind its back
    assert len(p.list_entries()) == 100

    report = history.verify(p.store)
    assert report.ok, report.problems[:3]
    assert (report.commits, report.filemem_commits, report.rows, report.entries) == \
        (total, total, total, 100)

    out = verify_json(store_path)
    assert out["commits"] == total and out["ok"]

    one = json.loads(ok("log", "--json", "--entry", p.list_entries()[0]["id"], store=store_path))
    assert [i["version"] for i in one] == list(range(30, 0, -1))

    # one forged commit at the end of a long history is found
    e = p.list_entries()[5]
    path = file_of(store_path, e["id"])
    set_text(path, "tampered")
    forged = person_commits(store_path, message_of(store_path), rel(store_path, path))
    bad = history.verify(p.store)
    assert not bad.ok and {x["commit"] for x in bad.problems} == {forged}
