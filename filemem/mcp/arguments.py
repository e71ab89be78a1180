"""Tool arguments that do not fit a tool's input schema, said so a model can fix them.

The SDK validates a call's arguments against the tool's input schema before anything runs;
its own report is pydantic's multi-line text. Here each of pydantic's errors becomes one
:class:`filemem.toolspec.ArgumentProblem`, and :func:`filemem.toolspec.invalid_arguments`
says them in one sentence naming each argument and what it takes (read from the same input
schema the client was given), so the call answers an ``INVALID_INPUT`` tool error like
every other bad input, in the words the Hermes plugin's tools use too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from filemem.toolspec import ArgumentProblem, invalid_arguments


def problems(tool: str, input_schema: Mapping[str, Any], exc: ValidationError
             ) -> tuple[str, dict[str, Any]]:
    """The one-sentence message and the details of an argument validation failure."""
    return invalid_arguments(tool, input_schema, (
        ArgumentProblem(tuple(error.get("loc", ())), missing=error.get("type") == "missing",
                        value=error.get("input"))
        for error in exc.errors()))


__all__ = ["problems"]
