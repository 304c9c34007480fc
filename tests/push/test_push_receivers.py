"""Receivers that attack the sender, on real sockets: one that drips its answer a byte at a
time, one that answers an endless body, and several owners' dripping receivers against another
owner's deliveries (``tests/hostile_receivers.py``). Private push is allowed: all on 127.0.0.1.
"""

from __future__ import annotations

import logging
import pathlib
import socket
import time
import typing as t

import pytest
import requests
from flask import Flask, request

from flask_a2a import Principal, Skill
from flask_a2a.push.webhooks import MAX_REPLY_BYTES, PushSender
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, echo
from tests.hostile_receivers import Drip, Flood, tls_for_loopback
from tests.webhook import Webhook, wait_until

#: The issue's figure: each attempt's deadline (A2A_PUSH_TIMEOUT).
TIMEOUT = 1.0
CONFIG = {"A2A_ALLOW_PRIVATE_PUSH": True, "A2A_PUSH_TIMEOUT": TIMEOUT}


def no_dns(host: str) -> list[str]:
    raise socket.gaierror(socket.EAI_NONAME, "no DNS in tests")


def owner_principal() -> Principal | None:
    """``Bearer u<n>`` is owner ``u<n>``: as many owners as a test needs."""
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    return Principal(token) if scheme == "Bearer" and token.startswith("u") else None


@pytest.fixture(autouse=True)
def _logs(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="flask_a2a")


@pytest.fixture
def drip() -> t.Iterator[Drip]:
    receiver = Drip(pause=0.5)
    yield receiver
    receiver.close()


def lines(caplog: pytest.LogCaptureFixture, needle: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if needle in r.getMessage()]


def idle(app: Flask) -> None:
    dispatcher = t.cast(PushSender, app.extensions["a2a"].exchange.push).dispatcher
    wait_until(lambda: dispatcher.in_flight == 0 and dispatcher.waiting == 0, timeout=20)


def app_with(make_app: t.Callable[..., Flask], gate: Gate, **options: t.Any) -> Flask:
    skills = [
        Skill(id="echo", name="Echo", description="Echo.", handler=echo),
        Skill(id="gate", name="Gate", description="Waits.", handler=gate.handler),
    ]
    return make_app(
        skills=skills, config=CONFIG, push_resolver=no_dns, principal=owner_principal, **options
    )


def held_task(client: A2ATestClient, token: str) -> str:
    """A task of owner ``token`` held WORKING by the gate."""
    task = client.send(
        "hold", skill="gate", token=token, configuration={"returnImmediately": True}
    )["task"]

    def working() -> bool:
        state = client.rpc("GetTask", {"id": task["id"]}, token=token).result["status"]["state"]
        return bool(state == "TASK_STATE_WORKING")

    wait_until(working)
    return str(task["id"])


def create(client: A2ATestClient, task_id: str, url: str, token: str) -> None:
    params = {"taskId": task_id, "url": url}
    assert client.rpc("CreateTaskPushNotificationConfig", params, token=token).result["url"]


@pytest.mark.parametrize("connection", ["new", "kept alive", "TLS"])
def test_a_dripping_answer_is_cut_at_the_attempts_deadline(
    make_app: t.Callable[..., Flask],
    gate: Gate,
    caplog: pytest.LogCaptureFixture,
    tmp_path: pathlib.Path,
    connection: str,
) -> None:
    """A2A_PUSH_TIMEOUT bounds the whole attempt, not each read: a receiver sending a byte
    every 0.5 s (each read well within 1 s) is closed at 1 s, where it held the slot for as
    long as it dripped; on a new connection, on one kept alive from the delivery before (its
    first answer came at once), and over TLS."""
    options: dict[str, t.Any] = {}
    tls = None
    if connection == "TLS":
        tls, ca_file = tls_for_loopback(str(tmp_path))
        options["push_client"] = session = requests.Session()
        session.verify = ca_file
    drip = Drip(0.5, prompt=1 if connection == "kept alive" else 0, tls=tls)
    try:
        client = A2ATestClient(app_with(make_app, gate, **options))
        task_id = held_task(client, "u1")
        create(client, task_id, drip.url(), "u1")  # the task as it stands: one delivery
        if connection == "kept alive":
            gate.release.set()  # two more: the first drips on the connection kept alive
        seen = drip.wait_for(1, closed=True, timeout=8)[0]
        idle(client.app)
    finally:
        drip.close()
    assert seen.closed_at is not None
    held = seen.closed_at - seen.requests[-1]
    print(f"\na dripping receiver ({connection}) held the attempt {held:.2f} s ({TIMEOUT} s)")
    assert held < TIMEOUT + 2.0
    assert len(seen.requests) == (2 if connection == "kept alive" else 1)
    assert 1 <= seen.sent <= 8  # it dripped a few bytes in (one each 0.5 s), no more
    (line,) = [line for line in lines(caplog, "push delivery failed") if task_id in line]
    assert "timed out" in line and "1 s deadline (A2A_PUSH_TIMEOUT)" in line


def test_four_owners_dripping_receivers_leave_room_for_another_owner(
    make_app: t.Callable[..., Flask], gate: Gate, drip: Drip, webhook: Webhook
) -> None:
    """The issue's attack: four owners, eight configs each, all on receivers that drip. The
    deliveries of another owner still go out at once."""
    client = A2ATestClient(app_with(make_app, gate))
    for owner in range(1, 5):
        token = f"u{owner}"
        task_id = held_task(client, token)
        for n in range(8):
            create(client, task_id, drip.url(f"/{token}/{n}"), token)
    drip.wait_for(10)  # the attackers' deliveries are dripping now
    victim = held_task(client, "u9")
    start = time.monotonic()
    create(client, victim, webhook.url("/u9"), "u9")
    (hit,) = webhook.wait_for(1, timeout=8)
    waited = hit.at - start
    print(f"\nanother owner's notification under the drip attack: {waited:.3f} s")
    assert waited < 3.0  # before: not at all (its event was dropped: every queue was full)
    # The attackers' deliveries end too, each at its deadline (those past the bounds were
    # dropped with a warning, as any owner's are).
    idle(client.app)
    seen = drip.wait_for(len(drip.seen), closed=True)
    assert max(each.held or 0 for each in seen) < TIMEOUT + 2.0


#: A reply far larger than anything the sender should read (generated as it is sent).
HUGE = 256 * 1024 * 1024


def test_a_huge_answer_is_read_no_further_than_a_few_kib(
    make_app: t.Callable[..., Flask], gate: Gate, caplog: pytest.LogCaptureFixture
) -> None:
    flood = Flood(HUGE)
    try:
        client = A2ATestClient(app_with(make_app, gate))
        task = client.send(
            "hi",
            skill="echo",
            token="u1",
            configuration={"taskPushNotificationConfig": {"url": flood.url()}},
        )["task"]
        assert task["status"]["state"] == "TASK_STATE_COMPLETED"
        seen = flood.wait_for(3, closed=True, timeout=20)  # snapshot, artifact, completed
        idle(client.app)
    finally:
        flood.close()
    sent = [each.sent for each in seen]
    print(f"\nbytes a {HUGE >> 20} MiB answer got out before the sender closed: {sent}")
    # What it read (4 KiB) plus what the sockets' buffers took: nowhere near the 256 MiB.
    assert all(MAX_REPLY_BYTES <= each < 16 * 1024 * 1024 for each in sent)
    # The status line decided: each was delivered, and nothing was logged as failed.
    assert not [line for line in lines(caplog, "push delivery") if task["id"] in line]
