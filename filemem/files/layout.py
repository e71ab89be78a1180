"""Where an entry lives in the store: ``<track>/<scope>/[<workspace>/]<agent>/<id>.md``.

Workspace and agent keys never become path components as they are. A directory name is a
readable tail of the key plus a short hash of the exact key, built only from ``[a-z0-9_-]``,
so ``..``, separators, drive letters, NUL, reserved Windows names, over-long names and
case-only differences are all harmless. The exact keys live in the front-matter.

What a tree from elsewhere (a remote's commit) may hold is checked here too, before a byte of
it is written (:func:`check_tree_path`): git's own path rules (no empty, ``.`` or ``..``
component, no ``.git`` in any spelling a file system folds to it) and then the store's shape.
"""

from __future__ import annotations

import functools
import hashlib
import re
from typing import Any, Final

from filemem.files.gitrepo import FILE_MODE, TREE_MODE
from filemem.model import SCOPES, TRACKS, UUID_RE, Entry

SHARED_DIR: Final = "_shared"  # agentKey '' (the layer every agent sees)
NO_WORKSPACE_DIR: Final = "_none"  # a workspace-scope entry with workspaceKey ''
ENTRY_SUFFIX: Final = ".md"
ENTRY_ROOTS: Final = TRACKS  # top-level folders that hold entries
_TAIL_MAX: Final = 24
_UNSAFE: Final = re.compile(r"[^a-z0-9_-]+")
# the files a store holds besides its entries (store-template/), all at the top
TOP_FILES: Final = ("filemem.yaml", "README.md", ".gitignore", ".gitattributes")
_DIR_NAME: Final = re.compile(r"[a-z0-9_-]+\Z")  # what key_dir, _shared and _none make
# code points HFS+ ignores when comparing names (git's is_hfs_dotgit): ".g\u200cit" is ".git"
_HFS_IGNORED: Final = frozenset(
    [0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
     0x206A, 0x206B, 0x206C, 0x206D, 0x206E, 0x206F, 0xFEFF])
_MODE_NAMES: Final = {0o120000: "a symbolic link", 0o160000: "a submodule (gitlink)",
                      0o100755: "an executable file"}
# What editors and file managers leave beside the files a person saves: never an entry (no
# pattern matches a name ending in .md that a person would give an entry). `filemem status`,
# `adopt`, `discard` and `watch` skip these whatever the store's own .gitignore says (a store
# made before the list existed has not got it), and store-template/.gitignore lists exactly
# these lines, so `git status` skips them too (tests/test_editors.py keeps the two equal).
# .gitignore syntax, matched against a file's name.
EDITOR_FILES: Final = (
    ".*.sw?",  # vim's swap file (.x.md.swp, then .swo, ...; .swx is its probe); nano's lock
    ".*.s[a-v][a-z]",  # vim's further swap files (.x.md.swa is followed by .svz ... .saa)
    "4913",  # vim's test of whether it may create a file in the folder (deleted at once)
    "*~",  # backups: vim's x.md~ (kept with 'backup'), nano -B, emacs
    ".#*",  # emacs' lock (a symbolic link)
    "\\#*#",  # emacs' auto-save (#x.md#)
    "*.save",  # nano's emergency save when it is killed (x.md.save ...
    "*.save.[0-9]*",  # ... and x.md.save.1 when that exists)
    "*.vsctmp",  # VS Code's atomic save (x.md.vsctmp, renamed over x.md)
    ".goutputstream-*",  # GNOME's (gedit's) atomic save
    "*.kate-swp",  # Kate's swap file
    "*___jb_tmp___",  # JetBrains' safe write
    "*___jb_old___",
    "*.tmp",  # other tools' write-then-rename
    ".DS_Store",  # macOS Finder
    "._*",  # macOS metadata on file systems without it (._x.md)
    "Thumbs.db",  # Windows Explorer
)


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


NOT_AN_ENTRY: Final = ("not an entry file (entry files end in .md, and the track folders "
                       "hold nothing else)")
OUTSIDE: Final = ("not part of the store, which holds entries under user/ and agent/ and "
                  "its own files at the top: filemem never commits it; move it out "
                  "of the store, or `filemem discard` it (which deletes it)")
OUTSIDE_COMMITTED: Final = ("committed with git, though not part of the store (which holds "
                            "entries under user/ and agent/ and its own files at the top): "
                            "filemem never commits it; commit the change with git, or "
                            "`filemem discard` it (which puts it back as committed)")



def in_entry_folder(path: str) -> bool:
    """Whether a store-relative path is a file under a track folder, where only entry files
    belong (one that is not :func:`is_entry_path` is :data:`NOT_AN_ENTRY`)."""
    return "/" in path and path.split("/", 1)[0] in ENTRY_ROOTS


@functools.lru_cache(maxsize=1)
def _editor_filter() -> Any:
    from dulwich.ignore import IgnoreFilter  # git's own matching rules; imported when needed

    return IgnoreFilter([p.encode() for p in EDITOR_FILES])


@functools.lru_cache(maxsize=4096)
def is_editor_file(path: str) -> bool:
    """Whether a store-relative path's file name is one of :data:`EDITOR_FILES`."""
    return bool(_editor_filter().is_ignored(path.rsplit("/", 1)[-1]))


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


# ---------------------------------------------------------------- paths from elsewhere


def leaves_folder(name: str) -> bool:
    """Whether one path component names no file of its folder: empty, ``.``, ``..`` (also
    with the trailing dots and spaces Windows drops), or git's own folder under any
    spelling a file system folds to ``.git``: any case (``.GIT``), trailing dots or spaces
    (``.git.``), the NTFS short name ``git~1``, HFS+'s ignored code points (git's
    ``verify_path``, ``is_ntfs_dotgit``, ``is_hfs_dotgit``)."""
    if not name.isascii():  # the ignored code points are not ASCII (most names are)
        name = "".join(c for c in name if ord(c) not in _HFS_IGNORED)
    return name.lower().rstrip(". ") in ("", ".git", "git~1")


def name_problem(name: str) -> str | None:
    """Why one component of a path from elsewhere is unsafe on some file system, or None."""
    if name == "":
        return "an empty name"
    if "/" in name or "\\" in name:
        return "a name holding a path separator"
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in name):
        return "a name holding a control character"
    if name.rstrip(". ") in ("", ".", ".."):
        return "a name that points out of its folder"
    if leaves_folder(name):
        return "git's own folder (.git under another spelling); a clone would run what it holds"
    if ":" in name:
        return "a name holding ':' (an NTFS alternate data stream)"
    return None


def _store_shape(parts: list[str], mode: int) -> str | None:
    """Why a well-formed path is not a file (or folder) this store holds, or None."""
    depth, top = len(parts), parts[0]
    if depth == 1:
        if mode == TREE_MODE:
            return None if top in ENTRY_ROOTS else "not a folder a store holds"
        return None if top in TOP_FILES else "not a file a store holds"
    if top not in ENTRY_ROOTS or parts[1] not in SCOPES:
        return "not a file a store holds"
    folders = 4 if parts[1] == "workspace" else 3  # track/scope/[workspace/]agent
    if mode == TREE_MODE:
        if depth > folders:
            return "a folder deeper than a store's layers"
    elif depth != folders + 1:
        return "not where entry files live (<track>/<scope>/[<workspace>/]<agent>/<id>.md)"
    elif not (parts[-1].endswith(ENTRY_SUFFIX) and UUID_RE.match(parts[-1][:-3])):
        return "not an entry file name (<uuid>.md)"
    if any(not _DIR_NAME.match(p) for p in (parts[2:] if mode == TREE_MODE else parts[2:-1])):
        return "not a layer folder name ([a-z0-9_-])"
    return None


def check_tree_path(path: str, mode: int = FILE_MODE) -> str | None:
    """Why a store may not hold ``path`` (a file, or a folder for ``mode`` TREE_MODE) from
    a tree made elsewhere, or None. A store holds ``filemem.yaml``, ``README.md``,
    ``.gitignore`` and ``.gitattributes`` at its top, and entry files
    ``<track>/<scope>/[<workspace>/]<agent>/<uuid>.md``: regular files (mode 100644) in
    folders, nothing else (no symbolic link, submodule, executable)."""
    parts = path.split("/")
    for part in parts:
        problem = name_problem(part)
        if problem is not None:
            return problem
    if mode not in (FILE_MODE, TREE_MODE):
        return f"{_MODE_NAMES.get(mode, f'an unknown kind of file (mode {mode:o})')}; " \
            "a store holds only regular files (mode 100644)"
    problem = _store_shape(parts, mode)
    if problem is None:
        return None
    top = ", ".join(TOP_FILES)
    return f"{problem} (a store holds {top} at its top and entry files " \
        "<track>/<scope>/[<workspace>/]<agent>/<uuid>.md)"


__all__ = [
    "EDITOR_FILES", "ENTRY_ROOTS", "NOT_AN_ENTRY", "OUTSIDE", "OUTSIDE_COMMITTED", "SCOPES",
    "SHARED_DIR", "TOP_FILES",
    "check_tree_path", "entry_path", "id_from_path", "in_entry_folder", "is_editor_file",
    "is_entry_path", "is_store_path", "key_dir", "layer_dir", "leaves_folder", "name_problem",
    "path_problem",
]
