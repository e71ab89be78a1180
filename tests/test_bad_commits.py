"""A bad file committed with git itself (not through filemem): every STORE_CORRUPT, on every
surface (Python, CLI, MCP, bridge), names the file, the commit that brought it and the way
out; following the way out exactly as printed mends the store; `filemem status` and
`verify` list the file; the owner's repair commands (status, log, verify, adopt, discard)
keep working meanwhile. Real git commits, real subprocesses."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

import filemem
from filemem.files.layout import key_dir
from tests.conftest import assert_clean_repo, git, head, rel, run_cli
from tests.test_mcp import MODES, Person, err, ok, served

UG = ["--track", "user", "--scope", "user-global"]
SHARED = "user/user-global/_shared"
READS_AND_WRITES = [["list"], ["query", "tea"], ["snapshot"], ["budgets"], ["export"],
                    ["add", "--yes", *UG, "one more"]]


def _store(tmp_path: Path) -> Path:
    store = tmp_path / "mem"
    assert run_cli("init", str(store)).returncode == 0
    for text in ("likes tea", "likes coffee"):
        out = run_cli("add", "--yes", *UG, text, store=store)
        assert out.returncode == 0, out.stderr
    return store


def _file(store: Path, text: str) -> Path:
    [found] = [f for f in (store / SHARED).glob("*.md") if text in f.read_text("utf-8")]
    return found


def _commits(store: Path) -> int:
    return int(git(store, "rev-list", "--count", "HEAD"))


def _person_commit(store: Path, subject: str) -> str:
    git(store, "add", "-A")
    git(store, "commit", "-q", "-m", subject)
    return head(store)


def _person_git(store: Path, command: str, *extra: str) -> None:
    """Run a git command exactly as an error message printed it (plus ``extra``)."""
    args = shlex.split(command)
    assert args[:3] == ["git", "-C", str(store)], command
    git(store, *args[3:], *extra)


# each breaks the store as a person's own edit might; returns (bad file, the way to mend it
# besides `git revert`, as the message must print it)

def _bad_yaml(store: Path) -> tuple[str, str]:
    f = _file(store, "likes tea")
    f.write_text(f.read_text("utf-8").replace("version: 1", "version: [1"), "utf-8")
    return rel(store, f), f"`git -C {store} commit {rel(store, f)}`"


def _bad_id(store: Path) -> tuple[str, str]:
    f = _file(store, "likes tea")
    f.write_text(re.sub(r"(?m)^id: .*$", "id: not-a-uuid", f.read_text("utf-8")), "utf-8")
    return rel(store, f), f"`git -C {store} commit {rel(store, f)}`"


def _wrong_name(store: Path) -> tuple[str, str]:
    f = _file(store, "likes tea")
    git(store, "mv", rel(store, f), f"{SHARED}/tea.md")
    return f"{SHARED}/tea.md", f"`git -C {store} mv {SHARED}/tea.md {rel(store, f)}`"


def _wrong_folder(store: Path) -> tuple[str, str]:
    f = _file(store, "likes tea")
    (store / "agent" / "user-global" / "_shared").mkdir(parents=True)
    moved = f"agent/user-global/_shared/{f.name}"
    git(store, "mv", rel(store, f), moved)
    return moved, f"`git -C {store} mv {moved} {rel(store, f)}`"


def _not_an_entry(store: Path) -> tuple[str, str]:
    (store / SHARED / "notes.txt").write_text("my own notes\n", "utf-8")
    return f"{SHARED}/notes.txt", f"`git -C {store} rm {SHARED}/notes.txt`"


def _duplicate_id(store: Path) -> tuple[str, str]:
    f = _file(store, "likes tea")
    folder = store / "user" / "user-global" / key_dir("bob")
    folder.mkdir()
    (folder / f.name).write_text(
        f.read_text("utf-8").replace('agentKey: ""', "agentKey: bob"), "utf-8")
    bad = rel(store, folder / f.name)
    return bad, f"`git -C {store} commit {bad}`"


def _bad_config(store: Path) -> tuple[str, str]:
    cfg = store / "filemem.yaml"
    cfg.write_text(cfg.read_text("utf-8").replace("writePolicy: ask", "writePolicy: [ask"),
                   "utf-8")
    return "filemem.yaml", f"`git -C {store} commit filemem.yaml`"


def _config_deleted(store: Path) -> tuple[str, str]:
    git(store, "rm", "-q", "filemem.yaml")
    return "filemem.yaml", "checkout {short}~1 -- filemem.yaml`"


def _copy_in_wrong_folder(store: Path) -> tuple[str, str]:
    f = _file(store, "likes tea")
    folder = store / "user" / "user-global" / key_dir("bob")
    folder.mkdir()
    shutil.copy(f, folder / f.name)  # the same entry, as it is, in bob's folder
    bad = rel(store, folder / f.name)
    return bad, f"it is a copy of the entry in {rel(store, f)}: take it out and commit " \
        f"that: `git -C {store} rm {bad}`"


BREAKERS: dict[str, Callable[[Path], tuple[str, str]]] = {
    "bad-yaml": _bad_yaml, "bad-id": _bad_id, "wrong-name": _wrong_name,
    "wrong-folder": _wrong_folder, "not-an-entry": _not_an_entry,
    "duplicate-id": _duplicate_id, "copy-in-wrong-folder": _copy_in_wrong_folder,
    "bad-config": _bad_config,
    "config-deleted": _config_deleted,
}


def _broken(tmp_path: Path, kind: str) -> tuple[Path, str, str, str]:
    """A store with ``kind`` committed by a person: (store, bad file, commit, way out)."""
    store = _store(tmp_path)
    bad, way = BREAKERS[kind](store)
    sha = _person_commit(store, f"my hand edit ({kind})")
    return store, bad, sha, way.replace("{short}", sha[:10])


@pytest.mark.parametrize("kind", list(BREAKERS))
def test_every_store_corrupt_names_the_file_the_commit_and_the_way_out(
        tmp_path: Path, kind: str) -> None:
    store, bad, sha, way = _broken(tmp_path, kind)
    full = os.path.join(store, *bad.split("/"))
    came = "was deleted by" if kind == "config-deleted" else "came in with"
    n = _commits(store)
    messages = set()
    for args in READS_AND_WRITES:
        out = run_cli(*args, store=store)
        assert out.returncode == 1, (args, out.stderr)
        assert "Traceback" not in out.stderr
        assert out.stderr.startswith(f"filemem: STORE_CORRUPT: memory store file {full} is "
                                     "corrupt: "), (args, out.stderr)
        assert f'{came} commit {sha[:10]} "my hand edit ({kind})"' in out.stderr, out.stderr
        assert f"undo that commit with `git -C {store} revert {sha[:10]}`" in out.stderr
        assert way in out.stderr, (way, out.stderr)
        messages.add(out.stderr.removeprefix("filemem: STORE_CORRUPT: ").rstrip("\n"))
    assert len(messages) == 1  # one message, whatever was asked
    [message] = messages
    assert _commits(store) == n  # the refused add wrote nothing, not even a denial

    # the Python API: the same error, its parts in details
    with filemem.open_store(store, validate=False) as provider, \
            pytest.raises(filemem.ProtocolError) as caught:
        provider.list_entries()
    assert caught.value.code == "STORE_CORRUPT" and caught.value.message == message
    details = caught.value.details
    assert (details["path"], details["file"], details["commit"], details["subject"]) == \
        (full, bad, sha, f"my hand edit ({kind})")
    assert details["reason"] in message and details["wayOut"] in message

    # the owner's commands still work, and list the file with the same message
    status = run_cli("status", store=store)
    assert status.returncode == 0, status.stderr
    assert "Invalid files committed at HEAD" in status.stdout
    assert message in status.stdout
    assert "Nothing to adopt" not in status.stdout
    listed = json.loads(run_cli("status", "--json", store=store).stdout)
    assert [(c["path"], c["kind"], c["invalidAtHead"]["message"]) for c in listed] == \
        [(bad, "invalid", message)]
    verify = run_cli("verify", "--json", store=store)
    assert verify.returncode == 1
    assert json.loads(verify.stdout)["problems"] == [{"commit": sha, "problem": message}]
    assert f"PROBLEM {sha[:10]}: {message}" in run_cli("verify", store=store).stdout
    log = run_cli("log", store=store)
    assert log.returncode == 0 and f"my hand edit ({kind})" in log.stdout

    # the way out, run exactly as printed, mends the store
    [revert] = re.findall(r"`(git -C \S+ revert \w+)`", message)
    _person_git(store, revert, "--no-edit")
    listed_now = run_cli("list", "--json", store=store)
    assert listed_now.returncode == 0, listed_now.stderr
    assert sorted(e["text"] for e in json.loads(listed_now.stdout)) == \
        ["likes coffee", "likes tea"]
    assert run_cli("verify", store=store).returncode == 0
    assert_clean_repo(store)


@pytest.mark.parametrize("kind", ["bad-yaml", "wrong-name", "not-an-entry", "config-deleted"])
def test_the_other_way_out_as_printed_mends_the_store_too(tmp_path: Path, kind: str) -> None:
    store, bad, _sha, _way = _broken(tmp_path, kind)
    if kind == "bad-yaml":  # fixed in an editor first, as the message says
        f = store / bad
        f.write_text(f.read_text("utf-8").replace("version: [1", "version: 1"), "utf-8")
    message = run_cli("list", store=store).stderr
    [*commands] = re.findall(r"`(git -C [^`]+)`", message.split(" revert ", 1)[1])
    for command in commands:  # e.g. `git mv A B`, then `git commit`
        extra = ("-m", "mend it") if " commit" in command else ()
        _person_git(store, command, *extra)
    out = run_cli("list", "--json", store=store)
    assert out.returncode == 0, (commands, out.stderr)
    assert sorted(e["text"] for e in json.loads(out.stdout)) == ["likes coffee", "likes tea"]
    assert run_cli("verify", store=store).returncode == 0
    assert_clean_repo(store)


def test_repair_commands_work_on_a_store_with_a_bad_commit(tmp_path: Path) -> None:
    store, bad, sha, _way = _broken(tmp_path, "bad-yaml")
    coffee = _file(store, "likes coffee")
    coffee.write_text(coffee.read_text("utf-8").replace("likes coffee", "likes black coffee"),
                      "utf-8")
    (store / SHARED / "scratch.md").write_text("a draft\n", "utf-8")
    n = _commits(store)

    # another file's edit is adopted, another discarded: the bad file stays as it is
    out = run_cli("adopt", "--yes", str(coffee), store=store)
    assert out.returncode == 0, out.stderr
    assert _commits(store) == n + 1
    out = run_cli("discard", "--yes", store=store)
    assert out.returncode == 0, out.stderr
    assert not (store / SHARED / "scratch.md").exists()
    assert (store / bad).read_text("utf-8").count("version: [1") == 1
    assert run_cli("list", store=store).returncode == 1  # still refused: not mended yet

    # nothing differs from HEAD: nothing to adopt or discard, and the way to what mends it
    for verb in ("adopt", "discard"):
        out = run_cli(verb, "--yes", store=store)
        assert out.returncode == 0, out.stderr
        assert f"Nothing to {verb}" in out.stdout and "`filemem status`" in out.stdout
    # adopting the bad file before it is fixed says it is unchanged, and what mends it
    out = run_cli("adopt", "--yes", str(store / bad), store=store)
    assert out.returncode == 1
    assert "it is as it was committed" in out.stderr and "not valid YAML" in out.stderr
    assert f"`git -C {store} revert {sha[:10]}`" in out.stderr
    # adopt again is offered only after the fix, not as the way out of itself
    assert (f"fix the file in your editor, then `filemem adopt {store / bad} --store "
            f"{store}`") in out.stderr
    assert "(or `filemem adopt" not in out.stderr
    assert _commits(store) == n + 1

    # the person fixes it in the working tree: adoptable as their own edit
    f = store / bad
    f.write_text(f.read_text("utf-8").replace("version: [1", "version: 1"), "utf-8")
    status = run_cli("status", store=store).stdout
    assert "you have changed it" in status and f"M {bad}" in status
    out = run_cli("adopt", "--yes", store=store)
    assert out.returncode == 0, out.stderr
    listed = json.loads(run_cli("list", "--json", store=store).stdout)
    assert sorted(e["text"] for e in listed) == ["likes black coffee", "likes tea"]
    assert run_cli("status", "--json", store=store).stdout.strip() == "[]"
    verify = run_cli("verify", store=store)
    assert verify.returncode == 0, verify.stdout
    rows = json.loads(run_cli("log", "--json", store=store).stdout)
    assert rows[0]["action"] == "edit" and rows[0]["text"] == "likes tea"
    assert_clean_repo(store)


def _without_row(message: str, text: str) -> str:
    """``message`` with the audit row whose Audit-Text starts with ``text`` left out."""
    head_part, trailers = message.rstrip("\n").rsplit("\n\n", 1)
    rows: list[list[str]] = []
    for line in trailers.split("\n"):
        if line.startswith("Audit-Seq: "):
            rows.append([])
        rows[-1].append(line)
    kept = [r for r in rows if not any(x.startswith(f'Audit-Text: "{text}') for x in r)]
    assert len(kept) == len(rows) - 1
    return head_part + "\n\n" + "\n".join(x for r in kept for x in r) + "\n"


def test_a_fixed_file_adopted_under_its_id_verifies(tmp_path: Path) -> None:
    """A file committed invalid whose name is not an id becomes `<id>.md` when its fix is
    adopted: the commit's rows name the old file too, so verify passes (and the same commit
    without that row is reported, as a change no row explains)."""
    store = _store(tmp_path)
    bad = f"{SHARED}/new.md"
    (store / bad).write_text("hand\n", "utf-8")
    _person_commit(store, "by hand")
    (store / bad).write_text("hand fixed\n", "utf-8")
    out = run_cli("adopt", "--yes", store=store)
    assert out.returncode == 0, out.stderr
    assert not (store / bad).exists()
    listed = json.loads(run_cli("list", "--json", store=store).stdout)
    assert "hand fixed" in [e["text"] for e in listed]
    verify = run_cli("verify", store=store)
    assert verify.returncode == 0, verify.stdout
    assert_clean_repo(store)

    # the adopt commit tampered: the row naming the old file taken out of it
    message = git(store, "log", "-1", "--format=%B")
    git(store, "commit", "-q", "--amend", "-m", _without_row(message, "moved "))
    verify = run_cli("verify", store=store)
    assert verify.returncode == 1
    assert f"{bad} changed without an audit row naming it" in verify.stdout


def test_a_bare_text_file_committed_with_git_is_adopted_as_it_is(tmp_path: Path) -> None:
    """A note written as bare text and committed with git itself, never adopted, stops the
    memory; `filemem adopt PATH`, as the error offers, takes it as it is (an id and
    front-matter, `<id>.md`), with no edit first, and verify passes. (A file that cannot be
    read as it is, like bad YAML, still needs its fix first: the test above.)"""
    store = _store(tmp_path)
    bad = f"{SHARED}/tabs.md"
    (store / bad).write_text("I prefer tabs\n", "utf-8")
    sha = _person_commit(store, "my note")
    refused = run_cli("list", store=store)
    assert refused.returncode == 1 and "STORE_CORRUPT" in refused.stderr
    printed = f"filemem adopt {store / bad} --store {store}"  # the store named: not default
    assert f"(or `{printed}`, which records it as your edit)" in refused.stderr
    out = run_cli("adopt", "--yes", store=store)  # no PATH, nothing changed: named
    assert out.returncode == 0, out.stderr
    assert f"Adoptable as committed: `filemem adopt {bad} --store {store}`." in out.stdout
    [c] = json.loads(run_cli("status", "--json", store=store).stdout)
    assert (c["path"], c["kind"], c["adoptable"]) == (bad, "invalid", True)
    assert c["entry"]["text"] == "I prefer tabs"
    assert "adoptable as committed" in run_cli("status", store=store).stdout
    out = run_cli("discard", "--yes", bad, store=store)  # nothing to put back: the way on
    assert out.returncode == 1
    assert f"`{printed}` takes it as it is" in out.stderr
    assert f"`git -C {store} revert {sha[:10]}`" in out.stderr

    n = _commits(store)
    out = subprocess.run([sys.executable, "-m", "filemem.cli", *shlex.split(printed)[1:],
                          "--yes"], capture_output=True, text=True, cwd=tmp_path,
                         stdin=subprocess.DEVNULL)  # as printed, from another folder
    assert out.returncode == 0, out.stderr
    assert "Adopted 1 change in one commit." in out.stdout
    assert _commits(store) == n + 1
    [tabs] = [e for e in json.loads(run_cli("list", "--json", store=store).stdout)
              if e["text"] == "I prefer tabs"]
    assert tabs["source"] == "hand-edit"
    assert not (store / bad).exists() and (store / SHARED / f"{tabs['id']}.md").is_file()
    verify = run_cli("verify", store=store)
    assert verify.returncode == 0, verify.stdout
    assert "1 made outside filemem" in verify.stdout
    assert_clean_repo(store)


@pytest.mark.parametrize("kind", ["wrong-folder", "duplicate-id", "copy-in-wrong-folder"])
def test_a_misplaced_or_copied_entry_file_deleted_and_adopted_verifies(
        tmp_path: Path, kind: str) -> None:
    """The file that is not where its audited entry is (moved to a wrong folder with git, or
    a copy of the entry in another agent's folder) deleted by hand and `filemem adopt`ed:
    the store serves again, and verify passes, since the commit's row names the file and no
    audited entry's file changed without one (the entry itself stays where it is, if it is
    there)."""
    store, bad, _sha, _way = _broken(tmp_path, kind)
    assert run_cli("list", store=store).returncode == 1
    (store / bad).unlink()
    out = run_cli("adopt", "--yes", store=store)
    assert out.returncode == 0, out.stderr
    texts = [e["text"] for e in json.loads(run_cli("list", "--json", store=store).stdout)]
    assert ("likes tea" in texts) == (kind != "wrong-folder")  # a copy's entry stays
    verify = run_cli("verify", store=store)
    assert verify.returncode == 0, verify.stdout
    assert_clean_repo(store)


def test_a_committed_non_entry_file_is_not_a_hand_edit_to_discard(tmp_path: Path) -> None:
    store, bad, _sha, _way = _broken(tmp_path, "not-an-entry")
    coffee = _file(store, "likes coffee")
    original = coffee.read_bytes()
    coffee.write_text(coffee.read_text("utf-8").replace("likes coffee", "likes tea too"),
                      "utf-8")
    listed = {c["path"]: c["kind"] for c in
              json.loads(run_cli("status", "--json", store=store).stdout)}
    assert listed == {bad: "invalid", rel(store, coffee): "edited"}  # committed, not added
    out = run_cli("discard", "--yes", store=store)
    assert out.returncode == 0, out.stderr
    assert (store / bad).read_text("utf-8") == "my own notes\n"  # a committed file is kept
    assert coffee.read_bytes() == original
    assert git(store, "status", "--porcelain") == ""


def test_the_commit_is_found_behind_later_commits_and_through_a_merge(tmp_path: Path) -> None:
    store = _store(tmp_path)
    git(store, "switch", "-q", "-c", "side")
    bad, _way = _bad_yaml(store)
    brought = _person_commit(store, "tea, by hand on a branch")
    git(store, "switch", "-q", "main")
    readme = store / "README.md"
    readme.write_text(readme.read_text("utf-8") + "\nmine\n", "utf-8")
    _person_commit(store, "a note in the README")
    git(store, "merge", "-q", "--no-ff", "side", "-m", "merge side")
    message = run_cli("list", store=store).stderr
    assert f'came in with commit {brought[:10]} "tea, by hand on a branch"' in message
    assert f"`git -C {store} revert {brought[:10]}`" in message

    # a second bad file: the first is named, and how many more; status lists both
    (store / SHARED / "zz-notes.txt").write_text("x\n", "utf-8")
    _person_commit(store, "notes")
    message = run_cli("list", store=store).stderr
    assert "(1 more invalid file: `filemem status` lists them)" in message
    status = run_cli("status", "--json", store=store)
    assert [c["path"] for c in json.loads(status.stdout)] == [bad, f"{SHARED}/zz-notes.txt"]


def test_a_merge_that_made_the_file_is_named_and_not_offered_for_revert(
        tmp_path: Path) -> None:
    store = _store(tmp_path)
    git(store, "switch", "-q", "-c", "side")
    readme = store / "README.md"
    readme.write_text(readme.read_text("utf-8") + "\nside\n", "utf-8")
    _person_commit(store, "side work")
    git(store, "switch", "-q", "main")
    git(store, "merge", "-q", "--no-ff", "--no-commit", "side")
    _bad, way = _bad_yaml(store)  # the merge's own change
    merge = _person_commit(store, "merge side, and a tweak")
    message = run_cli("list", store=store).stderr
    assert f'came in with merge commit {merge[:10]} "merge side, and a tweak"' in message
    assert " revert " not in message and way in message


def test_history_is_walked_only_for_an_error_and_once_per_head(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from filemem.store import invalid as invalid_mod

    walks: list[str] = []
    real = invalid_mod.introduced

    def counted(git_repo: Any, at: str, path: str) -> Any:
        walks.append(path)
        return real(git_repo, at, path)

    monkeypatch.setattr(invalid_mod, "introduced", counted)
    store = _store(tmp_path)
    with filemem.open_store(store, write_policy="auto") as provider:
        provider.list_entries()
        provider.query({"text": "tea"})
        assert walks == []  # a healthy store never walks history
        _bad_yaml(store)
        _person_commit(store, "break it")
        for _ in range(3):
            with pytest.raises(filemem.ProtocolError):
                provider.list_entries()
        assert len(walks) == 1  # remembered while HEAD stays
        (store / "README.md").write_text("moved on\n", "utf-8")
        _person_commit(store, "HEAD moves")
        with pytest.raises(filemem.ProtocolError) as caught:
            provider.budgets()
        assert len(walks) == 2 and '"break it"' in caught.value.message


# ---------------------------------------------------------------- MCP and the bridge


@pytest.mark.parametrize("mode", MODES)
def test_mcp_tools_report_the_file_the_commit_and_the_way_out(tmp_path: Path,
                                                              mode: str) -> None:
    store, bad, sha, _way = _broken(tmp_path, "bad-yaml")
    person = Person()  # nobody may be asked: the store cannot take a write

    async def scenario() -> list[Any]:
        async with served(store, mode, person=person) as c:
            query = await c.call_tool("memory_query", {"text": "coffee"})
            add = await c.call_tool("memory_add", {"scope": "user-global", "text": "more"})
            git(store, "revert", "--no-edit", sha)  # the owner follows the way out
            after = await c.call_tool("memory_query", {"text": "coffee"})
            return [query, add, after]

    query, add, after = anyio.run(scenario)
    for result in (query, add):
        error = err(result)
        assert error["code"] == "STORE_CORRUPT"
        assert error["details"]["file"] == bad and error["details"]["commit"] == sha
        assert f'came in with commit {sha[:10]} "my hand edit (bad-yaml)"' in error["message"]
        assert f"`git -C {store} revert {sha[:10]}`" in error["message"]
        assert "give them this message" in error["hint"] and "do not retry" in error["hint"]
    assert person.messages == []
    assert [e["text"] for e in ok(after)["entries"]] == ["likes coffee"]


def test_the_bridge_answers_each_request_with_the_error_and_serves_the_mended_store(
        tmp_path: Path) -> None:
    store, bad, sha, _way = _broken(tmp_path, "wrong-name")
    exe = shutil.which("filemem", path=os.path.dirname(sys.executable))
    command = [exe] if exe else [sys.executable, "-m", "filemem.cli"]
    proc = subprocess.Popen([*command, "bridge", "--store", str(store), "--approval", "auto"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None

    def call(rid: int, method: str) -> dict[str, Any]:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                     "params": {}}).encode() + b"\n")
        proc.stdin.flush()
        answer: dict[str, Any] = json.loads(proc.stdout.readline())
        assert answer["id"] == rid
        return answer

    try:
        refused = call(1, "listEntries")
        budgets = call(2, "budgets")
        git(store, "revert", "--no-edit", sha)
        served_now = call(3, "listEntries")
    finally:
        proc.stdin.close()
        code = proc.wait(timeout=60)
        stderr = proc.stderr.read().decode() if proc.stderr else ""
    for answer in (refused, budgets):
        error = answer["error"]
        assert error["code"] == -32000 and error["data"]["code"] == "STORE_CORRUPT"
        assert error["data"]["details"]["file"] == bad
        assert error["data"]["details"]["commit"] == sha
        assert f'came in with commit {sha[:10]} "my hand edit (wrong-name)"' in error["message"]
        assert f"`git -C {store} mv {bad} " in error["message"]
    assert sorted(e["text"] for e in served_now["result"]) == ["likes coffee", "likes tea"]
    assert code == 0 and "Traceback" not in stderr


def test_sync_refuses_to_spread_a_bad_file_to_other_machines(tmp_path: Path) -> None:
    store = _store(tmp_path)
    remote = tmp_path / "remote.git"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    assert run_cli("remote", "add", "origin", str(remote), store=store).returncode == 0
    assert run_cli("sync", store=store).returncode == 0
    pushed = git(remote, "rev-parse", "main").strip()
    bad, _way = _not_an_entry(store)
    sha = _person_commit(store, "my notes")
    out = run_cli("sync", store=store)
    assert out.returncode == 1 and out.stderr.startswith("filemem: STORE_CORRUPT: ")
    assert bad in out.stderr and f"revert {sha[:10]}" in out.stderr
    assert git(remote, "rev-parse", "main").strip() == pushed  # nothing went out
