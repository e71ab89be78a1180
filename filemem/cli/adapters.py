"""`filemem adapters`, and the file side of `filemem import/export --adapter`.

Adapters are pure converters, so the reading and writing of other tools' files happens
here: a file becomes ``{"text", "file", "path"}`` (or its parsed JSON), a directory
``{"files": {name: text}, "path"}``; an export payload that is a string is written as a
text file, ``{"files": {...}}`` into a directory, anything else as JSON. A directory export
into a folder that has some of its files already is made again with what they hold now (an
adapter's ``export_into``: Claude Code's MEMORY.md keeps the lines of other files), and a
file whose content would not change is left as it is.
"""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any, Final

import click

from filemem import errors, location
from filemem.adapters import ID_RE, default_registry
from filemem.cli.app import main
from filemem.cli.common import emit_json, json_option
from filemem.shown import counted, them, visible
from filemem.types import SkippedEntry

MAX_FILE_BYTES: Final = 16 * 1024 * 1024
TEXT_SUFFIXES: Final = (".md", ".markdown", ".txt")
_SAFE_FILE: Final = re.compile(r"[^/\\\x00]+\Z")


@main.command(name="adapters")
@json_option
def adapters_command(as_json: bool) -> None:
    """List the memory adapters: Hermes, Claude Code, mem0 and any installed plugins.

    Use one with `filemem import --adapter ID PATH` or `filemem export --adapter ID`.
    Plugins register through the `filemem.adapters` entry-point group.
    """
    registry = default_registry()
    rows = registry.list()
    if as_json:
        emit_json({"adapters": [{**r, "origin": registry.origin(r["id"])} for r in rows],
                   "problems": list(registry.problems)})
    else:
        click.echo(f"Memory adapters ({len(rows)}):")
        for r in rows:
            click.echo(visible(f"- {r['id']} ({r['name']}, v{r['version']}): "
                               f"{r['description']}"))
            click.echo(visible(f"  import: {', '.join(r['importFormats'])}; "
                               f"export: {r['exportFormat']}"))
            origin = registry.origin(r["id"])
            if origin != "filemem":
                click.echo(f"  from {visible(origin)}")
        click.echo("Import with `filemem import --adapter ID PATH`; export with "
                   "`filemem export --adapter ID [--out PATH]`.")
    for problem in registry.problems:
        click.echo(f"filemem: warning: adapter {visible(problem, keep_newlines=True)}",
                   err=True)


def check_id(adapter_id: str) -> str:
    if not ID_RE.match(adapter_id):
        raise click.UsageError(
            f"adapter id missing or invalid: {adapter_id!r}; use --adapter ID (lowercase "
            "kebab-case, see `filemem adapters`)")
    return adapter_id


# ---------------------------------------------------------------- reading payloads


def _decode(data: bytes, shown: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise errors.invalid_input(f"import: {shown} is not UTF-8 text ({exc.reason} at byte "
                                   f"{exc.start}); nothing was imported") from None


def _read(path: str) -> bytes:
    size = os.path.getsize(path)
    if size > MAX_FILE_BYTES:
        raise errors.invalid_input(f"import: {path} is {size:,} bytes, more than "
                                   f"{MAX_FILE_BYTES:,}; nothing was imported")
    with open(path, "rb") as f:
        return f.read()


def read_payload(path: str) -> Any:
    """What an adapter gets for PATH: a directory's top-level files, a file's text, or the
    JSON a ``.json`` file (or a file that parses as JSON) holds; ``-`` reads stdin."""
    if path == "-":
        text = _decode(sys.stdin.buffer.read(), "stdin")
        return _text_or_json(text, None, None, "stdin")
    full = os.path.abspath(path)
    if os.path.isdir(full):
        files: dict[str, str] = {}
        for name in sorted(os.listdir(full)):
            child = os.path.join(full, name)
            if name.startswith(".") or not os.path.isfile(child):
                continue  # hidden files (editor swap files, Hermes' temp files), folders
            files[name] = _decode(_read(child), child)
        return {"files": files, "path": full}
    text = _decode(_read(full), path)
    return _text_or_json(text, os.path.basename(full), full, path)


def _text_or_json(text: str, name: str | None, full: str | None, shown: str) -> Any:
    lower = (name or "").lower()
    if lower.endswith(".json"):
        try:
            return json.loads(text)
        except ValueError as exc:
            raise errors.invalid_input(f"import: {shown} is not JSON ({exc}); nothing was "
                                       "imported") from None
    if not lower.endswith(TEXT_SUFFIXES) and text.lstrip()[:1] in ("{", "["):
        try:
            return json.loads(text)
        except ValueError:
            pass  # Markdown that starts with a bracket
    payload: dict[str, Any] = {"text": text}
    if name is not None:
        payload["file"] = name
    if full is not None:
        payload["path"] = full
    return payload


# ---------------------------------------------------------------- writing payloads


def current_files(out: str, names: Any) -> dict[str, str]:
    """What the regular files ``names`` in the folder ``out`` hold now (those that are there
    and are UTF-8 text; a link or anything else is left out)."""
    found: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str) or not _SAFE_FILE.match(name) or name in (".", ".."):
            continue  # write_payload refuses such a name
        path = os.path.join(out, name)
        try:
            if os.path.islink(path) or not os.path.isfile(path) \
                    or os.path.getsize(path) > MAX_FILE_BYTES:
                continue
            with open(path, "rb") as f:
                found[name] = f.read().decode("utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return found


def is_directory_payload(payload: Any) -> bool:
    return (isinstance(payload, dict) and set(payload) == {"files"}
            and isinstance(payload["files"], dict))


def write_payload(adapter_id: str, payload: Any, out: str | None, force: bool) -> str:
    """Write an export payload; returns a line saying what was written ('' for stdout)."""
    from filemem.owner import make_export_folder, write_export  # loaded only when needed

    if is_directory_payload(payload):
        files = payload["files"]
        if out is None:
            names = ", ".join(sorted(files)) or "no files"
            raise click.UsageError(f"the {adapter_id} export is a directory ({names}): pass "
                                   "--out DIR")
        for name, text in files.items():
            if not isinstance(name, str) or not isinstance(text, str) \
                    or not _SAFE_FILE.match(name) or name in (".", ".."):
                raise errors.ProtocolError(
                    errors.ADAPTER_PAYLOAD,
                    f'adapter "{adapter_id}": export produced an unusable file name {name!r}',
                    {"adapterId": adapter_id})
        if os.path.exists(out) and not os.path.isdir(out):
            raise errors.invalid_input(f"export: {out} is a file; the {adapter_id} export is a "
                                       "directory: pass --out DIR")
        current = current_files(out, files)
        changed = sorted(n for n in files if os.path.lexists(os.path.join(out, n))
                         and current.get(n) != files[n])
        if changed and not force:
            raise errors.invalid_input(
                f"export: {out} already has {', '.join(changed)}; pass --force to overwrite "
                f"{them(len(changed))} (other files there are left "
                "alone); nothing was written")
        make_export_folder(out)
        written = sorted(n for n in files if current.get(n) != files[n])
        for name in written:
            write_export(os.path.join(out, name), files[name].encode("utf-8"))
        same = len(files) - len(written)
        if not written:
            return f"Nothing to write in {out}: {counted(same, 'file')} already up to date"
        return (f"Wrote {counted(len(written), 'file')} to {out}: {', '.join(written)}"
                + (f"; {same} already up to date" if same else ""))
    if isinstance(payload, str):
        data = payload.encode("utf-8")
    else:
        try:
            data = (json.dumps(payload, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
        except (TypeError, ValueError) as exc:
            raise errors.ProtocolError(
                errors.ADAPTER_PAYLOAD,
                f'adapter "{adapter_id}": export produced a value that is not text or JSON '
                f"({exc})", {"adapterId": adapter_id}) from None
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return ""
    if os.path.isdir(out):
        raise errors.invalid_input(f"export: {out} is a directory; the {adapter_id} export is "
                                   "one file: pass --out FILE")
    if os.path.lexists(out) and not force:
        raise errors.invalid_input(f"export: {out} already exists; pass --force to overwrite "
                                   "it; nothing was written")
    write_export(os.path.abspath(out), data)
    return f"Wrote {out}"


# ---------------------------------------------------------------- import / export --adapter


def import_with_adapter(adapter_id: str, path: str, workspace: str | None, agent: str | None,
                        session_id: str | None, yes: bool, store_path: str | None,
                        as_json: bool, keep_duplicates: bool = False) -> None:
    """Convert PATH with the adapter, then import: one approval, one commit, the budget
    checked before asking and again after (the Provider's seed does both); entries already
    in memory are skipped unless ``keep_duplicates`` (the owner side's rule)."""
    from filemem.cli.common import open_owner, write_ctx
    from filemem.model import workspace_key_of

    check_id(adapter_id)
    registry = default_registry()
    registry.entry(adapter_id)  # ADAPTER_NOT_FOUND before reading anything
    entries = registry.adapt(adapter_id, read_payload(path))
    shown = "stdin" if path == "-" else path
    if not entries:
        raise errors.invalid_input(f"import: the {adapter_id} adapter found no entries in "
                                   f"{shown}; nothing was imported")
    derived: set[str] = set()
    for e in entries:
        if not isinstance(e, dict) or e.get("scope") != "workspace":
            continue
        if workspace is not None:
            e["workspaceKey"] = workspace_key_of(workspace)
        elif isinstance(e.get("workspaceKey"), str) and e["workspaceKey"]:
            derived.add(e["workspaceKey"])
    for key in sorted(derived):
        if not os.path.isdir(key):
            click.echo(f"filemem: note: {adapter_id} placed entries in workspace "
                       f"{visible(key)}, which is not a folder here; if that is wrong, "
                       "import again with --workspace DIR", err=True)
    with open_owner(store_path, validate=True, yes=yes) as owner:
        result = owner.import_entries(entries, write_ctx(workspace, agent, session_id),
                                      keep_duplicates=keep_duplicates, adapter_id=adapter_id)
    if as_json:
        emit_json(result)
        return
    skipped, root = result["skipped"], location.resolve_store_path(store_path)
    if not result["added"]:
        click.echo(f"Nothing to import: {skipped_line(skipped, root)}; nothing was written "
                   f"(--keep-duplicates imports {them(len(skipped))} anyway).")
        return
    click.echo(f"Imported {counted(result['added'], 'entry', 'entries')} via adapter "
               f"{adapter_id} in one commit.")
    if skipped:
        click.echo(f"Skipped {skipped_line(skipped, root)} (--keep-duplicates imports them "
                   "too).")


def skipped_line(skipped: list[SkippedEntry], root: str | None = None) -> str:
    """``3 already in memory, 1 repeated in the import, 1 imported before, 2 waiting in
    pending approval ID (`filemem pending`, `filemem approve ID`)``."""
    parts = []
    for why, said in (("in-memory", "already in memory"), ("repeated", "repeated in the import"),
                      ("imported-before", "imported before in this version and changed in "
                       "filemem since")):
        n = sum(1 for s in skipped if s["why"] == why)
        if n:
            parts.append(f"{counted(n, 'entry', 'entries')} {said}")
    ids = list(dict.fromkeys(s.get("pendingId", "") for s in skipped if s["why"] == "pending"))
    for pid in ids:
        n = sum(1 for s in skipped if s.get("pendingId", "") == pid)
        parts.append(f"{counted(n, 'entry', 'entries')} waiting in pending approval "
                     f"{pid} (see it with `{location.command(root, 'pending')}`, import it "
                     f"with `{location.command(root, 'approve', pid)}`)")
    return ", ".join(parts)


def export_with_adapter(adapter_id: str, out: str | None, track: str | None, scope: str | None,
                        force: bool, store_path: str | None) -> None:
    """Write the entries (all, or one track/scope) in the adapter's format. Read-only."""
    from filemem.cli.common import open_store

    check_id(adapter_id)
    registry = default_registry()
    registry.entry(adapter_id)
    with open_store(store_path) as store:
        entries = [e for e in store.list_entries()
                   if (track is None or e["track"] == track)
                   and (scope is None or e["scope"] == scope)]
        entries = import_order(store, entries)
        metadata = store.entry_metadata()
    payload = registry.export(adapter_id, entries, metadata)
    if is_directory_payload(payload) and out is not None and os.path.isdir(out):
        current = current_files(out, payload["files"])
        if current:  # a live folder: what its files hold now may change what to write
            payload = registry.export(adapter_id, entries, metadata,
                                      {"files": current, "path": os.path.abspath(out)})
    done = write_payload(adapter_id, payload, out, force)
    if done:
        click.echo(f"{done} ({counted(len(entries), 'entry', 'entries')})", err=True)


def import_order(store: Any, entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The listing order, with the entries of one import in the order they were imported.

    Entries seeded together share a ``createdAt`` and list by their random ids; a format
    whose order means something (a Hermes file) would come back shuffled. The ``add`` audit
    rows of a seed are in input order, so they break the tie.
    """
    stamps: dict[str, int] = {}
    for e in entries:
        stamps[e["createdAt"]] = stamps.get(e["createdAt"], 0) + 1
    tied = {e["id"] for e in entries if stamps[e["createdAt"]] > 1}
    if not tied:
        return entries
    position: dict[str, int] = {}
    for limit in (1_000, 10_000):
        rows = store.audit_list(limit)
        for r in rows:
            if r["action"] == "add" and r["entryId"] in tied and isinstance(r["seq"], int):
                position.setdefault(r["entryId"], r["seq"])
        if tied <= position.keys() or len(rows) < limit:
            break
    last = float("inf")
    return sorted(entries, key=lambda e: (e["createdAt"], position.get(e["id"], last), e["id"]))
