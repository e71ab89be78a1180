"""`filemem redact`: a text (or an entry's every text) gone from the whole history.

Real stores, the real `filemem` command and the real git CLI: afterwards `git log -p --all`,
`git grep` over every revision, every object in `.git` (`git cat-file --batch-all-objects`)
and every byte of the store's folder hold no trace of it; `git fsck --strict` is clean and
`filemem verify` passes. Hostile input is refused with a clear error and changes nothing.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.files.wal import Wal
from filemem.owner import Owner
from filemem.owner.redaction import MARKER
from tests.conftest import ctx, git, head, run_at_terminal, run_cli

UG = {"track": "user", "scope": "user-global"}
SECRET = "ghp_R3dactMe0123456789abcdefXYZ"


def history_traces(store: Path, needle: str) -> list[str]:
    """The needle in anything the repository's refs reach (a store or a bare remote)."""
    found = []
    if needle in git(store, "log", "-p", "--all"):
        found.append("git log -p --all")
    revs = git(store, "rev-list", "--all").split()
    grep = subprocess.run(["git", "-C", str(store), "grep", "-F", needle, *revs],
                          capture_output=True, text=True)
    if grep.stdout:
        found.append("git grep over every revision")
    return found


def traces(store: Path, needle: str) -> list[str]:
    """Every place the needle is still found: git's views of all history, every object in
    the object store, and every file under the store's folder (working tree, .git,
    .filemem) as raw bytes."""
    found = history_traces(store, needle)
    objects = subprocess.run(["git", "-C", str(store), "cat-file", "--batch-all-objects",
                              "--batch"], capture_output=True, check=True).stdout
    if needle.encode() in objects:
        found.append("git cat-file --batch-all-objects")
    for path in store.rglob("*"):
        if path.is_file() and not path.is_symlink() and needle.encode() in path.read_bytes():
            found.append(str(path.relative_to(store)))
    # the write-ahead log keeps objects base64-encoded: read its records
    if any(needle.encode() in raw for r in Wal.at(str(store / ".filemem")).records()
           for _sha, _kind, raw in r.objects):
        found.append("the write-ahead log's objects")
    return found


def fingerprint(store: Path) -> dict[str, Any]:
    """What a refused redaction must leave exactly as it was."""
    files = {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
             if p.is_file() and "objects" not in p.parts and p.name != "index"
             and "lock" not in p.name}
    return {"head": head(store), "refs": git(store, "for-each-ref"),
            "objects": git(store, "count-objects", "-v"), "files": files}


def verify_ok(store: Path) -> dict[str, Any]:
    done = run_cli("verify", "--json", store=store)
    assert done.returncode == 0, done.stdout + done.stderr
    report: dict[str, Any] = json.loads(done.stdout)
    assert report["ok"] and not report["problems"]
    return report


@pytest.fixture
def secret_store(tmp_path: Path) -> Path:
    """A store whose history, ledger and pending approvals hold SECRET: added, replaced
    (both versions hold it), recalled, snapshotted, and staged in a pending approval."""
    store = tmp_path / "store"
    with filemem.open_store(store, create=True, write_policy="auto") as p:
        p.add({**UG, "text": "Prefers tea over coffee"}, ctx())
        p.add({**UG, "text": f"The CI token is {SECRET}, do not share"}, ctx())
        p.add({**UG, "text": "Uses Python 3.11"}, ctx())
        p.replace({**UG, "match": "CI token", "text": f"CI token rotated; old was {SECRET}"},
                  ctx())
        p.query({"text": "token"})
        p.snapshot(ctx())
    with filemem.open_store(store, write_policy="ask") as p, \
            pytest.raises(filemem.ProtocolError):
        p.add({**UG, "text": f"again: {SECRET}"}, ctx())  # nobody to ask: staged
    assert (store / ".filemem" / "pending").glob("*.json")
    assert len(traces(store, SECRET)) >= 5
    return store


def test_text_redaction_leaves_no_trace(secret_store: Path) -> None:
    store = secret_store
    before = int(git(store, "rev-list", "--count", "HEAD"))
    done = run_cli("redact", "--text", SECRET, "--yes", "--json", store=store)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    # every commit from the first that held it (the init and the first add keep their sha)
    assert result["commitsRewritten"] == before - 2
    assert result["ledgerRows"] >= 1 and result["pendingApprovals"] == 1
    assert SECRET not in done.stdout + done.stderr
    assert traces(store, SECRET) == []
    git(store, "fsck", "--strict", "--no-dangling")
    assert git(store, "status", "--porcelain") == ""
    assert int(git(store, "rev-list", "--count", "HEAD")) == before + 1
    report = verify_ok(store)
    assert report["commits"] == before + 1
    with Owner(filemem.open_store(store)) as owner:
        texts = [e["text"] for e in owner.provider.query({})["entries"]]
        assert f"CI token rotated; old was {MARKER}" in texts
        assert "Prefers tea over coffee" in texts  # other entries untouched
        rows = owner.log()
        record = rows[0]
        assert record["action"] == "redact" and record["text"] is None
        assert "scrypt" in record["outcome"] and "by the owner" in record["outcome"]
        adds = [r for r in rows if r["action"] == "add" and MARKER in str(r["text"])]
        assert [r["text"] for r in adds] == [f"The CI token is {MARKER}, do not share"]
        pending = owner.pending()
        assert len(pending) == 1 and MARKER in json.dumps(pending)
        ledger = owner.provider.audit_list(100)
        assert any(r["action"] == "snapshot" and MARKER in str(r["text"]) for r in ledger)


def test_entry_redaction_removes_every_version(secret_store: Path) -> None:
    store = secret_store
    with filemem.open_store(store) as p:
        entry = next(e for e in p.query({})["entries"] if "CI token" in e["text"])
        old_versions = [f"The CI token is {SECRET}, do not share",
                        f"CI token rotated; old was {SECRET}"]
    done = run_cli("redact", entry["id"][:8], "--yes", "--json", store=store)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["entryId"] == entry["id"]
    for text in old_versions:
        assert traces(store, text) == []
    # a text of another write that only quotes part of the entry's is not the entry's
    assert any("pending" in t for t in traces(store, f"again: {SECRET}"))
    verify_ok(store)
    git(store, "fsck", "--strict")
    with filemem.open_store(store) as p:
        texts = {e["id"]: e["text"] for e in p.query({})["entries"]}
        assert texts[entry["id"]] == MARKER
        assert "Uses Python 3.11" in texts.values()


def test_hostile_input_changes_nothing(secret_store: Path) -> None:
    store = secret_store
    before = fingerprint(store)
    entry_file = next(store.glob("user/user-global/**/*.md"))
    cases = [
        (["redact", "00000000-dead", "--yes"], "no entry"),  # an id that does not exist
        (["redact", "", "--yes"], "give the entry's id"),  # the start of every id
        (["redact", "--text", "no such text anywhere", "--yes"], "nowhere"),
        (["redact", "--text", entry_file.stem[:13], "--yes"], "name"),  # part of a file name
        (["redact", "--text", "user-global", "--yes"], "name"),  # a folder, a layer
        (["redact", "--text", "Audit-Seq", "--yes"], "audit trailers"),  # their structure
        (["redact", "--text", "committer", "--yes"], "header"),  # a commit's header
        (["redact", "--text", "   ", "--yes"], "empty"),
        (["redact", "--text", MARKER, "--yes"], "nothing to redact"),  # the marker itself
        (["redact", "--yes"], "ENTRY-ID or --text"),
        (["redact", "abc", "--text", SECRET, "--yes"], "ENTRY-ID or --text"),
        (["redact", "--text", SECRET], "no terminal to ask on"),  # no --yes
    ]
    for args, said in cases:
        done = run_cli(*args, "--json", store=store)
        assert done.returncode != 0, args
        assert said in done.stdout + done.stderr, (args, done.stdout, done.stderr)
        assert json.loads(done.stdout or done.stderr)["error"]["code"] == "INVALID_INPUT"
        assert fingerprint(store) == before, args


def test_text_in_a_front_matter_key_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with filemem.open_store(store, create=True, write_policy="auto") as p:
        e = p.add({**UG, "text": "a note"}, ctx())["entry"]
    path = next(store.glob(f"user/user-global/**/{e['id']}.md"))
    data = path.read_text().replace("---\n", "---\nx-hunter2key: 1\n", 1)
    path.write_text(data)
    assert run_cli("adopt", "--yes", store=store).returncode == 0
    before = fingerprint(store)
    done = run_cli("redact", "--text", "hunter2key", "--yes", store=store)
    assert done.returncode != 0 and "front matter" in done.stderr
    assert fingerprint(store) == before


def test_confirmation_at_a_terminal(secret_store: Path) -> None:
    store = secret_store
    before = fingerprint(store)
    args = ["redact", "--text", SECRET, "--store", str(store)]
    code, out = run_at_terminal(args, b"n\n", prompt=b"Redact it?")
    assert code != 0 and "4 of" in out and "commits rewritten" in out
    assert SECRET not in out  # the prompt says what, never echoes the text
    assert fingerprint(store) == before
    code, out = run_at_terminal(args, b"y\n", prompt=b"Redact it?")
    assert code == 0, out
    assert traces(store, SECRET) == []


def stdin_text_at_a_terminal(args: list[str], text: str, answer: bytes,
                             timeout: float = 60) -> tuple[int, str, str, str]:
    """Run `filemem` with ``text`` on stdin (a pipe) and stdout, stderr piped, in a session
    whose controlling terminal is a pseudo-terminal; answer there what it asks. Returns the
    exit code, stdout, stderr and what the terminal showed."""
    master, slave = os.openpty()
    name = os.ttyname(slave)

    def take_terminal() -> None:  # a session leader opening a tty gets it as its own
        os.close(os.open(name, os.O_RDWR))

    proc = subprocess.Popen([sys.executable, "-m", "filemem", *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True, preexec_fn=take_terminal)
    shown = b""  # the slave stays open here: with none open, reading the master fails (EIO)
    try:
        assert proc.stdin is not None
        proc.stdin.write(text.encode())
        proc.stdin.close()
        deadline = time.monotonic() + timeout
        while b"[y/N]" not in shown:
            assert time.monotonic() < deadline and proc.poll() is None, shown
            if select.select([master], [], [], 0.1)[0]:
                shown += os.read(master, 65536)
        os.write(master, answer)
        assert proc.stdout is not None and proc.stderr is not None
        out, err = proc.stdout.read(), proc.stderr.read()  # a few lines each
        proc.wait(timeout=timeout)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(master)
        os.close(slave)
    return proc.returncode, out.decode(), err.decode(), shown.decode().replace("\r\n", "\n")


@pytest.mark.parametrize("answer", [b"n\n", b"y\n"])
def test_a_text_from_stdin_is_confirmed_on_the_terminal(secret_store: Path,
                                                         answer: bytes) -> None:
    store = secret_store
    before = fingerprint(store)
    code, out, err, shown = stdin_text_at_a_terminal(
        ["redact", "--text", "-", "--store", str(store)], SECRET + "\n", answer)
    assert "4 of" in shown and "commits rewritten" in shown and "Redact it?" in shown
    assert SECRET not in shown + out + err
    if answer == b"n\n":
        assert code == 3 and "Nothing was changed" in err  # not approved
        assert fingerprint(store) == before
    else:
        assert code == 0, err
        assert "Redacted a text of" in out
        assert traces(store, SECRET) == []
        verify_ok(store)


def test_a_text_from_stdin_with_no_terminal_at_all_is_refused(secret_store: Path) -> None:
    before = fingerprint(secret_store)
    done = subprocess.run([sys.executable, "-m", "filemem", "redact", "--text", "-", "--json",
                           "--store", str(secret_store)], input=SECRET, capture_output=True,
                          text=True, start_new_session=True)  # no controlling terminal
    assert done.returncode != 0
    error = json.loads(done.stdout or done.stderr)["error"]
    assert error["code"] == "INVALID_INPUT"
    assert "no terminal to ask on" in error["message"] and "--yes" in error["message"]
    assert fingerprint(secret_store) == before


def test_no_agent_surface_reaches_redact() -> None:
    from filemem import bridge, toolspec

    names = json.dumps([t for t in dir(toolspec)]) + json.dumps(dir(bridge))
    assert "redact" not in names.lower()
    assert not hasattr(filemem.Provider, "redact")


def test_text_from_stdin_stays_out_of_the_command_line(secret_store: Path) -> None:
    done = run_cli("redact", "--text", "-", "--yes", store=secret_store, input=SECRET + "\n")
    assert done.returncode == 0, done.stderr
    assert "commits rewritten" in done.stdout and SECRET not in done.stdout
    assert traces(secret_store, SECRET) == []
    verify_ok(secret_store)


def test_a_hand_edited_file_to_rewrite_is_refused(secret_store: Path) -> None:
    store = secret_store
    path = next(p for p in store.glob("user/user-global/**/*.md") if SECRET in p.read_text())
    path.write_text(path.read_text() + "my own edit\n")
    before = fingerprint(store)
    done = run_cli("redact", "--text", SECRET, "--yes", "--json", store=store)
    assert done.returncode != 0
    assert json.loads(done.stdout or done.stderr)["error"]["code"] == "WRITE_DENIED"
    assert "adopt or discard" in done.stdout + done.stderr
    assert fingerprint(store) == before


def test_a_short_entry_text_is_replaced_only_where_the_entry_is_named(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with filemem.open_store(store, create=True, write_policy="auto") as p:
        short = p.add({**UG, "text": "tabs"}, ctx())["entry"]
        p.add({**UG, "text": "prefers tabs over spaces"}, ctx())
    done = run_cli("redact", short["id"], "--yes", store=store)
    assert done.returncode == 0, done.stderr
    with filemem.open_store(store) as p:
        texts = sorted(e["text"] for e in p.query({})["entries"])
    assert texts == [MARKER, "prefers tabs over spaces"]
    verify_ok(store)


def test_a_row_recorded_late_by_a_read_begun_before_is_redacted_too(
        secret_store: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from filemem.owner import redact
    from filemem.store import redactstage

    real = redactstage.forget_old_history

    def late_reader(store: Any) -> None:  # a snapshot rendered before, recorded now
        store.append_ledger([{"seq": None, "ts": None, "action": "snapshot", "track": None,
                              "scope": None, "entryId": None, "text": f"- token {SECRET}",
                              "outcome": "ok", "source": "filemem", "sessionId": None}])
        real(store)

    monkeypatch.setattr(redactstage, "forget_old_history", late_reader)
    with filemem.open_store(secret_store) as p:
        redact.apply(p.store, text=SECRET)
    assert traces(secret_store, SECRET) == []
    rows = (secret_store / ".filemem" / "audit.jsonl").read_text().splitlines()
    assert json.loads(rows[-1])["text"] == f"- token {MARKER}"


def test_a_long_history_of_many_versions_is_searched_with_forms_made_once(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry with many versions over a long history: each version's JSON forms are made
    once for the whole rewrite (once per name, row and line of the history took hours at
    100,000 commits), and the rewrite is what it was."""
    from filemem.owner import redaction

    store = tmp_path / "store"
    budgets = {t: {"userGlobal": 10**6, "workspace": 10**6} for t in ("user", "agent")}
    with filemem.open_store(store, create=True, write_policy="auto", budgets=budgets) as p:
        entry = p.add({**UG, "text": "note v0: the café keeps \u00e9 and \"quotes\""},
                      ctx())["entry"]
        for i in range(12):
            p.add({**UG, "text": f"bystander {i}"}, ctx())
            p.replace({**UG, "match": f"note v{i}:", "text": f"note v{i + 1}: the café keeps "
                       f"\u00e9 and \"quotes\""}, ctx())
    made: list[str] = []
    real = redaction._json_forms

    def counted(text: str) -> tuple[str, ...]:
        made.append(text)
        return real(text)

    monkeypatch.setattr(redaction, "_json_forms", counted)
    with filemem.open_store(store) as p:
        plan = Owner(p).redact_plan(entry["id"], None)
    assert plan.found and plan.to_json()["commitsRewritten"] >= 25
    assert len(set(made)) == 13 and len(made) <= 2 * 13  # once each, for each of 2 spreads
    done = run_cli("redact", entry["id"], "--yes", "--json", store=store)
    assert done.returncode == 0, done.stderr
    for i in range(13):
        assert traces(store, f"note v{i}: the café") == []
    assert traces(store, "bystander 11") != []  # the others' texts stay
    verify_ok(store)


def test_a_long_history_says_how_far_the_redaction_got(secret_store: Path) -> None:
    """Reading and rewriting thousands of commits takes a while: the API reports every
    thousand commits; on a terminal, one line of stderr counts them and is wiped after;
    without a terminal nothing is printed but the result."""
    from tests.test_history import fast_history

    store = secret_store
    total = fast_history(store, 30, 2100)
    with filemem.open_store(store) as p:
        counts: list[int] = []
        plan = Owner(p).redact_plan(None, SECRET, counts.append)
    assert plan.found and counts == list(range(1000, total, 1000))
    code, out = run_at_terminal(["redact", "--text", SECRET, "--store", str(store)], b"y\n",
                                prompt=b"Redact it?")
    assert code == 0, out
    assert "Reading the history: 1,000 commits..." in out
    assert "Rewriting the history: 2,000 commits..." in out
    assert "\rRedacted a text" in out.replace(" " * 20, "")  # the line wiped, then the result
    assert traces(store, SECRET) == []
    done = run_cli("redact", "--text", "note 7 v1", "--yes", store=store)  # no terminal
    assert done.returncode == 0, done.stderr
    assert "commits..." not in done.stderr + done.stdout
    verify_ok(store)
