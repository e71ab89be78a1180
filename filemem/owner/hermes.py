"""`filemem connect hermes` / `filemem disconnect hermes`: filemem as Hermes Agent's memory
provider.

Connect writes a plugin folder ``$HERMES_HOME/plugins/filemem/`` (``HERMES_HOME`` defaults
to ``~/.hermes``) and sets ``memory.provider: filemem`` in ``$HERMES_HOME/config.yaml``:

* ``__init__.py``: the plugin (:mod:`filemem.hermes_plugin`, copied as it is);
* ``plugin.yaml``: its manifest for Hermes' plugin list;
* ``filemem.json``: which Python runs filemem (this one: the plugin runs inside Hermes'
  Python, which may be another, so it starts ``<python> -E -m filemem hook hermes``), the
  store, the agent name, and what ``memory.provider`` was before, for disconnect.

All or nothing (:mod:`filemem.owner.hermes_switch`): ``memory.provider`` in
``config.yaml`` is the switch, replaced last by connect and first by disconnect; the plugin
folder is written whole in ``$HERMES_HOME/.filemem-connect/`` and put in place (or taken
out) in one rename, and a journal there lets the next connect or disconnect finish or roll
back one that was killed. A failure puts every file back as it was.
"""

from __future__ import annotations

import contextlib
import importlib.resources
import json
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from filemem import __version__, errors
from filemem.files import atomic, stoppoint
from filemem.owner import hermes_switch as switch
from filemem.owner import yamlconfig

PLUGIN: Final = "filemem"  # the plugin folder's name and memory.provider's value
SECTION: Final = "memory"
KEY: Final = "provider"
SETTINGS: Final = "filemem.json"
NAMES: Final = (SETTINGS, "__init__.py", "plugin.yaml")  # the plugin folder's files
MARK: Final = "filemem connect hermes"  # what says a plugin folder is filemem's own
MANIFEST: Final = (
    f"name: {PLUGIN}\n"
    f"version: {__version__}\n"
    'description: "filemem: your memory as a git repository of Markdown files; the session '
    "snapshot in the system prompt, memory writes through filemem's approval gate (written "
    'by filemem connect hermes)"\n'
    "kind: exclusive\n"
)


def hermes_home() -> str:
    """Hermes' home as Hermes finds it: ``$HERMES_HOME``, else ``~/.hermes`` (on Windows
    ``%LOCALAPPDATA%\\hermes``)."""
    home = os.environ.get("HERMES_HOME", "").strip()
    if home:
        return os.path.abspath(os.path.expanduser(home))
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA", "").strip() or os.path.join(
            os.path.expanduser("~"), "AppData", "Local")
        return os.path.join(base, "hermes")
    return os.path.join(os.path.expanduser("~"), ".hermes")


@dataclass(frozen=True)
class Target:
    """Where and how Hermes is connected."""

    home: str
    store: str  # the store's path, as the plugin names it
    agent: str = "hermes"
    python: str = sys.executable

    @property
    def plugin_dir(self) -> str:
        return os.path.join(self.home, "plugins", PLUGIN)

    @property
    def config(self) -> str:
        return os.path.join(self.home, "config.yaml")


@dataclass(frozen=True)
class Change:
    """What happened to one file: created, updated, unchanged, removed, restored, absent
    or kept (left alone)."""

    path: str
    action: str
    note: str = ""


@dataclass(frozen=True)
class Previous:
    """``memory.provider`` before connect: absent, or written as ``token`` (meaning
    ``value``); and whether there was a ``memory`` section and a config.yaml at all."""

    had_config: bool
    had_section: bool
    had_key: bool
    value: Any = None
    token: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"hadConfig": self.had_config, "hadSection": self.had_section,
                "hadKey": self.had_key, "value": self.value, "token": self.token}

    @classmethod
    def from_json(cls, raw: Any) -> Previous | None:
        if not isinstance(raw, dict):
            return None
        return cls(bool(raw.get("hadConfig")), bool(raw.get("hadSection")),
                   bool(raw.get("hadKey")), raw.get("value"),
                   raw.get("token") if isinstance(raw.get("token"), str) else None)

    def describe(self) -> str:
        if not self.had_key or self.value in (None, ""):
            return "Hermes' built-in memory only"
        return f"the memory provider {self.value!r}"


# ---------------------------------------------------------------- the files


def plugin_source() -> bytes:
    return importlib.resources.files("filemem").joinpath("hermes_plugin.py").read_bytes()


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise errors.ConnectError(errors.CONFIG_UNWRITABLE,
                                  f"{path}: cannot be read ({exc.strerror}); nothing was "
                                  "changed", {"path": path}) from None


def read_settings(plugin_dir: str) -> dict[str, Any] | None:
    """The plugin folder's ``filemem.json`` if filemem wrote it, else None."""
    raw = _read(os.path.join(plugin_dir, SETTINGS))
    if raw is None:
        return None
    try:
        settings = json.loads(raw.decode("utf-8"))
    except ValueError:
        return None
    return settings if isinstance(settings, dict) and settings.get("by") == MARK else None


def _settings(target: Target, previous: Previous, made_plugins: bool) -> bytes:
    doc = {"by": MARK, "python": target.python, "store": target.store,
           "agent": target.agent, "previous": previous.to_json(),
           "madePluginsFolder": made_plugins}
    return (json.dumps(doc, ensure_ascii=False, indent=2) + "\n").encode("utf-8")


@dataclass
class Step:
    """One file to write (``data``) or remove (``data`` None), with its mode."""

    path: str
    data: bytes | None
    mode: int = 0o600


Writer = Callable[[str, bytes, int], None]


def _write(path: str, data: bytes, mode: int) -> None:
    atomic.atomic_write(path, data, durable=True, mode=mode)


def apply(steps: list[Step], dirs: list[str], write: Writer = _write) -> list[str]:
    """Make each step in order; on any failure put back every file already changed (and
    remove the folders made), then raise CONFIG_UNWRITABLE. Returns the folders made."""
    done: list[tuple[Step, bytes | None, int]] = []
    made: list[str] = []
    try:
        for d in dirs:
            if not os.path.isdir(d):
                os.makedirs(d, mode=0o700)
                made.append(d)
        for step in steps:
            before = _read(step.path)
            mode = yamlconfig.file_mode(step.path, step.mode)
            if step.data is None:
                if before is not None:
                    os.unlink(step.path)
            else:
                write(step.path, step.data, mode if before is not None else step.mode)
            done.append((step, before, mode))
    except (OSError, errors.ConnectError) as exc:
        for step, before, mode in reversed(done):
            try:
                if before is None:
                    if os.path.lexists(step.path):
                        os.unlink(step.path)
                else:
                    write(step.path, before, mode)
            except OSError:
                pass
        for d in reversed(made):
            with contextlib.suppress(OSError):
                os.rmdir(d)
        if isinstance(exc, errors.ConnectError):
            raise
        path = getattr(exc, "filename", None) or (done and done[-1][0].path) or "?"
        raise errors.ConnectError(
            errors.CONFIG_UNWRITABLE,
            f"{path}: cannot be written ({exc.strerror or exc}); every file was put back as "
            "it was: fix that (permissions, disk space), then run the command again",
            {"path": str(path)}) from None
    return made


# ---------------------------------------------------------------- connect


def _previous(cfg: yamlconfig.YamlFile) -> Previous:
    sec = cfg.section(SECTION)
    if not isinstance(sec, dict) or KEY not in sec:
        return Previous(cfg.exists, isinstance(sec, dict), False)
    return Previous(cfg.exists, True, True, sec[KEY], yamlconfig.token(cfg, SECTION, KEY))


def connect(target: Target, write: Writer = _write) -> list[Change]:
    """Install the plugin and select it; running it again changes nothing."""
    if not os.path.isdir(target.home):
        raise errors.ConnectError(
            errors.AGENT_NOT_FOUND,
            f"Hermes Agent does not look installed here: its home {target.home} does not "
            "exist. Install it (pip install hermes-agent) and run `hermes setup` once, or "
            "set HERMES_HOME to the Hermes home (a profile's folder) you use; then run "
            "`filemem connect hermes` again. Nothing was changed.", {"path": target.home})
    cfg = yamlconfig.read(target.config)  # CONFIG_INVALID before anything is written
    note = _resolve(target.home, target.plugin_dir, cfg)
    settings = read_settings(target.plugin_dir)
    if settings is None and os.path.lexists(target.plugin_dir) and \
            (not os.path.isdir(target.plugin_dir) or os.listdir(target.plugin_dir)):
        raise errors.ConnectError(
            errors.NAME_TAKEN,
            f"{target.plugin_dir} exists and was not written by filemem: Hermes' plugin "
            f"named {PLUGIN!r} would be that one. Move it away, then run `filemem connect "
            "hermes` again. Nothing was changed.", {"path": target.plugin_dir})
    current = cfg.section(SECTION)
    connected = isinstance(current, dict) and current.get(KEY) == PLUGIN
    kept = Previous.from_json(settings.get("previous")) if settings else None
    previous = kept if kept is not None and connected else _previous(cfg)
    if connected and kept is None:  # selected by hand before: disconnect leaves no provider
        previous = Previous(cfg.exists, True, False)
    plugins = os.path.join(target.home, "plugins")
    made = bool(settings.get("madePluginsFolder")) if settings else not os.path.isdir(plugins)
    files = [(os.path.join(target.plugin_dir, SETTINGS), _settings(target, previous, made)),
             (os.path.join(target.plugin_dir, "__init__.py"), plugin_source()),
             (os.path.join(target.plugin_dir, "plugin.yaml"), MANIFEST.encode("utf-8"))]
    changes: list[Change] = [] if note is None else [Change(switch.work_dir(target.home),
                                                            "recovered", note)]
    for path, data in files:
        before = _read(path)
        changes.append(Change(path, "unchanged" if before == data else
                              ("created" if before is None else "updated")))
    folder_changed = any(c.action in ("created", "updated") for c in changes)
    config_step: Step | None = None
    if connected:
        changes.append(Change(target.config, "unchanged"))
    else:
        text = yamlconfig.set_value(cfg, SECTION, KEY, PLUGIN, PLUGIN)
        config_data = cfg.encode(text)
        config_step = Step(target.config, config_data, yamlconfig.file_mode(target.config))
        changes.append(Change(target.config, "updated" if cfg.exists else "created",
                              f"memory.provider: {PLUGIN} (was: {previous.describe()})"))
    if not folder_changed and config_step is None:
        return changes
    journal = switch.Journal("connect", not os.path.isdir(plugins), settings is None)
    try:
        work = switch.begin(target.home, journal)
        if folder_changed and switch.foreign(target.plugin_dir, NAMES):
            # the person's own files are in the folder: it is never moved whole
            apply([Step(path, data) for path, data in files if _read(path) != data], [],
                  write)
        elif folder_changed:
            switch.stage(work, [(os.path.basename(p), d) for p, d in files], write)
            switch.put_in_place(work, target.plugin_dir)
        if config_step is not None:  # the switch: Hermes uses filemem from here on
            stoppoint.reached(f"switch {target.config}")
            write(config_step.path, config_data, config_step.mode)
        switch.end(target.home)
    except (OSError, errors.ConnectError) as exc:
        raise _failed(target.home, target.plugin_dir, target.config, exc) from None
    return changes


def _selected(cfg: yamlconfig.YamlFile) -> bool:
    current = cfg.section(SECTION)
    return isinstance(current, dict) and current.get(KEY) == PLUGIN


def _resolve(home: str, plugin_dir: str, cfg: yamlconfig.YamlFile) -> str | None:
    """Finish or roll back an interrupted connect or disconnect first (one line on it)."""
    try:
        return switch.resolve(home, plugin_dir, _selected(cfg))
    except OSError as exc:
        raise errors.ConnectError(
            errors.CONFIG_UNWRITABLE,
            f"{switch.work_dir(home)} holds an interrupted `filemem connect/disconnect "
            f"hermes`, which cannot be finished or rolled back ({exc.strerror or exc}); fix "
            "that (permissions, disk space), then run the command again",
            {"path": switch.work_dir(home)}) from None


def _failed(home: str, plugin_dir: str, config: str, exc: Exception) -> errors.ConnectError:
    """Put every file back as the switch says (see :mod:`filemem.owner.hermes_switch`),
    and the error to raise."""
    with contextlib.suppress(OSError, errors.ConnectError):
        switch.resolve(home, plugin_dir, _selected(yamlconfig.read(config)))
    if isinstance(exc, errors.ConnectError):
        return exc
    path = getattr(exc, "filename", None) or "?"
    return errors.ConnectError(
        errors.CONFIG_UNWRITABLE,
        f"{path}: cannot be written ({getattr(exc, 'strerror', None) or exc}); every file "
        "was put back as it was: fix that (permissions, disk space), then run the command "
        "again", {"path": str(path)})


def connection(home: str) -> dict[str, Any]:
    """Whether Hermes at ``home`` uses filemem, read only (``filemem connections``)."""
    plugin_dir = os.path.join(home, "plugins", PLUGIN)
    cfg = yamlconfig.read(os.path.join(home, "config.yaml"))
    settings = read_settings(plugin_dir)
    python = (settings or {}).get("python")
    return {"home": home, "connected": _selected(cfg) and settings is not None,
            "selected": _selected(cfg), "plugin": settings is not None,
            "store": (settings or {}).get("store"), "agent": (settings or {}).get("agent"),
            # the plugin runs filemem with this Python: gone (a venv removed or moved),
            # Hermes finds the provider not available
            "python": python, "pythonMissing": settings is not None and not (
                isinstance(python, str) and os.path.isfile(python)),
            "interrupted": switch.look(home, _selected(cfg))}


# ---------------------------------------------------------------- disconnect


def disconnect(home: str, write: Writer = _write) -> list[Change]:
    """Put ``memory.provider`` back as it was (the switch, first) and remove the plugin
    folder; files that are not filemem's are left alone."""
    plugin_dir = os.path.join(home, "plugins", PLUGIN)
    config = os.path.join(home, "config.yaml")
    cfg = yamlconfig.read(config)
    note = _resolve(home, plugin_dir, cfg)
    settings = read_settings(plugin_dir)
    previous = Previous.from_json(settings.get("previous")) if settings else None
    changes: list[Change] = [] if note is None else [Change(switch.work_dir(home),
                                                            "recovered", note)]
    config_step: Step | None = None
    current = cfg.section(SECTION)
    if _selected(cfg):
        prev = previous or Previous(cfg.exists, True, False)
        if prev.had_key:  # written as it was: `''`, "mem0", honcho
            token = prev.token if prev.token is not None else json.dumps(prev.value)
            text = yamlconfig.set_value(cfg, SECTION, KEY, prev.value, token)
        else:
            text = yamlconfig.remove_key(cfg, SECTION, KEY, drop_section=not prev.had_section)
        if not prev.had_config and not text.strip():
            config_step = Step(config, None)
            changes.append(Change(config, "removed", "filemem had created it"))
        else:
            config_step = Step(config, cfg.encode(text), yamlconfig.file_mode(config))
            changes.append(Change(config, "restored", f"memory.provider: back to "
                                                      f"{prev.describe()}"))
    elif cfg.exists:
        other = current.get(KEY) if isinstance(current, dict) else None
        changes.append(Change(config, "kept", "" if other in (None, "") else
                              f"memory.provider is {other!r}, not {PLUGIN}"))
    if settings is not None:
        changes.append(Change(plugin_dir, "removed"))
    elif os.path.lexists(plugin_dir):
        changes.append(Change(plugin_dir, "kept", "not written by filemem"))
    else:
        changes.append(Change(plugin_dir, "absent"))
    if config_step is None and settings is None:
        return changes
    made = bool(settings and settings.get("madePluginsFolder"))
    try:
        work = switch.begin(home, switch.Journal("disconnect", made, False))
        if config_step is not None:  # the switch: Hermes stops using filemem here
            stoppoint.reached(f"switch {config}")
            if config_step.data is None:
                os.unlink(config)
            else:
                write(config, config_step.data, config_step.mode)
        if settings is not None and switch.foreign(plugin_dir, NAMES):
            apply([Step(os.path.join(plugin_dir, n), None) for n in NAMES
                   if os.path.lexists(os.path.join(plugin_dir, n))], [], write)
            _remove_cache(os.path.join(plugin_dir, "__pycache__"))
        elif settings is not None:
            switch.take_out(work, plugin_dir, made)
        switch.end(home)
    except (OSError, errors.ConnectError) as exc:
        raise _failed(home, plugin_dir, config, exc) from None
    return changes


def _remove_cache(path: str) -> None:
    """Python's bytecode cache that Hermes' import left in the plugin folder."""
    if not os.path.isdir(path) or os.path.islink(path):
        return
    for name in os.listdir(path):
        if name.endswith(".pyc"):
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(path, name))
    with contextlib.suppress(OSError):
        os.rmdir(path)


__all__ = ["PLUGIN", "Change", "Previous", "Step", "Target", "apply", "connect", "connection",
           "disconnect", "hermes_home", "plugin_source", "read_settings"]
