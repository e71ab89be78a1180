"""The store: a git repository of entry files, its lock, its view of HEAD, transactions with
retry and crash repair (``core``), and its local state under ``.filemem/``: the audit
trailers and read-side ledger (``auditlog``), recall counters (``recall``), pending
approvals (``pending``).
"""
