"""The workspace and the agent layer are visible at the command line: `filemem list` and
`query` show them, and a match that is not where the command looked is named where it is,
with the options that reach it (the owner sees every layer). Real `filemem` processes."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from filemem import toolspec
from tests.conftest import assert_clean_repo, file_of, git, run_cli


def ok(*args: str, store: Path) -> str:
    out = run_cli(*args, store=store)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    return out.stdout


def as_json(*args: str, store: Path) -> Any:
    return json.loads(ok(*args, "--json", store=store))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    ok("init", str(path), store=path)
    return path


def test_list_and_query_show_workspace_and_agent_layer(store: Path) -> None:
    api, web = "/w/api", "/w/web-app"
    ok("add", "--yes", "--scope", "user-global", "--tag", "pref", "Prefers tea", store=store)
    ok("add", "--yes", "--track", "agent", "--workspace", api, "CI runs on Debian 12",
       store=store)
    ok("add", "--yes", "--track", "agent", "--workspace", web, "--agent", "coder",
       "Debian images for web", store=store)
    lines = ok("list", store=store).splitlines()
    assert len(lines) == 3
    cells = [line.split() for line in lines]
    assert cells[0][1:6] == ["user/user-global", "all", "workspaces", "shared", "Prefers"]
    assert cells[1][1:4] == ["agent/workspace", api, "shared"]
    assert cells[2][1:5] == ["agent/workspace", web, "agent", "coder"]
    # in columns: every text starts at the same place
    starts = {line.index(text) for line, text in zip(lines, (
        "Prefers tea", "CI runs on Debian 12", "Debian images for web"), strict=True)}
    assert len(starts) == 1
    found = ok("query", "debian", store=store).splitlines()
    assert sorted(line.split()[2] for line in found) == [api, web]
    assert any(web in line and "agent coder" in line for line in found)
    # --json has the exact keys
    listed = as_json("list", store=store)
    assert [(e["workspaceKey"], e["agentKey"]) for e in listed] == \
        [("", ""), (api, ""), (web, "coder")]
    queried = as_json("query", "debian", store=store)["entries"]
    assert sorted((e["workspaceKey"], e["agentKey"]) for e in queried) == \
        [(api, ""), (web, "coder")]


def test_the_home_folder_is_shown_as_a_tilde(store: Path, tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "code").mkdir(parents=True)
    env = {"HOME": str(home)}
    assert run_cli("add", "--yes", "--workspace", str(home / "code"), "fact", store=store,
                   env=env).returncode == 0
    out = run_cli("list", store=store, env=env).stdout
    assert " ~/code " in out and str(home) not in out


def test_a_match_in_another_layer_is_named_with_the_options_that_reach_it(
        store: Path, tmp_path: Path) -> None:
    here = str(tmp_path)
    ok("add", "--yes", "--track", "agent", "--workspace", here, "CI runs on Debian 12",
       store=store)
    n = git(store, "rev-list", "--count", "HEAD")
    # the default track is user: not found there, and told where it is
    out = run_cli("replace", "--yes", "--workspace", here, "Debian", "CI runs on Debian 13",
                  store=store)
    assert out.returncode == 1
    first, hint = out.stderr.splitlines()
    assert first == (f'filemem: ENTRY_NOT_FOUND: no entry in user/workspace contains "Debian" '
                     f'(searched the shared layer of workspace "{here}"); nothing was changed; '
                     f'it is in agent/workspace (the shared layer of workspace "{here}": '
                     "1 entry)")
    assert hint == ("filemem: to change it in agent/workspace, run the command again with "
                    "--track agent --scope workspace")
    err = json.loads(run_cli("replace", "--yes", "--json", "--workspace", here, "Debian",
                             "x", store=store).stdout)["error"]
    assert err["details"]["elsewhere"] == [{"track": "agent", "scope": "workspace",
                                            "workspaceKey": here, "agentKey": "",
                                            "entries": 1}]
    assert git(store, "rev-list", "--count", "HEAD") == n  # nothing asked, nothing written
    # the hint leads somewhere: the same command with those options does it
    again = ["replace", "--yes", "--workspace", here, *shlex.split(hint.split(" with ")[1]),
             "Debian", "CI runs on Debian 13"]
    assert "now version 2" in ok(*again, store=store)
    assert_clean_repo(store)


def test_a_match_in_an_agents_layer_and_the_shared_one_asks_for_a_longer_match(
        store: Path, tmp_path: Path) -> None:
    here = str(tmp_path)
    ok("add", "--yes", "--track", "agent", "--workspace", here, "CI runs on Debian 12",
       store=store)
    ok("add", "--yes", "--track", "agent", "--workspace", here, "--agent", "coder",
       "Debian images are pinned", store=store)
    out = run_cli("replace", "--yes", "--workspace", here, "Debian", "x", store=store)
    shared, agent = out.stderr.splitlines()[1:]
    assert shared.endswith("again with --track agent --scope workspace")
    assert agent.endswith("again with --track agent --scope workspace --agent coder and a "
                          "longer MATCH (the shared layer there has a match too)")
    # as told: those options alone are ambiguous, with a longer MATCH they reach the entry
    options = shlex.split(agent.split(" with ")[1].split(" and a longer")[0])
    again = run_cli("replace", "--yes", "--workspace", here, *options, "Debian", "x",
                    store=store)
    assert again.returncode == 1 and "AMBIGUOUS_MATCH" in again.stderr
    done = as_json("replace", "--yes", "--workspace", here, *options, "Debian images",
                   "Debian images are pinned by digest", store=store)
    assert done["entry"]["agentKey"] == "coder"
    assert_clean_repo(store)


def test_the_owner_is_told_of_other_workspaces_and_agents(store: Path, tmp_path: Path) -> None:
    api, other = tmp_path / "my api", tmp_path / "other"
    api.mkdir()
    other.mkdir()
    ok("add", "--yes", "--track", "agent", "--workspace", str(api), "--agent", "coder",
       "CI runs on Debian 12", store=store)
    # `cd other; filemem replace --track agent Debian ...`: which workspace was searched, and
    # where the entry is (another workspace, an agent's layer: the owner sees them all)
    out = run_cli("remove", "--yes", "--track", "agent", "--workspace", str(other), "Debian",
                  store=store)
    assert out.returncode == 1
    first, hint = out.stderr.splitlines()
    assert f'searched the shared layer of workspace "{other}"' in first
    assert (f'it is in agent/workspace (agent "coder"\'s layer of workspace "{api}": 1 entry)'
            in first)
    assert "CI runs" not in first  # where, not what
    options = shlex.split(hint.split(" with ")[1])
    assert options == ["--track", "agent", "--scope", "workspace", "--workspace", str(api),
                       "--agent", "coder"]
    removed = as_json("remove", "--yes", "--workspace", str(other), *options, "Debian",
                      store=store)
    assert removed["entry"]["text"] == "CI runs on Debian 12"
    # nothing anywhere: no hint
    out = run_cli("remove", "--yes", "Debian", store=store)
    assert out.returncode == 1 and len(out.stderr.splitlines()) == 1
    assert "it is in" not in out.stderr


def test_an_ambiguous_match_names_the_workspace_searched(store: Path, tmp_path: Path) -> None:
    here = str(tmp_path)
    for text in ("Debian 12 on CI", "Debian 13 on laptops"):
        ok("add", "--yes", "--workspace", here, text, store=store)
    out = run_cli("remove", "--yes", "--workspace", here, "Debian", store=store)
    assert out.returncode == 1
    assert out.stderr.startswith(
        f'filemem: AMBIGUOUS_MATCH: match "Debian" is ambiguous in user/workspace (searched the '
        f'shared layer of workspace "{here}"): 2 entries contain it')


def test_advice_that_cannot_lead_out_is_followed_by_a_way_that_does(store: Path) -> None:
    """BUDGET_EXCEEDED's protocol advice (remove entries) cannot help a text larger than the
    whole budget; AMBIGUOUS_MATCH's (a longer MATCH) cannot pick an entry whose whole text is
    inside another's. The CLI names the way out that works, and following it works."""
    big = "y" * 4001
    out = run_cli("add", "--yes", "--track", "agent", "--scope", "user-global", big,
                  store=store)
    assert out.returncode == 1
    assert ("this write alone adds 4001 chars, more than the whole agent/user-global budget "
            "of 4000" in out.stderr and "budgets.agent.userGlobal" in out.stderr)
    assert toolspec.hint("BUDGET_EXCEEDED", json.loads(run_cli(
        "add", "--yes", "--json", "--track", "agent", "--scope", "user-global", big,
        store=store).stdout)["error"]["details"]).startswith("This text alone is longer")
    assert toolspec.hint("BUDGET_EXCEEDED", {"used": 3990, "limit": 4000, "needed": 4010}) \
        == toolspec.HINTS["BUDGET_EXCEEDED"]  # room can be made: the usual advice
    short = as_json("add", "--yes", "--scope", "user-global", "Prefers tea", store=store)
    ok("add", "--yes", "--scope", "user-global", "Prefers tea strongly", store=store)
    out = run_cli("remove", "--yes", "--scope", "user-global", "Prefers tea", store=store)
    assert out.returncode == 1 and "AMBIGUOUS_MATCH" in out.stderr
    assert "no MATCH picks it alone: delete its file" in out.stderr
    file_of(store, short["entry"]["id"]).unlink()  # as told
    ok("adopt", "--yes", store=store)
    assert [e["text"] for e in as_json("list", store=store)] == ["Prefers tea strongly"]
    assert_clean_repo(store)
