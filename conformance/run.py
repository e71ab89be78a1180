"""Run the dsh-memory-protocol/v1 conformance suite against a provider.

    python run.py --factory module:function      # a Python provider factory
    python run.py --bridge "filemem bridge --store {store}"   # any bridge command

One line per case (``PASS A1 ...``, ``FAIL B2 ...: why``, ``SKIP G1 ...: why``), then the
number of skipped cases if any, then a last line ``N passed, N failed``. Exit status: 0 when
nothing failed, 1 when a case failed, 2 for a usage or setup error (a bridge that does not
start is one, found before any case runs). Standard library only:
copy this folder anywhere and run it; see README.md.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
import traceback
from collections.abc import Sequence
from typing import TextIO

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from cases import CASES, Case
from harness import (
    OPTIONAL_METHODS,
    Backend,
    BridgeBackend,
    BridgeError,
    CaseFailure,
    FactoryBackend,
    Harness,
    MethodMissing,
    ProtocolFailure,
    SetupError,
    Skip,
)
from preflight import check_bridge

PROTOCOL_GROUPS = ("A", "B", "C", "D", "E")
GROUPS = {"A": "entry model", "B": "write semantics", "C": "budgets",
          "D": "audit reconstruction", "E": "export envelope",
          "S": "filemem's stricter choices", "G": "git store", "P": "several processes"}
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog="run.py",
        description="Check a dsh-memory-protocol/v1 provider (filemem's conformance suite).",
        epilog="Groups: " + ", ".join(f"{g} {name}" for g, name in GROUPS.items())
        + ". Exit status: 0 all passed (or skipped), 1 a case failed, 2 usage/setup error.")
    target = ap.add_mutually_exclusive_group()
    target.add_argument("--factory", metavar="MODULE:FUNCTION",
                        help="a Python factory f(store_path, budgets, gate) returning a "
                             "provider (imported with the current folder on sys.path)")
    target.add_argument("--bridge", metavar="COMMAND",
                        help="a command speaking the bridge protocol; {store} is a fresh "
                             "folder per case, {budgets} the budgets JSON (else appended as "
                             "--budgets JSON), {python} the --python interpreter")
    ap.add_argument("-k", dest="keywords", action="append", default=[], metavar="SUBSTRING",
                    help="run only cases whose id or title contains SUBSTRING "
                         "(case-blind; repeat for more)")
    ap.add_argument("--group", metavar="A,B,...",
                    help="run only these groups (" + ",".join(GROUPS) + ")")
    ap.add_argument("--protocol-only", action="store_true",
                    help="only the protocol's 22 cases (groups A-E)")
    ap.add_argument("--list", action="store_true", help="list the selected cases and exit")
    ap.add_argument("--python", default=sys.executable, metavar="PATH",
                    help="interpreter for child processes (factory writers of group P, "
                         "{python} in --bridge); default: this one")
    ap.add_argument("--timeout", type=float, default=60.0, metavar="SECONDS",
                    help="how long to wait for one bridge answer (default 60)")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="details: timings, notes, tracebacks, bridge stderr on failure")
    return ap


def select(cases: Sequence[Case], keywords: Sequence[str], groups: str | None,
           protocol_only: bool) -> list[Case]:
    """The cases to run, in suite order."""
    chosen = list(cases)
    if protocol_only:
        chosen = [c for c in chosen if c.group in PROTOCOL_GROUPS]
    if groups:
        wanted = {g.strip().upper() for g in groups.split(",") if g.strip()}
        unknown = wanted - set(GROUPS)
        if unknown:
            raise SetupError(f"unknown group(s) {', '.join(sorted(unknown))}; groups are "
                             + ", ".join(GROUPS))
        chosen = [c for c in chosen if c.group in wanted]
    if keywords:
        kws = [k.lower() for k in keywords]
        chosen = [c for c in chosen if any(k in c.id.lower() or k in c.title.lower()
                                           for k in kws)]
    return chosen


def one_line(text: str, limit: int = 400) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[:limit - 1] + "…"


def run_case(c: Case, backend: Backend, verbose: bool, out: TextIO) -> str:
    """Run one case on a fresh harness; print its line; return PASS, FAIL or SKIP."""
    start = time.monotonic()
    status, reason, detail = "PASS", "", ""
    h = Harness(backend)
    try:
        c.fn(h)
    except Skip as exc:
        status, reason = "SKIP", str(exc)
    except MethodMissing as exc:
        if exc.method in OPTIONAL_METHODS:
            status, reason = "SKIP", f"the provider has no {exc.method}() (optional)"
        else:
            status, reason = "FAIL", f"the provider has no {exc.method}()"
    except CaseFailure as exc:
        status, reason = "FAIL", str(exc)
        detail = traceback.format_exc()
    except ProtocolFailure as exc:
        status, reason = "FAIL", f"unexpected protocol error {exc.code}: {exc.message}"
        detail = traceback.format_exc()
    except BridgeError as exc:
        status, reason = "FAIL", f"bridge: {exc}"
        detail = traceback.format_exc()
    except KeyboardInterrupt:
        h.kill()
        h.close()
        raise
    except Exception as exc:
        status, reason = "FAIL", f"{type(exc).__name__}: {exc}"
        detail = traceback.format_exc()
    problems = h.close()
    if problems and status != "FAIL":
        status, reason = "FAIL", "; ".join(problems)
    elif problems:
        reason += "; also " + "; ".join(problems)
    if status == "FAIL" and h.problems:
        reason += " (" + "; ".join(h.problems) + ")"
    line = f"{status} {c.id} {c.title}" + (f": {one_line(reason)}" if reason else "")
    print(line, file=out, flush=True)
    if verbose:
        print(f"    {time.monotonic() - start:.2f} s", file=out)
        for note in h.notes:
            print(f"    note: {note}", file=out)
        if status == "FAIL":
            for block in (reason if len(one_line(reason)) != len(reason) else "", detail,
                          h.closing_diagnostics):
                for text_line in block.strip().splitlines():
                    print(f"    | {text_line}", file=out)
        out.flush()
    return status


def main(argv: Sequence[str] | None = None, out: TextIO = sys.stdout) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    ap = parser()
    if not args_list:
        ap.print_help(sys.stderr)
        return EXIT_USAGE
    args = ap.parse_args(args_list)
    try:
        chosen = select(CASES, args.keywords, args.group, args.protocol_only)
    except SetupError as exc:
        print(f"run.py: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.list:
        for c in chosen:
            print(f"{c.id:<4} {c.title}", file=out)
        return EXIT_OK
    if not args.factory and not args.bridge:
        print("run.py: give --factory MODULE:FUNCTION or --bridge COMMAND (or --list)",
              file=sys.stderr)
        return EXIT_USAGE
    if not chosen:
        print("run.py: no case matches the selection", file=sys.stderr)
        return EXIT_USAGE
    try:
        backend: Backend = (FactoryBackend(args.factory, args.python) if args.factory
                            else BridgeBackend(args.bridge, args.python, args.timeout))
        if isinstance(backend, BridgeBackend):
            check_bridge(backend)  # one setup error, not the same failure in every case
    except SetupError as exc:
        print(f"run.py: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.verbose:
        print(f"dsh-memory-protocol/v1 conformance: {len(chosen)} cases against "
              f"{backend.description}", file=out)
    start = time.monotonic()
    counts = {"PASS": 0, "FAIL": 0, "SKIP": 0}
    for c in chosen:
        counts[run_case(c, backend, args.verbose, out)] += 1
    if args.verbose:
        print(f"{time.monotonic() - start:.1f} s in all", file=out)
    if counts["SKIP"]:
        print(f"{counts['SKIP']} skipped", file=out)
    print(f"{counts['PASS']} passed, {counts['FAIL']} failed", file=out)
    return EXIT_FAILED if counts["FAIL"] else EXIT_OK


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
