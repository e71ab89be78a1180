"""One writer process of group P, for Python factories (``run.py`` starts several).

Protocol on stdin/stdout, so the parent can line every writer up before any of them
writes: read one JSON job line ``{"factory", "store", "budgets", "calls"}``; import the
factory and print ``ready``; wait for a ``go`` line; open the provider, make the calls,
print one JSON line with the per-call results, close the provider. Several OS processes
sharing one store is what a person with two agents open has, and threads in one process
cannot show it.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from harness import FactorySubject, allow, gate_adapter, load_factory, run_calls


def main() -> int:
    out = sys.stdout
    sys.stdout = sys.stderr  # a provider's prints must not garble the lines the parent reads
    job: dict[str, Any] = json.loads(sys.stdin.readline())
    factory = load_factory(job["factory"])
    asked: list[dict[str, Any]] = []
    problems: list[str] = []
    print("ready", file=out, flush=True)
    if sys.stdin.readline().strip() != "go":
        return 3
    # opened after "go", so the writers also open the store together (P3 needs that)
    subject = FactorySubject(factory(job["store"], job["budgets"],
                                     gate_adapter(allow, asked, problems)))
    try:
        results = run_calls(subject, [(m, i) for m, i in job["calls"]])
    finally:
        subject.close()
    print(json.dumps(results), file=out, flush=True)
    return 0 if not problems else 4


if __name__ == "__main__":
    sys.exit(main())
