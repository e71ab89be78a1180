"""git's own commands in a store (issue 11, point 2), with the real git CLI.

(a) After `filemem clone` and `filemem remote add`, a plain `git pull` and `git push` work:
the branch tracks the remote `filemem sync` uses, a pull merges (no "divergent branches"
stop, no rebase of the audit commits), and filemem's sync and git's push/pull agree on the
remote-tracking ref. (b) A store in the middle of a git merge, rebase, cherry-pick, revert,
`git am` or bisect refuses every write (CLI, MCP, bridge, the owner's commands) before
anyone is asked, `filemem status` says why in memory terms, reads go on, and filemem never
commits on top of the unfinished operation.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.owner import Owner, clone
from tests.conftest import GIT, run_cli, write_in_flight

UG = {"track": "user", "scope": "user-global"}
UG_ARGS = ["--track", "user", "--scope", "user-global"]

pytestmark = pytest.mark.skipif(GIT is None, reason="git CLI not installed")


def g(path: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The git CLI in ``path`` as a person runs it, without their global or system config
    (so a `pull.rebase` of the machine's owner cannot decide what these tests see)."""
    assert GIT is not None
    env = {**os.environ, "GIT_AUTHOR_NAME": "Test Person", "GIT_AUTHOR_EMAIL": "p@example.org",
           "GIT_COMMITTER_NAME": "Test Person", "GIT_COMMITTER_EMAIL": "p@example.org",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1", "GIT_EDITOR": "true",
           "GIT_MERGE_AUTOEDIT": "no"}
    out = subprocess.run([GIT, "-C", str(path), *args], capture_output=True, text=True,
                         env=env)
    if check and out.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed ({out.returncode}):\n"
                             f"{out.stdout}\n{out.stderr}")
    return out


def head(path: Path, ref: str = "HEAD") -> str:
    return g(path, "rev-parse", ref).stdout.strip()


def add(store: Path, text: str) -> dict[str, Any]:
    with filemem.open_store(store, write_policy="auto") as p:
        return dict(p.add({**UG, "text": text},
                          filemem.write_context(session_id="s", cwd=str(store.parent)))["entry"])


def replace(store: Path, match: str, text: str) -> None:
    with filemem.open_store(store, write_policy="auto") as p:
        p.replace({**UG, "match": match, "text": text},
                  filemem.write_context(session_id="s", cwd=str(store.parent)))


def texts(store: Path) -> list[str]:
    with filemem.open_store(store) as p:
        return sorted(e["text"] for e in p.list_entries())


def published(tmp_path: Path) -> tuple[Path, Path]:
    """A bare remote and a store `a` published there with `filemem remote add` + `sync`."""
    remote = tmp_path / "remote.git"
    g(tmp_path, "init", "-q", "--bare", "-b", "main", str(remote))
    a = tmp_path / "a"
    filemem.init_store(a).close()
    add(a, "Prefers English")
    out = run_cli("remote", "add", "origin", str(remote), store=a)
    assert out.returncode == 0, out.stderr
    assert run_cli("sync", store=a).returncode == 0
    return remote, a


# ---------------------------------------------------------------- (a) git pull / git push


def test_clone_and_remote_add_set_up_git_pull_and_push(tmp_path: Path) -> None:
    remote, a = published(tmp_path)
    for key, value in (("branch.main.remote", "origin"), ("branch.main.merge",
                                                           "refs/heads/main"),
                       ("pull.rebase", "false")):
        assert g(a, "config", key).stdout.strip() == value
    b = Path(clone(str(remote), str(tmp_path / "b")))
    assert g(b, "config", "branch.main.remote").stdout.strip() == "origin"
    assert "Your branch is up to date with 'origin/main'" in g(b, "status").stdout
    assert head(b, "origin/HEAD") == head(b)  # `git log origin` works, as after `git clone`

    # a fast-forward both ways with git alone
    add(a, "Uses fish")
    push = g(a, "push")
    assert head(remote, "main") == head(a) == head(a, "origin/main"), push.stderr
    assert g(b, "pull").returncode == 0
    assert head(b) == head(a)
    assert texts(b) == ["Prefers English", "Uses fish"]

    # diverged: a plain `git pull` merges (no "divergent branches" stop), `git push` sends it
    add(b, "Works on the api repo")
    add(a, "Runs tests with make test")
    g(b, "push")
    pull = g(a, "pull")
    assert "divergent" not in pull.stderr + pull.stdout
    assert len(g(a, "log", "-1", "--format=%P").stdout.split()) == 2  # a merge commit
    assert texts(a) == ["Prefers English", "Runs tests with make test", "Uses fish",
                        "Works on the api repo"]
    g(a, "push")
    assert head(remote, "main") == head(a)
    assert g(a, "status", "--porcelain").stdout == ""
    # filemem agrees with what git did: nothing to sync, the tracking ref where git left it
    out = run_cli("sync", "--json", store=a)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["upToDate"] is True
    assert head(a, "origin/main") == head(remote, "main")
    assert run_cli("verify", store=a).returncode == 0  # git's merge: made outside filemem


def test_filemem_sync_keeps_the_tracking_ref_git_reads(tmp_path: Path) -> None:
    remote, a = published(tmp_path)
    b = Path(clone(str(remote), str(tmp_path / "b")))
    add(b, "from b")
    assert run_cli("sync", store=b).returncode == 0
    assert head(b, "origin/main") == head(remote, "main") == head(b)
    assert "Your branch is up to date with 'origin/main'" in g(b, "status").stdout
    add(a, "from a")
    assert run_cli("sync", store=a).returncode == 0  # fetch, merge, push
    assert head(a, "origin/main") == head(remote, "main") == head(a)
    assert "Your branch is up to date with 'origin/main'" in g(a, "status").stdout
    g(b, "fetch")  # git's own fetch and filemem's agree: b is behind by what a pushed
    assert "Your branch is behind 'origin/main'" in g(b, "status").stdout
    assert g(b, "pull").returncode == 0 and head(b) == head(a)


def test_the_upstream_follows_the_remote_sync_would_use(tmp_path: Path) -> None:
    _remote, a = published(tmp_path)
    other = tmp_path / "other.git"
    g(tmp_path, "init", "-q", "--bare", "-b", "main", str(other))
    assert run_cli("remote", "add", "backup", str(other), store=a).returncode == 0
    assert g(a, "config", "branch.main.remote").stdout.strip() == "origin"  # kept
    assert run_cli("remote", "remove", "origin", store=a).returncode == 0
    # as `git remote remove` does, the upstream goes; the one remote left is sync's default
    assert g(a, "config", "branch.main.remote").stdout.strip() == "backup"
    g(a, "push")
    assert head(other, "main") == head(a)
    assert run_cli("remote", "remove", "backup", store=a).returncode == 0
    assert g(a, "config", "branch.main.remote", check=False).returncode == 1  # unset


def test_a_store_set_up_before_gets_tracking_at_its_next_sync(tmp_path: Path) -> None:
    remote, a = published(tmp_path)
    g(a, "config", "--unset", "branch.main.remote")
    g(a, "config", "--unset", "branch.main.merge")
    g(a, "config", "pull.ff", "only")  # the owner's own choice of how to pull stays
    g(a, "config", "--unset", "pull.rebase")
    assert g(a, "push", check=False).returncode != 0  # no upstream
    assert run_cli("sync", store=a).returncode == 0
    assert g(a, "config", "branch.main.remote").stdout.strip() == "origin"
    assert g(a, "config", "pull.rebase", check=False).returncode == 1
    assert g(a, "config", "pull.ff").stdout.strip() == "only"
    add(a, "after")
    g(a, "push")
    assert head(remote, "main") == head(a)


# ---------------------------------------------------------------- (b) unfinished git operations


def stage(store: Path) -> str:
    """A write staged for the owner's approval (policy ask, nobody to ask): its id."""
    with filemem.open_store(store) as p, pytest.raises(filemem.ProtocolError) as caught:
        p.add({**UG, "text": "staged"}, filemem.write_context(session_id="s", cwd="/w"))
    return str(caught.value.details["pendingId"])


def conflicting_pull(tmp_path: Path, *, staged: bool = False) -> tuple[Path, Path, str, str]:
    """Two machines replaced the same entry; `git pull` on b stops on the conflict. Returns
    (remote, b, the entry's id, the id of a write staged on b before the pull, or "")."""
    remote, a = published(tmp_path)
    b = Path(clone(str(remote), str(tmp_path / "b")))
    replace(a, "English", "Prefers English, tests first")
    assert run_cli("sync", store=a).returncode == 0
    replace(b, "English", "Prefers English, short answers")
    pid = stage(b) if staged else ""
    pull = g(b, "pull", check=False)
    assert pull.returncode == 1 and "CONFLICT" in pull.stdout, pull.stdout + pull.stderr
    assert (b / ".git" / "MERGE_HEAD").exists()
    with filemem.open_store(b) as p:
        (entry,) = [e for e in p.list_entries() if "English" in e["text"]]
    return remote, b, entry["id"], pid


def assert_refused(out: subprocess.CompletedProcess[str], operation: str = "merge") -> None:
    from filemem.cli.common import EXIT_GIT_IN_PROGRESS

    assert out.returncode == EXIT_GIT_IN_PROGRESS, (out.returncode, out.stdout, out.stderr)
    assert out.stderr.startswith(f"filemem: GIT_OPERATION_IN_PROGRESS: a git {operation} is "
                                 "in progress"), out.stderr
    assert "Traceback" not in out.stderr
    assert "Approve this write" not in out.stderr + out.stdout


def test_a_conflicted_git_pull_refuses_every_cli_write_before_asking(tmp_path: Path) -> None:
    _remote, b, eid, pid = conflicting_pull(tmp_path, staged=True)
    before = head(b)

    out = run_cli("add", *UG_ARGS, "no terminal, no --yes", store=b)
    assert_refused(out)
    conflicted = f"user/user-global/_shared/{eid}.md"
    for words in ("(.git/MERGE_HEAD", conflicted, "git commit", "`git merge --abort`",
                  "`filemem sync`", "nothing was written"):
        assert words in out.stderr, (words, out.stderr)
    for args in (["add", "--yes", *UG_ARGS, "with --yes"],
                 ["replace", "--yes", *UG_ARGS, "Uses", "x"],
                 ["remove", "--yes", *UG_ARGS, "English"],
                 ["adopt", "--yes"], ["discard", "--yes"], ["sync"],
                 ["approve", pid], ["reject", pid]):
        assert_refused(run_cli(*args, store=b))
    # nothing was committed, staged or resolved: git's merge is as git left it
    assert head(b) == before
    assert (b / ".git" / "MERGE_HEAD").exists()
    assert g(b, "diff", "--name-only", "--diff-filter=U").stdout.split() == [conflicted]
    assert "<<<<<<<" in (b / conflicted).read_text()
    with filemem.open_store(b) as p:
        owner = Owner(p)
        assert [r["id"] for r in owner.pending()] == [pid]  # still waiting, as it was

    # reads answer, from the branch as last committed
    for args in (["list"], ["query", "English"], ["budgets"], ["snapshot"], ["log"],
                 ["verify"], ["pending"]):
        out = run_cli(*args, store=b)
        assert out.returncode == 0, (args, out.stderr)
    assert "Prefers English, short answers" in run_cli("list", store=b).stdout

    # status says it in memory terms, not "the front-matter is not valid YAML"
    out = run_cli("status", store=b)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("A git merge is in progress in this store (.git/MERGE_HEAD)")
    assert f"entry {eid[:8]} (user/user-global, \"Prefers English, short answers\") has " \
           f"conflict markers: {conflicted}" in out.stdout
    assert "`git merge --abort`" in out.stdout and "git commit" in out.stdout
    assert "YAML" not in out.stdout
    out = run_cli("status", "--json", store=b)
    (change,) = json.loads(out.stdout)
    assert change["conflict"] is True and change["adoptable"] is False
    assert "YAML" not in change["problem"]
    assert "A git merge is in progress" in out.stderr

    # the way out: abort, then filemem merges entry by entry; then everything works
    g(b, "merge", "--abort")
    assert run_cli("verify", store=b).returncode == 0
    out = run_cli("status", store=b)
    assert "git merge" not in out.stdout
    out = run_cli("sync", store=b)
    assert out.returncode == 0, out.stderr
    assert run_cli("approve", pid, store=b).returncode == 0
    assert run_cli("add", "--yes", *UG_ARGS, "after the merge", store=b).returncode == 0
    assert g(b, "status", "--porcelain").stdout == ""
    assert "Prefers English, tests first" in texts(b)  # nothing lost


def test_resolving_and_committing_the_merge_with_git_then_everything_works(
        tmp_path: Path) -> None:
    remote, b, eid, _pid = conflicting_pull(tmp_path)
    conflicted = f"user/user-global/_shared/{eid}.md"
    g(b, "checkout", "--theirs", "--", conflicted)  # keep the other machine's version
    g(b, "add", conflicted)
    out = run_cli("status", store=b)  # resolved but not committed: still git's merge
    assert out.stdout.startswith("A git merge is in progress"), out.stdout
    assert "has conflict markers" not in out.stdout
    assert "part of the unfinished git merge, which commits it" in out.stdout
    assert_refused(run_cli("add", "--yes", *UG_ARGS, "not yet", store=b))
    g(b, "commit", "--no-edit")
    assert run_cli("status", store=b).stdout.startswith("Nothing to adopt")
    assert run_cli("add", "--yes", *UG_ARGS, "after the merge", store=b).returncode == 0
    out = run_cli("verify", store=b)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "made outside filemem" in out.stdout or "outside filemem" in out.stdout
    g(b, "push")
    assert head(remote, "main") == head(b)
    assert "Prefers English, tests first" in texts(b)


def test_mcp_and_bridge_writes_are_refused_without_a_prompt(tmp_path: Path) -> None:
    import anyio

    from tests.test_bridge import BridgeProc
    from tests.test_mcp import MODES, Person, err, ok, served

    _remote, b, _eid, _pid = conflicting_pull(tmp_path)
    before = head(b)

    async def scenario(mode: str) -> None:
        person = Person()  # answers nothing: a prompt would fail the test
        async with served(b, mode, person=person) as client:
            error = err(await client.call_tool("memory_add", {"text": "from the agent",
                                                               "scope": "user-global"}))
            assert error["code"] == "GIT_OPERATION_IN_PROGRESS"
            assert error["details"]["operation"] == "merge"
            assert "git merge --abort" in error["message"]
            assert "do not retry" in error["hint"]
            error = err(await client.call_tool("memory_remove", {"match": "English",
                                                                  "scope": "user-global"}))
            assert error["code"] == "GIT_OPERATION_IN_PROGRESS"
            found = ok(await client.call_tool("memory_query", {"text": "English"}))
            assert found["total"] == 1
        assert person.messages == []

    for mode in MODES:
        anyio.run(scenario, mode)

    bridge = BridgeProc(b)  # --approval host: a prompt would come as approval/request
    try:
        error = bridge.error("add", {"input": {**UG, "text": "from the host"},
                                     "write": filemem.write_context(session_id="h",
                                                                    cwd="/w")})
        assert error["code"] == -32001
        assert error["data"]["code"] == "GIT_OPERATION_IN_PROGRESS"
        assert error["data"]["details"]["operation"] == "merge"
        assert bridge.approvals == []
        assert len(bridge.result("listEntries")) == 1
        assert bridge.finish() == 0
    finally:
        bridge.kill()
    assert head(b) == before and (b / ".git" / "MERGE_HEAD").exists()


class Asked:
    """A gate that records being asked (and may do something while the person reads)."""

    def __init__(self, answer: str = "allowed-once", meanwhile: Any = None) -> None:
        self.answer, self.meanwhile, self.requests = answer, meanwhile, []  # type: ignore[var-annotated]

    def __call__(self, request: Any) -> str:
        self.requests.append(request)
        if self.meanwhile is not None:
            self.meanwhile()
        return self.answer


def store_with_branches(tmp_path: Path) -> tuple[Path, str]:
    """A store whose main and branch `side` changed the same entry differently (git
    commits on side, a filemem replace on main), and a branch `readme` that changes only
    README.md. Returns (store, the entry file's path)."""
    s = tmp_path / "store"
    filemem.init_store(s).close()
    eid = add(s, "first version")["id"]
    rel = f"user/user-global/_shared/{eid}.md"
    g(s, "checkout", "-q", "-b", "side")
    data = (s / rel).read_bytes()
    assert data.rstrip(b"\n").endswith(b"first version")
    (s / rel).write_bytes(data.replace(b"first version", b"side version"))
    g(s, "commit", "-q", "-am", "side edit")
    g(s, "checkout", "-q", "-b", "readme", "main")
    with open(s / "README.md", "a") as f:
        f.write("\nA line from the readme branch.\n")
    g(s, "commit", "-q", "-am", "readme edit")
    g(s, "checkout", "-q", "main")
    replace(s, "first version", "main version")
    return s, rel


def _patch(s: Path) -> None:
    patch = s.parent / "side.patch"
    patch.write_text(g(s, "format-patch", "-1", "side", "--stdout").stdout)
    g(s, "am", "-3", str(patch), check=False)


def _cherry_picks_between_two(s: Path) -> None:
    g(s, "cherry-pick", "side", "readme", check=False)  # stops on side's conflict
    rel = g(s, "diff", "--name-only", "--diff-filter=U").stdout.split()[0]
    g(s, "checkout", "--theirs", "--", rel)
    g(s, "add", rel)
    g(s, "commit", "-q", "--no-edit")  # one pick done, the next still to go


# name: (start it, what shows it, its kind, how to undo it)
OPERATIONS: dict[str, tuple[Any, str, str, list[str]]] = {
    "merge": (lambda s: g(s, "merge", "side", check=False), "MERGE_HEAD", "merge",
              ["merge", "--abort"]),
    "merge --no-commit": (lambda s: g(s, "merge", "--no-commit", "--no-ff", "readme"),
                          "MERGE_HEAD", "merge", ["merge", "--abort"]),
    "rebase": (lambda s: g(s, "rebase", "side", check=False), "rebase-merge", "rebase",
               ["rebase", "--abort"]),
    "rebase --apply": (lambda s: g(s, "rebase", "--apply", "side", check=False),
                       "rebase-apply", "rebase", ["rebase", "--abort"]),
    "am": (_patch, "rebase-apply", "am", ["am", "--abort"]),
    "cherry-pick": (lambda s: g(s, "cherry-pick", "side", check=False), "CHERRY_PICK_HEAD",
                    "cherry-pick", ["cherry-pick", "--abort"]),
    "cherry-pick of two, between them": (_cherry_picks_between_two, "sequencer",
                                         "cherry-pick", ["cherry-pick", "--abort"]),
    "revert": (lambda s: g(s, "revert", "--no-edit", "HEAD~1", check=False), "REVERT_HEAD",
               "revert", ["revert", "--abort"]),
    "bisect": (lambda s: g(s, "bisect", "start", "HEAD", "HEAD~2"), "BISECT_START",
               "bisect", ["bisect", "reset"]),
}


@pytest.mark.parametrize("name", list(OPERATIONS))
def test_every_unfinished_git_operation_refuses_writes_and_serves_reads(
        tmp_path: Path, name: str) -> None:
    start, marker, kind, undo = OPERATIONS[name]
    s, _rel = store_with_branches(tmp_path)
    branch = head(s, "refs/heads/main")
    start(s)
    assert (s / ".git" / marker).exists(), g(s, "status").stdout
    moved = head(s, "refs/heads/main")  # `git am`/a pick may have committed some already
    asked = Asked()
    with filemem.open_store(s, gate=asked) as p:
        listed = [e["text"] for e in p.list_entries()]
        assert "main version" in listed or kind in ("am", "cherry-pick", "revert")
        assert p.query({"text": "version"})["total"] >= 1
        for write in (lambda: p.add({**UG, "text": "new"}, filemem.write_context(
                          session_id="s", cwd="/w")),
                      lambda: p.remove({**UG, "match": "version"}, filemem.write_context(
                          session_id="s", cwd="/w"))):
            with pytest.raises(filemem.GitOperationInProgress) as caught:
                write()
            assert caught.value.details["operation"] == kind
            assert caught.value.details["marker"] == f".git/{marker}"
            assert f"a git {kind} is in progress" in caught.value.message
        with pytest.raises(filemem.GitOperationInProgress):
            Owner(p).adopt()
        with pytest.raises(filemem.GitOperationInProgress):
            Owner(p).discard()
        found = Owner(p).git_operation()
        assert found is not None and found.op.kind == kind
    assert asked.requests == []  # nobody was asked
    assert head(s, "refs/heads/main") == moved
    assert (s / ".git" / marker).exists()  # git's operation is as git left it
    g(s, *undo)
    assert not (s / ".git" / marker).exists()
    # git puts the branch back (a pick committed by hand before the abort stays)
    assert head(s, "refs/heads/main") in (branch, moved)
    with filemem.open_store(s, gate=asked) as p:
        assert Owner(p).git_operation() is None
        p.add({**UG, "text": "after"}, filemem.write_context(session_id="s", cwd="/w"))
    assert len(asked.requests) == 1
    assert g(s, "status", "--porcelain").stdout == ""


def test_a_merge_begun_while_the_person_decides_is_never_committed_on(
        tmp_path: Path) -> None:
    s, _rel = store_with_branches(tmp_path)
    before = head(s)

    def git_merge() -> None:  # the owner runs `git merge` while the prompt is open
        g(s, "merge", "--no-commit", "--no-ff", "readme")

    with filemem.open_store(s, gate=Asked("allowed-once", git_merge)) as p:
        with pytest.raises(filemem.GitOperationInProgress) as caught:
            p.add({**UG, "text": "approved, then git merged"},
                  filemem.write_context(session_id="s", cwd="/w"))
        assert caught.value.details["operation"] == "merge"
    assert head(s) == before  # the commit primitive refused under the branch's lock
    assert not write_in_flight(s)
    assert "A line from the readme branch" in g(s, "diff", "--cached").stdout  # git's merge
    g(s, "merge", "--abort")

    # a refusal while git merges: its audit row is kept in the ledger, not committed
    with filemem.open_store(s, gate=Asked("rejected", git_merge)) as p:
        with pytest.raises(filemem.ProtocolError) as denied:
            p.add({**UG, "text": "declined"}, filemem.write_context(session_id="s", cwd="/w"))
        assert denied.value.details["outcome"] == "rejected"
        row = p.audit_list(1)[0]
        assert (row["action"], row["text"]) == ("add-denied", "declined")
    assert head(s) == before
    g(s, "merge", "--abort")
    assert g(s, "status", "--porcelain").stdout == ""


def test_a_merge_begun_after_this_processs_write_is_refused_before_anyone_is_asked(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After a write, the check before the next one is a stat of .git while nothing was
    added to it; a merge that leaves MERGE_HEAD adds a name: refused before asking. Were
    it made within the same clock tick (the stat unchanged), the compare-and-swap's own
    look refuses it, after the approval, and nothing is committed."""
    from filemem.files import gitstate

    s, _rel = store_with_branches(tmp_path)
    asked = Asked()
    looked: list[str] = []
    real = gitstate.unfinished

    def counted(git_dir: str) -> Any:
        looked.append(git_dir)
        return real(git_dir)

    monkeypatch.setattr(gitstate, "unfinished", counted)
    ws = filemem.write_context(session_id="s", cwd="/w")
    with filemem.open_store(s, gate=asked) as p:
        p.add({**UG, "text": "one"}, ws)
        looked.clear()
        p.add({**UG, "text": "two"}, ws)
        assert len(looked) == 1  # under the branch's lock only: before, one stat
        g(s, "merge", "--no-commit", "--no-ff", "readme")
        assert (s / ".git" / "MERGE_HEAD").exists()
        with pytest.raises(filemem.GitOperationInProgress):
            p.add({**UG, "text": "during the merge"}, ws)
        assert len(asked.requests) == 2  # the third write was not asked about
        before = head(s)
        git_dir = str(s / ".git")
        gitstate._quiet[git_dir] = gitstate._identity(git_dir)  # as if in one tick
        with pytest.raises(filemem.GitOperationInProgress):
            p.add({**UG, "text": "during the merge, in the same tick"}, ws)
        assert len(asked.requests) == 3 and head(s) == before


# ---------------------------------------------------------------- the ways out, followed


def conflicting_pull_rebase(tmp_path: Path) -> tuple[Path, str]:
    """Two machines replaced the same entry (b later); `git pull --rebase` on b stops on
    the conflict. Returns (b, the entry's id)."""
    remote, a = published(tmp_path)
    b = Path(clone(str(remote), str(tmp_path / "b")))
    replace(a, "English", "Prefers English, tests first")
    assert run_cli("sync", store=a).returncode == 0
    replace(b, "English", "Prefers English, short answers")
    pull = g(b, "pull", "--rebase", check=False)
    assert pull.returncode != 0 and "CONFLICT" in pull.stdout + pull.stderr, pull.stderr
    assert (b / ".git" / "rebase-merge").exists()
    with filemem.open_store(b) as p:
        (entry,) = [e for e in p.list_entries() if "English" in e["text"]]
    return b, entry["id"]


def test_a_conflicted_pull_rebase_leads_with_abort_then_sync(tmp_path: Path) -> None:
    b, eid = conflicting_pull_rebase(tmp_path)
    way = "Undo it: `git rebase --abort`, then, if it came from `git pull --rebase`, " \
          "`filemem sync`"
    out = run_cli("status", store=b)
    assert out.returncode == 0 and way in out.stdout, out.stdout
    told = out.stdout[out.stdout.index(way):]
    assert told.index("`filemem sync`") < told.index("`git rebase --continue`")
    assert "rewrites filemem's commits, and `filemem verify` reports" in told
    refused = run_cli("add", "--yes", *UG_ARGS, "during the rebase", store=b)
    assert_refused(refused, "rebase")
    assert f"nothing was written. {way}" in refused.stderr

    # followed: abort, sync; the later text keeps the id, the other is a new entry
    g(b, "rebase", "--abort")
    out = run_cli("sync", store=b)
    assert out.returncode == 0 and "conflict:" in out.stdout, out.stdout + out.stderr
    out = run_cli("verify", store=b)
    assert out.returncode == 0 and "OK:" in out.stdout, out.stdout
    with filemem.open_store(b) as p:
        english = {e["text"]: e["id"] for e in p.list_entries() if "English" in e["text"]}
    assert english.keys() == {"Prefers English, tests first", "Prefers English, short answers"}
    assert english["Prefers English, short answers"] == eid  # updated later
    assert english["Prefers English, tests first"] != eid


def test_verify_after_a_continued_rebase_names_what_puts_history_and_head_in_step(
        tmp_path: Path) -> None:
    b, eid = conflicting_pull_rebase(tmp_path)
    conflicted = f"user/user-global/_shared/{eid}.md"
    g(b, "checkout", "--ours", "--", conflicted)  # no markers, but git has it unmerged
    (change,) = json.loads(run_cli("status", "--json", store=b).stdout)
    assert change["problem"].startswith("git still marks it as unresolved in the "
                                        "unfinished git rebase"), change
    g(b, "checkout", "--theirs", "--", conflicted)  # b's own commit, as rebased
    g(b, "add", conflicted)
    g(b, "rebase", "--continue")
    rewritten = head(b)

    def problems() -> list[str]:
        out = run_cli("verify", "--json", store=b)
        return [x["problem"] for x in json.loads(out.stdout)["problems"]]

    def at_head(found: list[str]) -> list[str]:
        return [x for x in found if x.startswith("replaying history does not give")]

    (gap,) = at_head(problems())
    assert f"{eid} is version 2 at HEAD but version 3 in the audited history" in gap
    assert "`filemem adopt`" in gap and "only its `version:` line" in gap
    assert "to keep it, write the text you want with `filemem replace`" not in gap
    replace(b, "English", "Prefers English, short answers")  # does not mend it, as told
    (gap,) = at_head(problems())
    assert "version 3 at HEAD but version 4" in gap
    path = b / conflicted  # the advice followed: only the version line, then adopt
    data = path.read_text()
    path.write_text(data.replace("version: 3\n", "version: 4\n"))
    assert run_cli("adopt", "--yes", store=b).returncode == 0
    found = problems()
    assert at_head(found) == []
    (left,) = found  # the rewritten commit stays reported, as the record of it
    assert left.startswith(f"replace row for {eid}") and rewritten[:12] in left


def test_a_git_stash_pop_conflict_resolved_by_hand_is_adopted(tmp_path: Path) -> None:
    s = tmp_path / "store"
    filemem.init_store(s).close()
    eid = add(s, "one")["id"]
    rel = f"user/user-global/_shared/{eid}.md"
    path = s / rel
    path.write_text(path.read_text().replace("\none\n", "\nhand\n"))
    g(s, "stash")
    replace(s, "one", "one v4")
    assert g(s, "stash", "pop", check=False).returncode != 0
    assert g(s, "diff", "--name-only", "--diff-filter=U").stdout.split() == [rel]
    markers = "it has git conflict markers (<<<<<<< ... >>>>>>>): keep the text you " \
              "want, delete those lines, then adopt it"
    out = run_cli("adopt", "--yes", store=s)  # markers in it: never committed
    assert out.returncode == 1 and markers in out.stderr, out.stderr
    before = head(s)

    # the person deletes the three lines; git's index still lists the file as unmerged
    kept = [line for line in path.read_text().splitlines(keepends=True)
            if not line.startswith(("<<<<<<< ", "=======", ">>>>>>> "))]
    path.write_text("".join(kept))
    assert g(s, "diff", "--name-only", "--diff-filter=U").stdout.split() == [rel]
    out = run_cli("status", "--json", store=s)
    (change,) = json.loads(out.stdout)
    assert change["adoptable"] is True and change["conflict"] is True, change
    out = run_cli("adopt", "--yes", store=s)
    assert out.returncode == 0, out.stderr
    assert head(s, "HEAD~1") == before
    assert texts(s) == ["one v4\nhand"]
    assert g(s, "status", "--porcelain").stdout == ""  # git's conflict is resolved too
    assert run_cli("verify", store=s).returncode == 0


def test_a_git_stash_pop_conflict_is_discarded(tmp_path: Path) -> None:
    s = tmp_path / "store"
    filemem.init_store(s).close()
    eid = add(s, "one")["id"]
    path = s / f"user/user-global/_shared/{eid}.md"
    path.write_text(path.read_text().replace("\none\n", "\nhand\n"))
    g(s, "stash")
    replace(s, "one", "one v4")
    assert g(s, "stash", "pop", check=False).returncode != 0
    out = run_cli("discard", "--yes", store=s)
    assert out.returncode == 0, out.stderr
    assert texts(s) == ["one v4"] and g(s, "status", "--porcelain").stdout == ""
