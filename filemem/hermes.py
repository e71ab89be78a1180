"""filemem's side of the Hermes Agent memory provider: what ``filemem hook hermes`` serves.

`filemem connect hermes` puts a small plugin into Hermes (``filemem/hermes_plugin.py``,
copied to ``$HERMES_HOME/plugins/filemem/__init__.py``). That plugin runs inside Hermes'
own Python, which may be another version with other packages than filemem's, so it imports
nothing of filemem: it starts ``<filemem's python> -E -m filemem hook hermes`` once per
Hermes session and forwards Hermes' calls to it over stdin/stdout, one JSON object per
line (``{"id", "method", "params"}`` in, ``{"id", "result"}`` or ``{"id", "error"}`` out).
This module answers them with the Provider:

* ``tools``: the memory tools in OpenAI's function format (the ``filemem mcp`` tools' names,
  arguments and descriptions, from :mod:`filemem.toolspec`);
* ``prompt``: the session's frozen snapshot, recorded as its ``snapshot`` audit row with
  Hermes' session id (the very text Hermes puts into its system prompt);
* ``call``: one tool call, answered with the ``filemem mcp`` tools' result JSON;
* ``mirror``: a write Hermes' own ``memory`` tool made (its ``on_memory_write`` hook),
  replayed as the same write in filemem.

Nobody can be asked inside Hermes, so under the ``ask`` policy every write (a tool call or
a mirrored one) is staged as a pending approval for the owner (``filemem pending``) and the
model is told so; ``auto`` and ``off`` policies in ``filemem.yaml`` decide as everywhere.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Any, Final

from filemem import errors
from filemem.provider import Provider, write_context
from filemem.toolspec import (
    ADD_DOC,
    BUDGETS_DOC,
    CONSOLIDATE_DOC,
    MATCH_DOC,
    QUERY_DOC,
    REMOVE_DOC,
    REPLACE_DOC,
    SCOPE_DOC,
    TAGS_DOC,
    TOOL_SOURCE,
    TRACK_DOC,
    WRITE_METHODS,
    argument_problems,
    entry_out,
    error_object,
    invalid_arguments,
    shape,
    tool_details,
    tool_name,
    unknown_tool,
)

MIRROR_SOURCE: Final = "hermes"  # the source of the writes Hermes' own memory tool made
TARGET_TRACK: Final = {"memory": "agent", "user": "user"}  # MEMORY.md / USER.md
log = logging.getLogger("filemem.hermes")

# ---------------------------------------------------------------- the tools

_TRACK: Final = {"type": "string", "enum": ["user", "agent"], "default": "user",
                 "description": TRACK_DOC}
_SCOPE: Final = {"type": "string", "enum": ["user-global", "workspace"], "default": "workspace",
                 "description": SCOPE_DOC}
_TAGS: Final = {"type": "array", "items": {"type": "string"}, "maxItems": 16,
                "description": TAGS_DOC}
_MATCH: Final = {"type": "string", "description": MATCH_DOC}


def _text(what: str) -> dict[str, Any]:
    return {"type": "string", "description": what}


@dataclass(frozen=True)
class Tool:
    """One tool: the Provider method it calls (also its result's ``action``), its
    description and arguments (JSON Schema), and which arguments it requires."""

    method: str
    description: str
    args: Mapping[str, Mapping[str, Any]]
    required: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return tool_name(self.method)

    def parameters(self) -> dict[str, Any]:
        """Its arguments as a JSON Schema object."""
        return {"type": "object", "properties": {k: dict(v) for k, v in self.args.items()},
                "required": list(self.required), "additionalProperties": False}

    def schema(self) -> dict[str, Any]:
        """The tool in OpenAI's function format, as Hermes takes it."""
        return {"name": self.name, "description": self.description,
                "parameters": self.parameters()}


TOOLS: Final = (
    Tool("add", ADD_DOC, {"text": _text("the fact, one self-contained statement"),
                          "track": _TRACK, "scope": _SCOPE, "tags": _TAGS}, ("text",)),
    Tool("replace", REPLACE_DOC,
         {"match": _MATCH, "text": _text("the complete new text of that entry"),
          "track": _TRACK, "scope": _SCOPE,
          "tags": {**_TAGS, "description": TAGS_DOC + "; omit to keep the entry's tags, [] to "
                                                      "clear them"}},
         ("match", "text")),
    Tool("remove", REMOVE_DOC, {"match": _MATCH, "track": _TRACK, "scope": _SCOPE},
         ("match",)),
    Tool("consolidate", CONSOLIDATE_DOC,
         {"matches": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                      "maxItems": 20, "description": "1 to 20 substrings, each matching "
                                                     "exactly one entry to merge (" + MATCH_DOC
                                                     + ")"},
          "text": _text("the one new entry that replaces them all"),
          "track": _TRACK, "scope": _SCOPE, "tags": _TAGS},
         ("matches", "text")),
    Tool("query", QUERY_DOC,
         {"text": _text("a substring to look for (case-insensitive for ASCII); omit to list"),
          "track": {"type": "string", "enum": ["user", "agent"],
                    "description": "only this track; omit for both"},
          "scope": {"type": "string", "enum": ["user-global", "workspace"],
                    "description": "only this scope; omit for both"},
          "limit": {"type": "integer", "minimum": 1,
                    "description": "most entries to return (default 20; hard-capped at 1000)"}}),
    Tool("budgets", BUDGETS_DOC, {}),
)
BY_NAME: Final = {t.name: t for t in TOOLS}
# the write tools as Hermes' model has them, which the snapshot's first line names
WRITE_TOOL_NAMES: Final = tuple(t.name for t in TOOLS if t.method in WRITE_METHODS)


def tool_schemas() -> list[dict[str, Any]]:
    return [t.schema() for t in TOOLS]


# ---------------------------------------------------------------- answering Hermes


def _failed(action: str, exc: BaseException) -> dict[str, Any]:
    """A call that failed, as the model reads it: the code, the details and what to do."""
    if isinstance(exc, errors.FilememError):
        error = error_object(exc.code, exc.message, tool_details(exc))
    else:
        log.error("filemem hermes: memory_%s failed", action, exc_info=exc)
        error = error_object("INTERNAL_ERROR", f"memory {action} failed: {exc}")
    return {"action": action, "ok": False, "error": error}


class HermesService:
    """One Hermes session's provider: the store opened on first use, the agent every write
    and read is for (``--agent``), and the session each call names (Hermes' session id
    and the folder Hermes works in)."""

    def __init__(self, store: str | None, agent: str) -> None:
        self.store = store
        self.agent = agent
        self._provider: Provider | None = None

    def provider(self) -> Provider:
        if self._provider is None:
            import filemem

            # no gate: nobody can be asked inside Hermes, so under `ask` a write is staged
            # as a pending approval for the owner (never written unapproved)
            self._provider = filemem.open_store(self.store, stage_pending=True)
        return self._provider

    def close(self) -> None:
        if self._provider is not None:
            self._provider.close()

    def session(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The protocol session of a call: ``{"id", "header": {"cwd", "agentPreset"}}``."""
        s = params.get("session")
        s = s if isinstance(s, dict) else {}
        sid, cwd = s.get("id"), s.get("cwd")
        header: dict[str, Any] = {"agentPreset": self.agent}
        if isinstance(cwd, str) and cwd:
            header["cwd"] = cwd
        return {"id": sid if isinstance(sid, str) and sid else None, "header": header}

    def write(self, session: dict[str, Any]) -> dict[str, Any]:
        header = session["header"]
        return write_context(session_id=session["id"], cwd=header.get("cwd"),
                             agent=header["agentPreset"])

    # -- the methods

    def tools(self, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        return tool_schemas()

    def prompt(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The frozen snapshot for the session (rendered once per session id, audited), its
        first line naming the write tools Hermes' model has. Nothing visible is ``''``, so
        Hermes leaves the block out of its system prompt (as Claude Code's SessionStart hook
        adds nothing): the tools' descriptions already say how to save, and a sentence that
        there is nothing would sit in every empty session's prompt."""
        try:
            return {"text": self.provider().snapshot(self.session(params),
                                                     tools=WRITE_TOOL_NAMES)}
        except Exception as exc:
            return {"text": "", **_failed("snapshot", exc)}

    def call(self, params: Mapping[str, Any]) -> dict[str, Any]:
        name, args = params.get("name"), params.get("args")
        tool = BY_NAME.get(name) if isinstance(name, str) else None
        if tool is None:
            return _failed(str(name), errors.invalid_input(unknown_tool(name, BY_NAME)))
        try:
            args = self._arguments(tool, args)
            session = self.session(params)
            if tool.method in WRITE_METHODS:
                inp = {k: v for k, v in args.items() if v is not None}
                inp.setdefault("track", "user")
                inp.setdefault("scope", "workspace")
                if tool.method != "remove":
                    inp["source"] = TOOL_SOURCE
                result = getattr(self.provider(), tool.method)(inp, self.write(session))
                return shape(tool.method, result)
            if tool.method == "query":
                filt = {k: v for k, v in args.items() if v is not None}
                found = self.provider().query(filt, {"session": session,
                                                     "sessionId": session["id"]})
                return {"action": "query", "ok": True,
                        "entries": [entry_out(e) for e in found["entries"]],
                        "total": found["total"], "truncated": found["truncated"]}
            return {"action": "budgets", "ok": True, "budgets": self.provider().budgets()}
        except Exception as exc:
            return _failed(tool.method, exc)

    @staticmethod
    def _arguments(tool: Tool, args: Any) -> dict[str, Any]:
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise errors.invalid_input(f"{tool.name} takes an object of arguments")
        found = argument_problems(tool.parameters(), args)
        if found:  # said as filemem mcp says arguments that miss the schema
            message, details = invalid_arguments(tool.name, tool.parameters(), found)
            raise errors.ProtocolError(errors.INVALID_INPUT, message, details)
        return dict(args)

    def mirror(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """A write Hermes' built-in memory tool made, as the same write here: ``add`` the
        content; ``replace`` the entry containing ``metadata.old_text`` with the content;
        ``remove`` the entry containing ``old_text`` (else the content). Hermes' memory is
        global: MEMORY.md is the agent track, USER.md the user track, both user-global."""
        action, target = params.get("action"), params.get("target")
        content = params.get("content")
        metadata = params.get("metadata")
        old = metadata.get("old_text") if isinstance(metadata, dict) else None
        name = action if isinstance(action, str) else "mirror"
        try:
            if action not in ("add", "replace", "remove"):
                raise errors.invalid_input(f"Hermes memory action {action!r} is not mirrored "
                                           "(only add, replace and remove are)")
            track = TARGET_TRACK.get(target) if isinstance(target, str) else None
            if track is None:
                raise errors.invalid_input(f"Hermes memory target {target!r} is not 'memory' "
                                           "or 'user'")
            inp: dict[str, Any] = {"track": track, "scope": "user-global"}
            if action == "add":
                inp.update(text=content, source=MIRROR_SOURCE)
            elif action == "replace":
                if not isinstance(old, str) or not old:
                    raise errors.invalid_input("Hermes replaced a memory without saying which "
                                               "(no old_text): nothing to mirror")
                inp.update(match=old, text=content, source=MIRROR_SOURCE)
            else:
                inp["match"] = old if isinstance(old, str) and old else content
            result = getattr(self.provider(), action)(inp, self.write(self.session(params)))
            return shape(action, result)
        except Exception as exc:
            return _failed(name, exc)


# ---------------------------------------------------------------- the channel


def serve(service: HermesService, stdin: IO[bytes], stdout: IO[bytes]) -> int:
    """Answer one request per line, in order, until stdin closes."""
    methods: dict[str, Callable[[Mapping[str, Any]], Any]] = {
        "tools": service.tools, "prompt": service.prompt, "call": service.call,
        "mirror": service.mirror}
    for raw in stdin:
        if not raw.strip():
            continue
        rid: Any = None
        try:
            msg = json.loads(raw.decode("utf-8"))
            if not isinstance(msg, dict):
                raise ValueError("a request must be a JSON object")
            rid = msg.get("id")
            method = methods.get(msg.get("method"))  # type: ignore[arg-type]
            if method is None:
                raise ValueError(f"unknown method {msg.get('method')!r}; methods: "
                                 + ", ".join(methods))
            params = msg.get("params")
            answer: dict[str, Any] = {"id": rid, "result": method(
                params if isinstance(params, dict) else {})}
        except Exception as exc:  # one bad request never stops the session
            log.error("filemem hook hermes: %s", exc, exc_info=not isinstance(exc, ValueError))
            answer = {"id": rid, "error": {"message": str(exc)}}
        # ASCII JSON: every character (a lone surrogate, U+2028) crosses the pipe exactly
        stdout.write(json.dumps(answer, ensure_ascii=True).encode("ascii") + b"\n")
        stdout.flush()
    return 0


def run(store: str | None, agent: str) -> int:
    """Serve the plugin on this process's stdin/stdout; diagnostics go to stderr."""
    out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # nothing else, even a C library, can write into the channel
    sys.stdout = sys.stderr
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    service = HermesService(store, agent)
    try:
        return serve(service, sys.stdin.buffer, out)
    finally:
        service.close()
        out.close()


__all__ = ["MIRROR_SOURCE", "TOOLS", "HermesService", "run", "serve", "tool_schemas"]
