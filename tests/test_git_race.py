"""A person's own git beside an agent's writes: git's `index.lock` is held from before the
branch moves until the index matches, so a `git commit -a` can never commit a tree that
lacks an entry filemem has already committed; and `filemem verify` notices an outside
commit that drops audited entries."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import filemem
from tests.conftest import assert_clean_repo, ctx, git, run_cli

UG = {"track": "user", "scope": "user-global"}

# A writer that stops right after its commit moved the branch, before the working tree and
# the index are updated, until the test lets it go on.
PAUSED_WRITER = """
import os, sys, time
import filemem
import filemem.store.transaction as T
store, marker, go = sys.argv[1], sys.argv[2], sys.argv[3]
real = T.Transaction._mirror
def paused(self, *args, **kwargs):
    open(marker, "w").close()
    while not os.path.exists(go):
        time.sleep(0.01)
    return real(self, *args, **kwargs)
T.Transaction._mirror = paused
p = filemem.open_store(store, write_policy="auto")
r = p.add({"track": "user", "scope": "user-global", "text": "the agent's entry"},
          filemem.write_context(session_id="agent", cwd="/w"))
print(r["entry"]["id"])
p.close()
"""


def _wait_for(path: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the writer never reached the pause"
        time.sleep(0.01)


def test_git_commit_a_between_the_branch_move_and_the_index_update(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with filemem.open_store(store, create=True, write_policy="auto") as p:
        mine = p.add({**UG, "text": "mine, before"}, ctx())["entry"]
    mine_file = next((store / "user" / "user-global").rglob(f"{mine['id']}.md"))
    marker, go = tmp_path / "paused", tmp_path / "go"
    writer = subprocess.Popen([sys.executable, "-c", PAUSED_WRITER, str(store), str(marker),
                               str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    _wait_for(marker, writer)
    # the agent's commit is on the branch; the person edits a file and commits everything
    mine_file.write_text(mine_file.read_text(encoding="utf-8").replace("mine, before",
                                                                       "mine, by hand"),
                         encoding="utf-8")
    person = subprocess.run(["git", "-C", str(store), "-c", "user.name=P",
                             "-c", "user.email=p@example.org", "commit", "-qam", "hand edit"],
                            capture_output=True, text=True)
    go.touch()
    out, err = writer.communicate(timeout=60)
    assert writer.returncode == 0, err
    agent_id = out.strip()
    # git could not take the index while filemem held it: its commit failed and said why
    assert person.returncode != 0
    assert "index.lock" in person.stderr
    with filemem.open_store(store) as p:
        assert agent_id in {e["id"] for e in p.list_entries()}
    # once filemem is done, the person's commit goes through and keeps the agent's entry
    git(store, "-c", "user.name=P", "-c", "user.email=p@example.org", "commit", "-qam",
        "hand edit")
    with filemem.open_store(store) as p:
        texts = {e["text"] for e in p.list_entries()}
    assert texts == {"mine, by hand", "the agent's entry"}
    assert_clean_repo(store)


def test_verify_notices_an_outside_commit_that_drops_audited_entries(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with filemem.open_store(store, create=True, write_policy="auto") as p:
        kept = p.add({**UG, "text": "kept"}, ctx())["entry"]
        dropped = p.add({**UG, "text": "dropped behind filemem's back"}, ctx())["entry"]
    path = next((store / "user" / "user-global").rglob(f"{dropped['id']}.md"))
    git(store, "rm", "-q", os.path.relpath(path, store))
    git(store, "-c", "user.name=P", "-c", "user.email=p@example.org", "commit", "-qm",
        "tidy up")
    out = run_cli("verify", "--json", store=store)
    assert out.returncode == 1, out.stdout
    assert dropped["id"] in out.stdout and kept["id"] not in out.stdout
    assert "removes" in out.stdout and "git revert" in out.stdout
