"""Properties of the store's checks over any text: a write is either stored exactly or refused
with a protocol code (and then nothing is written); the checks never fail, their spans lie in
the text, a secret is never echoed; what a person is shown holds no hidden character raw and
the JSON form reads back as the very text."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import filemem
from filemem import errors, shown
from filemem.config import Config
from filemem.jsstr import utf16_len
from filemem.rules import findings
from filemem.rules.normalized import normalize
from tests.checks_corpus import INJECTION, INVISIBLE, ORDINARY, SECRETS
from tests.conftest import ctx

PIECES = ([t for _r, t in INJECTION] + [t for _r, t, _s in SECRETS]
          + [t for _k, t in INVISIBLE] + ORDINARY)
# any text, with the corpus' pieces mixed in so the interesting cases are common
TEXTS = st.lists(st.one_of(st.text(min_size=0, max_size=40), st.sampled_from(PIECES)),
                 min_size=1, max_size=4).map("".join)
CONFIGS = st.builds(Config, invisible=st.sampled_from(["warn", "refuse"]))


@settings(max_examples=300, deadline=None)
@given(TEXTS, CONFIGS)
def test_the_checks_never_fail_and_their_spans_lie_in_the_text(text: str, cfg: Config) -> None:
    found = findings.scan(text, cfg)
    n = utf16_len(text)
    for f in found:
        assert 0 <= f["start"] < f["end"] <= n, f
        assert f["level"] in ("warn", "block")
    error = findings.refused(found)
    assert (error is None) == (findings.blocking(found) == [])
    if error is not None:
        assert error.code == errors.INVALID_INPUT and error.details["reason"] == "checks"
        dumped = json.dumps(error.to_dict())
        for f in found:
            if f["kind"] == "secret" and f["end"] - f["start"] >= 16:
                assert text.encode("utf-16-le")[2 * f["start"]:2 * f["end"]].decode(
                    "utf-16-le", "replace") not in dumped


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_what_a_person_sees_holds_nothing_hidden_and_json_reads_back(text: str) -> None:
    seen = shown.visible(text)
    assert all(shown.kind_at(seen, i) is None for i in range(len(seen)))
    assert (shown.warning(text) is None) == (shown.hidden(text) == {})
    dumped = shown.json_text({"text": text})
    assert json.loads(dumped) == {"text": text}
    assert not any(shown.kind_at(dumped, i) for i in range(len(dumped)))
    for line in shown.block(text)[1:-1]:
        assert line.startswith(shown.BAR)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_the_normalised_form_maps_back_into_the_text(text: str) -> None:
    norm = normalize(text)
    assert len(norm.origin) == len(norm.text)
    assert list(norm.origin) == sorted(norm.origin)
    assert all(0 <= i < len(text) for i in norm.origin)


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(text=TEXTS)
def test_any_text_is_stored_exactly_or_refused_with_a_code(tmp_path: Path, text: str) -> None:
    store = tmp_path / "store"
    with filemem.open_store(store, create=True, write_policy="auto") as p:
        before = p.list_entries()
        try:
            result: Any = p.add({"track": "agent", "scope": "user-global", "text": text}, ctx())
        except filemem.ProtocolError as exc:
            assert exc.code in errors.CODES
            assert p.list_entries() == before  # nothing written
            return
        stored = result["entry"]
        assert stored["text"] == text
        assert [e["text"] for e in p.list_entries() if e["id"] == stored["id"]] == [text]
        assert not findings.blocking(findings.scan(text, p.config()))


@settings(max_examples=2000, deadline=None)
@given(st.characters(), st.characters(), st.characters())
def test_the_fast_check_never_misses_a_hidden_character(a: str, ch: str, b: str) -> None:
    text = a + ch + b
    if shown.plain(text):
        assert all(shown.kind_at(text, i) is None for i in range(3))


def test_the_fast_check_covers_every_format_and_control_character() -> None:
    import unicodedata

    for code in range(0x110000):
        ch = chr(code)
        if unicodedata.category(ch) in ("Cf", "Cc", "Cs") and ch not in "\t\n":
            assert not shown.plain(ch), hex(code)
