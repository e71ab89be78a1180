"""The frozen snapshot: rendering in en and zh, the empty case, freezing per
session id, the ``snapshot`` audit row, visibility, and heading numbers that are the budget
numbers enforcement uses (filemem choice 5)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import filemem
from tests.conftest import ctx, git

MakeProvider = Callable[..., filemem.Provider]
UG = {"track": "user", "scope": "user-global"}
UW = {"track": "user", "scope": "workspace"}
AG = {"track": "agent", "scope": "user-global"}
AW = {"track": "agent", "scope": "workspace"}

# filemem names itself and the tools that change memory; without tools named, the
# protocol's write operations (the reference's "[dsh-memento: ... use the memory tool.]"
# is not filemem's to say)
HEADER_EN = ("[filemem: frozen memory snapshot \u2014 captured at session start; memory "
             "changes during this session do not update this block. To change memory, use the "
             "memory tools (add, replace, remove, consolidate).]")
HEADER_ZH = ("[filemem\uff1a\u51bb\u7ed3\u8bb0\u5fc6\u5feb\u7167\u2014\u2014"
             "\u4f1a\u8bdd\u542f\u52a8\u65f6\u6355\u83b7\uff1b\u672c\u4f1a\u8bdd\u5185\u7684"
             "\u8bb0\u5fc6\u53d8\u66f4\u4e0d\u66f4\u65b0\u6b64\u5757\u3002\u8981\u4fee\u6539"
             "\u8bb0\u5fc6\uff0c\u8bf7\u4f7f\u7528 memory \u5de5\u5177\uff08add\u3001replace"
             "\u3001remove\u3001consolidate\uff09\u3002]")
MCP_TOOLS = ["memory_add", "memory_replace", "memory_remove", "memory_consolidate"]
HEADER_EN_MCP = ("[filemem: frozen memory snapshot \u2014 captured at session start; memory "
                 "changes during this session do not update this block. To change memory, use "
                 "the memory_add, memory_replace, memory_remove or memory_consolidate tool.]")
HEADER_ZH_MCP = ("[filemem\uff1a\u51bb\u7ed3\u8bb0\u5fc6\u5feb\u7167\u2014\u2014"
                 "\u4f1a\u8bdd\u542f\u52a8\u65f6\u6355\u83b7\uff1b\u672c\u4f1a\u8bdd\u5185"
                 "\u7684\u8bb0\u5fc6\u53d8\u66f4\u4e0d\u66f4\u65b0\u6b64\u5757\u3002\u8981"
                 "\u4fee\u6539\u8bb0\u5fc6\uff0c\u8bf7\u4f7f\u7528 memory_add\u3001memory_replace"
                 "\u3001memory_remove \u6216 memory_consolidate \u5de5\u5177\u3002]")
TITLES_EN = {
    "UG": "User profile (global preferences, communication style, landmines)",
    "UW": "User preferences for this workspace",
    "AG": "Environment facts and conventions (cross-workspace)",
    "AW": "Workspace facts, conventions, and lessons",
}
TITLES_ZH = {
    "UG": "用户画像（全局偏好、沟通风格、雷区）",
    "UW": "本工作区的用户偏好",
    "AG": "环境事实与约定（跨工作区）",
    "AW": "本工作区的事实、约定与教训",
}


def session(sid: str | None = "s1", cwd: str | None = "/w/a",
            agent: str | None = None) -> dict[str, Any]:
    return ctx(sid, cwd, agent)["agent"]["session"]


def snapshot_rows(p: filemem.Provider) -> list[dict[str, Any]]:
    return [r for r in p.audit_list(1000) if r["action"] == "snapshot"]


# ---------------------------------------------------------------- rendering


def test_worked_example_en(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "偏好中文回复"}, ctx(cwd="/w/a"))
    provider.add({**AW, "text": "测试先于实现"}, ctx(cwd="/w/a"))
    text = provider.snapshot(session())
    assert text == (f"{HEADER_EN}\n\n"
                    f"## {TITLES_EN['UG']} \u2014 6/2000 chars used\n- 偏好中文回复\n\n"
                    f"## {TITLES_EN['AW']} \u2014 6/4000 chars used\n- 测试先于实现")


def test_all_four_groups_in_fixed_order_zh(make_provider: MakeProvider) -> None:
    p = make_provider(budgets={"user": {"userGlobal": 100, "workspace": 200},
                               "agent": {"userGlobal": 300, "workspace": 400}})
    p.add({**AW, "text": "aw"}, ctx(cwd="/w/a"))
    p.add({**AG, "text": "ag"}, ctx(cwd="/w/a"))
    p.add({**UW, "text": "uw"}, ctx(cwd="/w/a"))
    p.add({**UG, "text": "ug"}, ctx(cwd="/w/a"))
    text = p.snapshot(session(), language="zh")
    assert text == "\n\n".join([
        HEADER_ZH,
        f"## {TITLES_ZH['UG']} \u2014 2/100 已用字符\n- ug",
        f"## {TITLES_ZH['UW']} \u2014 2/200 已用字符\n- uw",
        f"## {TITLES_ZH['AG']} \u2014 2/300 已用字符\n- ag",
        f"## {TITLES_ZH['AW']} \u2014 2/400 已用字符\n- aw",
    ])
    en = p.snapshot(session("s-en"), language="en")
    assert [line for line in en.splitlines() if line.startswith("## ")] == [
        f"## {TITLES_EN[k]} \u2014 2/{n} chars used"
        for k, n in (("UG", 100), ("UW", 200), ("AG", 300), ("AW", 400))]


def test_unknown_language_falls_back_to_english(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    assert provider.snapshot(session(), language="fr").startswith(HEADER_EN + "\n\n## ")


def test_store_language_setting_is_used(provider: filemem.Provider, store_path: Path) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    cfg = store_path / "filemem.yaml"
    cfg.write_text(cfg.read_text(encoding="utf-8").replace("language: en", "language: zh"),
                   encoding="utf-8")
    git(store_path, "commit", "-q", "-am", "snapshot language: zh")
    assert provider.snapshot(session("zh-1")).startswith(HEADER_ZH)
    assert provider.snapshot(session("en-1"), language="en").startswith(HEADER_EN)


def test_empty_groups_are_left_out_and_texts_kept_as_is(provider: filemem.Provider) -> None:
    provider.add({**AG, "text": "line one\nline two\n- not a bullet"}, ctx())
    provider.add({**AG, "text": "  spaced  "}, ctx())
    text = provider.snapshot(session())
    assert text == (f"{HEADER_EN}\n\n## {TITLES_EN['AG']} \u2014 42/4000 chars used\n"
                    "- line one\nline two\n- not a bullet\n-   spaced  ")


def test_the_header_names_the_tools_of_the_surface(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    assert provider.snapshot(session("m-en"), tools=MCP_TOOLS).startswith(HEADER_EN_MCP + "\n\n")
    assert provider.snapshot(session("m-zh"), language="zh",
                             tools=MCP_TOOLS).startswith(HEADER_ZH_MCP + "\n\n")
    one = provider.snapshot(session("host"), tools=["remember"])
    assert one.splitlines()[0].endswith("To change memory, use the remember tool.]")
    two = provider.snapshot(session("host2"), tools=("mem.save", "mem.drop"))
    assert two.splitlines()[0].endswith("use the mem.save or mem.drop tool.]")
    assert "dsh-memento" not in one + two


@pytest.mark.parametrize("tools", [[], "memory_add", ["memory add"], ["x\n## fake"], [""],
                                   ["a" * 65], [1], ["t"] * 9])
def test_bad_tool_names_are_invalid_input(provider: filemem.Provider, tools: Any) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    with pytest.raises(filemem.ProtocolError) as exc:
        provider.snapshot(session("bad"), tools=tools)
    assert exc.value.code == "INVALID_INPUT" and "snapshot tools" in exc.value.message
    assert not snapshot_rows(provider)  # nothing rendered, nothing recorded


def test_entries_in_creation_order(provider: filemem.Provider) -> None:
    provider.seed([{**UG, "text": f"seeded {i}"} for i in range(6)], ctx())
    provider.add({**UG, "text": "later"}, ctx())
    provider.replace({**UG, "match": "seeded 3", "text": "seeded 3 changed"}, ctx())
    text = provider.snapshot(session())
    bullets = [line[2:] for line in text.splitlines() if line.startswith("- ")]
    assert bullets == [e["text"] for e in provider.list_entries()]
    assert bullets[-1] == "later"


# ---------------------------------------------------------------- empty, frozen, audited


def test_empty_store_gives_empty_text_and_a_row(provider: filemem.Provider) -> None:
    assert provider.snapshot(session("empty-1")) == ""
    rows = snapshot_rows(provider)
    assert len(rows) == 1
    r = rows[0]
    assert {k: r[k] for k in ("track", "scope", "entryId", "text", "outcome", "source",
                              "sessionId")} == {
        "track": None, "scope": None, "entryId": None, "text": "", "outcome": "ok",
        "source": "filemem", "sessionId": "empty-1"}


def test_nothing_visible_is_empty_too(provider: filemem.Provider) -> None:
    provider.add({**AW, "text": "other workspace"}, ctx(cwd="/w/b"))
    provider.add({**UG, "text": "coder only"}, ctx(agent="coder"))
    assert provider.snapshot(session("v", "/w/a", "reviewer")) == ""
    assert snapshot_rows(provider)[0]["text"] == ""


def test_no_session_no_snapshot_no_row(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    for bad in (None, "s1", 7, ["s1"]):
        assert provider.snapshot(bad) == ""
    assert snapshot_rows(provider) == []


def test_frozen_per_session_id(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "before"}, ctx())
    first = provider.snapshot(session("frozen"))
    provider.add({**UG, "text": "after"}, ctx())
    provider.remove({**UG, "match": "before"}, ctx())
    assert provider.snapshot(session("frozen")) == first
    assert provider.snapshot(session("frozen", "/elsewhere", "other")) == first
    assert "- before" in first and "after" not in first
    fresh = provider.snapshot(session("fresh"))
    assert "- after" in fresh and "before" not in fresh
    rows = snapshot_rows(provider)
    assert [r["sessionId"] for r in rows] == ["fresh", "frozen"]


def test_frozen_empty_snapshot_stays_empty(provider: filemem.Provider) -> None:
    assert provider.snapshot(session("e")) == ""
    provider.add({**UG, "text": "new"}, ctx())
    assert provider.snapshot(session("e")) == ""
    assert len(snapshot_rows(provider)) == 1


def test_row_text_is_byte_identical(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "emoji \U0001f600 and CJK 中文\r\nCRLF"}, ctx())
    provider.add({**AW, "text": "tab\there \u2028 sep"}, ctx(cwd="/w/a"))
    text = provider.snapshot(session("bytes"))
    row = snapshot_rows(provider)[0]
    assert row["text"] == text
    assert row["text"].encode("utf-8") == text.encode("utf-8")
    assert row["sessionId"] == "bytes"


def test_session_without_id(provider: filemem.Provider) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    text = provider.snapshot(session(None))
    assert "- x" in text
    row = snapshot_rows(provider)[0]
    assert row["sessionId"] is None and row["text"] == text


def test_snapshot_is_read_only(provider: filemem.Provider, store_path: Path) -> None:
    provider.add({**UG, "text": "x"}, ctx())
    head = git(store_path, "rev-parse", "HEAD")
    provider.snapshot(session("ro"))
    assert git(store_path, "rev-parse", "HEAD") == head
    assert git(store_path, "status", "--porcelain") == ""


# ---------------------------------------------------------------- visibility and numbers


@pytest.fixture
def layered(provider: filemem.Provider) -> filemem.Provider:
    provider.add({**UG, "text": "ug shared"}, ctx(cwd="/w/a"))
    provider.add({**UG, "text": "ug coder"}, ctx(cwd="/w/b", agent="coder"))
    provider.add({**UG, "text": "ug reviewer"}, ctx(cwd="/w/a", agent="reviewer"))
    provider.add({**AW, "text": "ws-a shared"}, ctx(cwd="/w/a"))
    provider.add({**AW, "text": "ws-a coder"}, ctx(cwd="/w/a", agent="coder"))
    provider.add({**AW, "text": "ws-b shared"}, ctx(cwd="/w/b"))
    provider.add({**AW, "text": "ws-b coder"}, ctx(cwd="/w/b", agent="coder"))
    return provider


@pytest.mark.parametrize(("cwd", "agent", "want"), [
    ("/w/a", "coder", ["ug shared", "ug coder", "ws-a shared", "ws-a coder"]),
    ("/w/b", "coder", ["ug shared", "ug coder", "ws-b shared", "ws-b coder"]),
    ("/w/a", None, ["ug shared", "ws-a shared"]),
    ("/w/a/sub/..", "reviewer", ["ug shared", "ug reviewer", "ws-a shared"]),
    ("/w/c", "coder", ["ug shared", "ug coder"]),
])
def test_visibility_by_workspace_and_agent(layered: filemem.Provider, cwd: str,
                                           agent: str | None, want: list[str]) -> None:
    text = layered.snapshot(session(f"{cwd}-{agent}", cwd, agent))
    bullets = [line[2:] for line in text.splitlines() if line.startswith("- ")]
    assert bullets == want


def test_heading_numbers_are_enforcement_numbers(make_provider: MakeProvider) -> None:
    # filemem choice 5: the heading shows the whole pool, visible or not
    p = make_provider(budgets={"agent": {"workspace": 40}})
    p.add({**AW, "text": "mine"}, ctx(cwd="/w/a", agent="coder"))
    p.add({**AW, "text": "someone else's, elsewhere"}, ctx(cwd="/w/b", agent="reviewer"))
    used = next(r["used"] for r in p.budgets() if r["track"] == "agent"
                and r["scope"] == "workspace")
    assert used == 4 + 25
    text = p.snapshot(session("n", "/w/a", "coder"))
    assert f"## {TITLES_EN['AW']} \u2014 {used}/40 chars used\n- mine" in text
    assert "elsewhere" not in text
    # and the heading is what enforcement says: 11 more code units no longer fit
    with pytest.raises(filemem.ProtocolError) as info:
        p.add({**AW, "text": "x" * (40 - used + 1)}, ctx(cwd="/w/a", agent="coder"))
    assert (info.value.code, info.value.details["used"]) == ("BUDGET_EXCEEDED", used)
