"""``filemem mcp``: the MCP server agents (Claude Code, Hermes, Cursor, ...) use.

Every tool is a thin call into the one :class:`~filemem.provider.Provider`; nothing here
re-implements a protocol rule. What this package adds is what only an MCP server can know:

* **who is asking** - the session's workspace comes from the client's MCP roots when it
  offers them (else ``--workspace``, else the server's cwd) and its agent from ``--agent``.
  The model never passes workspace, agent or approval: no tool has such a parameter.
* **how a person approves** - under the ``ask`` policy each write is shown to the human in
  the client through MCP elicitation, with the full approve-what-you-see payload. The two
  protocol eras need two routes to the same guarantee (the write is exactly what was shown):

  - 2025-11-25 and older (handshake era): the server may send requests mid-call, so the
    provider's own approval gate asks with ``ctx.elicit`` at the moment the pipeline asks
    (after resolution and budget checks, before the lock) - the payload shown *is* the one
    being written, and the provider refuses if the target changed while the person looked.
  - 2026-07-28: a server cannot send requests mid-call; a tool call is answered with an
    input-required round trip instead. A resolver runs the provider's pipeline up to the
    approval step (`Provider.plan`: nothing is written or recorded) to learn the exact payload,
    and asks with ``Elicit``. On the retry the resolver runs again; the SDK discards the
    answer if the question (which contains the whole payload) changed, and asks again. The
    tool body then runs the real write with a gate that answers only for that same payload.

  A client that declared no elicitation capability cannot show a prompt, so the write is
  staged as a pending approval for the owner's CLI (``filemem pending``) - never written.
  No tool, argument or prompt lets the model approve, change the policy or see pending
  approvals.
* **the frozen snapshot** as a resource (and a prompt), rendered once per MCP session and
  recorded as a ``snapshot`` audit row byte-identical to what the client receives.

Nothing but protocol messages go to stdout (the SDK's stdio transport moves fd 1 aside).
The store is opened lazily, after ``initialize`` is answered, so start-up costs only the
imports.

One module per idea: ``gates`` (the approval form and the provider's gate), ``sessions``
(sessions, roots, the shared service), ``results`` (results and tool errors), ``routing``
(the resolvers that route each write's approval, and the write itself), ``tools`` (the
write-tool table the write tools are generated from, and the reads), ``server`` (the server,
the snapshot resource and prompt, ``run``).
"""
