"""Unit tests for filemem.config: filemem.yaml defaults, overrides and validation messages."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from filemem import config, errors
from filemem.config import Config, parse, parse_budgets, parse_policies, parse_policy
from filemem.errors import ProtocolError

TEMPLATE = Path(__file__).resolve().parents[1] / "store-template" / "filemem.yaml"
BUDGET_KEYS = [("user", "userGlobal", ("user", "user-global")),
               ("user", "workspace", ("user", "workspace")),
               ("agent", "userGlobal", ("agent", "user-global")),
               ("agent", "workspace", ("agent", "workspace"))]


def invalid(fn: Any, *args: Any, **kwargs: Any) -> str:
    with pytest.raises(ProtocolError) as info:
        fn(*args, **kwargs)
    assert info.value.code == errors.INVALID_INPUT
    return info.value.message


def test_defaults() -> None:
    c = Config()
    assert c.schema == config.STORE_SCHEMA == 1
    assert c.budgets == {("user", "user-global"): 2000, ("user", "workspace"): 2000,
                         ("agent", "user-global"): 4000, ("agent", "workspace"): 4000}
    assert c.write_policy == "ask"
    assert c.write_policies == {}
    assert c.max_entries_per_query == 20
    assert c.language == "en"
    assert c.limit("agent", "workspace") == 4000


def test_minimal_file_gives_defaults() -> None:
    assert parse({"schema": 1}) == Config()


def test_the_template_gives_defaults() -> None:
    assert parse(config.load_yaml(TEMPLATE.read_bytes())) == Config()


def test_defaults_are_not_shared_between_instances() -> None:
    a = Config()
    a.budgets[("user", "user-global")] = 1
    assert Config().budgets[("user", "user-global")] == 2000
    assert config.DEFAULT_BUDGETS[("user", "user-global")] == 2000


def test_overrides_apply() -> None:
    c = parse({
        "schema": 1,
        "budgets": {"user": {"userGlobal": 12}, "agent": {"workspace": 99}},
        "writePolicy": "auto",
        "writePolicies": {"user/workspace": "off", "source:claude": "ask",
                          "agent/user-global": "auto", "source:mem0-x9": "off"},
        "maxEntriesPerQuery": 5,
        "language": "zh",
    })
    assert c.budgets == {("user", "user-global"): 12, ("user", "workspace"): 2000,
                         ("agent", "user-global"): 4000, ("agent", "workspace"): 99}
    assert c.write_policy == "auto"
    assert c.write_policies == {"user/workspace": "off", "source:claude": "ask",
                                "agent/user-global": "auto", "source:mem0-x9": "off"}
    assert c.max_entries_per_query == 5
    assert c.language == "zh"


def test_yaml_text_round_trip_through_to_json() -> None:
    text = b"schema: 1\nbudgets: {user: {workspace: 7}}\nwritePolicy: off\nlanguage: zh\n"
    c = parse(config.load_yaml(text))
    assert c.limit("user", "workspace") == 7
    assert c.write_policy == "off"  # the YAML 1.2 safe loader keeps `off` a string
    assert parse(config.to_json(c)) == c


def test_with_overrides() -> None:
    base = Config()
    assert base.with_overrides() is base
    c = base.with_overrides(budgets={"agent": {"userGlobal": 1}}, write_policy="off",
                            write_policies={"source:x": "auto"})
    assert c.limit("agent", "user-global") == 1
    assert c.limit("user", "user-global") == 2000
    assert c.write_policy == "off" and c.write_policies == {"source:x": "auto"}
    assert base == Config() and c != base
    assert c.language == base.language and c.rules == base.rules  # the rest carried over
    assert "write_policy='off'" in repr(c)
    invalid(base.with_overrides, budgets={"user": {"workspace": 0}})
    invalid(base.with_overrides, write_policy="maybe")


@pytest.mark.parametrize("value", [0, -1, 1.5, 2000.5, "2000", None, True, [1], {"a": 1}])
@pytest.mark.parametrize(("track", "key", "_layer"), BUDGET_KEYS)
def test_bad_budget_values(track: str, key: str, _layer: tuple[str, str], value: Any) -> None:
    message = invalid(parse, {"schema": 1, "budgets": {track: {key: value}}})
    assert message == f"filemem config: budgets.{track}.{key} must be a positive integer"


@pytest.mark.parametrize(("track", "key", "layer"), BUDGET_KEYS)
def test_budget_of_one_is_fine(track: str, key: str, layer: tuple[str, str]) -> None:
    assert parse_budgets({track: {key: 1}})[layer] == 1


@pytest.mark.parametrize("value", [[], "big", 5, None])
def test_budgets_must_be_an_object(value: Any) -> None:
    assert invalid(parse_budgets, value) == (
        "filemem config: budgets must be an object with user/agent tracks and "
        "userGlobal/workspace layers")


@pytest.mark.parametrize("track", ["user", "agent"])
def test_budget_track_must_be_an_object(track: str) -> None:
    message = invalid(parse, {"schema": 1, "budgets": {track: 2000}})
    assert message == f"filemem config: budgets.{track} must be an object"


@pytest.mark.parametrize(("value", "shown"), [("maybe", '"maybe"'), ("ASK", '"ASK"'),
                                              ("", '""'), (None, "null"), (1, "1"),
                                              (False, "false"), ("propose", '"propose"')])
def test_bad_write_policy(value: Any, shown: str) -> None:
    expected = f"invalid writePolicy {shown} (one of ask|auto|off)"
    assert invalid(parse_policy, value) == expected
    assert invalid(parse, {"schema": 1, "writePolicy": value}) == expected


@pytest.mark.parametrize("value", ["ask", "auto", "off"])
def test_good_write_policy(value: str) -> None:
    assert parse({"schema": 1, "writePolicy": value}).write_policy == value


@pytest.mark.parametrize(
    "key",
    ["team/workspace", "user/global", "User/workspace", "user/workspace/x", "user", "source:",
     "source:Claude", "source:a_b", "source: claude", "src:claude", "", "user/ workspace",
     "*", "source:claude ", " user/workspace"],
)
def test_bad_write_policies_key(key: str) -> None:
    message = invalid(parse_policies, {key: "auto"})
    assert message == (f'invalid writePolicies key "{key}" '
                       '(expected "track/scope" or "source:<name>")')


def test_non_string_write_policies_key() -> None:
    message = invalid(parse, {"schema": 1, "writePolicies": {1: "auto"}})
    assert message == 'invalid writePolicies key "1" (expected "track/scope" or "source:<name>")'


@pytest.mark.parametrize(("value", "shown"), [("maybe", '"maybe"'), ("Auto", '"Auto"'),
                                              (None, "null"), (True, "true"), (0, "0"),
                                              ("deny", '"deny"')])
def test_bad_write_policies_value(value: Any, shown: str) -> None:
    message = invalid(parse_policies, {"user/workspace": value})
    assert message == (f'invalid writePolicies value for "user/workspace": {shown} '
                       "(one of ask|auto|off)")


@pytest.mark.parametrize("value", [[], "auto", 5])
def test_write_policies_must_be_a_mapping(value: Any) -> None:
    assert "writePolicies must be a mapping" in invalid(parse_policies, value)


def test_null_write_policies_mean_none() -> None:
    assert parse({"schema": 1, "writePolicies": None}).write_policies == {}


@pytest.mark.parametrize("key", ["user/workspace\n", "source:claude\n"])
def test_write_policies_key_with_trailing_newline_is_rejected(key: str) -> None:
    invalid(parse_policies, {key: "off"})


@pytest.mark.parametrize(("value", "shown"), [("fr", '"fr"'), ("EN", '"EN"'), ("", '""'),
                                              (None, "null"), (1, "1")])
def test_bad_language(value: Any, shown: str) -> None:
    message = invalid(parse, {"schema": 1, "language": value})
    assert message == f"filemem config: language must be 'en' or 'zh' (got {shown})"


@pytest.mark.parametrize("value", [0, -3, 2.5, "20", True, None])
def test_bad_max_entries_per_query(value: Any) -> None:
    message = invalid(parse, {"schema": 1, "maxEntriesPerQuery": value})
    assert message == "filemem config: maxEntriesPerQuery must be a positive integer"


@pytest.mark.parametrize("raw", [{}, {"schema": 0}, {"schema": "1"}, {"schema": True},
                                 {"schema": 1.0}, {"schema": -1}])
def test_bad_schema(raw: dict[str, Any]) -> None:
    assert invalid(parse, raw) == "filemem config: schema must be a positive integer"


@pytest.mark.parametrize("raw", [None, [], "schema: 1", 1])
def test_config_must_be_a_mapping(raw: Any) -> None:
    assert invalid(parse, raw) == "filemem config: filemem.yaml must be a mapping"


def test_load_yaml_is_safe(tmp_path: Path) -> None:
    from ruamel.yaml.error import YAMLError

    marker = tmp_path / "hacked"
    payload = f"schema: !!python/object/apply:os.system ['touch {marker}']\n".encode()
    with pytest.raises(YAMLError):
        config.load_yaml(payload)
    assert not marker.exists()


def test_load_yaml_reads_yaml_1_2_plain_data() -> None:
    raw = config.load_yaml(b"schema: 1\nlanguage: en\nwritePolicy: auto\nx: [1, 'a']\n")
    assert raw == {"schema": 1, "language": "en", "writePolicy": "auto", "x": [1, "a"]}
