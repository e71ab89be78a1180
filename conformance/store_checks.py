"""Store-level checks for providers whose store is a git repository (group G).

A git-backed store promises more than the Provider face shows: the folder is a normal
repository a person can inspect (clean status, sound object database), and every write
commit carries its audit row as ``Audit-*`` trailers (the grammar of filemem's
``schemas/audit-trailers.md``) so ``git log`` alone is the audit trail. These helpers use
the git CLI, which is what the person owning the store uses too.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from harness import Skip

LEDGER_ACTIONS = frozenset({"recalled", "snapshot"})  # read-side rows: never committed
TRAILER_FIELDS = {
    "Audit-Seq": "seq", "Audit-Ts": "ts", "Audit-Action": "action", "Audit-Track": "track",
    "Audit-Scope": "scope", "Audit-Entry": "entryId", "Audit-Outcome": "outcome",
    "Audit-Source": "source", "Audit-Session": "sessionId", "Audit-Text": "text",
}
ROW_FIELDS = ("seq", "ts", "action", "track", "scope", "entryId", "text", "outcome", "source",
              "sessionId")


class TrailerError(ValueError):
    """A commit message whose audit trailers do not follow the grammar."""


@dataclass(frozen=True)
class Commit:
    sha: str
    message: str

    @property
    def subject(self) -> str:
        return self.message.split("\n", 1)[0]


def git(store: str, *args: str) -> subprocess.CompletedProcess[str]:
    """Run the git CLI in ``store`` with a neutral environment (no pager, no prompts)."""
    exe = shutil.which("git")
    if exe is None:
        raise Skip("no git CLI on PATH")
    env = {**os.environ, "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    return subprocess.run([exe, "-C", store, *args], capture_output=True, text=True,
                          encoding="utf-8", errors="replace", env=env)


def require_git_store(store: str) -> None:
    """Skip the case unless ``store`` is itself the top of a git work tree."""
    out = git(store, "rev-parse", "--show-toplevel")
    if out.returncode != 0:
        raise Skip("the store folder is not a git repository")
    top = out.stdout.strip()
    if os.path.normcase(os.path.realpath(top)) != os.path.normcase(os.path.realpath(store)):
        raise Skip("the store folder is not the top of its own git repository")


def commit_count(store: str) -> int:
    out = git(store, "rev-list", "--count", "HEAD")
    if out.returncode != 0:
        raise AssertionError(f"git rev-list failed: {out.stderr.strip()}")
    return int(out.stdout.strip())


def commits(store: str) -> list[Commit]:
    """Every commit reachable from HEAD, newest first, with its full message."""
    out = git(store, "log", "-z", "--format=%H%n%B")
    if out.returncode != 0:
        raise AssertionError(f"git log failed: {out.stderr.strip()}")
    found = []
    for record in out.stdout.split("\0"):
        record = record.lstrip("\n")
        if not record:
            continue
        sha, _, message = record.partition("\n")
        found.append(Commit(sha, message))
    return found


def _value(key: str, raw: str) -> Any:
    if raw.startswith('"'):
        try:
            value = json.loads(raw)
        except ValueError:
            raise TrailerError(f"{key}: not a JSON string: {raw[:80]}") from None
        if not isinstance(value, str):
            raise TrailerError(f"{key}: not a JSON string: {raw[:80]}")
        return value
    if key == "Audit-Text":
        raise TrailerError(f"Audit-Text must be a JSON string, got {raw[:80]}")
    if raw != raw.strip() or not raw or any(ord(c) < 0x20 or ord(c) == 0x7F for c in raw):
        raise TrailerError(f"{key}: a plain value must be one trimmed line: {raw[:80]!r}")
    return raw


def parse_trailers(message: str) -> list[dict[str, Any]]:
    """The audit rows in a commit message's last paragraph (the trailer block)."""
    body = message.rstrip("\n")
    block = body.rsplit("\n\n", 1)[-1]
    rows: list[dict[str, Any]] = []
    for line in block.split("\n"):
        key, sep, raw = line.partition(": ")
        if not sep or key not in TRAILER_FIELDS:
            raise TrailerError(f"not an Audit-* trailer line: {line[:80]!r}")
        field = TRAILER_FIELDS[key]
        if field == "seq":
            rows.append(dict.fromkeys(ROW_FIELDS))
        elif not rows:
            raise TrailerError(f"{key} before the first Audit-Seq")
        row = rows[-1]
        if field in ("seq", "ts"):
            if not raw.isdigit():
                raise TrailerError(f"{key}: not a non-negative integer: {raw[:40]!r}")
            row[field] = int(raw)
        else:
            if row[field] is not None:
                raise TrailerError(f"{key} appears twice in one row")
            row[field] = _value(key, raw)
    for row in rows:
        if row["ts"] is None or row["action"] is None:
            raise TrailerError(f"row {row['seq']} lacks Audit-Ts or Audit-Action")
    seqs = [r["seq"] for r in rows]
    if seqs != sorted(seqs) or len(set(seqs)) != len(seqs):
        raise TrailerError(f"rows are not in increasing seq order: {seqs}")
    if not rows:
        raise TrailerError("no Audit-* trailers")
    return rows


__all__ = ["LEDGER_ACTIONS", "Commit", "TrailerError", "commit_count", "commits", "git",
           "parse_trailers", "require_git_store"]
