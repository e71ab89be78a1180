"""The store's configuration, ``filemem.yaml``: schema version, budgets and write policies.

It is read from HEAD like everything else, so a change takes effect once it is committed.
No tool argument or model output can change it; a program can override values for its own
process only (``open_store(budgets=..., write_policy=...)``).
"""

from __future__ import annotations

import re
from typing import Any, ClassVar, Final

from filemem import errors, yamlsafe
from filemem.jsstr import js_json
from filemem.model import LAYERS

CONFIG_NAME: Final = "filemem.yaml"
CONFIG_MAX_BYTES: Final = 256 * 1024
STORE_SCHEMA: Final = 1  # the store layout version this code reads and writes
POLICIES: Final = ("ask", "auto", "off")
INVISIBLE_POLICIES: Final = ("warn", "refuse")
LEVELS: Final = ("off", "warn", "block")
# The named checks a text goes through before it is approved and before it reaches a model
# (their patterns are in filemem.rules.injection and filemem.rules.secrets), with the level
# each has unless filemem.yaml's ``checks.rules`` says otherwise: the blatant cases block,
# the rest warn.
CHECK_RULES: Final = {
    # planted instructions (filemem.rules.injection)
    "ignore-instructions": "block",
    "pipe-to-shell": "block",
    "exfiltration": "block",
    "marker-imitation": "block",
    "role-override": "warn",
    "agent-config-edit": "warn",
    "hidden-comment": "warn",
    # secrets (filemem.rules.secrets)
    "aws-access-key": "block",
    "github-token": "block",
    "gitlab-token": "block",
    "slack-token": "block",
    "npm-token": "block",
    "pypi-token": "block",
    "openai-key": "block",
    "anthropic-key": "block",
    "private-key": "block",
    "jwt": "block",
    "assigned-secret": "block",
}
LANGUAGES: Final = ("en", "zh")
DEFAULT_BUDGETS: Final = {
    ("user", "user-global"): 2000,
    ("user", "workspace"): 2000,
    ("agent", "user-global"): 4000,
    ("agent", "workspace"): 4000,
}
_LAYER_KEYS: Final = {"user-global": "userGlobal", "workspace": "workspace"}
_POLICY_KEY_RE: Final = re.compile(
    r"^(?:(?:user|agent)/(?:user-global|workspace)|source:[a-z0-9-]+)\Z")


class Config:
    """A store's settings (``filemem.yaml``), with its defaults. Treat as immutable:
    :meth:`with_overrides` makes a new one. (A plain class, not a dataclass: making a
    dataclass costs every cold command about a millisecond.)"""

    _FIELDS: ClassVar = ("schema", "budgets", "write_policy", "write_policies",
                         "max_entries_per_query", "language", "invisible", "rules")
    __slots__ = _FIELDS

    def __init__(self, schema: int = STORE_SCHEMA,
                 budgets: dict[tuple[str, str], int] | None = None,
                 write_policy: str = "ask", write_policies: dict[str, str] | None = None,
                 max_entries_per_query: int = 20, language: str = "en",
                 invisible: str = "warn",  # checks.invisible: warn | refuse
                 rules: dict[str, str] | None = None) -> None:
        self.schema = schema
        self.budgets = dict(DEFAULT_BUDGETS) if budgets is None else budgets
        self.write_policy = write_policy
        self.write_policies = {} if write_policies is None else write_policies
        self.max_entries_per_query = max_entries_per_query
        self.language = language
        self.invisible = invisible
        self.rules = dict(CHECK_RULES) if rules is None else rules

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        return type(other) is Config and self._values() == other._values()

    __hash__ = None  # type: ignore[assignment]  # it holds dicts

    def __repr__(self) -> str:
        return "Config(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in self._FIELDS) + ")"

    def level(self, rule: str) -> str:
        """``off``, ``warn`` or ``block`` for a named check (:data:`CHECK_RULES`)."""
        return self.rules.get(rule, CHECK_RULES[rule])

    def limit(self, track: str, scope: str) -> int:
        return self.budgets[(track, scope)]

    def with_overrides(self, *, budgets: Any = None, write_policy: str | None = None,
                       write_policies: Any = None) -> Config:
        changes: dict[str, Any] = {}
        if budgets is not None:
            changes["budgets"] = parse_budgets(budgets)
        if write_policy is not None:
            changes["write_policy"] = parse_policy(write_policy)
        if write_policies is not None:
            changes["write_policies"] = parse_policies(write_policies)
        if not changes:
            return self
        return Config(**{n: changes.get(n, getattr(self, n)) for n in self._FIELDS})


def _positive_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def parse_budgets(raw: Any) -> dict[tuple[str, str], int]:
    """``{user: {userGlobal, workspace}, agent: {...}}``; missing values keep the defaults."""
    if not isinstance(raw, dict):
        raise errors.invalid_input(
            "filemem config: budgets must be an object with user/agent tracks and "
            "userGlobal/workspace layers"
        )
    out = dict(DEFAULT_BUDGETS)
    for track, scope in LAYERS:
        if track not in raw:
            continue
        layer = raw[track]
        if not isinstance(layer, dict):
            raise errors.invalid_input(f"filemem config: budgets.{track} must be an object")
        key = _LAYER_KEYS[scope]
        if key in layer:
            if not _positive_int(layer[key]):
                raise errors.invalid_input(
                    f"filemem config: budgets.{track}.{key} must be a positive integer"
                )
            out[(track, scope)] = int(layer[key])
    return out


def budget_key(track: str, scope: str) -> str:
    """The key of ``filemem.yaml`` that holds a layer's budget, e.g. ``budgets.user.userGlobal``."""
    return f"budgets.{track}.{_LAYER_KEYS[scope]}"


def budgets_to_json(budgets: dict[tuple[str, str], int]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for (track, scope), limit in budgets.items():
        out.setdefault(track, {})[_LAYER_KEYS[scope]] = limit
    return out


def parse_policy(value: Any) -> str:
    if value not in POLICIES or not isinstance(value, str):
        raise errors.invalid_input(f"invalid writePolicy {js_json(value)} (one of ask|auto|off)")
    return value


def parse_policies(raw: Any) -> dict[str, str]:
    if not isinstance(raw, dict):
        raise errors.invalid_input(
            "filemem config: writePolicies must be a mapping of \"track/scope\" or "
            "\"source:<name>\" to ask|auto|off"
        )
    out: dict[str, str] = {}
    for key, value in raw.items():
        if not isinstance(key, str) or not _POLICY_KEY_RE.match(key):
            raise errors.invalid_input(
                f'invalid writePolicies key "{key}" (expected "track/scope" or "source:<name>")'
            )
        if value not in POLICIES or not isinstance(value, str):
            raise errors.invalid_input(
                f'invalid writePolicies value for "{key}": {js_json(value)} (one of ask|auto|off)'
            )
        out[key] = value
    return out


def parse_checks(raw: Any) -> tuple[str, dict[str, str]]:
    """``checks: {invisible: warn|refuse, rules: {<rule>: off|warn|block}}``; what is not
    given keeps its default."""
    if not isinstance(raw, dict) or not set(raw) <= {"invisible", "rules"}:
        raise errors.invalid_input(
            "filemem config: checks must be a mapping with invisible (warn|refuse) and rules "
            "(a mapping of rule name to off|warn|block)")
    invisible = raw.get("invisible", "warn")
    if invisible not in INVISIBLE_POLICIES:
        raise errors.invalid_input(
            f"filemem config: checks.invisible must be warn or refuse (got {js_json(invisible)})")
    given = raw.get("rules") or {}
    if not isinstance(given, dict):
        raise errors.invalid_input("filemem config: checks.rules must be a mapping of rule "
                                   "name to off|warn|block")
    rules = dict(CHECK_RULES)
    for name, level in given.items():
        if name not in CHECK_RULES:
            raise errors.invalid_input(
                f"filemem config: checks.rules has no rule {js_json(name)} (the rules: "
                f"{', '.join(CHECK_RULES)})")
        if level not in LEVELS:
            raise errors.invalid_input(
                f"filemem config: checks.rules.{name} must be off, warn or block (got "
                f"{js_json(level)})")
        rules[name] = level
    return str(invisible), rules


def parse(raw: Any) -> Config:
    """Validate a loaded ``filemem.yaml`` mapping (INVALID_INPUT says what is wrong)."""
    if not isinstance(raw, dict):
        raise errors.invalid_input("filemem config: filemem.yaml must be a mapping")
    schema = raw.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise errors.invalid_input("filemem config: schema must be a positive integer")
    limit = raw.get("maxEntriesPerQuery", 20)
    if not _positive_int(limit):
        raise errors.invalid_input("filemem config: maxEntriesPerQuery must be a positive integer")
    language = raw.get("language", "en")
    if language not in LANGUAGES:
        raise errors.invalid_input(
            f"filemem config: language must be 'en' or 'zh' (got {js_json(language)})"
        )
    invisible, rules = parse_checks(raw.get("checks") or {})
    return Config(
        schema=int(schema),
        budgets=parse_budgets(raw.get("budgets", {})),
        write_policy=parse_policy(raw.get("writePolicy", "ask")),
        write_policies=parse_policies(raw.get("writePolicies") or {}),
        max_entries_per_query=int(limit),
        language=str(language),
        invisible=invisible,
        rules=rules,
    )


def load_yaml(data: bytes) -> Any:
    """Parse ``filemem.yaml`` through the guarded reader (plain data only; the entry files'
    limits, with room for a long ``writePolicies``). A YAML problem of any kind is a
    ruamel ``YAMLError`` saying what is wrong."""
    try:
        return yamlsafe.load(data.decode("utf-8"), what=CONFIG_NAME, max_bytes=CONFIG_MAX_BYTES)
    except yamlsafe.YamlError as exc:
        from ruamel.yaml.error import YAMLError  # only now: a plain config needs no ruamel

        where = f" (line {exc.line})" if exc.line is not None else ""
        raise YAMLError(exc.message + where) from None


def load(data: bytes) -> Config:
    """``filemem.yaml``'s bytes as a Config: the one reader that the view of HEAD, adopting a
    hand edit and sync all use. STORE_UNSUPPORTED_VERSION for a schema newer than this code
    (``details.found``), INVALID_INPUT for anything else wrong."""
    try:
        raw = load_yaml(data)
    except errors.ProtocolError:
        raise
    except Exception as exc:  # YAML errors of any kind, bytes that are not UTF-8
        said = str(exc)  # the guarded reader's says so itself: "filemem.yaml is not valid..."
        raise errors.invalid_input(said if "not valid YAML" in said
                                   else f"not valid YAML: {said}") from None
    schema = raw.get("schema") if isinstance(raw, dict) else None
    if isinstance(schema, int) and not isinstance(schema, bool) and schema > STORE_SCHEMA:
        raise errors.ProtocolError(
            errors.STORE_UNSUPPORTED_VERSION,
            f"store schema {schema} needs a newer filemem (this one reads {STORE_SCHEMA}); "
            "upgrade filemem here first", {"found": schema})
    return parse(raw)


def problem(data: bytes) -> str | None:
    """Why ``filemem.yaml``'s bytes cannot be committed, or None."""
    try:
        load(data)
    except errors.ProtocolError as exc:
        return exc.message
    return None


def to_json(config: Config) -> dict[str, Any]:
    return {
        "schema": config.schema,
        "budgets": budgets_to_json(config.budgets),
        "writePolicy": config.write_policy,
        "writePolicies": dict(config.write_policies),
        "maxEntriesPerQuery": config.max_entries_per_query,
        "language": config.language,
        "checks": {"invisible": config.invisible, "rules": dict(config.rules)},
    }
