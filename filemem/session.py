"""Who is writing or reading: the keys of a protocol session, and the write context.

A write context is ``{"agent": {"session": {"id", "header": {"cwd", "agentPreset"}}}}``;
the protocol also lets a caller put a per-call approval callback in it (``"gate"``, the
"write gate"). Both are read here once, at the boundary, into a typed :class:`Writer`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

from filemem import errors
from filemem.model import agent_key_of, check_storable, workspace_key_of

if TYPE_CHECKING:
    from filemem.approval import Gate


class Writer(NamedTuple):
    """Who is writing: the session's keys, and the write gate if the call brought one."""

    write: dict[str, Any]  # the write context as it came, without the gate (JSON-safe)
    session_id: str | None
    workspace_key: str
    agent_key: str
    gate: Gate | None = None


def session_keys(session: Any) -> tuple[str | None, str, str]:
    """(session id, workspace key, agent key) of a protocol session object."""
    if not isinstance(session, dict):
        return None, "", ""
    sid = session.get("id")
    header = session.get("header")
    header = header if isinstance(header, dict) else {}
    cwd, preset = header.get("cwd"), header.get("agentPreset")
    for value, what in ((sid, "session id"), (cwd, "session cwd"), (preset, "agentPreset")):
        if isinstance(value, str):
            check_storable(value, what)
    return (sid if isinstance(sid, str) else None, workspace_key_of(cwd), agent_key_of(preset))


def writer_of(write: Any) -> Writer:
    """The write context's owning agent; WRITE_REQUIRES_AGENT before anything else."""
    if not isinstance(write, dict) or write.get("agent") is None:
        raise errors.write_requires_agent()
    agent = write["agent"]
    session = agent.get("session") if isinstance(agent, dict) else None
    sid, wk, ak = session_keys(session)
    gate = write.get("gate")
    plain = {k: v for k, v in write.items() if k != "gate"}
    return Writer(plain, sid, wk, ak, gate if callable(gate) else None)


def write_context(*, session_id: str | None = None, cwd: str | None = None,
                  agent: str | None = None, gate: Gate | None = None) -> dict[str, Any]:
    """Build a protocol write context: ``{"agent": {"session": {"id", "header": {...}}}}``."""
    header: dict[str, Any] = {}
    if cwd is not None:
        header["cwd"] = cwd
    if agent is not None:
        header["agentPreset"] = agent
    ctx: dict[str, Any] = {"agent": {"session": {"id": session_id, "header": header}}}
    if gate is not None:
        ctx["gate"] = gate
    return ctx


__all__ = ["Writer", "session_keys", "write_context", "writer_of"]
