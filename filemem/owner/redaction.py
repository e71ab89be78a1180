"""What a redaction replaces, and where: the rules applied to every text of the history.

A redaction is one or more *needles* (the texts to remove) and the marker they become,
:data:`MARKER`. ``filemem redact --text S`` has one needle, replaced wherever it occurs.
``filemem redact ENTRY-ID`` has every text that entry ever had: the entry's own texts (its
files, its audit rows) become the marker whole, and elsewhere (a commit's subject and body,
another entry that quoted it, a snapshot in the ledger) each of its texts is replaced where
it occurs, if it is at least :data:`SPREAD_MIN` characters long (a short text such as
``yes`` is replaced only where the entry itself is named, not in every note that says yes).

The marker is the same for every redaction, so rewriting the same commit the same way
gives the same commit on every machine: a second machine redacting the text its own
unpushed commits still hold joins the rewritten history instead of forking it.

Rewriting is consistent by construction: an entry file and the audit row that wrote it get
the same replacement, so ``filemem verify`` replays the rewritten history as it replayed
the old one, and meets the marker where the text was. What cannot be rewritten without
breaking the store (the text in a file or folder name, a front-matter key or value, an
entry id, a layer, a session id, a commit's author) is refused before anything changes.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from filemem import errors
from filemem.ops.base import Changes, Replayed, RowRule
from filemem.store.auditlog import commit_message, parse_rows
from filemem.types import AuditRow

MARKER: Final = "[redacted]"
SPREAD_MIN: Final = 8
ACTION: Final = "redact"
_FREE_FIELDS: Final = ("text", "outcome")  # row fields that hold free text
_FIXED_FIELDS: Final = ("action", "track", "scope", "entryId", "source", "sessionId")
_SCRYPT: Final = {"n": 2 ** 14, "r": 8, "p": 1}


def refused(where: str, why: str) -> errors.ProtocolError:
    """INVALID_INPUT: the text is somewhere a redaction cannot rewrite; nothing changed."""
    return errors.invalid_input(
        f"the text to redact is in {where}; {why}. Nothing was changed. filemem redacts "
        "texts (entry texts, audit rows, commit messages, other files' contents), not the "
        "names and keys the store is built of: to remove it from there, rewrite the history "
        "with git's own tools (git filter-repo), then `filemem verify`")


def _json_forms(text: str) -> tuple[str, ...]:
    """The text as JSON strings write it (as it is, and with non-ASCII escaped)."""
    return (json.dumps(text, ensure_ascii=False)[1:-1], json.dumps(text)[1:-1])


def _any_of(items: Iterable[str]) -> re.Pattern[str] | None:
    """One expression matching where any of ``items`` occurs (None for none): one search in
    C, where testing each (``item in text``) took ~0.4 µs an item, and an entry with 100
    versions has 100 to test against every name, row and line of a history."""
    unique = sorted(set(items), key=len, reverse=True)
    return re.compile("|".join(map(re.escape, unique))) if unique else None


def _any_of_bytes(items: Iterable[bytes]) -> re.Pattern[bytes] | None:
    unique = sorted(set(items), key=len, reverse=True)
    return re.compile(b"|".join(map(re.escape, unique))) if unique else None


class _Finders(NamedTuple):
    """The needles of one :meth:`Needles.spread` and the searches for them, made once."""

    needles: tuple[str, ...]
    folded: tuple[str, ...]  # whitespace folded, as a subject shows them
    raw: re.Pattern[str] | None
    forms: re.Pattern[str] | None  # as written, and as JSON strings write them
    encoded: re.Pattern[bytes] | None
    any_folded: re.Pattern[str] | None

    @classmethod
    def of(cls, needles: tuple[str, ...]) -> _Finders:
        folded = tuple(c for c in (" ".join(n.split()) for n in needles) if c)
        return cls(needles, folded, _any_of(needles),
                   _any_of(f for n in needles for f in (n, *_json_forms(n))),
                   _any_of_bytes(n.encode("utf-8", "surrogatepass") for n in needles),
                   _any_of(folded))


@dataclass(frozen=True)
class Needles:
    """The texts to remove (longest first) and, for an entry's redaction, its id."""

    texts: tuple[str, ...]
    entry_id: str | None = None

    @classmethod
    def of(cls, texts: Iterable[str], entry_id: str | None = None) -> Needles:
        # the marker is what a redacted text already became: never a text to remove (an
        # entry redacted here has it as its text; redacting it again finds what is left)
        unique = sorted({t for t in texts if t and t != MARKER}, key=lambda t: (-len(t), t))
        return cls(tuple(unique), entry_id)

    def spread(self, naming: bool = False) -> tuple[str, ...]:
        """The needles replaced wherever they occur (all of them where the entry is named)."""
        return self._finders(naming).needles

    def collapsed(self, naming: bool = False) -> tuple[str, ...]:
        """:meth:`spread` with whitespace folded, as a commit's subject shows a text."""
        return self._finders(naming).folded

    def _finders(self, naming: bool) -> _Finders:
        wide = self.entry_id is None or naming
        made = self._made.get(wide)
        if made is None:
            needles = self.texts if wide else \
                tuple(t for t in self.texts if len(t) >= SPREAD_MIN)
            made = self._made[wide] = _Finders.of(needles)
        return made

    @functools.cached_property
    def _made(self) -> dict[bool, _Finders]:
        return {}

    def free(self, text: str, naming: bool = False) -> str:
        finders = self._finders(naming)
        if finders.raw is None or finders.raw.search(text) is None:
            return text
        for needle in finders.needles:  # one after the other, longest first
            if needle in text:
                text = text.replace(needle, MARKER)
        return text

    def entry_text(self, text: str, entry_id: str | None) -> str:
        """An entry's text (or its audit row's): the marker whole for the redacted entry."""
        if self.entry_id is not None and entry_id == self.entry_id:
            return MARKER if text else text
        return self.free(text)

    def found(self, text: str, naming: bool = False) -> bool:
        """Whether any needle is in ``text``, raw or as JSON escapes it."""
        forms = self._finders(naming).forms
        return forms is not None and forms.search(text) is not None

    def found_bytes(self, data: bytes, naming: bool = False) -> bool:
        encoded = self._finders(naming).encoded
        return encoded is not None and encoded.search(data) is not None

    def found_folded(self, text: str, naming: bool = False) -> bool:
        """Whether any needle is in ``text`` as a subject shows it (whitespace folded)."""
        folded = self._finders(naming).any_folded
        return folded is not None and folded.search(text) is not None

    def digest(self) -> str:
        """A salted, slow hash of what is redacted (never the text): ``scrypt$salt$hash``.
        Whoever holds the text can check it against the record; nobody can read it off."""
        salt = os.urandom(16)
        data = "\0".join(sorted(self.texts)).encode("utf-8", "surrogatepass")
        out = hashlib.scrypt(data, salt=salt, dklen=32, maxmem=64 * 1024 * 1024, **_SCRYPT)
        return f"scrypt-n{_SCRYPT['n']}-r{_SCRYPT['r']}-p{_SCRYPT['p']}${salt.hex()}${out.hex()}"


def redact_row(r: AuditRow, needles: Needles, naming: bool) -> AuditRow:
    """One audit row with its free texts redacted; refused if a needle is in a field the
    store is built of (an id, a layer, a session id)."""
    out: dict[str, Any] = dict(r)
    for key in _FIXED_FIELDS:
        value = out.get(key)
        if isinstance(value, str) and needles.found(value, naming) and \
                not (key == "entryId" and value == needles.entry_id):
            raise refused(f"the {key} of an audit row ({value[:12]}...)",
                          "that field names the store's own structure")
    eid = out.get("entryId")
    for key in _FREE_FIELDS:
        value = out.get(key)
        if isinstance(value, str):
            out[key] = (needles.entry_text(value, eid if isinstance(eid, str) else None)
                        if key == "text" else needles.free(value, naming))
    return out  # type: ignore[return-value]


def redact_subject(subject: str, needles: Needles, naming: bool) -> str:
    """A subject line: the needles as written, and as the subject shows them (whitespace
    folded); a subject cut off ("…") in the middle of one loses that start as well."""
    subject = needles.free(subject, naming)
    for c in needles.collapsed(naming):
        subject = subject.replace(c, MARKER)
    if subject.endswith("\u2026"):
        cut = subject[:-1]
        for c in needles.collapsed(naming):
            for n in range(min(len(c), len(cut)), 2, -1):
                if cut.endswith(c[:n]):
                    return cut[:-n] + MARKER + "\u2026"
    return subject


def redact_message(message: str, needles: Needles) -> str:
    """A commit message with the needles out of its subject, body and audit rows (rows
    re-encoded as filemem writes them). A message that carries no audit rows (a commit made
    outside filemem) has them replaced wherever they are."""
    try:
        rows = parse_rows(message)
    except ValueError:
        rows = None
    naming = rows is not None and needles.entry_id is not None and any(
        r.get("entryId") == needles.entry_id for r in rows)
    if rows is None:
        out = _raw(message, needles, True)
    else:
        head = message.rstrip("\n").rsplit("\n\n", 1)[0]
        subject, _, body = head.partition("\n\n")
        new_rows = [redact_row(r, needles, naming) for r in rows]
        new_subject = redact_subject(subject, needles, naming)
        new_body = needles.free(body, naming)
        if new_rows == rows and new_subject == subject and new_body == body:
            out = message
        else:
            out = commit_message(new_subject, new_body, new_rows)
    if needles.found(out, naming) or needles.found_folded(out, naming):
        if rows is not None:  # still there once every text is redacted: in the structure
            raise refused("the audit trailers of the commit messages (their field names "
                          "or fixed values)", "those are how the audit trail is read")
        out = _raw(out, needles, naming)
    return out


def _raw(text: str, needles: Needles, naming: bool) -> str:
    """Every needle replaced as written, as a JSON string escapes it and whitespace-folded."""
    spread = needles.spread(naming)
    for n in spread:
        text = text.replace(n, MARKER)
        for form in _json_forms(n):
            text = text.replace(form, MARKER)
    for c in needles.collapsed(naming):
        text = text.replace(c, MARKER)
    return text


def _check_redact(r: AuditRow, done: Changes) -> str | None:
    if done.added or done.modified or done.deleted:
        return "a redact row in a commit that changes entries (a redaction's record " \
               "changes no file)"
    return None


def _replay_redact(r: AuditRow, entries: Replayed, done: Changes) -> None:
    return None  # the rewritten history already holds the marker: nothing to replay


# ``verify``: the record of a redaction changes nothing; the commits it rewrote replay as
# they are (their entry files and audit rows carry the same marker)
ROW_RULES: Final = {ACTION: RowRule(_check_redact, _replay_redact)}
