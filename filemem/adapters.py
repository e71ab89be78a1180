"""The adapter registry: other tools' memory formats in and out, through pure converters.

An adapter is an object (or a mapping) with::

    id              lowercase kebab-case, unique in the registry
    name, description, version      non-empty strings (the description says what the
                                    format cannot carry)
    import_formats  non-empty list of non-empty strings (also accepted: importFormats)
    export_format   non-empty string (also accepted: exportFormat)
    adapt(payload)  -> a list of protocol entry inputs {track, scope, text, source?, tags?,
                       workspaceKey?, agentKey?} (or {"entries": [...]}, the reference's shape)
    export(entries) -> a payload

Round trips: an entry ``adapt`` returns may carry ``"adapterMetadata": {"key"?: str,
"data": {...}}``, what the adapter needs to give the memory back as it came (a file name,
another tool's ids and fields). filemem keeps it in the entry's file under the front-matter
key ``x-<adapter id>``, with the SHA-256 of the text it came with; the model never sees it.
``export`` then gets each entry that has some with ``"adapterMetadata": {"key", "data",
"textSha256", "textUnchanged"}``: ``textUnchanged`` is false once the text was changed in
filemem (a replace keeps the metadata), so the adapter gives back what came in only for what
did not change. ``key`` names the memory in the other tool (its file, its id): the owner's
import skips a memory this adapter imported with the same key into the same layer before,
in the version it was imported in (``filemem.owner.imports``). An adapter may also have
``export_into(entries, current)``: the export into a destination that already holds files,
given what they hold now (``{"files": {name: text}}`` for the files its export writes), so
that exporting into a live folder keeps what is not filemem's (Claude Code's MEMORY.md
lines of other files).

Adapters do no I/O and call no model, so the caller decides where payloads come from and
go. The convention the CLI follows: one text file is ``{"text", "file", "path"}``, a
directory is ``{"files": {name: text}, "path"}``, JSON is the parsed value; an export that
returns a string is a text file, ``{"files": {...}}`` a directory, anything else JSON.

Where adapters come from: the ones shipped in the top-level ``adapters/`` folder (installed
as ``filemem._adapters``), third-party packages through the ``filemem.adapters``
entry-point group (discovered when the default registry is first used), and
:func:`register` at run time. An entry point names an adapter object, a class or factory
that makes one, or a list of them. A broken third-party adapter is reported in
:func:`problems` and skipped; it never stops filemem from working.

Errors follow the reference provider: a bad adapter is INVALID_INPUT (checked in the
reference's order, except that ``importFormats: []`` is refused); an unknown id is
ADAPTER_NOT_FOUND; a payload an adapter cannot convert is ADAPTER_PAYLOAD (protocol errors
an adapter raises pass through unchanged, anything else is wrapped).
"""

from __future__ import annotations

import builtins
import hashlib
import importlib
import importlib.util
import re
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Final

from filemem import errors

ENTRY_POINT_GROUP: Final = "filemem.adapters"
META_PREFIX: Final = "x-"  # the front-matter key of an adapter's metadata: x-<adapter id>
ID_RE: Final = re.compile(r"[a-z0-9][a-z0-9-]*\Z")
SHIPPED_MODULE: Final = "filemem._adapters"
_MISSING: Final = object()


@dataclass(frozen=True)
class Registered:
    """An adapter as registered: its metadata is copied, so later changes to the object
    cannot make the listing lie."""

    adapter: Any
    id: str
    name: str
    description: str
    version: str
    import_formats: tuple[str, ...]
    export_format: str
    origin: str

    def info(self) -> dict[str, Any]:
        """The reference's listing row."""
        return {"id": self.id, "name": self.name, "description": self.description,
                "version": self.version, "importFormats": list(self.import_formats),
                "exportFormat": self.export_format}


def _get(adapter: Any, *names: str) -> Any:
    for n in names:
        if isinstance(adapter, Mapping):
            if n in adapter:
                return adapter[n]
        elif hasattr(adapter, n):
            return getattr(adapter, n)
    return _MISSING


def _call(adapter: Any, name: str) -> Callable[..., Any]:
    fn = _get(adapter, name)
    assert callable(fn)
    return fn  # type: ignore[no-any-return]


def validate(adapter: Any, origin: str = "register()") -> Registered:
    """Check an adapter in the reference's order; INVALID_INPUT naming the first problem."""
    if adapter is None or isinstance(adapter, (str, bytes, int, float, bool, list, tuple, set)):
        raise errors.invalid_input("memory adapter must be an object")
    if isinstance(adapter, type):
        raise errors.invalid_input(
            f"memory adapter must be an object (got the class {adapter.__name__}; register an "
            "instance)")
    aid = _get(adapter, "id")
    if not isinstance(aid, str) or not ID_RE.match(aid):
        raise errors.invalid_input("memory adapter id must be a lowercase kebab-case string")
    for key in ("name", "description", "version"):
        value = _get(adapter, key)
        if not isinstance(value, str) or not value.strip():
            raise errors.invalid_input(f'memory adapter "{aid}" needs a non-empty {key} string')
    formats = _get(adapter, "import_formats", "importFormats")
    if not isinstance(formats, (list, tuple)) or not formats or not all(
            isinstance(f, str) and f for f in formats):
        raise errors.invalid_input(
            f'memory adapter "{aid}" importFormats must be a non-empty string array')
    export_format = _get(adapter, "export_format", "exportFormat")
    if not isinstance(export_format, str) or not export_format:
        raise errors.invalid_input(
            f'memory adapter "{aid}" exportFormat must be a non-empty string')
    for fn in ("adapt", "export"):
        if not callable(_get(adapter, fn)):
            raise errors.invalid_input(f'memory adapter "{aid}" {fn} must be a function')
    return Registered(adapter, aid, _get(adapter, "name"), _get(adapter, "description"),
                      _get(adapter, "version"), tuple(formats), export_format, origin)


class Registry:
    """Adapters by id. Thread-safe; the module-level functions use :func:`default_registry`."""

    def __init__(self) -> None:
        self._adapters: dict[str, Registered] = {}
        self._lock = threading.RLock()
        self.problems: list[str] = []

    def register(self, adapter: Any, *, origin: str = "register()") -> Callable[[], None]:
        """Add an adapter; returns a disposer that removes it again (only if the registered
        adapter is still this very object, so calling it twice, or after someone else
        registered the id, is harmless)."""
        entry = validate(adapter, origin)
        with self._lock:
            if entry.id in self._adapters:
                raise errors.invalid_input(f'memory adapter "{entry.id}" is already registered')
            self._adapters[entry.id] = entry

        def dispose() -> None:
            with self._lock:
                current = self._adapters.get(entry.id)
                if current is not None and current.adapter is adapter:
                    del self._adapters[entry.id]

        return dispose

    def list(self) -> list[dict[str, Any]]:
        """``{id, name, description, version, importFormats, exportFormat}`` rows by id."""
        with self._lock:
            return [self._adapters[k].info() for k in sorted(self._adapters)]

    def entry(self, adapter_id: str) -> Registered:
        with self._lock:
            found = self._adapters.get(adapter_id)
        if found is None:
            raise errors.ProtocolError(
                errors.ADAPTER_NOT_FOUND,
                f'no memory adapter registered with id "{adapter_id}"; check `filemem '
                "adapters` for the registered list",
                {"adapterId": adapter_id})
        return found

    def get(self, adapter_id: str) -> Any:
        return self.entry(adapter_id).adapter

    def adapt(self, adapter_id: str, payload: Any) -> builtins.list[Any]:
        """Convert a payload into protocol entry inputs (not validated here: seed does).
        An entry's ``adapterMetadata`` becomes its ``meta`` (``x-<adapter id>``, with the
        hash of its text); a ``meta`` the adapter set itself is dropped."""
        entry = self.entry(adapter_id)
        result = self._run(entry, "adapt", payload)
        if isinstance(result, Mapping) and isinstance(result.get("entries"), list):
            result = result["entries"]
        if not isinstance(result, list):
            raise errors.ProtocolError(
                errors.ADAPTER_PAYLOAD,
                f'adapter "{adapter_id}": adapt failed: it returned {type(result).__name__}, '
                "not a list of entries", {"adapterId": adapter_id})
        return [_with_meta(adapter_id, i, e) if isinstance(e, Mapping) else e
                for i, e in enumerate(result)]

    def export(self, adapter_id: str, entries: builtins.list[dict[str, Any]],
               metadata: Mapping[str, Mapping[str, Any]] | None = None,
               current: Any = None) -> Any:
        """Convert protocol entries into the adapter's export payload. ``metadata`` (entry
        id -> its ``x-`` keys, :meth:`filemem.Provider.entry_metadata`) gives each entry
        this adapter's metadata, if it has any. ``current``: what the destination holds now
        (``{"files": {...}}``), for an adapter with ``export_into``; others ignore it."""
        registered = self.entry(adapter_id)
        given = [_metadata_for(adapter_id, e, (metadata or {}).get(str(e.get("id"))))
                 if isinstance(e, Mapping) else e for e in entries]
        if current is not None and callable(_get(registered.adapter, "export_into")):
            return self._run(registered, "export_into", given, current)
        return self._run(registered, "export", given)

    @staticmethod
    def _run(entry: Registered, method: str, *args: Any) -> Any:
        try:
            return _call(entry.adapter, method)(*args)
        except errors.ProtocolError:
            raise
        except Exception as exc:
            raise errors.ProtocolError(
                errors.ADAPTER_PAYLOAD, f'adapter "{entry.id}": {method} failed: {exc}',
                {"adapterId": entry.id}) from exc

    # ------------------------------------------------------------ sources

    def load_shipped(self) -> None:
        """Register the adapters in the top-level ``adapters/`` folder."""
        for adapter in shipped_module().shipped():
            self.register(adapter, origin="filemem")

    def discover(self) -> None:
        """Register third-party adapters from the ``filemem.adapters`` entry points.

        Each failure (import error, invalid adapter, duplicate id) is recorded in
        :attr:`problems` and skipped, so one broken plugin cannot break the others.
        """
        from importlib.metadata import entry_points

        for ep in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            dist = getattr(ep, "dist", None)
            where = f"entry point {ep.name!r} ({ep.value}"
            where += f", from {dist.name} {dist.version})" if dist is not None else ")"
            try:
                loaded = ep.load()
                made = loaded() if isinstance(loaded, type) or (
                    callable(loaded) and _get(loaded, "id") is _MISSING) else loaded
                for adapter in made if isinstance(made, (list, tuple)) else [made]:
                    self.register(adapter, origin=where)
            except Exception as exc:  # a plugin's bug must not break filemem
                message = exc.message if isinstance(exc, errors.ProtocolError) else repr(exc)
                self.problems.append(f"{where} could not be registered: {message}")

    def origin(self, adapter_id: str) -> str:
        return self.entry(adapter_id).origin


# ---------------------------------------------------------------- round-trip metadata


def meta_key(adapter_id: str) -> str:
    """The front-matter key an adapter's metadata is kept under: ``x-<adapter id>``."""
    return META_PREFIX + adapter_id


def text_hash(text: str) -> str:
    """The SHA-256 (hex) of a text as UTF-8: what binds metadata to the text it came with."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def _with_meta(adapter_id: str, index: int, entry: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in entry.items() if k not in ("adapterMetadata", "meta")}
    given = entry.get("adapterMetadata")
    if given is None:
        return out
    key = given.get("key") if isinstance(given, Mapping) else None
    data = given.get("data") if isinstance(given, Mapping) else None
    if not isinstance(given, Mapping) or not isinstance(data, Mapping) or not (
            key is None or (isinstance(key, str) and key)):
        raise errors.ProtocolError(
            errors.ADAPTER_PAYLOAD,
            f'adapter "{adapter_id}": entry {index}: adapterMetadata must be {{"key"?: a '
            'non-empty string, "data": an object}', {"adapterId": adapter_id, "item": index})
    text = entry.get("text")
    if isinstance(text, str):  # else the import refuses the entry for its text
        stored: dict[str, Any] = {} if key is None else {"key": key}
        stored.update(textSha256=text_hash(text), data=dict(data))
        out["meta"] = {meta_key(adapter_id): stored}
    return out


def stored_metadata(adapter_id: str, meta: Mapping[str, Any] | None
                    ) -> tuple[str | None, str, dict[str, Any]] | None:
    """(key, textSha256, data) of this adapter's metadata among an entry's ``x-`` keys,
    or None when it has none (or a hand edit left it in a shape filemem did not write)."""
    value = (meta or {}).get(meta_key(adapter_id))
    if not isinstance(value, Mapping):
        return None
    key, sha, data = value.get("key"), value.get("textSha256"), value.get("data")
    if not isinstance(sha, str) or not isinstance(data, Mapping) or not (
            key is None or isinstance(key, str)):
        return None
    return key, sha, dict(data)


def _metadata_for(adapter_id: str, entry: Mapping[str, Any],
                  meta: Mapping[str, Any] | None) -> dict[str, Any]:
    out = {k: v for k, v in entry.items() if k != "adapterMetadata"}
    found = stored_metadata(adapter_id, meta)
    if found is not None:
        key, sha, data = found
        text = entry.get("text")
        out["adapterMetadata"] = {"key": key, "data": data, "textSha256": sha,
                                  "textUnchanged": isinstance(text, str)
                                  and text_hash(text) == sha}
    return out


def shipped_module() -> ModuleType:
    """``filemem._adapters`` when installed; the repository's ``adapters/`` folder, loaded
    under that name, in a source or editable checkout (the same fallback as the store
    template)."""
    if SHIPPED_MODULE in sys.modules:
        return sys.modules[SHIPPED_MODULE]
    try:
        return importlib.import_module(SHIPPED_MODULE)
    except ModuleNotFoundError as exc:
        if exc.name != SHIPPED_MODULE:
            raise
    folder = Path(__file__).resolve().parent.parent / "adapters"
    spec = importlib.util.spec_from_file_location(
        SHIPPED_MODULE, folder / "__init__.py", submodule_search_locations=[str(folder)])
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"the shipped adapters are not installed (looked in {folder})")
    module = importlib.util.module_from_spec(spec)
    sys.modules[SHIPPED_MODULE] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[SHIPPED_MODULE]
        raise
    return module


_default: Registry | None = None
_default_lock = threading.Lock()


def default_registry() -> Registry:
    """The process-wide registry: shipped adapters plus entry points, loaded on first use."""
    global _default
    with _default_lock:
        if _default is None:
            registry = Registry()
            registry.load_shipped()
            registry.discover()
            _default = registry
        return _default


def register(adapter: Any) -> Callable[[], None]:
    """Register an adapter in the default registry; returns its disposer."""
    return default_registry().register(adapter)


def list_adapters() -> list[dict[str, Any]]:
    """The default registry's adapters, by id (also available as ``adapters.list()``)."""
    return default_registry().list()


def adapt(adapter_id: str, payload: Any) -> list[Any]:
    return default_registry().adapt(adapter_id, payload)


def export(adapter_id: str, entries: list[dict[str, Any]],
           metadata: Mapping[str, Mapping[str, Any]] | None = None, current: Any = None) -> Any:
    return default_registry().export(adapter_id, entries, metadata, current)


def problems() -> list[str]:
    """Third-party adapters that could not be loaded, one line each."""
    return list(default_registry().problems)


def __getattr__(name: str) -> Any:
    # `adapters.list()` as in the reference, without shadowing the builtin in this module
    if name == "list":
        return list_adapters
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ENTRY_POINT_GROUP",
    "META_PREFIX",
    "Registered",
    "Registry",
    "adapt",
    "default_registry",
    "export",
    "list_adapters",
    "meta_key",
    "problems",
    "register",
    "stored_metadata",
    "text_hash",
    "validate",
]
