"""``.filemem/cache/state.json``: the view of HEAD as last saved, so that a cold process does
not parse every entry file again. An optimisation only: anything wrong with it (missing,
torn, another format, a tree that no longer exists) means it is ignored and rebuilt."""

from __future__ import annotations

import json
import os
import time
from typing import Any, Final

from filemem import config as config_mod
from filemem import errors
from filemem.config import Config
from filemem.files import atomic
from filemem.files.gitrepo import GitError, GitRepo
from filemem.model import Entry
from filemem.store.state import State, usage_of

FORMAT: Final = 1
SAVE_EVERY: Final = 64  # changed files between saves of the cache ...
SAVE_INTERVAL: Final = 60.0  # ... by a long-running writer, at most once a minute

Parsed = dict[str, tuple[Entry | None, str | None, bool]]  # blob -> (entry, why not, canonical)


class ViewCache:
    def __init__(self, meta: str, git: GitRepo) -> None:
        self.path = os.path.join(meta, "cache", "state.json")
        self.git = git
        self.unsaved = 0  # files changed since the last save
        self.saved_tree: str | None = None
        self.saved_config: str | None = None
        self.saved_at = 0.0

    def load(self, parsed: Parsed) -> tuple[State, tuple[str, Config, None] | None] | None:
        """The saved view (its entries also go into ``parsed``) and the parsed config it
        carries, or None. The view's config is left for the caller to read."""
        try:
            with open(self.path, encoding="utf-8") as f:
                raw = json.load(f)
            if raw.get("format") != FORMAT:
                return None
            entries: dict[str, Entry] = {}
            paths: dict[str, str] = {}
            blobs: dict[str, str] = {}
            corrupt: dict[str, str] = {}
            noncanonical: set[str] = set()
            for path, (blob, fields, reason, canonical) in raw["files"].items():
                blobs[path] = blob
                if fields is None:
                    corrupt[path] = reason
                    continue
                (eid, track, scope, wk, ak, text, source, tags, version, created, updated,
                 session) = fields
                e = Entry(eid, track, scope, wk, ak, text, source, tuple(tags), version,
                          created, updated, session)
                entries[eid] = e
                paths[eid] = path
                parsed[blob] = (e, None, canonical)
                if not canonical:
                    noncanonical.add(eid)
            config = None
            cfg_blob, cfg_raw = raw.get("config") or (None, None)
            if cfg_blob and cfg_raw is not None:  # spares a YAML parse on a cold start
                config = (cfg_blob, config_mod.parse(cfg_raw), None)
            self.saved_tree = raw["tree"]
            self.saved_config = cfg_blob
            # the cached tree must still exist (it does unless someone rewrote history and gc'd)
            self.git.read_tree(raw["tree"])
        except (OSError, ValueError, KeyError, TypeError, GitError, errors.ProtocolError):
            return None
        state = State(head=raw["head"], tree=raw["tree"], config=None, config_problem=None,
                      entries=entries, paths=paths, blobs=blobs,
                      noncanonical=frozenset(noncanonical), corrupt=corrupt,
                      usage=usage_of(entries))
        return state, config

    def save(self, state: State) -> None:
        files: dict[str, Any] = {}
        for eid, path in state.paths.items():
            e = state.entries[eid]
            files[path] = [state.blobs[path], [
                e.id, e.track, e.scope, e.workspace_key, e.agent_key, e.text, e.source,
                list(e.tags), e.version, e.created_at, e.updated_at, e.session_id,
            ], None, eid not in state.noncanonical]
        for path, reason in state.corrupt.items():
            files[path] = [state.blobs.get(path, ""), None, reason, False]
        cfg = [state.config_blob, config_mod.to_json(state.config)] \
            if state.config is not None and state.config_blob else None
        data = json.dumps({"format": FORMAT, "head": state.head, "tree": state.tree,
                           "config": cfg, "files": files},
                          ensure_ascii=False, separators=(",", ":"))
        try:
            # not durable: a cache lost in a crash is rebuilt from HEAD
            atomic.atomic_write(self.path, data.encode("utf-8"), durable=False)
            self.unsaved = 0
            self.saved_tree = state.tree
            self.saved_config = state.config_blob
            self.saved_at = time.monotonic()
        except OSError:
            pass  # the cache is an optimisation; never fail a read or write over it

    def changed(self, state: State, files: int) -> None:
        """``files`` entry files changed in a write: save now and then, not every time."""
        self.unsaved += files
        if self.unsaved >= SAVE_EVERY and time.monotonic() - self.saved_at > SAVE_INTERVAL:
            self.save(state)

    def behind(self, state: State) -> bool:
        return self.saved_tree != state.tree or self.saved_config != state.config_blob
