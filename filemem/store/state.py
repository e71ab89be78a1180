"""The view of one commit: the entries at HEAD, their files, what is invalid, and usage."""

from __future__ import annotations

from collections.abc import ValuesView

from filemem import errors
from filemem.config import Config
from filemem.files.layout import entry_path
from filemem.model import LAYERS, Entry
from filemem.rules.query import TextIndex


class State:
    """The store as committed at one HEAD. Treat as immutable; writes make a new one."""

    __slots__ = (
        "_layers",
        "_newest",
        "_ordered",
        "_text_index",
        "blobs",
        "config",
        "config_blob",
        "config_problem",
        "corrupt",
        "entries",
        "head",
        "noncanonical",
        "paths",
        "tree",
        "usage",
    )

    def __init__(self, *, head: str, tree: str, config: Config | None,
                 config_problem: errors.ProtocolError | None, entries: dict[str, Entry],
                 paths: dict[str, str], blobs: dict[str, str], noncanonical: frozenset[str],
                 corrupt: dict[str, str], usage: dict[tuple[str, str], int],
                 config_blob: str | None = None,
                 _layers: dict[tuple[str, str], dict[str, Entry]] | None = None,
                 _newest: int | None = None) -> None:
        self.head = head
        self.tree = tree
        self.config = config
        self.config_problem = config_problem
        self.entries = entries
        self.paths = paths  # entry id -> path
        self.blobs = blobs  # path -> blob sha (entry files only)
        self.noncanonical = noncanonical  # ids whose file has keys of its own (spliced on replace)
        self.corrupt = corrupt  # path -> reason
        self.usage = usage
        self.config_blob = config_blob
        # each layer's entries by id, in the order of ``entries``; carried from view to view
        # by evolve (a write changes a layer or two: rebuilding all of them was an O(n) loop)
        self._layers = _layers
        self._ordered: list[Entry] | None = None
        self._text_index: TextIndex | None = None
        self._newest = _newest

    def layer(self, track: str, scope: str) -> ValuesView[Entry]:
        """The entries of one layer, in the order of ``entries``."""
        return self.layers().get((track, scope), {}).values()

    def layers(self) -> dict[tuple[str, str], dict[str, Entry]]:
        """Each layer's entries by id (do not change them)."""
        if self._layers is None:
            layers: dict[tuple[str, str], dict[str, Entry]] = {k: {} for k in LAYERS}
            for e in self.entries.values():
                layers[(e.track, e.scope)][e.id] = e
            self._layers = layers
        return self._layers

    def newest_created(self) -> int:
        """The latest createdAt so far (0 if none): new entries are created after it, so the
        listing order (createdAt, id) is the order of the writes."""
        if self._newest is None:
            self._newest = max((e.created_at for e in self.entries.values()), default=0)
        return self._newest

    def text_index(self) -> TextIndex:
        """All entries' texts, for a query over all of them (made when first asked)."""
        if self._text_index is None:
            self._text_index = TextIndex(self.entries.values())
        return self._text_index

    def ordered(self) -> list[Entry]:
        """All entries by (createdAt, id): the listing order."""
        if self._ordered is None:
            self._ordered = sorted(self.entries.values(), key=lambda e: (e.created_at, e.id))
        return self._ordered


def usage_of(entries: dict[str, Entry]) -> dict[tuple[str, str], int]:
    usage = dict.fromkeys(LAYERS, 0)
    for e in entries.values():
        usage[(e.track, e.scope)] += e.size
    return usage


def evolve(st: State, head: str, tree: str, puts: list[Entry], deletes: list[Entry],
            blobs: dict[str, str]) -> State:
    # .copy(), not dict(): after a removal a dict has a hole, and dict() of a dict with
    # holes inserts key by key (~5x slower at 1,000 entries); .copy() clones it whole
    entries = st.entries.copy()
    paths = st.paths.copy()
    all_blobs = st.blobs.copy()
    noncanonical = set(st.noncanonical)
    usage = st.usage.copy()
    for e in deletes:
        old = entries.pop(e.id)
        usage[old.layer] -= old.size
        all_blobs.pop(paths.pop(e.id), None)
        noncanonical.discard(e.id)
    for e in puts:
        previous = entries.get(e.id)
        if previous is not None:
            usage[previous.layer] -= previous.size
        entries[e.id] = e
        usage[e.layer] += e.size
        path = entry_path(e)
        paths[e.id] = path
        all_blobs[path] = blobs[path]
        # a spliced file keeps its own keys, so it stays non-canonical; new files are canonical
    return State(head=head, tree=tree, config=st.config, config_problem=st.config_problem,
                 entries=entries, paths=paths, blobs=all_blobs,
                 noncanonical=frozenset(noncanonical), corrupt=dict(st.corrupt), usage=usage,
                 config_blob=st.config_blob, _layers=_evolved_layers(st, puts, deletes),
                 _newest=max([st.newest_created(), *(e.created_at for e in puts)]))


def _evolved_layers(st: State, puts: list[Entry], deletes: list[Entry]
                    ) -> dict[tuple[str, str], dict[str, Entry]] | None:
    """``st``'s layers with the write applied, copying only the layers it changed, in the
    order a rebuild from the new ``entries`` gives (an id keeps its place, a new one goes
    last); None (rebuilt when asked) if ``st`` had none or an entry changed layer."""
    if st._layers is None:
        return None
    layers = st._layers.copy()
    copied: set[tuple[str, str]] = set()

    def own(key: tuple[str, str]) -> dict[str, Entry]:
        if key not in copied:
            layers[key] = layers[key].copy() if key in layers else {}
            copied.add(key)
        return layers[key]

    for e in deletes:
        own(st.entries[e.id].layer).pop(e.id, None)
    for e in puts:
        previous = st.entries.get(e.id)
        if previous is not None and previous.layer != e.layer:
            return None  # its place in the new layer is its place in ``entries``
        own(e.layer)[e.id] = e
    return layers

