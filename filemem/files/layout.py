"""Where an entry lives in the store: ``<track>/<scope>/[<workspace>/]<agent>/<id>.md``.

Workspace and agent keys never become path components as they are. A directory name is a
readable tail of the key plus a short hash of the exact key, built only from ``[a-z0-9_-]``,
so ``..``, separators, drive letters, NUL, reserved Windows names, over-long names and
case-only differences are all harmless. The exact keys live in the front-matter.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import Final

from filemem.model import SCOPES, TRACKS, UUID_RE, Entry

SHARED_DIR: Final = "_shared"  # agentKey '' (the layer every agent sees)
NO_WORKSPACE_DIR: Final = "_none"  # a workspace-scope entry with workspaceKey ''
ENTRY_SUFFIX: Final = ".md"
ENTRY_ROOTS: Final = TRACKS  # top-level folders that hold entries
_TAIL_MAX: Final = 24
_UNSAFE: Final = re.compile(r"[^a-z0-9_-]+")


@functools.lru_cache(maxsize=4096)
def key_dir(key: str) -> str:
    """A safe, stable directory name for a workspace or agent key."""
    digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:10]
    tail = key.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    tail = _UNSAFE.sub("_", tail.lower()).strip("_-")[:_TAIL_MAX].strip("_-")
    return f"{tail}-{digest}" if tail else digest


@functools.lru_cache(maxsize=4096)
def layer_dir(entry_track: str, scope: str, workspace_key: str, agent_key: str) -> str:
    parts = [entry_track, scope]
    if scope == "workspace":
        parts.append(key_dir(workspace_key) if workspace_key else NO_WORKSPACE_DIR)
    parts.append(key_dir(agent_key) if agent_key else SHARED_DIR)
    return "/".join(parts)


def entry_path(entry: Entry) -> str:
    """The store-relative POSIX path of an entry's file."""
    return f"{layer_dir(entry.track, entry.scope, entry.workspace_key, entry.agent_key)}/" \
        f"{entry.id}{ENTRY_SUFFIX}"


def is_entry_path(path: str) -> bool:
    """Whether a store-relative path is where entry files live (under a track folder, ``.md``)."""
    head = path.split("/", 1)[0]
    return head in ENTRY_ROOTS and path.endswith(ENTRY_SUFFIX)


_NOT_STORE_DIRS: Final = frozenset({".git", ".filemem"})


def is_store_path(path: str) -> bool:
    """Whether ``path`` can name a file of the store's tree: relative, POSIX, no empty,
    ``.`` or ``..`` component, no backslash, drive or NUL, and not inside ``.git/`` or
    ``.filemem/`` (what a journal read from disk may name before it is acted on)."""
    if not isinstance(path, str) or not path or "\\" in path or "\0" in path \
            or path.startswith("/") or ":" in path.split("/", 1)[0]:
        return False
    parts = path.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return False
    return parts[0].lower() not in _NOT_STORE_DIRS


def path_problem(path: str, entry: Entry) -> str | None:
    """Why ``path`` is not where ``entry`` belongs, or None if it is."""
    expected = entry_path(entry)
    if path == expected:
        return None
    name = path.rsplit("/", 1)[-1]
    if name != f"{entry.id}{ENTRY_SUFFIX}":
        return f"file name does not match the entry id {entry.id} (expected {expected})"
    return f"entry is in the wrong folder for its track/scope/workspace/agent (expected {expected})"


def id_from_path(path: str) -> str | None:
    name = path.rsplit("/", 1)[-1]
    if not name.endswith(ENTRY_SUFFIX):
        return None
    stem = name[: -len(ENTRY_SUFFIX)]
    return stem if UUID_RE.match(stem) else None


__all__ = [
    "ENTRY_ROOTS", "SCOPES", "SHARED_DIR", "entry_path", "id_from_path", "is_entry_path",
    "is_store_path",
    "key_dir", "layer_dir", "path_problem",
]
