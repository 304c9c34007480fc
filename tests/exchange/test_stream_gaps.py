"""A stream that missed events sends the stored task (issue 23 item 2), checked on the relay
itself: an event whose version skips ahead of the last one shown, or a bus saying events may
have been lost (``BusEvent.lost``: a shared bus reconnected), makes the stream read the store
and send the snapshot instead. The fleet test (tests/live/test_fleet.py) does it over Redis."""

from __future__ import annotations

import typing as t

from flask_a2a.exchange.bus import Bus, BusEvent
from flask_a2a.exchange.streams import Seats, relay
from flask_a2a.protocol.model import Task, TaskState, TaskStatus, utcnow


class Store:
    """The stored task as a stream event, as the test sets it; counts the reads."""

    def __init__(self) -> None:
        self.stored: tuple[str, int, bool] | None = None
        self.reads = 0

    def newer(self, version: int) -> tuple[str, int, bool] | None:
        self.reads += 1
        if self.stored is None or self.stored[1] <= version:
            return None
        return self.stored


class Feed:
    def __init__(self, store: Store) -> None:
        self.store = store

    def wrap(self, result_json: str) -> str:
        return result_json

    def still_allowed(self) -> bool:
        return True

    def refused(self) -> str:
        raise AssertionError("the caller is always allowed here")

    def poll(self, version: int) -> tuple[str, int, bool] | None:
        return None  # a live bus: only a gap or a lost notice reads the store

    def catch_up(self, version: int) -> tuple[str, int, bool] | None:
        return self.store.newer(version)


def shown(bus: Bus, store: Store, events: list[BusEvent]) -> list[str]:
    """What a stream that showed version 1 sends for ``events`` (published before it reads)."""
    subscription = bus.subscribe("t")
    body = relay(
        first="task@1", first_version=1, first_final=False, subscription=subscription,
        seat=Seats(16, "refuse").take("alice"), keepalive=5.0, feed=Feed(store),
    )  # fmt: skip
    for event in events:
        bus.publish(event)
    return [frame.decode().removeprefix("data: ").strip() for frame in body]


def event(version: int, final: bool = False) -> BusEvent:
    return BusEvent("t", version, None, f"event@{version}", final)


def test_consecutive_events_are_sent_as_they_are_without_reading_the_store() -> None:
    store = Store()
    assert shown(Bus(), store, [event(2), event(3), event(4, final=True)]) == [
        "task@1",
        "event@2",
        "event@3",
        "event@4",
    ]
    assert store.reads == 0


def test_an_event_past_a_gap_is_replaced_by_the_stored_task() -> None:
    store = Store()
    store.stored = ("task@6", 6, False)  # versions 3 and 4 never reached this stream
    sent = shown(Bus(), store, [event(2), event(5), event(6), event(7, final=True)])
    # event@5 shows as the stored task (which holds 3, 4, 5 and 6): event@6 is in it
    assert sent == ["task@1", "event@2", "task@6", "event@7"]


def test_a_lost_notice_sends_the_stored_task_when_it_is_newer() -> None:
    store = Store()
    store.stored = ("task@3", 3, False)
    sent = shown(Bus(), store, [BusEvent.lost("t"), event(3), BusEvent.lost("t"),
                                event(4, final=True)])  # fmt: skip
    assert sent == ["task@1", "task@3", "event@4"]  # the second notice found nothing newer
    assert store.reads == 2


def test_a_write_with_nothing_to_show_is_no_gap() -> None:
    """A follow-up kept in history is a write with no event: its notice moves the stream's
    version on, so the next event is sent as it is, and nothing is read."""
    store = Store()
    sent = shown(Bus(), store, [event(2), BusEvent.noted("t", 3), event(4, final=True)])
    assert sent == ["task@1", "event@2", "event@4"]
    assert store.reads == 0


def test_a_final_stored_task_ends_the_stream() -> None:
    store = Store()
    store.stored = ("task@9", 9, True)
    assert shown(Bus(), store, [event(5), event(8)]) == ["task@1", "task@9"]


def test_a_gap_the_store_cannot_fill_sends_the_event_itself() -> None:
    store = Store()  # the read fails or finds nothing newer (logged by the exchange's feed)
    assert shown(Bus(), store, [event(4), event(5, final=True)]) == ["task@1", "event@4", "event@5"]


def test_a_held_stream_ignores_a_lost_notice() -> None:
    """A task its run still holds (not stored yet) is this process's alone: a notice before
    its first event neither ends the stream nor shows anything."""
    bus, store = Bus(), Store()
    subscription = bus.subscribe("t")
    body = relay(
        first=None, first_version=0, first_final=False, subscription=subscription,
        seat=Seats(16, "refuse").take("alice"), keepalive=5.0, feed=Feed(store),
        snapshot=lambda: None,
    )  # fmt: skip
    bus.publish(BusEvent.lost("t"))
    task = Task(id="t", context_id="c", status=TaskStatus(TaskState.WORKING, utcnow()))
    bus.publish(BusEvent("t", 1, task, "task@1", False))
    bus.publish(event(2, final=True))
    sent = [frame.decode().removeprefix("data: ").strip() for frame in t.cast(t.Any, body)]
    assert sent == ["task@1", "event@2"]
