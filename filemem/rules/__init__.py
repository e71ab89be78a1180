"""The protocol's rules over entries, with no I/O: budgets, match resolution, query,
the snapshot's rendering and the export envelope."""
