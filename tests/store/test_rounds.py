"""Group commit (``flask_a2a.store.rounds``): concurrent calls with one key share an execution."""

from __future__ import annotations

import threading
import typing as t

import pytest

from flask_a2a.protocol.model import Tier
from flask_a2a.store.rounds import RoundFailed, Rounds
from tests.conftest import wait_for

TIER = Tier("alice", None, None)


def test_settles_during_a_trim_share_the_next_one_which_starts_after_them() -> None:
    rounds: Rounds[Tier, int] = Rounds()
    first_started, release_first = threading.Event(), threading.Event()
    calls: list[int] = []
    joined: list[int] = []

    def trim(items: list[int]) -> list[str]:
        assert sorted(items) == sorted(joined[len(joined) - len(items) :])
        calls.append(len(joined))  # how many settles had joined when this trim started
        if len(calls) == 1:
            first_started.set()
            assert release_first.wait(10)
        return [f"deleted-{len(calls)}"]

    results: dict[int, list[str] | None] = {}

    def settle(n: int) -> None:
        joined.append(n)
        results[n] = rounds.run(TIER, n, trim)

    leader = threading.Thread(target=settle, args=(0,))
    leader.start()
    assert first_started.wait(10)
    others = [threading.Thread(target=settle, args=(n,)) for n in range(1, 6)]
    for thread in others:
        thread.start()
    assert wait_for(lambda: len(joined) == 6)
    assert not any(n in results for n in range(1, 6))  # none answered before a later trim
    release_first.set()
    for thread in [leader, *others]:
        thread.join(10)
    assert calls == [1, 6]  # two trims for six settles; the second started after all of them
    assert results[0] == ["deleted-1"]
    trimmed_by_second = [n for n in range(1, 6) if results[n]]
    assert len(trimmed_by_second) == 1 and results[trimmed_by_second[0]] == ["deleted-2"]


def test_tiers_do_not_wait_for_each_other_and_a_lone_settle_trims_at_once() -> None:
    rounds: Rounds[Tier, int] = Rounds()
    started, release = threading.Event(), threading.Event()

    def slow(_: list[int]) -> list[str]:
        started.set()
        assert release.wait(10)
        return []

    thread = threading.Thread(target=lambda: rounds.run(TIER, 1, slow))
    thread.start()
    assert started.wait(10)
    other: list[t.Any] = []
    assert rounds.run(Tier("bob", None, None), 2, lambda _: other.append(1) or ["b"]) == ["b"]  # type: ignore[func-returns-value]
    release.set()
    thread.join(10)
    assert rounds.run(TIER, 3, lambda _: ["again"]) == ["again"]
    assert rounds._rounds == {}  # nothing left behind


def test_a_failed_round_raises_in_its_leader_and_tells_the_others() -> None:
    rounds: Rounds[Tier, int] = Rounds()
    started, release = threading.Event(), threading.Event()
    outcomes: dict[int, str] = {}

    def execute(items: list[int]) -> None:
        if items == [0]:
            started.set()
            assert release.wait(10)
            return
        raise RuntimeError("database went away")

    def call(n: int) -> None:
        try:
            rounds.run(TIER, n, execute)
            outcomes[n] = "ok"
        except RuntimeError:
            outcomes[n] = "error"
        except RoundFailed:
            outcomes[n] = "round failed"

    first = threading.Thread(target=call, args=(0,))
    first.start()
    assert started.wait(10)
    others = [threading.Thread(target=call, args=(n,)) for n in (1, 2)]
    for thread in others:
        thread.start()
    assert wait_for(lambda: len(rounds._rounds[TIER][1].items) == 2)  # type: ignore[union-attr]
    release.set()
    for thread in [first, *others]:
        thread.join(10)
    assert outcomes[0] == "ok"
    assert sorted([outcomes[1], outcomes[2]]) == ["error", "round failed"]
    assert rounds._rounds == {}
    with pytest.raises(RuntimeError):
        rounds.run(TIER, 5, execute)
    assert rounds.run(TIER, 0, execute) is None and rounds._rounds == {}
