"""Other tools' metadata in entry files (``x-<name>`` keys, schemas/entry-file.md): only an
import writes it, a replace keeps it, the model never sees it, the audit trail holds it."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.adapters import default_registry, text_hash
from tests.conftest import assert_clean_repo, ctx, file_of, git, head, set_text

MakeProvider = Callable[..., filemem.Provider]
META = {"x-some-tool": {"key": "note-1.md", "textSha256": text_hash("Uses sqlc; run make gen"),
                        "data": {"file": "note-1.md", "odd": "\u2028 \"q\" \n ---"}}}
SECRET = "never-shown-to-the-model"


def imported(provider: filemem.Provider, **more: Any) -> dict[str, Any]:
    meta = {**META, "x-other": {"data": {"marker": SECRET}}}
    result = provider.import_entries([{"track": "agent", "scope": "workspace",
                                       "text": "Uses sqlc; run make gen", "meta": meta,
                                       **more}], ctx())
    return result["entries"][0]  # type: ignore[no-any-return]


def test_an_import_keeps_it_in_the_file_and_nothing_shows_it(
        provider: filemem.Provider, store_path: Path) -> None:
    entry = imported(provider)
    data = file_of(store_path, entry["id"]).read_text(encoding="utf-8")
    assert '\nx-other: {"data": {"marker": "never-shown-to-the-model"}}\n' in data
    assert data.index("\nsessionId: ") < data.index("\nx-other: ") < data.index("\nx-some-tool:")
    assert provider.entry_metadata() == {entry["id"]: {**META, "x-other": {
        "data": {"marker": SECRET}}}}
    # the protocol's shapes and everything an agent gets have no trace of it
    session = {"id": "s9", "header": {"cwd": "/work/proj"}}
    seen = [provider.list_entries(), provider.query({"text": "sqlc"}), provider.export(),
            provider.snapshot(session), provider.audit_list(50)]
    for shown in seen:
        assert SECRET not in json.dumps(shown), shown
        assert "x-other" not in json.dumps(shown)
    assert set(provider.list_entries()[0]) == set(entry)
    assert_clean_repo(store_path)


def test_only_an_import_writes_it(provider: filemem.Provider, store_path: Path) -> None:
    added = provider.add({"track": "user", "scope": "workspace", "text": "a", "meta": META},
                         ctx())["entry"]
    seeded = provider.seed([{"track": "user", "scope": "workspace", "text": "b",
                             "meta": META}], ctx())["entries"][0]
    for e in (added, seeded):
        assert "x-some-tool" not in file_of(store_path, e["id"]).read_text(encoding="utf-8")
    assert provider.entry_metadata() == {}


@pytest.mark.parametrize(("meta", "needle"), [
    ({"name": {"data": {}}}, "must be x-<name>"),
    ({"x-a": "text"}, "must be an object"),
    ({"x-a": {"d": "x" * 40_000}}, "more than 32,768"),
    ([1], "must be an object of x-<name> keys"),
])
def test_bad_metadata_is_refused_before_anyone_is_asked(
        make_provider: MakeProvider, store_path: Path, meta: Any, needle: str) -> None:
    asked: list[Any] = []
    provider = make_provider(write_policy="ask", gate=lambda r: asked.append(r) or "allowed-once")
    before = head(make_provider().path)
    with pytest.raises(filemem.ProtocolError) as info:
        provider.import_entries([{"track": "user", "scope": "workspace", "text": "t",
                                  "meta": meta}], ctx())
    assert info.value.code == "INVALID_INPUT" and needle in info.value.message
    assert "nothing was written" in info.value.message
    assert asked == [] and head(store_path) == before


def test_a_replace_keeps_it_and_export_sees_the_text_changed(
        provider: filemem.Provider, store_path: Path) -> None:
    entry = imported(provider)
    path = file_of(store_path, entry["id"])
    line = next(x for x in path.read_text(encoding="utf-8").split("\n")
                if x.startswith("x-some-tool: "))
    provider.replace({"track": "agent", "scope": "workspace", "match": "sqlc",
                      "text": "Uses sqlc 1.27; run make gen"}, ctx())
    assert line in path.read_text(encoding="utf-8").split("\n")
    assert provider.entry_metadata()[entry["id"]]["x-some-tool"] == META["x-some-tool"]

    class Probe:  # an adapter that shows what export hands it
        id, name, description, version = "some-tool", "probe", "probe", "1"
        import_formats, export_format = ("p",), "p"

        def adapt(self, payload: Any) -> list[Any]:
            return []

        def export(self, entries: list[dict[str, Any]]) -> Any:
            return [e.get("adapterMetadata") for e in entries]

    dispose = default_registry().register(Probe())
    try:
        got = default_registry().export("some-tool", provider.list_entries(),
                                        provider.entry_metadata())
    finally:
        dispose()
    assert got == [{"key": "note-1.md", "data": META["x-some-tool"]["data"],
                    "textSha256": text_hash("Uses sqlc; run make gen"),
                    "textUnchanged": False}]
    # the history holds it: verify replays the store from the audit trail
    with filemem.open_owner(store_path) as owner:
        report = owner.verify()
    assert report.ok, report.problems
    assert "x-some-tool" in git(store_path, "show", "HEAD~1:" + path.relative_to(
        store_path).as_posix())


def test_a_cold_start_reads_it_back(make_provider: MakeProvider, store_path: Path) -> None:
    entry = imported(make_provider())
    first = make_provider().entry_metadata()
    cache = store_path / ".filemem" / "cache" / "state.jsonl"
    make_provider().close()
    again = filemem.open_store(store_path)
    try:
        assert again.entry_metadata() == first and entry["id"] in first
    finally:
        again.close()
    # the view cache keeps it too (an entry in it is checked against its blob)
    assert "x-some-tool" in cache.read_text(encoding="utf-8")


def test_hand_edits_of_the_text_and_of_the_key(provider: filemem.Provider,
                                               store_path: Path) -> None:
    entry = imported(provider)
    path = file_of(store_path, entry["id"])
    set_text(path, "Uses sqlc, by hand")
    with filemem.open_owner(store_path) as owner:
        owner.adopt()
    assert provider.list_entries()[0]["text"] == "Uses sqlc, by hand"
    assert provider.entry_metadata()[entry["id"]]["x-some-tool"] == META["x-some-tool"]
    # a person removes one key: adopted as an edit, that metadata is gone
    data = path.read_text(encoding="utf-8")
    path.write_text("\n".join(x for x in data.split("\n") if not x.startswith("x-other: ")),
                    encoding="utf-8")
    with filemem.open_owner(store_path) as owner:
        owner.adopt()
        assert owner.verify().ok
    assert set(provider.entry_metadata()[entry["id"]]) == {"x-some-tool"}
    assert_clean_repo(store_path)


def test_a_staged_import_keeps_it_until_approved(make_provider: MakeProvider,
                                                 store_path: Path) -> None:
    staging = make_provider(write_policy="ask")  # nobody to ask: the import waits
    with pytest.raises(filemem.ProtocolError) as info:
        imported(staging)
    assert info.value.details["outcome"] == "pending"
    with filemem.open_owner(store_path) as owner:
        record = owner.pending()[0]
        done = owner.approve(record["id"])
    entry_id = done["result"]["entries"][0]["id"]
    assert make_provider().entry_metadata()[entry_id]["x-some-tool"] == META["x-some-tool"]
