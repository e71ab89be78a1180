"""``.filemem/cache/state.jsonl``: the entries parsed from HEAD's files as last saved, so
that a cold process does not parse every entry file again (JSON lines: :func:`document`).
An optimisation only: anything wrong with it (missing, torn, another format, a symbolic
link) means it is ignored and rebuilt.

``.filemem/`` is not a trusted source (anyone who can write a file there could otherwise
serve agents memory nobody committed), so nothing in the cache is believed: it is a memo
of blob sha -> parsed entry, and an entry goes into the memo only if encoding it again
(:func:`filemem.files.codec.encodings`: as filemem writes it, or as it wrote it before
files ended with a newline) gives bytes whose git blob sha is that blob's. A
forged text, id or field changes those bytes, so it fails the check (short of a SHA-1
collision) and the blob is parsed from git instead. The paths and blobs themselves always
come from HEAD's tree (a full walk, which reads tree objects only), never from the cache;
the path check and duplicate ids are decided by the view as for a cold start. Entries that
are not in filemem's canonical form (a hand-written front-matter), invalid files and the
config are not cached: they cannot be re-derived from the parsed form and are read from git.

Why not trust a recorded head/tree: the cache file is not bound to git by anything an
editor of the file cannot reproduce (there is no secret to key a MAC with), and reading
every blob to check it is the cost the cache exists to avoid. Encoding and hashing 1,000
entries takes about 2.5 ms, against about 40 ms to read and parse them from git.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from typing import Any, Final

from filemem import errors
from filemem.files import atomic, codec
from filemem.files.gitindex import hash_blob
from filemem.files.gitrepo import GitRepo
from filemem.model import Entry
from filemem.store.state import State

# 2: nothing believed unchecked (entries checked by blob); 3: + metadata; 4: a line a file
FORMAT: Final = 4
SAVE_EVERY: Final = 64  # changed files between saves of the cache ...
SAVE_INTERVAL: Final = 60.0  # ... by a long-running writer, at most once a minute
# A file the cache lacks is read and parsed from git by each cold start (~40 µs); saving
# the cache costs ~10 µs an entry (12 ms at 1,000 here, a tenth of a cold `filemem add`).
# So a cold start or a closing process saves it once it lacks this many files (fewer in a
# small store: one in a store of under 64 entries).
STALE_FILES: Final = 16

Parsed = dict[str, tuple[Entry | None, str | None, bool]]  # blob -> (entry, why not, canonical)
Record = list[Any]  # a file's line after its path: [blob, fields or None, why not, canonical]
_DECODER: Final = json.JSONDecoder()


class ViewCache:
    def __init__(self, meta: str, git: GitRepo) -> None:
        self.path = os.path.join(meta, "cache", "state.jsonl")
        self.old_path = os.path.join(meta, "cache", "state.json")  # format 3 and before
        self.git = git
        self.unsaved = 0  # files changed since the last save
        self.saved_tree: str | None = None
        self.saved_at = 0.0

    def load(self, parsed: Parsed) -> int:
        """Put the saved entries that check out against their blob sha into ``parsed``
        (blob -> decoded); returns how many did."""
        try:
            records = _records(atomic.read_nofollow(self.path).decode("utf-8"))  # a link:
            header = next(records)  # ignored (OSError)
            if header.get("format") != FORMAT:
                return 0
            found = 0
            one: dict[Any, Any] = {}  # one copy of each repeated value (layer keys, session)
            for _path, blob, fields, _reason, canonical in records:
                if fields is None or not canonical or not isinstance(blob, str):
                    continue  # read from git: only the canonical form can be re-derived
                (eid, track, scope, wk, ak, text, source, tags, version, created, updated,
                 session, meta) = fields
                e = Entry(eid, one.setdefault(track, track), one.setdefault(scope, scope),
                          one.setdefault(wk, wk), one.setdefault(ak, ak), text,
                          one.setdefault(source, source), tuple(tags), version, created,
                          updated, one.setdefault(session, session),
                          tuple(map(tuple, meta)) if meta else ())
                if blob not in map(hash_blob, codec.encodings(e)):
                    continue  # not what the blob holds: a forged or stale cache
                parsed[blob] = (e, None, True)
                found += 1
            self.saved_tree = header.get("tree")
        except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError,
                StopIteration, errors.ProtocolError, codec.CodecError):
            return 0
        return found

    def save(self, state: State) -> None:
        if self.git.head() != state.head:
            return  # a view HEAD has left (a redaction may have removed its texts)
        files: dict[str, Record] = {}
        for eid, path in state.paths.items():
            e = state.entries[eid]
            files[path] = [state.blobs[path], [
                e.id, e.track, e.scope, e.workspace_key, e.agent_key, e.text, e.source,
                list(e.tags), e.version, e.created_at, e.updated_at, e.session_id,
                [list(m) for m in e.meta],
            ], None, eid not in state.noncanonical]
        for path, reason in state.corrupt.items():
            files[path] = [state.blobs.get(path, ""), None, reason, False]
        data = document({"format": FORMAT, "head": state.head, "tree": state.tree}, files)
        try:
            # not durable: a cache lost in a crash is rebuilt from HEAD
            atomic.atomic_write(self.path, data, durable=False)
            if os.path.lexists(self.old_path):
                os.unlink(self.old_path)
            self.unsaved = 0
            self.saved_tree = state.tree
            self.saved_at = time.monotonic()
        except OSError:
            pass  # the cache is an optimisation; never fail a read or write over it

    def changed(self, state: State, files: int) -> None:
        """``files`` entry files changed in a write: save now and then, not every time."""
        self.unsaved += files
        if self.unsaved >= SAVE_EVERY and time.monotonic() - self.saved_at > SAVE_INTERVAL:
            self.save(state)

    def stale(self, state: State) -> bool:
        """Worth saving: saved for another tree, and lacking :data:`STALE_FILES` of
        ``state``'s files (``unsaved``; files it cannot hold, a person's own front-matter,
        are read from git whatever it holds)."""
        return self.saved_tree != state.tree and \
            self.unsaved >= min(STALE_FILES, 1 + len(state.entries) // 64)


def document(header: dict[str, Any], files: dict[str, Record]) -> bytes:
    """The cache file: ``header`` (format, head, tree) on the first line, then one line per
    file, ``[path, blob, fields, why not, canonical]``. A line per file so that a load parses
    one file's record at a time: parsed as one document, 10,000 entries' lists, numbers and
    repeated strings (~13 MB of objects) were freed between the entries kept, leaving ~8 MB
    of a long-running server's memory that Python could not hand back."""
    dump = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode
    lines = [dump(header), *(dump([path, *record]) for path, record in files.items()), ""]
    return "\n".join(lines).encode("utf-8")


def read_document(data: bytes) -> tuple[dict[str, Any], dict[str, Record]]:
    """``document``'s header and files (whole: for tools and tests; loading streams)."""
    records = _records(data.decode("utf-8"))
    return next(records), {r[0]: r[1:] for r in records}


def _records(data: str) -> Iterator[Any]:
    """The JSON values of ``data``, one a line, each parsed as it is reached."""
    decode = _DECODER.raw_decode
    i, end = 0, len(data)
    while i < end:
        value, i = decode(data, i)
        if data[i:i + 1] != "\n":
            raise ValueError(f"view cache: expected a new line at {i}")
        i += 1
        yield value
