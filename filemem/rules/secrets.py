"""Credential-looking texts: the named rules that find a secret about to be stored.

A secret written into a git store lives in every commit and every clone, so a text that
looks like one is refused before anyone is asked (unless the owner's ``filemem.yaml`` sets
the rule to ``warn`` or ``off``). The rules know the shapes of real tokens (fixed prefixes
and lengths), a private-key block, a JWT, and a high-entropy value assigned to a name that
says it is a secret (``*_KEY``, ``*_TOKEN``, ``*_SECRET``, ``PASSWORD``...). A git commit
id, a UUID or a checksum is not a secret; neither is a placeholder (``<your-token>``,
``${GITHUB_TOKEN}``, ``xxxx``, ``changeme``) or a reference to where a secret lives
(``token: see 1Password "deploy"``, ``GITHUB_TOKEN=$(gh auth token)``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from typing import Final

from filemem.rules.lazyre import Lazy
from filemem.rules.wordset import WordSet

RULES: Final[dict[str, tuple[Lazy, ...]]] = {
    "aws-access-key": (Lazy(r"(?<![A-Z0-9])(?:AKIA|ASIA|ABIA|ACCA|A3T[A-Z0-9])"
                                  r"[A-Z0-9]{16}(?![A-Z0-9])"),),
    "github-token": (Lazy(r"(?<![A-Za-z0-9_])gh[pousr]_[A-Za-z0-9]{36,255}(?![A-Za-z0-9])"),
                     Lazy(r"(?<![A-Za-z0-9_])github_pat_[A-Za-z0-9_]{60,255}")),
    "gitlab-token": (Lazy(r"(?<![A-Za-z0-9_-])gl(?:pat|dt|rt|ptt|ft|cbt|oas|soat)-"
                                r"[A-Za-z0-9_-]{20,}"),),
    "slack-token": (Lazy(r"(?<![A-Za-z0-9])xox[abposre]-(?:\d+-)?[A-Za-z0-9-]{10,}"),
                    Lazy(r"https://hooks\.slack\.com/(?:services|workflows|triggers)/"
                               r"[A-Za-z0-9_/-]{20,}")),
    "npm-token": (Lazy(r"(?<![A-Za-z0-9_])npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])"),),
    "pypi-token": (Lazy(r"(?<![A-Za-z0-9_-])pypi-AgE[A-Za-z0-9_-]{50,}"),),
    "openai-key": (Lazy(r"(?<![A-Za-z0-9_-])sk-(?!ant-)(?:proj-|svcacct-|admin-|None-)?"
                              r"(?=[A-Za-z0-9_-]*[0-9])(?=[A-Za-z0-9_-]*[A-Za-z])"
                              r"[A-Za-z0-9_-]{32,}"),),
    "anthropic-key": (Lazy(r"(?<![A-Za-z0-9_-])sk-ant-[a-z]+\d*-[A-Za-z0-9_-]{32,}"),),
    "private-key": (Lazy(r"-----BEGIN[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----"
                               r"(?:[\s\S]*?-----END[ A-Z0-9]*PRIVATE KEY(?: BLOCK)?-----|"
                               r"[\s\S]*\Z)"),),
    "jwt": (Lazy(r"(?<![A-Za-z0-9_-])eyJ[A-Za-z0-9_-]{10,}\.eyJ[A-Za-z0-9_-]{10,}\."
                       r"[A-Za-z0-9_-]{10,}"),),
}

# What each rule's patterns start with (any of, in the lower-cased text): a rule whose
# trigger is not in the text is not tried, so most notes cost one search for all the
# words (:data:`WORDS`).
TRIGGERS: Final[dict[str, tuple[str, ...]]] = {
    "aws-access-key": ("akia", "asia", "abia", "acca", "a3t"),
    "github-token": ("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    "gitlab-token": ("glpat-", "gldt-", "glrt-", "glptt-", "glft-", "glcbt-", "gloas-",
                     "glsoat-"),
    "slack-token": ("xox", "hooks.slack"),
    "npm-token": ("npm_",),
    "pypi-token": ("pypi-",),
    "openai-key": ("sk-",),
    "anthropic-key": ("sk-ant-",),
    "private-key": ("private key",),
    "jwt": ("eyj",),
    "assigned-secret": ("key", "token", "secret", "passw", "pwd", "passphrase", "credential"),
}


WORDS: Final = WordSet(w for words in TRIGGERS.values() for w in words)


_RULES_OF: Final = {w: frozenset(r for r, words in TRIGGERS.items() if w in words)
                    for w in WORDS.words}  # a word -> the rules it triggers


def triggered(found: frozenset[str]) -> set[str]:
    """The rules whose trigger words are in ``found``."""
    rules: set[str] = set()
    for word in found:
        rules |= _RULES_OF.get(word, frozenset())
    return rules


# NAME = value, NAME: value, "name": "value", --name value; the name says it is a secret
_ASSIGNED: Final = Lazy(
    r"(?<![A-Za-z0-9])(?P<name>[A-Za-z0-9_.-]{0,40}?(?:api[_-]?key|access[_-]?key|secret[_-]?key|"
    r"private[_-]?key|auth[_-]?token|access[_-]?token|refresh[_-]?token|client[_-]?secret|"
    r"apikey|secret|token|password|passwd|passphrase|pwd|credentials?|(?<=[_.-])key|^key)"
    r")[\"']?\s*(?:=|:|=>|:=|\s(?=-))\s*[\"'`]?(?P<value>[^\s\"'`,;)}\]]{8,})",
    re.IGNORECASE | re.MULTILINE)
_PLACEHOLDER: Final = Lazy(
    r"^(?:<[^>]*>|\$\{?[A-Za-z_][A-Za-z0-9_]*\}?|\$\(.*|%[A-Za-z_]+%|\{\{.*\}\}|"
    r"(?:x+|\*+|\.+|#+|_+|-+)|.*(?:example|placeholder|changeme|your[_-]|redacted|dummy|"
    r"sample|xxxx|\*\*\*\*|not[_-]?set|todo).*|(?:os\.)?environ.*|process\.env.*|"
    r"getenv.*|env\(.*|secrets?\..*|vault:.*|op://.*|keychain.*|"
    r"(?:true|false|null|none|required|optional|string|str|bytes|int)\b.*)$", re.IGNORECASE)
_HEX_ID: Final = Lazy(r"^(?:[0-9a-f]{7,12}|[0-9a-f]{40}|[0-9a-f]{64}|[0-9A-F]{40}|"
                            r"[0-9A-F]{64})$")
_UUID: Final = Lazy(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-"
                          r"[0-9a-fA-F]{12}$")
MIN_ENTROPY: Final = 3.0  # bits per character of an assigned value that counts as random
MIN_LENGTH: Final = 8


def entropy(value: str) -> float:
    """Shannon entropy of ``value`` in bits per character."""
    n = len(value)
    counts: dict[str, int] = {}
    for ch in value:
        counts[ch] = counts.get(ch, 0) + 1
    return -sum(c / n * math.log2(c / n) for c in counts.values())


def _random_looking(value: str) -> bool:
    """A value that reads like a generated secret, not a word, path, id or placeholder."""
    if len(value) < MIN_LENGTH or _PLACEHOLDER.match(value) or _HEX_ID.match(value) or \
            _UUID.match(value) or "(" in value:  # a call: `token = f.encrypt(...)`
        return False
    if "/" in value and not re.search(r"[A-Za-z0-9+/]{20,}={0,2}$", value):
        return False  # a path or a URL
    classes = sum(bool(re.search(p, value))
                  for p in (r"[a-z]", r"[A-Z]", r"[0-9]", r"[^A-Za-z0-9]"))
    return classes >= 2 and entropy(value) >= MIN_ENTROPY


def matches(text: str, words: frozenset[str] | None = None
            ) -> Iterator[tuple[str, int, int]]:
    """``(rule, start, end)`` for every credential-looking span of ``text``, by position.
    ``words``: the trigger words in ``text.lower()``, if the caller has found them."""
    found: list[tuple[int, str, int]] = []
    if words is None:
        words = WORDS.found_in(text.lower())
    rules = triggered(words)
    for name, patterns in RULES.items():
        if name in rules:
            for pattern in patterns:
                found += [(m.start(), name, m.end()) for m in pattern.finditer(text)]
    for m in _ASSIGNED.finditer(text) if "assigned-secret" in rules else ():
        value = m.group("value")
        if _random_looking(value):
            start, end = m.span("value")
            if not any(a <= start < b for a, _, b in found):
                found.append((start, "assigned-secret", end))
    for start, name, end in sorted(found):
        yield name, start, end
