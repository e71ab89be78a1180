"""Unit tests for filemem.files.layout: safe directory names and entry paths."""

from __future__ import annotations

import re
from typing import Any

import pytest

from filemem.files import layout
from filemem.files.layout import entry_path, id_from_path, is_entry_path, key_dir, path_problem
from filemem.model import Entry

UUID = "0f7c1b1e-4a5b-4c3d-9e8f-001122334455"
WINDOWS_RESERVED = {"con", "prn", "aux", "nul", *(f"com{i}" for i in range(1, 10)),
                    *(f"lpt{i}" for i in range(1, 10))}

HOSTILE_KEYS = [
    "..", ".", "../..", "../../etc/passwd", "/", "//", "\\", "a/b", "a\\b", "C:\\work\\proj",
    "C:", "c:/", "\x00", "a\x00b", ":", "a:b", "CON", "con", "nul", "NUL", "COM1", "com1",
    "LPT9", "aux.txt", "CON.", "con ", " ", "   ", "-", "_", "_shared", "_none", ".git",
    "/work/proj/.git", "x" * 1000, "你好", "😀", "\ud800", "a\nb", "*?<>|\"", "~", "$HOME",
    "/work/proj/", "/work/proj", "\u202e", "\t", "dir/..", "..\\..\\windows", "UPPER", "upper",
]


def assert_safe(name: str) -> None:
    assert name
    assert re.fullmatch(r"[a-z0-9_-]+", name), name
    for bad in ("/", "\\", "..", "\x00", ":"):
        assert bad not in name
    assert name not in (".", "..")
    assert name.split(".")[0].lower() not in WINDOWS_RESERVED
    assert not name.startswith(("_", "-"))  # never collides with _shared, _none, or a flag
    assert len(name) <= 40


@pytest.mark.parametrize("key", HOSTILE_KEYS, ids=range(len(HOSTILE_KEYS)))
def test_key_dir_is_always_a_safe_name(key: str) -> None:
    assert_safe(key_dir(key))


def test_key_dir_is_stable_and_distinct() -> None:
    names = [key_dir(k) for k in HOSTILE_KEYS]
    assert names == [key_dir(k) for k in HOSTILE_KEYS]
    assert len(set(names)) == len(set(HOSTILE_KEYS))


@pytest.mark.parametrize(("a", "b"), [("Coder", "coder"), ("/Work/Proj", "/work/proj"),
                                      ("CON", "con"), ("a/b", "a_b"), ("a b", "a_b"),
                                      ("x/proj", "y/proj")])
def test_keys_that_look_alike_get_different_dirs(a: str, b: str) -> None:
    assert key_dir(a) != key_dir(b)
    assert key_dir(a).lower() != key_dir(b).lower()  # safe on case-insensitive filesystems


def test_key_dir_keeps_a_readable_tail() -> None:
    assert key_dir("/work/api-server").startswith("api-server-")
    assert key_dir("C:\\Users\\me\\Proj").startswith("proj-")
    assert key_dir("coder").startswith("coder-")


def test_long_keys_are_bounded() -> None:
    for n in (25, 100, 10_000):
        assert len(key_dir("k" * n)) <= 40
        assert len(key_dir("/" + "segment/" * n)) <= 40
    assert key_dir("k" * 100) != key_dir("k" * 101)


def make_entry(**changes: Any) -> Entry:
    fields: dict[str, Any] = dict(
        id=UUID, track="user", scope="user-global", workspace_key="", agent_key="", text="t",
        source="s", tags=(), version=1, created_at=0, updated_at=0, session_id=None)
    fields.update(changes)
    return Entry(**fields)


def test_entry_paths_per_layer() -> None:
    assert entry_path(make_entry()) == f"user/user-global/_shared/{UUID}.md"
    assert entry_path(make_entry(track="agent", agent_key="coder")) == \
        f"agent/user-global/{key_dir('coder')}/{UUID}.md"
    assert entry_path(make_entry(scope="workspace", workspace_key="/work/proj")) == \
        f"user/workspace/{key_dir('/work/proj')}/_shared/{UUID}.md"
    assert entry_path(make_entry(scope="workspace", workspace_key="/w", agent_key="a")) == \
        f"user/workspace/{key_dir('/w')}/{key_dir('a')}/{UUID}.md"
    assert entry_path(make_entry(scope="workspace", workspace_key="")) == \
        f"user/workspace/{layout.NO_WORKSPACE_DIR}/_shared/{UUID}.md"


@pytest.mark.parametrize("key", HOSTILE_KEYS, ids=range(len(HOSTILE_KEYS)))
def test_entry_path_has_a_fixed_shape_for_any_key(key: str) -> None:
    path = entry_path(make_entry(track="agent", scope="workspace", workspace_key=key,
                                 agent_key=key))
    parts = path.split("/")
    assert len(parts) == 5
    assert parts[:2] == ["agent", "workspace"]
    assert parts[4] == f"{UUID}.md"
    for part in parts[2:4]:
        assert part in ("_shared", "_none") or re.fullmatch(r"[a-z0-9][a-z0-9_-]*", part)
    assert is_entry_path(path)


def test_whitespace_agent_key_is_not_the_shared_layer() -> None:
    """Only the exact key '' is the shared layer; other keys never map onto _shared."""
    assert entry_path(make_entry(agent_key=" ")).split("/")[2] != "_shared"
    assert entry_path(make_entry(agent_key="_shared")).split("/")[2] != "_shared"


def test_is_entry_path() -> None:
    assert is_entry_path(f"user/user-global/_shared/{UUID}.md")
    assert is_entry_path(f"agent/x/{UUID}.md")
    assert not is_entry_path("README.md")
    assert not is_entry_path("filemem.yaml")
    assert not is_entry_path(f"team/user-global/_shared/{UUID}.md")
    assert not is_entry_path("user/user-global/_shared/notes.txt")
    assert not is_entry_path(f".filemem/user/{UUID}.md")


def test_id_from_path() -> None:
    assert id_from_path(f"user/user-global/_shared/{UUID}.md") == UUID
    assert id_from_path(f"{UUID}.md") == UUID
    assert id_from_path(f"user/user-global/_shared/{UUID.upper()}.md") == UUID.upper()
    assert id_from_path(f"user/user-global/_shared/{UUID}.txt") is None
    assert id_from_path(f"user/user-global/_shared/{UUID}") is None
    assert id_from_path("user/user-global/_shared/notes.md") is None
    assert id_from_path("user/user-global/_shared/.md") is None


def test_path_problem() -> None:
    e = make_entry()
    good = entry_path(e)
    assert path_problem(good, e) is None
    wrong_folder = f"agent/user-global/_shared/{UUID}.md"
    problem = path_problem(wrong_folder, e)
    assert problem is not None and "wrong folder" in problem and good in problem
    other = "11111111-1111-4111-8111-111111111111"
    problem = path_problem(f"user/user-global/_shared/{other}.md", e)
    assert problem is not None and "file name does not match" in problem and UUID in problem


def test_path_problem_notices_a_moved_agent_or_workspace() -> None:
    e = make_entry(scope="workspace", workspace_key="/w", agent_key="coder")
    moved = entry_path(make_entry(scope="workspace", workspace_key="/w", agent_key="Coder"))
    assert path_problem(moved, e) is not None
    moved = entry_path(make_entry(scope="workspace", workspace_key="/W", agent_key="coder"))
    assert path_problem(moved, e) is not None
