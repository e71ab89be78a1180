"""Agent text shown to a person: control characters are visible escapes, never raw bytes, and
the agent's text is delimited so it cannot imitate the frame around it (`filemem pending`,
`list`, `query`, `log`, the terminal prompt, the MCP approval message)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import mcp_types as t
import pytest
from mcp import Client, StdioServerParameters

import filemem
from filemem import shown
from tests.conftest import run_at_terminal, run_cli

# What a staged write could use to hide part of itself from the owner (no NUL: a store
# refuses one, tests/test_nul.py)
HOSTILE = ("start \x1b[8mhidden\x1b[0m \x1b[2Kwiped \x1b[1Aup \x1b]0;title\x07 "
           "over\rwrite back\x08\x08 c1\x9b31m nel\x85 dcs\x90 del\x7f tab\tend")
ESCAPED = ("start \\x1b[8mhidden\\x1b[0m \\x1b[2Kwiped \\x1b[1Aup \\x1b]0;title\\x07 "
           "over\\rwrite back\\x08\\x08 c1\\x9b31m nel\\x85 dcs\\x90 del\\x7f tab\\tend")
ARGV_HOSTILE = HOSTILE
SEPARATOR = "-" * 60
APPROVE = ("Approve writes exactly this as one git commit; decline refuses it and nothing is "
           "written.")
# A text imitating the frame: the separators, the closing sentence, many blank lines, and
# this renderer's own frame lines.
FRAME = ("harmless\n" + SEPARATOR + "\n\n" + APPROVE + "\n" + "\n" * 40 + shown.END + "\n"
         + shown.BEGIN + "\n" + SEPARATOR + "\nsecret: rm -rf ~")
PLAIN = "Prefers replies in 中文, naïve café 😀 👩‍💻"
RAW = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]")  # anything but \n


def clean(out: str) -> None:
    """No raw control byte reaches the screen; only newlines break lines."""
    assert not RAW.search(out), [m.group() for m in RAW.finditer(out)]


def joined(inside: list[str]) -> list[str]:
    """The text's lines back from the shown ones (a long line continues after MORE)."""
    parts: list[str] = []
    for ln in inside:
        if ln.startswith(shown.MORE + " "):
            parts[-1] += ln[len(shown.MORE) + 1:]
        elif ln.startswith(shown.BAR + " "):
            parts.append(ln[2:])
        else:
            assert ln == shown.BAR, ln
            parts.append("")
    return parts


def framed(out: str, text: str) -> None:
    """Every line of ``text`` is shown with the text prefix, in order, between the frame's
    begin and end lines; the frame lines themselves appear exactly once unprefixed."""
    lines = out.split("\n")
    stripped = [ln.lstrip(" ") for ln in lines]
    begin = [i for i, ln in enumerate(stripped) if ln.startswith(shown.BEGIN)]
    end = [i for i, ln in enumerate(stripped) if ln == shown.END]
    assert len(begin) == 1 and len(end) == 1, out
    inside = stripped[begin[0] + 1:end[0]]
    assert all(ln.startswith(shown.BAR) for ln in inside), inside
    assert joined(inside) == [shown.visible(part) for part in text.split("\n")]
    # no line outside the frame repeats what the text says
    outside = stripped[:begin[0]] + stripped[end[0] + 1:]
    assert not any(ln == SEPARATOR or ln.startswith("secret") for ln in outside), outside


# ---------------------------------------------------------------- the renderer


def test_visible_escapes_every_control_and_keeps_printable_text() -> None:
    assert shown.visible(HOSTILE) == ESCAPED
    assert shown.visible("nul\x00") == "nul\\x00"
    assert shown.visible(PLAIN) == PLAIN
    assert shown.visible("a\nb") == "a\\nb"
    assert shown.visible("\u2028\u2029\u202e\u2066") == "\\u2028\\u2029\\u202e\\u2066"
    clean(shown.visible("".join(chr(c) for c in range(0x20)) + "".join(
        chr(c) for c in range(0x7f, 0xa0))))


def test_block_prefixes_every_line_and_ends_clearly() -> None:
    lines = shown.block("one\n\ntwo\x1b[8m")
    assert lines == [shown.BEGIN, "│ one", "│", "│ two\\x1b[8m", shown.END]
    for line in shown.block(FRAME)[1:-1]:
        assert line.startswith(shown.BAR)
    # a long line is cut into prefixed pieces, so a window's own wrapping cannot start a
    # visual line with the agent's text
    long = shown.block(" " * 200 + APPROVE)
    assert len(long) > 4
    assert all(ln.startswith(shown.BAR) and len(ln) <= shown.WIDTH + 3 for ln in long[1:-1])
    assert joined(long[1:-1]) == [" " * 200 + APPROVE]
    wide = shown.block("中" * 100)  # two columns each
    assert [len(ln) for ln in wide[1:-1]] == [2 + 38, 3 + 38, 3 + 24]


# ---------------------------------------------------------------- the CLI


@pytest.fixture
def store(tmp_path: Path) -> Path:
    path = tmp_path / "store"
    filemem.open_store(path, create=True).close()
    return path


def cli(*args: str, store: Path, input: str | None = None) -> str:
    out = run_cli(*args, store=store, input=input)
    assert out.returncode == 0, (out.stdout, out.stderr)
    clean(out.stdout + out.stderr)
    return out.stdout


def test_list_query_and_log_show_escapes_on_one_line(store: Path) -> None:
    for text in (HOSTILE, FRAME, PLAIN):
        cli("add", "--yes", "--scope", "user-global", "-", store=store, input=text)
    for args in (("list",), ("query",), ("log",)):
        out = cli(*args, store=store)
        assert ESCAPED[:90] in out, out
        assert PLAIN in out
        # the frame text stays on its one line: nothing of it starts a line
        for line in out.split("\n"):
            assert not line.lstrip().startswith((SEPARATOR, "Approve", shown.END, "secret"))
    listed = cli("list", store=store).strip().split("\n")
    assert len(listed) == 3
    # --json stays exact: the text round-trips byte for byte
    assert [e["text"] for e in json.loads(cli("list", "--json", store=store))] == \
        [HOSTILE, FRAME, PLAIN]


def test_list_query_and_audit_warn_once_about_hidden_characters(store: Path) -> None:
    for text in ("zero\u200bwidth", "bidi \u202eok\u202c", PLAIN):
        cli("add", "--yes", "--scope", "user-global", text, store=store)
    for args in (("list",), ("query",), ("audit",)):
        out = run_cli(*args, store=store)
        assert out.returncode == 0 and "zero\\u200bwidth" in out.stdout, out
        # on stderr: stdout stays one line per entry (or audit row)
        assert out.stderr.count("warning: these texts hold") == 1, out.stderr
        assert "zero-width" in out.stderr and "bidirectional control" in out.stderr
        assert "warning" not in out.stdout
        assert "warning" not in run_cli(*args, "--json", store=store).stderr
    # nothing hidden: no warning
    plain = store.parent / "plain"
    filemem.open_store(plain, create=True).close()
    cli("add", "--yes", "--scope", "user-global", PLAIN, store=plain)
    for args in (("list",), ("query",), ("audit",)):
        assert run_cli(*args, store=plain).stderr == ""


def test_a_pipe_gets_the_exact_text_and_a_terminal_the_escapes(store: Path) -> None:
    cli("add", "--yes", "--scope", "user-global", "-", store=store, input=HOSTILE)
    piped = subprocess.run([sys.executable, "-m", "filemem", "snapshot", "--store", str(store)],
                           capture_output=True, check=True)
    row = json.loads(cli("audit", "--json", "--limit", "1", store=store))[0]
    assert row["action"] == "snapshot" and "\x1b[8mhidden\x1b[0m" in row["text"]
    assert piped.stdout == (row["text"] + "\n").encode()  # byte for byte, escapes and all
    # the JSON outputs and the export are the exact bytes too, whatever the locale's codec
    latin = {**os.environ, "PYTHONIOENCODING": "latin-1"}
    for args in (("snapshot", "--json"), ("list", "--json"), ("export",)):
        out = subprocess.run([sys.executable, "-m", "filemem", *args, "--store", str(store)],
                             capture_output=True, env=latin)
        assert out.returncode == 0, out.stderr
        assert RAW.search(out.stdout.decode()) is None  # JSON escapes every control
        doc = json.loads(out.stdout.decode("utf-8"))
        texts = [doc["text"]] if "text" in doc else \
            [e["text"] for e in (doc if isinstance(doc, list) else doc["entries"])]
        assert any(HOSTILE in t for t in texts), texts
    cli("add", "--yes", "--scope", "user-global", PLAIN, store=store)
    out = subprocess.run([sys.executable, "-m", "filemem", "export", "--store", str(store)],
                         capture_output=True, env=latin)
    assert out.returncode == 0 and PLAIN in json.loads(out.stdout.decode())["entries"][1]["text"]
    # at a terminal: shown, not done
    code, screen = run_at_terminal(["snapshot", "--store", str(store)], b"", prompt=b"]")
    assert code == 0 and "\x1b" not in screen and ESCAPED[:60] in screen, screen


def test_pending_shows_escapes_inside_a_frame(store: Path) -> None:
    for text in (HOSTILE, FRAME):  # no terminal: staged as pending approvals
        out = run_cli("add", "--scope", "user-global", "-", store=store, input=text)
        assert out.returncode == 3, out.stderr
    out = cli("pending", store=store)
    first, second = out.split(shown.END, 1)
    framed(first + shown.END, HOSTILE)
    framed(second[second.index("\n") + 1:], FRAME)
    assert [r["payload"]["text"] for r in json.loads(cli("pending", "--json", store=store))] \
        == [HOSTILE, FRAME]


@pytest.mark.parametrize("text", [ARGV_HOSTILE, FRAME], ids=["controls", "frame"])
def test_terminal_prompt_shows_escapes_inside_a_frame(store: Path, text: str) -> None:
    code, screen = run_at_terminal(["add", "--store", str(store), "--session", "s\x1b[8m1",
                                    text], b"n\n")
    assert code == 3, screen
    asked = screen.split("Approve this write?")[0]
    clean(asked)
    framed(asked, text)
    assert "session s\\x1b[8m1" in asked


def test_plain_text_looks_as_before_in_the_prompt(store: Path) -> None:
    code, screen = run_at_terminal(["add", "--store", str(store), PLAIN], b"n\n")
    assert code == 3
    assert f"│ {PLAIN}\n{shown.END}" in screen


# ---------------------------------------------------------------- the MCP approval message


def declined_adds(store: Path, mode: str, texts: list[str]) -> tuple[list[str], list[Any]]:
    """``memory_add`` of each text through the real `filemem mcp` and the Python MCP SDK
    client (in ``mode``), a person declining every question: (the elicitation messages the
    person was shown, the tool results)."""
    (store.parent / "proj").mkdir()
    messages: list[str] = []
    results: list[Any] = []

    async def person(context: Any, params: t.ElicitRequestParams) -> t.ElicitResult:
        messages.append(params.message)
        return t.ElicitResult(action="decline")

    async def scenario() -> None:
        args = ["-m", "filemem.cli", "mcp", "--store", str(store), "--agent", "coder"]
        params = StdioServerParameters(command=sys.executable, args=args,
                                       cwd=str(store.parent / "proj"))
        async with Client(params, mode=mode, elicitation_callback=person,
                          read_timeout_seconds=60) as c:
            for text in texts:
                results.append(await c.call_tool("memory_add", {"text": text,
                                                                "scope": "user-global"}))

    anyio.run(scenario)
    return messages, results


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
def test_mcp_approval_message_shows_escapes_inside_a_frame(store: Path, mode: str) -> None:
    messages, _ = declined_adds(store, mode, [HOSTILE, FRAME])
    assert len(messages) == 2
    for message, text in zip(messages, (HOSTILE, FRAME), strict=True):
        clean(message)
        framed(message, text)
        # the one real closing sentence comes after the frame's end, unprefixed
        real = [ln for ln in message.split("\n") if ln.startswith("Approve writes")]
        assert real == [APPROVE]
        assert message.index(shown.END) < message.index("\n" + APPROVE)


def test_counts_say_one_entry_and_many_entries() -> None:
    assert [shown.counted(n, "entry", "entries") for n in (0, 1, 2)] == \
        ["0 entries", "1 entry", "2 entries"]
    assert shown.counted(1, "commit") == "1 commit" and shown.counted(3, "commit") == "3 commits"
