"""Rules that had two or three copies which drifted apart; each now lives in one place, and
every surface gets it."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

import filemem
from filemem.bridge import PROTOCOL_ERROR, Bridge
from filemem.files.gitrepo import GitRepo
from tests.conftest import BIG, assert_clean_repo, ctx, git, run_cli

UG = {"track": "user", "scope": "user-global"}


def _bridge(provider: filemem.Provider, method: str, params: dict[str, Any]) -> dict[str, Any]:
    out = io.BytesIO()
    Bridge(provider, io.BytesIO(), out).handle(
        {"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    answer: dict[str, Any] = json.loads(out.getvalue().decode("utf-8").splitlines()[-1])
    return answer


def test_bridge_seed_over_the_batch_limit_is_refused(make_provider: Any,
                                                      store_path: Path) -> None:
    provider = make_provider(budgets=BIG)
    before = git(store_path, "rev-parse", "HEAD")
    many = [{**UG, "text": f"fact {i}"} for i in range(1001)]
    answer = _bridge(provider, "seed", {"inputs": many, "write": ctx()})
    assert answer["error"]["code"] == PROTOCOL_ERROR
    assert answer["error"]["data"]["code"] == "INVALID_INPUT"
    assert "1,001 entries, more than 1,000 per seed" in answer["error"]["message"]
    assert git(store_path, "rev-parse", "HEAD") == before
    assert provider.list_entries() == []
    assert _bridge(provider, "seed", {"inputs": many[:1000], "write": ctx()})["result"][
        "added"] == 1000


def test_provider_seed_and_import_share_the_limit(make_provider: Any) -> None:
    provider = make_provider(budgets=BIG)
    many = [{**UG, "text": f"fact {i}"} for i in range(1001)]
    for call in (provider.seed, provider.import_entries):
        with pytest.raises(filemem.ProtocolError) as info:
            call(many, ctx())
        assert info.value.code == "INVALID_INPUT"
    assert provider.list_entries() == []


def test_adopting_a_config_from_a_newer_filemem_is_refused(provider: filemem.Provider,
                                                           store_path: Path) -> None:
    provider.add({**UG, "text": "still readable"}, ctx())
    head = git(store_path, "rev-parse", "HEAD")
    config = store_path / "filemem.yaml"
    config.write_text(config.read_text(encoding="utf-8").replace("schema: 1", "schema: 2"),
                      encoding="utf-8")
    out = run_cli("adopt", "--yes", "--json", store=store_path)
    assert out.returncode == 1, out.stdout
    assert "needs a newer filemem" in out.stdout
    assert git(store_path, "rev-parse", "HEAD") == head
    status = json.loads(run_cli("status", "--json", store=store_path).stdout)
    problems = [c.get("problem") for c in status if c["path"] == "filemem.yaml"]
    assert problems and "needs a newer filemem" in str(problems[0])
    # the store still reads: nothing too new was committed
    assert [e["text"] for e in provider.list_entries()] == ["still readable"]


def test_an_audit_only_commit_is_never_dropped(make_provider: Any, store_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """A person's git keeps moving the branch during a denied write: the denial's row still
    reaches the audit trail (in the ledger when no commit could be made)."""
    provider = make_provider(write_policy="off")
    real = GitRepo.cas_head

    def always_moved(self: GitRepo, old: str | None, new: str, message: str,
                     durable: bool = True, then: Any = None) -> bool:
        if "denied" in message:
            return False  # as if someone committed with git every time
        return real(self, old, new, message, durable, then)

    monkeypatch.setattr(GitRepo, "cas_head", always_moved)
    with pytest.raises(filemem.ProtocolError) as info:
        provider.add({**UG, "text": "refused while git is busy"}, ctx())
    assert info.value.code == "WRITE_DENIED"
    rows = [r for r in provider.audit_list(10) if r["action"] == "add-denied"]
    assert [r["text"] for r in rows] == ["refused while git is busy"]
    monkeypatch.setattr(GitRepo, "cas_head", real)
    assert_clean_repo(store_path)


def test_a_write_on_a_branch_that_keeps_moving_says_so(make_provider: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    provider = make_provider()
    monkeypatch.setattr(GitRepo, "cas_head", lambda self, *args, **kwargs: False)
    with pytest.raises(filemem.StoreBusy, match="branch moved 5 times"):
        provider.add({**UG, "text": "never lands"}, ctx())


def test_listing_order_is_write_order_even_after_a_seed(provider: filemem.Provider,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A seed's entries take consecutive milliseconds; the next write must still sort after
    them, however soon it comes (here: with the clock standing still)."""
    import filemem.provider as provider_mod

    monkeypatch.setattr(provider_mod, "now_ms", lambda: 1_800_000_000_000)
    for round_ in range(3):
        provider.seed([{**UG, "text": f"seeded {round_}.{i}"} for i in range(50)], ctx())
        provider.add({**UG, "text": f"later {round_}"}, ctx())
        listed = [e["text"] for e in provider.list_entries()]
        assert listed[-51:] == [f"seeded {round_}.{i}" for i in range(50)] + [f"later {round_}"]
