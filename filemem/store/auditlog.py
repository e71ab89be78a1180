"""Audit rows: in git commit messages (writes, denials) and in the local read-side ledger.

A commit message is a one-line human subject, the full text(s) for a person reading
``git log``, and a trailer block holding the audit rows, one group per row::

    add user/user-global: Prefers replies in Chinese

    Prefers replies in Chinese

    Audit-Seq: 1811550000000000
    Audit-Ts: 1764467353123
    Audit-Action: add
    Audit-Track: user
    Audit-Scope: user-global
    Audit-Entry: 0f7c1b1e-4a5b-4c3d-9e8f-001122334455
    Audit-Outcome: allowed-once (via approval, writePolicy auto)
    Audit-Source: filemem
    Audit-Session: s1
    Audit-Text: "Prefers replies in Chinese"

Each ``Audit-Seq`` starts a row; absent fields are null. A value that is not a plain single
line is written as a JSON string (``Audit-Text`` always is). The grammar is documented in
``schemas/audit-trailers.md``. ``recalled`` and ``snapshot`` rows are read-side events: they
go to ``.filemem/audit.jsonl``, one JSON row per line, never committed.

``seq`` orders rows across both places: ``max(ts * 1024, last seq + 1)``, so it is unique in
a store, grows with time, and interleaves sensibly with commits pulled from another machine.
Both kinds of row draw it from one counter, ``.filemem/ledger.lock`` (:meth:`Ledger.numbering`):
held for microseconds, never across a commit, so a reader recording a row never waits for a
writer. A commit's seqs are taken before its compare-and-swap; a ledger row numbered
meanwhile comes after them (a commit that then fails leaves a gap, never a duplicate).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from typing import Any, Final, cast

from filemem.files import atomic, flock
from filemem.jsstr import json_str
from filemem.model import now_ms
from filemem.store.names import linked, open_private
from filemem.types import AuditRow

ROW_FIELDS: Final = ("seq", "ts", "action", "track", "scope", "entryId", "text", "outcome",
                     "source", "sessionId")
_TRAILERS: Final = (
    ("seq", "Audit-Seq"), ("ts", "Audit-Ts"), ("action", "Audit-Action"),
    ("track", "Audit-Track"), ("scope", "Audit-Scope"), ("entryId", "Audit-Entry"),
    ("outcome", "Audit-Outcome"), ("source", "Audit-Source"), ("sessionId", "Audit-Session"),
    ("text", "Audit-Text"),
)
_FIELD_OF: Final = {name: key for key, name in _TRAILERS}
_NOT_PLAIN: Final = "\x00-\x1f\x7f\x85\u2028\u2029"  # characters that force a JSON string
_PLAIN_VALUE: Final = re.compile(
    rf'^[^\s"{_NOT_PLAIN}](?:[^{_NOT_PLAIN}]*[^\s{_NOT_PLAIN}])?$')
_TRAILER_LINE: Final = re.compile(r"^([A-Za-z][A-Za-z0-9-]*): (.*)$")
SEQ_PER_MS: Final = 1024
LEDGER_NAME: Final = "audit.jsonl"
COUNTER_NAME: Final = "ledger.lock"
COUNTER_TIMEOUT: Final = 10.0
_COUNTER_WIDTH: Final = 20
_KNOWN_LINES: Final = 10_240  # ledger lines kept parsed (one auditList of the most rows)
_ROW_JSON: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
_ENCODING: Final = threading.Lock()  # taken only to encode rows not yet encoded


def row(action: str, *, track: str | None = None, scope: str | None = None,
        entry_id: str | None = None, text: str | None = None, outcome: str | None = None,
        source: str | None = None, session_id: str | None = None) -> AuditRow:
    """A row without seq/ts (the store stamps those when it records the row)."""
    return {"seq": None, "ts": None, "action": action, "track": track, "scope": scope,
            "entryId": entry_id, "text": text, "outcome": outcome, "source": source,
            "sessionId": session_id}


def next_seq(ts: int, last: int) -> int:
    return max(ts * SEQ_PER_MS, last + 1)


def _json_line(value: str) -> str:
    out = json_str(value)
    return out.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").replace("\x85", "\\u0085")


def _encode_value(key: str, value: Any) -> str:
    if isinstance(value, int):
        return str(value)
    text = str(value)
    if key != "text" and _PLAIN_VALUE.match(text):
        return text
    return _json_line(text)


def row_json(r: AuditRow) -> str:
    """A row as compact JSON, not ASCII-escaped: what ``json.dumps(r, ensure_ascii=False,
    separators=(",", ":"))`` gives, so a list of rows is these joined with commas."""
    return _ROW_JSON(r)


class RowBlock:
    """Audit rows from one place (a commit, a ledger line), newest first, each encoded as
    JSON once, when first asked for. A block is cached by what fixes its rows (a commit's
    sha, a ledger line's bytes), so its JSON can never be stale: a redaction makes new
    commits and new lines. Its rows are shared: copy one before changing it."""

    __slots__ = ("_json", "ordered", "rows")

    def __init__(self, rows: list[AuditRow]) -> None:
        self.rows = rows
        # newest first by seq, as filemem numbers them: then only its first n rows can be
        # among the newest n of a merge (hand-made trailers may be in any order)
        self.ordered = all(isinstance(r["seq"], int) for r in rows) and \
            all(a["seq"] >= b["seq"] for a, b in itertools.pairwise(rows))
        self._json: list[str] = []  # the first rows' JSON: rows are read from the newest

    def json(self, k: int) -> list[str]:
        """The JSON of the first ``k`` rows (a list to join; do not change it)."""
        done = self._encoded(k)
        return done if len(done) == k else done[:k]

    def json_at(self, i: int) -> str:
        """The JSON of row ``i``."""
        return self._encoded(i + 1)[i]

    def _encoded(self, k: int) -> list[str]:
        """The JSON of at least the first ``k`` rows. Appended in order under a lock (two
        threads must not both append row i); what is there can be read without it."""
        done = self._json
        if len(done) < k:
            with _ENCODING:
                while len(done) < k:
                    done.append(row_json(self.rows[len(done)]))
        return done


def one_line(text: str, limit: int = 72) -> str:
    """A subject-line excerpt of a text."""
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1] + "\u2026"


# a row's lines between Audit-Seq and Audit-Entry, and between Audit-Entry and Audit-Text (the
# last): what the rows of a seed share
_ORDER: Final = [key for key, _name in _TRAILERS]
_HEAD_KEYS: Final = tuple(_ORDER[_ORDER.index("seq") + 1:_ORDER.index("entryId")])
_TAIL_KEYS: Final = tuple(_ORDER[_ORDER.index("entryId") + 1:_ORDER.index("text")])
assert _ORDER[0] == "seq" and _ORDER[-1] == "text", "commit_message writes seq first, text last"
_HEAD: Final = frozenset(_HEAD_KEYS)
_TAIL: Final = frozenset(_TAIL_KEYS)
_SHARED: Final = _HEAD_KEYS + _TAIL_KEYS


def _group(r: AuditRow, keys: frozenset[str] | None = None) -> str:
    """A row's trailer lines (those of ``keys`` only, if given), each ending in a newline."""
    return "".join(f"{name}: {_encode_value(key, value)}\n" for key, name in _TRAILERS
                   if (keys is None or key in keys) and (value := r.get(key)) is not None)


def commit_message(subject: str, body: str, rows: list[AuditRow]) -> str:
    # a seed's 1,000 rows differ only in seq, entryId and text: the lines between those
    # are encoded once for each set of values, and a row is one f-string
    middles: dict[tuple[Any, ...], tuple[str, str]] = {}
    groups = []
    for r in rows:
        seq, entry, text = r.get("seq"), r.get("entryId"), r.get("text")
        if type(seq) is not int or type(entry) is not str or type(text) is not str \
                or not _PLAIN_VALUE.match(entry):
            groups.append(_group(r))
            continue
        key = tuple(map(r.get, _SHARED))
        middle = middles.get(key)
        if middle is None:
            middle = middles[key] = (_group(r, _HEAD), _group(r, _TAIL))
        groups.append(f"Audit-Seq: {seq}\n{middle[0]}Audit-Entry: {entry}\n{middle[1]}"
                      f"Audit-Text: {_json_line(text)}\n")
    head = f"{one_line(subject, 200)}\n\n{body}\n\n" if body else f"{one_line(subject, 200)}\n\n"
    # the groups end in the message's last newline: one join (a seed's message is ~0.7 MB,
    # and each copy of it a fresh buffer the system maps page by page)
    return "".join([head, *groups]) if groups else head + "\n"


def parse_rows(message: str) -> list[AuditRow] | None:
    """The audit rows in a commit message, or None if it carries none (not a filemem commit).

    Raises ValueError for a trailer block that starts like filemem's but does not parse.
    """
    block = message.rstrip("\n").rsplit("\n\n", 1)[-1]
    lines = block.split("\n")
    if not lines or not lines[0].startswith("Audit-Seq: "):
        return None
    rows: list[dict[str, Any]] = []
    current: dict[str, Any] | None = None
    for line in lines:
        m = _TRAILER_LINE.match(line)
        if not m or m.group(1) not in _FIELD_OF:
            raise ValueError(f"unexpected line in the audit trailers: {line[:80]!r}")
        key, raw = _FIELD_OF[m.group(1)], m.group(2)
        if key == "seq":
            current = dict.fromkeys(ROW_FIELDS)
            rows.append(current)
        assert current is not None
        if key in ("seq", "ts"):
            current[key] = int(raw)
        elif key == "text" and not raw.startswith('"'):
            raise ValueError("Audit-Text is not a JSON string")
        elif raw.startswith('"'):
            value = json.loads(raw)
            if not isinstance(value, str):
                raise ValueError(f"{m.group(1)} is not a string")
            current[key] = value
        else:
            current[key] = raw
    for r in rows:
        if r["ts"] is None or not r["action"]:
            raise ValueError("an audit row lacks Audit-Ts or Audit-Action")
    return [cast(AuditRow, r) for r in rows]


def last_trailer_seq(message: str) -> int | None:
    """The seq of a commit's last audit row (rows are in seq order), without parsing all."""
    pos = message.rfind("\nAudit-Seq: ")
    if pos < 0:
        return None
    end = message.find("\n", pos + 12)
    try:
        return int(message[pos + 12:end if end >= 0 else None])
    except ValueError:
        return None


def external_row(sha: str, time_s: int, message: str, after_seq: int = 0) -> AuditRow:
    """The row shown for a commit made outside filemem (a person's ``git commit``, a merge).

    git keeps whole seconds only, so its seq also comes after its parent's last row
    (``after_seq``): it sorts after what it was committed on top of."""
    subject = message.split("\n", 1)[0]
    return {"seq": next_seq(time_s * 1000, after_seq), "ts": time_s * 1000,
            "action": "external-commit",
            "track": None, "scope": None, "entryId": None, "text": subject,
            "outcome": f"committed outside filemem ({sha[:12]})", "source": "git",
            "sessionId": None}


class Ledger:
    """The append-only read-side ledger (``recalled`` and ``snapshot`` rows), and the seq
    counter every audit row is numbered from."""

    def __init__(self, meta_dir: str) -> None:
        self.path = os.path.join(meta_dir, LEDGER_NAME)
        self.counter_path = os.path.join(meta_dir, COUNTER_NAME)
        # kept open between rows (flock.Kept): every write and every recall numbers some
        self._counter = flock.Kept(self.counter_path, os.O_RDWR | os.O_CREAT, open_private)
        self._known: dict[bytes, RowBlock] = {}  # a line -> its row: keyed by content
        # the newest row's seq, and the file's identity and size it was read at
        self._last: tuple[tuple[int, int, int, int], int] | None = None

    @contextlib.contextmanager
    def numbering(self, floor: Callable[[], int]) -> Iterator[Callable[[AuditRow], None]]:
        """Hold the seq counter (its own small lock, never the store lock) and yield a
        function stamping a row's seq (and its ts, if unset). ``floor()``: the highest seq
        recorded so far (HEAD's last row, the ledger's); the counter also remembers seqs
        handed out for commits not yet made. Raises OSError if the counter cannot be
        written (a read-only store), StoreBusy if it stays taken (a stopped process)."""
        from filemem import errors

        try:
            fd = self._counter.hold(COUNTER_TIMEOUT, 0.002)
        except flock.Busy:
            raise errors.StoreBusy(
                f"the store is busy: its audit counter {self.counter_path} has been locked "
                f"by another process for more than {COUNTER_TIMEOUT:.0f} s (one that is "
                "stopped?); nothing was recorded; try again") from None
        try:
            raw = os.pread(fd, _COUNTER_WIDTH + 1, 0)
            try:
                start = int(raw.strip() or b"0")
            except ValueError:
                start = 0  # torn by a crash: the floor below still holds
            last = max(start, floor())

            def stamp(r: AuditRow) -> None:
                nonlocal last
                if r["ts"] is None:
                    r["ts"] = now_ms()
                r["seq"] = last = next_seq(int(r["ts"]), last)

            yield stamp
            if last != start:
                os.pwrite(fd, b"%0*d\n" % (_COUNTER_WIDTH, last), 0)
        finally:
            self._counter.release()

    def close(self) -> None:
        """Close the counter's file (kept open between rows; opened again when next used)."""
        self._counter.close()

    def _open(self, flags: int) -> int:
        """Never through a symbolic link: one is refused as STORE_CORRUPT naming it."""
        try:
            return atomic.open_nofollow(self.path, flags)
        except atomic.LinkRefused:
            raise linked(self.path) from None

    def append(self, rows: list[AuditRow]) -> None:
        data = "".join(row_json(r) + "\n" for r in rows).encode("utf-8")
        fd = self._open(os.O_RDWR | os.O_CREAT | os.O_APPEND)
        try:
            size = os.fstat(fd).st_size
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data  # a killed writer left a torn line: start a fresh one
            atomic.write_all(fd, data)  # an append, not a replace: O_APPEND, no fsync
        finally:
            os.close(fd)

    def forget(self) -> None:
        """Drop the lines kept parsed (a redaction rewrote the ledger)."""
        self._known.clear()
        self._last = None

    def tail(self, limit: int) -> list[AuditRow]:
        """The newest ``limit`` rows, newest first (reads backwards from the end)."""
        return [block.rows[0].copy() for block in self.tail_blocks(limit)]

    def tail_blocks(self, limit: int) -> list[RowBlock]:
        """The newest ``limit`` rows as blocks of one row each, newest first. A line read
        before is not parsed again: its block is looked up by the line's bytes."""
        if not os.path.lexists(self.path):
            return []
        with os.fdopen(self._open(os.O_RDONLY), "rb") as f:
            f.seek(0, os.SEEK_END)
            end = f.tell()
            chunk = 4096 if limit < 8 else 64 * 1024  # a write asks for the newest row
            data = b""
            pos = end
            while pos > 0 and data.count(b"\n") <= limit:
                step = min(chunk, pos)
                pos -= step
                f.seek(pos)
                data = f.read(step) + data
                chunk *= 2
        lines = data.split(b"\n")
        if pos > 0:
            lines = lines[1:]  # the first piece may be a partial line
        out: list[RowBlock] = []
        known = self._known
        for line in reversed(lines):
            block = known.get(line)
            if block is None:
                if not line.strip():
                    continue
                try:
                    value = json.loads(line)
                except ValueError:
                    continue  # a torn last line from a killed process: skip it
                if not isinstance(value, dict):
                    continue
                block = RowBlock([cast(AuditRow, {k: value.get(k) for k in ROW_FIELDS})])
                if len(known) >= _KNOWN_LINES:
                    known.clear()
                known[line] = block
            out.append(block)
            if len(out) >= limit:
                break
        return out

    def last_row(self, action: str, session_id: str) -> AuditRow | None:
        """The newest ``action`` row of ``session_id``, or None. Reads backwards from the end
        and parses only lines that can be it (a row's ``sessionId`` is its last key), so a
        long ledger costs a byte search, not a parse of every row."""
        if not os.path.lexists(self.path):
            return None
        suffix = (',"sessionId":' + json.dumps(session_id, ensure_ascii=False)
                  + "}").encode("utf-8")
        marker = ('"action":' + json.dumps(action)).encode("utf-8")
        with os.fdopen(self._open(os.O_RDONLY), "rb") as f:
            pos = f.seek(0, os.SEEK_END)
            rest = b""  # the start of the line cut by the previous (later) chunk
            while pos > 0:
                step = min(1 << 20, pos)
                pos -= step
                f.seek(pos)
                lines = (f.read(step) + rest).split(b"\n")
                rest = lines.pop(0) if pos > 0 else b""
                for line in reversed(lines):
                    if not (line.endswith(suffix) and marker in line):
                        continue
                    try:
                        value = json.loads(line)
                    except ValueError:
                        continue  # a torn line
                    if isinstance(value, dict) and value.get("action") == action \
                            and value.get("sessionId") == session_id:
                        return cast(AuditRow, {k: value.get(k) for k in ROW_FIELDS})
        return None

    def last_seq(self) -> int:
        """The newest row's seq (0: none), read again only once the file changed: every
        write numbers its rows after it, and the newest row can be a snapshot's whole text
        (100 KB read and looked up took ~0.2 ms a write)."""
        try:
            st = os.stat(self.path, follow_symlinks=False)
            at = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            at = (0, 0, 0, 0)
        if self._last is not None and self._last[0] == at:
            return self._last[1]
        rows = self.tail(1)
        seq = int(rows[0]["seq"]) if rows and isinstance(rows[0]["seq"], int) else 0
        self._last = (at, seq)
        return seq
