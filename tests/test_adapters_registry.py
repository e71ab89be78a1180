"""The adapter registry (filemem choice 13): validation in the reference's order
and words, duplicates, disposers, ADAPTER_NOT_FOUND / ADAPTER_PAYLOAD, the shipped adapters,
and a third-party adapter installed as a real package and found through its entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem import adapters
from filemem.adapters import Registry
from tests.conftest import ROOT, run_cli


class Echo:
    """A well-formed adapter: one entry per line of text, exported back as lines."""

    def __init__(self, aid: Any = "echo", **overrides: Any) -> None:
        self.id = aid
        self.name = "Echo"
        self.description = "one entry per line; cannot carry anything but the text"
        self.version = "0.1.0"
        self.import_formats = ["echo-lines"]
        self.export_format = "echo-lines"
        for k, v in overrides.items():
            setattr(self, k, v)

    def adapt(self, payload: Any) -> list[dict[str, Any]]:
        return [{"track": "user", "scope": "user-global", "text": line}
                for line in str(payload).splitlines() if line]

    def export(self, entries: list[dict[str, Any]]) -> str:
        return "\n".join(e["text"] for e in entries)


def invalid(registry: Registry, adapter: Any) -> str:
    with pytest.raises(filemem.ProtocolError) as info:
        registry.register(adapter)
    assert info.value.code == "INVALID_INPUT"
    return info.value.message


# ---------------------------------------------------------------- validation


def test_validation_order_and_messages() -> None:
    r = Registry()
    for bad in (None, "echo", 42, True, ["echo"], ("echo",)):
        assert invalid(r, bad) == "memory adapter must be an object"
    assert "register an instance" in invalid(r, Echo)  # the class, not an instance
    for aid in ("", "Echo", "-echo", "echo_1", "ech o", "écho", 7, None):
        assert invalid(r, Echo(aid)) == "memory adapter id must be a lowercase kebab-case string"
    # everything wrong at once: the first check in the reference's order names the problem
    everything = Echo("x", name="", description="", version="", import_formats=[],
                      export_format="", adapt=None, export=None)
    assert invalid(r, everything) == 'memory adapter "x" needs a non-empty name string'
    for key in ("name", "description", "version"):
        for value in ("", "   ", None, 3):
            assert invalid(r, Echo("x", **{key: value})) == \
                f'memory adapter "x" needs a non-empty {key} string'
    for formats in ([], (), None, "echo-lines", ["ok", ""], ["ok", 3]):
        assert invalid(r, Echo("x", import_formats=formats)) == \
            'memory adapter "x" importFormats must be a non-empty string array'
    for fmt in ("", None, ["echo"]):
        assert invalid(r, Echo("x", export_format=fmt)) == \
            'memory adapter "x" exportFormat must be a non-empty string'
    assert invalid(r, Echo("x", adapt="nope")) == 'memory adapter "x" adapt must be a function'
    assert invalid(r, Echo("x", export=None)) == 'memory adapter "x" export must be a function'
    assert r.list() == []  # nothing half-registered


def test_importformats_empty_is_refused_even_with_a_fresh_id() -> None:
    """filemem choice 13: the reference accepts ``[]`` (its test passed only because of the
    duplicate id); filemem refuses it on its own."""
    r = Registry()
    message = invalid(r, Echo("fresh-id", import_formats=[]))
    assert "importFormats must be a non-empty string array" in message
    assert r.list() == []


def test_mapping_adapters_and_camel_case_names() -> None:
    """A dict of values and callables (the shape a JavaScript author would write) works."""
    r = Registry()
    r.register({"id": "dict-echo", "name": "D", "description": "d", "version": "1",
                "importFormats": ["a", "b"], "exportFormat": "b",
                "adapt": lambda p: {"entries": [{"track": "user", "scope": "user-global",
                                                 "text": p}]},
                "export": lambda es: {"n": len(es)}})
    assert r.list() == [{"id": "dict-echo", "name": "D", "description": "d", "version": "1",
                         "importFormats": ["a", "b"], "exportFormat": "b"}]
    # the reference's {entries} result is unwrapped to the list
    assert r.adapt("dict-echo", "hi") == [{"track": "user", "scope": "user-global", "text": "hi"}]
    assert r.export("dict-echo", []) == {"n": 0}


# ---------------------------------------------------------------- registration


def test_duplicates_and_disposers() -> None:
    r = Registry()
    first = Echo("echo")
    dispose = r.register(first)
    assert invalid(r, Echo("echo")) == 'memory adapter "echo" is already registered'
    assert invalid(r, first) == 'memory adapter "echo" is already registered'
    dispose()
    assert r.list() == []
    dispose()  # twice is harmless
    second = Echo("echo")
    dispose_second = r.register(second)
    dispose()  # the first disposer does not remove someone else's adapter with the same id
    assert [a["id"] for a in r.list()] == ["echo"]
    assert r.get("echo") is second
    dispose_second()
    assert r.list() == []


def test_list_is_sorted_by_id_and_a_snapshot() -> None:
    r = Registry()
    for aid in ("zeta", "alpha", "m-1", "m0"):
        r.register(Echo(aid))
    assert [a["id"] for a in r.list()] == ["alpha", "m-1", "m0", "zeta"]
    adapter = r.get("alpha")
    adapter.name = "changed later"
    assert r.list()[0]["name"] == "Echo"  # the listing is what was validated
    row = r.list()[0]
    row["importFormats"].append("x")
    assert r.list()[0]["importFormats"] == ["echo-lines"]


def test_not_found_and_payload_errors() -> None:
    r = Registry()

    class Broken(Echo):
        def adapt(self, payload: Any) -> list[dict[str, Any]]:
            raise KeyError("text")

        def export(self, entries: list[dict[str, Any]]) -> str:
            raise filemem.ProtocolError("ADAPTER_PAYLOAD", "mine", {"adapterId": "broken",
                                                                    "line": 3})

    class Wrong(Echo):
        def adapt(self, payload: Any) -> Any:
            return "not a list"

    r.register(Broken("broken"))
    r.register(Wrong("wrong"))
    for call in (lambda: r.adapt("nope", "x"), lambda: r.export("nope", []),
                 lambda: r.get("nope")):
        with pytest.raises(filemem.ProtocolError) as info:
            call()
        assert info.value.code == "ADAPTER_NOT_FOUND"
        assert info.value.details == {"adapterId": "nope"}
        assert info.value.message.startswith('no memory adapter registered with id "nope"')
    with pytest.raises(filemem.ProtocolError) as info:
        r.adapt("broken", "x")
    assert (info.value.code, info.value.message) == \
        ("ADAPTER_PAYLOAD", "adapter \"broken\": adapt failed: 'text'")
    assert info.value.details == {"adapterId": "broken"}
    with pytest.raises(filemem.ProtocolError) as info:
        r.export("broken", [])
    assert (info.value.message, info.value.details) == ("mine", {"adapterId": "broken",
                                                                 "line": 3})  # unchanged
    with pytest.raises(filemem.ProtocolError) as info:
        r.adapt("wrong", "x")
    assert info.value.code == "ADAPTER_PAYLOAD"
    assert "returned str, not a list of entries" in info.value.message


# ---------------------------------------------------------------- the default registry


def test_shipped_adapters() -> None:
    rows = adapters.list_adapters()
    assert adapters.list() == rows  # the reference's name, without shadowing the builtin
    assert [a["id"] for a in rows][:3] == ["claude-code-memory-md", "hermes-memory-md", "mem0"]
    by_id = {a["id"]: a for a in rows}
    assert by_id["hermes-memory-md"]["importFormats"] == ["hermes-memory-md"]
    assert by_id["claude-code-memory-md"]["exportFormat"] == "claude-code-memory-dir"
    assert by_id["mem0"]["exportFormat"] == "mem0-results"
    for row in rows[:3]:  # 1.1.0: round-trip metadata (claude-code-memory-md, mem0)
        assert row["version"] == ("1.0.0" if row["id"] == "hermes-memory-md" else "1.1.0")
        assert "Cannot carry" in row["description"] or "cannot carry" in row["description"]
    registry = adapters.default_registry()
    assert registry.origin("mem0") == "filemem"
    # in this checkout the shipped adapters come from the top-level adapters/ folder
    assert Path(adapters.shipped_module().__file__ or "").parent == ROOT / "adapters"


def test_register_on_the_default_registry() -> None:
    dispose = adapters.register(Echo("test-default-echo"))
    try:
        assert adapters.adapt("test-default-echo", "a\nb") == [
            {"track": "user", "scope": "user-global", "text": "a"},
            {"track": "user", "scope": "user-global", "text": "b"}]
        assert adapters.export("test-default-echo", [{"text": "a"}]) == "a"
        with pytest.raises(filemem.ProtocolError) as info:
            adapters.register(Echo("mem0"))
        assert info.value.message == 'memory adapter "mem0" is already registered'
    finally:
        dispose()
    assert "test-default-echo" not in [a["id"] for a in adapters.list_adapters()]


# ---------------------------------------------------------------- third-party entry points


PLUGIN_PYPROJECT = """\
[build-system]
requires = ["flit_core>=3.4,<5"]
build-backend = "flit_core.buildapi"

[project]
name = "filemem-notes-adapter"
version = "0.3.0"
description = "A plain-notes adapter for filemem"

[project.entry-points."filemem.adapters"]
plain-notes = "filemem_notes_adapter:NotesAdapter"
broken-one = "filemem_notes_adapter:missing_name"
clashing = "filemem_notes_adapter:clash"
"""

PLUGIN_MODULE = '''\
"""A third-party adapter: a plain-text notes file, one memory per paragraph."""


class NotesAdapter:
    id = "plain-notes"
    name = "Plain notes"
    description = "Paragraphs of a text file; cannot carry tags or layers"
    version = "0.3.0"
    import_formats = ["plain-notes-txt"]
    export_format = "plain-notes-txt"

    def adapt(self, payload):
        text = payload["text"] if isinstance(payload, dict) else payload
        return [{"track": "user", "scope": "user-global", "text": p.strip(),
                 "source": "plain-notes", "tags": ["notes"]}
                for p in text.split("\\n\\n") if p.strip()]

    def export(self, entries):
        return "\\n\\n".join(e["text"] for e in entries) + "\\n"


def clash():
    """A factory whose adapter takes an id filemem already has: reported, not fatal."""
    adapter = NotesAdapter()
    adapter.id = "mem0"
    return adapter
'''


def test_third_party_adapter_through_an_entry_point(tmp_path: Path) -> None:
    """Build a real package with a ``filemem.adapters`` entry point, pip-install it into a
    folder, and use it from the real CLI with that folder on PYTHONPATH."""
    src = tmp_path / "plugin"
    (src / "filemem_notes_adapter").mkdir(parents=True)
    (src / "pyproject.toml").write_text(PLUGIN_PYPROJECT, encoding="utf-8")
    (src / "filemem_notes_adapter" / "__init__.py").write_text(PLUGIN_MODULE, encoding="utf-8")
    site = tmp_path / "site"
    out = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(site),
         str(src)], capture_output=True, text=True, timeout=300)
    if out.returncode != 0 and "flit" in out.stderr and "No matching distribution" in out.stderr:
        pytest.skip(f"no build backend reachable to build the test package: {out.stderr[-300:]}")
    assert out.returncode == 0, out.stderr
    assert list(site.glob("filemem_notes_adapter-0.3.0.dist-info/entry_points.txt"))
    env = {"PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])}

    listed = run_cli("adapters", "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    doc = json.loads(listed.stdout)
    ids = [a["id"] for a in doc["adapters"]]
    assert ids == ["claude-code-memory-md", "hermes-memory-md", "mem0", "plain-notes"]
    notes = doc["adapters"][-1]
    assert notes["origin"] == ("entry point 'plain-notes' (filemem_notes_adapter:NotesAdapter, "
                               "from filemem-notes-adapter 0.3.0)")
    assert notes["importFormats"] == ["plain-notes-txt"]
    problems = "\n".join(doc["problems"])
    assert "'broken-one'" in problems and "missing_name" in problems
    assert "'clashing'" in problems and 'memory adapter "mem0" is already registered' in problems
    assert "warning: adapter entry point 'broken-one'" in listed.stderr

    text = run_cli("adapters", env=env)
    assert "- plain-notes (Plain notes, v0.3.0): Paragraphs of a text file" in text.stdout
    assert "  from entry point 'plain-notes'" in text.stdout

    # and usable: import a notes file, export it back
    store = tmp_path / "store"
    assert run_cli("init", str(store), env=env).returncode == 0
    notes_file = tmp_path / "notes.txt"
    notes_file.write_text("Uses fish shell\n\n喜欢深色主题 🌙\n", encoding="utf-8")
    done = run_cli("import", "--adapter", "plain-notes", str(notes_file), "--yes",
                   store=store, env=env)
    assert done.returncode == 0, done.stderr
    assert "Imported 2 entries via adapter plain-notes in one commit." in done.stdout
    back = run_cli("export", "--adapter", "plain-notes", store=store, env=env)
    assert back.returncode == 0, back.stderr
    assert sorted(back.stdout.strip().split("\n\n")) == sorted(["Uses fish shell",
                                                                "喜欢深色主题 🌙"])
    listed_entries = json.loads(run_cli("list", "--json", store=store, env=env).stdout)
    assert {(e["source"], tuple(e["tags"])) for e in listed_entries} == {("plain-notes",
                                                                         ("notes",))}

    # without the package on the path, the adapter is simply not there
    gone = run_cli("export", "--adapter", "plain-notes", store=store)
    assert gone.returncode == 1
    assert "ADAPTER_NOT_FOUND" in gone.stderr


def test_a_plugin_that_fails_to_import_does_not_break_filemem(tmp_path: Path) -> None:
    """An entry point is found through its dist-info alone; an import error in it is a
    warning, and the shipped adapters keep working."""
    site = tmp_path / "site"
    info = site / "bad_plugin-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bad-plugin\nVersion: 1.0\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[filemem.adapters]\nexplodes = bad_plugin_module:Adapter\n", encoding="utf-8")
    (site / "bad_plugin_module.py").write_text("raise RuntimeError('boom at import')\n",
                                               encoding="utf-8")
    out = run_cli("adapters", env={"PYTHONPATH": os.pathsep.join([str(site), str(ROOT)])})
    assert out.returncode == 0
    assert out.stdout.startswith("Memory adapters (3):")
    assert "entry point 'explodes'" in out.stderr and "boom at import" in out.stderr


def test_entry_points_can_name_factories_and_lists(tmp_path: Path) -> None:
    site = tmp_path / "site"
    info = site / "multi-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: multi\nVersion: 1.0\n",
                                   encoding="utf-8")
    (info / "entry_points.txt").write_text(
        "[filemem.adapters]\nboth = multi_adapters:ADAPTERS\nmade = multi_adapters:make\n",
        encoding="utf-8")
    (site / "multi_adapters.py").write_text(textwrap.dedent('''\
        class A:
            name = "A"; description = "a"; version = "1"
            import_formats = ["a"]; export_format = "a"
            def __init__(self, aid): self.id = aid
            def adapt(self, payload): return []
            def export(self, entries): return ""
        ADAPTERS = [A("multi-one"), A("multi-two")]
        def make(): return A("multi-made")
        '''), encoding="utf-8")
    code = ("import json; from filemem import adapters; "
            "print(json.dumps([a['id'] for a in adapters.list_adapters()], ensure_ascii=False));"
            "print(json.dumps(adapters.problems()))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(site),
                                                                           str(ROOT)])})
    assert out.returncode == 0, out.stderr
    ids, problems = (json.loads(line) for line in out.stdout.splitlines())
    assert ids == ["claude-code-memory-md", "hermes-memory-md", "mem0", "multi-made",
                   "multi-one", "multi-two"]
    assert problems == []
