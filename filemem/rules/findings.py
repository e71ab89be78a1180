"""What the checks found in a text, and what follows from it: the one place that runs them.

Three kinds of check run over every text a write would store, before anyone is asked, and
over every entry when a snapshot is rendered, when a hand edit is adopted and when entries
arrive through sync or import:

* ``invisible``: characters a person cannot see or that reorder what is shown
  (:func:`filemem.shown.kind_at`); ``checks.invisible: warn`` (default) shows them as
  escapes with a warning line, ``refuse`` refuses the text.
* ``injection``: planted instructions (:mod:`filemem.rules.injection`), on the normalised
  text (:mod:`filemem.rules.normalized`).
* ``secret``: credential-looking values (:mod:`filemem.rules.secrets`), on the text and on
  its normalised form.

Each finding names its rule and level and the span it covers in the text, in UTF-16 code
units (the protocol's character count); a secret's finding never carries the matched text.
A finding at level ``block`` (an injection or secret rule set to ``block``, or an invisible
character under ``refuse``) refuses a write with INVALID_INPUT (``details.reason``:
``checks``) before anyone is asked, and withholds a stored entry from the snapshot.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from typing import Final, TypeAlias, TypedDict

from filemem import errors, shown
from filemem.config import Config
from filemem.jsstr import utf16_len
from filemem.rules import injection, secrets
from filemem.rules.memo import TextMemo
from filemem.rules.normalized import is_normal, normalize
from filemem.rules.wordset import WordSet

INVISIBLE: Final = "invisible"
INJECTION: Final = "injection"
SECRET: Final = "secret"
REFUSE_RULE: Final = "invisible-characters"  # the rule name a refused invisible text carries
EXCERPT: Final = 60  # characters of an injection finding's match that a person is shown


class _FindingFields(TypedDict):
    kind: str  # invisible | injection | secret
    rule: str  # the rule's name (an invisible finding: the class of character)
    level: str  # warn | block
    text: int  # which of the write's texts (0 for add and replace; a seed's entry index)
    start: int  # span in that text, UTF-16 code units, end exclusive
    end: int
    what: str  # what it is, for a person: never the secret itself


class Finding(_FindingFields, total=False):
    """One thing a check found in a text (machine-readable: bridge payloads, errors)."""

    excerpt: str  # injection only: the matched text (escaped, at most EXCERPT characters)
    count: int  # invisible only: how many characters the run holds


def _units(text: str, start: int, end: int) -> tuple[int, int]:
    a = utf16_len(text[:start])
    return a, a + utf16_len(text[start:end])


def _invisible(text: str, index: int, config: Config) -> list[Finding]:
    level = "block" if config.invisible == "refuse" else "warn"
    out: list[Finding] = []
    if shown.plain(text):
        return out
    i = 0
    while i < len(text):
        kind = shown.kind_at(text, i)
        if kind is None:
            i += 1
            continue
        j = i + 1
        while j < len(text) and shown.kind_at(text, j) == kind:
            j += 1
        start, end = _units(text, i, j)
        codes = " ".join(f"U+{ord(ch):04X}" for ch in text[i:min(j, i + 8)])
        more = " ..." if j - i > 8 else ""
        out.append({"kind": INVISIBLE, "rule": kind, "level": level, "text": index,
                    "start": start, "end": end, "count": j - i,
                    "what": f"{shown.KINDS[kind]}: {codes}{more}"})
        i = j
    return out


_Hit: TypeAlias = tuple[str, str, int, int]  # kind, rule, span in the original text
_WORDS: Final = WordSet(injection.WORDS.words | secrets.WORDS.words)
MEMO_CHARS: Final = 4_000_000  # characters of clean texts remembered (10^4 notes and more)


def _scan_rules(text: str) -> tuple[_Hit, ...]:
    """What the injection and secret rules match in ``text``, whatever their levels."""
    words = _WORDS.found_in(text.lower())
    if not words and is_normal(text):
        return ()  # most notes: no trigger word, and a normalised form that is the text
    norm = normalize(text)
    norm_words = words if norm.text == text else _WORDS.found_in(norm.text.lower())
    if not (injection.triggered(norm_words) or secrets.triggered(words)
            or secrets.triggered(norm_words)):
        return ()  # most notes: no rule is tried
    hits = [(INJECTION, rule, *norm.span(a, b))
            for rule, a, b in injection.matches(norm.text, norm_words)]
    hits += [(SECRET, rule, a, b) for rule, a, b in secrets.matches(text, words)]
    if norm.text != text:
        hits += [(SECRET, rule, *norm.span(a, b))
                 for rule, a, b in secrets.matches(norm.text, norm_words)]
    return tuple(hits)


# the same for a given text: a snapshot rendered again does not scan its entries again (the
# strings are mostly the entries' own, so remembering them costs little memory)
_hits: Final = TextMemo(_scan_rules, MEMO_CHARS, keep=lambda hits: not hits)


def _matched(text: str, index: int, config: Config) -> list[Finding]:
    hits = _hits(text)
    if not hits:
        return []
    out: list[Finding] = []
    seen: set[tuple[str, int, int]] = set()
    hidden = [(a, b) for kind, _rule, a, b in hits if kind == SECRET]
    for kind, rule, a, b in hits:
        level = config.level(rule)
        if level == "off" or (rule, a, b) in seen:
            continue
        if kind == SECRET and any(r == rule and x <= a < y for r, x, y in seen):
            continue  # the same secret seen in the normalised form
        seen.add((rule, a, b))
        start, end = _units(text, a, b)
        finding: Finding = {"kind": kind, "rule": rule, "level": level, "text": index,
                            "start": start, "end": end, "what": _what(kind, rule)}
        if kind == INJECTION:
            finding["excerpt"] = _excerpt(text, a, b, hidden)
        out.append(finding)
    return out


def _excerpt(text: str, a: int, b: int, secret_spans: list[tuple[int, int]]) -> str:
    """``text[a:b]`` for a person: hidden characters escaped, whatever looks like a secret
    (at any level, even off) left out, at most :data:`EXCERPT` characters."""
    parts, i = [], a
    for x, y in sorted(secret_spans):
        if y <= i or x >= b:
            continue
        parts += [shown.visible(text[i:max(i, x)]), "[secret left out]"]
        i = max(i, y)
    parts.append(shown.visible(text[i:b]))
    shown_text = "".join(parts)
    return shown_text[:EXCERPT] + ("\u2026" if len(shown_text) > EXCERPT else "")


def _what(kind: str, rule: str) -> str:
    if kind == SECRET:
        return f"looks like a credential ({rule})"
    return f"looks like a planted instruction ({rule})"


def scan(text: str, config: Config, index: int = 0) -> list[Finding]:
    """Every finding in ``text`` under ``config``'s levels (rules set to ``off`` find
    nothing), by kind: invisible characters, then injection and secret rules by position."""
    if shown.plain(text) and not _hits(text):
        return []  # most texts: nothing found (a seed checks 1,000)
    return _invisible(text, index, config) + sorted(
        _matched(text, index, config), key=lambda f: (f["start"], f["rule"]))


def scan_all(texts: Sequence[str], config: Config) -> list[Finding]:
    """:func:`scan` of each text (a seed's entry index is its finding's ``text``)."""
    together = len(texts) >= BATCH and _WORDS.at_once(len(texts))
    maybe = _maybe_found(texts) if together else range(len(texts))
    return [f for i in maybe for f in scan(texts[i], config, i)]


BATCH: Final = 64  # texts that scan_all first sorts out together
_SEP: Final = "\n"  # joins a batch's texts: plain, and in no trigger word (a test checks)


def _maybe_found(texts: Sequence[str]) -> list[int]:
    """The indexes of ``texts`` that something may be found in; the others are clean, known
    from one pass over them all (the per-text calls cost a seed more than the search), and
    remembered as such. Clean as in :func:`_scan_rules`' shortcut: ASCII (so lowercasing
    keeps every position), plain, and holding no trigger word. The separator is in no word
    and plain, so no word or hidden character found spans two texts."""
    maybe = [i for i, text in enumerate(texts) if not text.isascii()]
    picked = [i for i, text in enumerate(texts) if text.isascii()] if maybe else \
        range(len(texts))
    joined = _SEP.join([texts[i] for i in picked])
    low = joined.lower()
    ends = list(itertools.accumulate(len(texts[i]) + 1 for i in picked))  # each text's end+1
    found = set()
    for first in (shown.first_unplain, _WORDS.first_at):
        pos = first(low, 0)
        while pos >= 0:
            k = bisect.bisect_right(ends, pos)  # the text holding pos
            found.add(k)
            pos = first(low, ends[k]) if k + 1 < len(ends) else -1
    _hits.remember([texts[i] for k, i in enumerate(picked) if k not in found], ())
    return sorted(maybe + [picked[k] for k in found])


def blocking(findings: Iterable[Finding]) -> list[Finding]:
    return [f for f in findings if f["level"] == "block"]


def rule_of(finding: Finding) -> str:
    """The rule a blocking finding is named by (an invisible one under ``refuse``:
    ``invisible-characters``, whatever its class)."""
    return REFUSE_RULE if finding["kind"] == INVISIBLE else finding["rule"]


def refused(findings: Sequence[Finding]) -> errors.ProtocolError | None:
    """INVALID_INPUT for a write with a blocking finding (None if it has none): the rules and
    spans in ``details``, never the secret; the message says what to store instead."""
    block = blocking(findings)
    if not block:
        return None
    kinds = {f["kind"] for f in block}
    rules = sorted({rule_of(f) for f in block})
    advice = []
    if SECRET in kinds:
        advice.append("do not store a secret in memory: store where it lives instead (the "
                      "name of the environment variable, the password manager entry, the "
                      "file that holds it)")
    if INJECTION in kinds:
        advice.append("memory must not carry instructions or commands planted for an agent "
                      "(describe what the note is about in plain words instead)")
    if INVISIBLE in kinds:
        advice.append("the store refuses invisible and control characters "
                      "(checks.invisible: refuse); write the text without them")
    message = (f"this text was refused before anyone was asked, by the store's checks "
               f"({summary(block)}); {'; '.join(advice)}; only the store "
               "owner can relax a rule (checks in filemem.yaml); nothing was written")
    return errors.ProtocolError(errors.INVALID_INPUT, message, {
        "reason": "checks", "rules": rules,
        "findings": [dict(f) for f in block]})


def summary(found: Sequence[Finding]) -> str:
    """``rule at start-end, ...`` for a person (at most five, then how many more)."""
    where = ", ".join(f"{rule_of(f)} at {f['start']}-{f['end']}"
                      + (f" of text {f['text']}" if f["text"] else "") for f in found[:5])
    return where + (f" and {len(found) - 5} more" if len(found) > 5 else "")


def withheld(entry_id: str, rule: str) -> str:
    """What the snapshot shows in place of an entry a blocking rule matches."""
    return (f"[filemem: entry {entry_id} withheld from this snapshot: it matches the blocking "
            f"rule {rule}; the owner can read it with `filemem log --entry {entry_id}`]")


def describe(findings: Sequence[Finding]) -> list[str]:
    """Lines for a person, one per finding (after a text shown by :func:`filemem.shown.block`
    and its :func:`filemem.shown.warning` line)."""
    lines = []
    for f in findings:
        if f["kind"] == INVISIBLE:
            continue  # shown.warning says it in one line
        verb = "blocks" if f["level"] == "block" else "warns"
        where = f"text {f['text']}, " if f["text"] else ""
        seen = f": {f['excerpt']}" if "excerpt" in f else ""
        lines.append(f"check {f['rule']} {verb} ({where}characters {f['start']}-{f['end']}): "
                     f"{f['what']}{seen}")
    return lines
