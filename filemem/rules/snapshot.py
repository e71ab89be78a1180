"""The frozen snapshot: the memory a session sees at its start, rendered once.

One section per non-empty layer in the fixed order, entries by (createdAt, id), texts as
they are, except an entry a blocking check matches (:mod:`filemem.rules.findings`: it came
in by a hand edit, a sync or an import, or was stored before the rule blocked): the model
gets :func:`~filemem.rules.findings.withheld`, a line naming the entry and the rule, in its
place; the entry stays in the store for the owner. The heading shows the same used/limit
numbers that budget enforcement uses.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any, Final

from filemem import errors
from filemem.config import Config
from filemem.model import LAYERS, Entry
from filemem.rules import findings

# The first line names filemem and how the reader changes memory: the tools of the surface
# that serves the snapshot (the MCP server passes its write tools: ``memory_add``, ...), or,
# when none are named (the Python API, a bridge host that names none), the protocol's write
# operations. The reference implementation's header ("[dsh-memento: ... use the memory
# tool.]") is no part of the protocol's contract: nothing checks it byte for byte.
HEADER: Final = {
    "en": "[filemem: frozen memory snapshot \u2014 captured at session start; memory changes "
          "during this session do not update this block. To change memory, use {tools}.]",
    "zh": "[filemem\uff1a\u51bb\u7ed3\u8bb0\u5fc6\u5feb\u7167\u2014\u2014\u4f1a\u8bdd\u542f"
          "\u52a8\u65f6\u6355\u83b7\uff1b\u672c\u4f1a\u8bdd\u5185\u7684\u8bb0\u5fc6\u53d8\u66f4"
          "\u4e0d\u66f4\u65b0\u6b64\u5757\u3002\u8981\u4fee\u6539\u8bb0\u5fc6\uff0c\u8bf7\u4f7f"
          "\u7528{tools}\u3002]",
}
WRITE_OPERATIONS: Final = ("add", "replace", "remove", "consolidate")
MAX_TOOLS: Final = 8
_TOOL_NAME: Final = re.compile(r"[A-Za-z0-9_.:/-]{1,64}\Z")


def tool_names(value: Any) -> tuple[str, ...] | None:
    """The tool names a snapshot's header tells the reader to use: ``None`` (the protocol's
    operations) or 1..8 names of letters, digits and ``_ . : / -``; INVALID_INPUT else."""
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not 1 <= len(value) <= MAX_TOOLS or not all(
            isinstance(v, str) and _TOOL_NAME.match(v) for v in value):
        raise errors.invalid_input(
            f"snapshot tools must be a list of 1..{MAX_TOOLS} tool names (letters, digits and "
            "_ . : / -, at most 64 characters each)")
    return tuple(value)


_OR: Final = {"en": (", ", " or "), "zh": ("\u3001", " \u6216 ")}


def _either(names: tuple[str, ...], lang: str) -> str:
    comma, last = _OR[lang]
    return comma.join(names[:-1]) + (last if len(names) > 1 else "") + names[-1]


def header(lang: str, tools: tuple[str, ...] | None = None) -> str:
    """The snapshot's first line in ``lang`` (``en`` or ``zh``), naming ``tools``."""
    if tools is None:
        ops = _OR[lang][0].join(WRITE_OPERATIONS)
        how = (f" memory \u5de5\u5177\uff08{ops}\uff09" if lang == "zh"
               else f"the memory tools ({ops})")
    elif lang == "zh":
        how = f" {_either(tools, lang)} \u5de5\u5177"
    else:
        how = f"the {_either(tools, lang)} tool"
    return HEADER[lang].format(tools=how)


TITLES: Final = {
    "en": {
        ("user", "user-global"):
            "User profile (global preferences, communication style, landmines)",
        ("user", "workspace"): "User preferences for this workspace",
        ("agent", "user-global"): "Environment facts and conventions (cross-workspace)",
        ("agent", "workspace"): "Workspace facts, conventions, and lessons",
    },
    "zh": {
        ("user", "user-global"): "\u7528\u6237\u753b\u50cf\uff08\u5168\u5c40\u504f\u597d\u3001"
                                 "\u6c9f\u901a\u98ce\u683c\u3001\u96f7\u533a\uff09",
        ("user", "workspace"): "\u672c\u5de5\u4f5c\u533a\u7684\u7528\u6237\u504f\u597d",
        ("agent", "user-global"): "\u73af\u5883\u4e8b\u5b9e\u4e0e\u7ea6\u5b9a\uff08\u8de8\u5de5"
                                  "\u4f5c\u533a\uff09",
        ("agent", "workspace"): "\u672c\u5de5\u4f5c\u533a\u7684\u4e8b\u5b9e\u3001\u7ea6\u5b9a"
                                "\u4e0e\u6559\u8bad",
    },
}
USED: Final = {"en": "chars used", "zh": "\u5df2\u7528\u5b57\u7b26"}
# What a person or a model reads when the session can see no entry at all (``say_empty``):
# the protocol's own snapshot is then ``''``, which a client shows as a blank resource.
EMPTY: Final = {
    "en": "[filemem: no memories yet \u2014 nothing is saved for this workspace and agent, so "
          "this session starts with an empty memory.]",
    "zh": "[filemem\uff1a\u8fd8\u6ca1\u6709\u8bb0\u5fc6\u2014\u2014\u6b64\u5de5\u4f5c"
          "\u533a\u548c agent \u5c1a\u672a\u4fdd\u5b58\u4efb\u4f55\u5185\u5bb9\uff0c"
          "\u672c\u4f1a\u8bdd\u4ece\u7a7a\u8bb0\u5fc6\u5f00\u59cb\u3002]",
}


def _text(entry: Entry, config: Config) -> str:
    """The entry's text as the model gets it: as it is, or the withheld marker."""
    block = findings.blocking(findings.scan(entry.text, config))
    return findings.withheld(entry.id, findings.rule_of(block[0])) if block else entry.text


def render(entries: Iterable[Entry], usage: dict[tuple[str, str], int], config: Config,
           language: str | None = None, tools: tuple[str, ...] | None = None, *,
           say_empty: bool = False) -> str:
    """The snapshot text for already-filtered (visible) entries. With none, ``''`` (the
    protocol's rule), or with ``say_empty`` the sentence saying there are no memories yet.
    Its header names ``tools`` (see :func:`header`)."""
    lang = language if language in HEADER else (config.language if config.language in HEADER
                                                 else "en")
    groups: dict[tuple[str, str], list[Entry]] = {k: [] for k in LAYERS}
    for e in entries:
        groups[(e.track, e.scope)].append(e)
    sections = []
    for layer in LAYERS:
        group = sorted(groups[layer], key=lambda e: (e.created_at, e.id))
        if not group:
            continue
        head = f"## {TITLES[lang][layer]} \u2014 {usage[layer]}/{config.limit(*layer)} {USED[lang]}"
        sections.append(head + "\n" + "\n".join(f"- {_text(e, config)}" for e in group))
    if not sections:
        return EMPTY[lang] if say_empty else ""
    return "\n\n".join([header(lang, tools), *sections])
