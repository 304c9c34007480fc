"""A blocking SendMessage runs its handler in the request's own greenlet under gevent.

``GeventRunner.here``: no greenlet is spawned for a send that waits for its run anyway. What
must not change with it: the handler sees the app but not the request (as a spawned run does),
a cancel or the deadline still cuts it and the send answers, a cut that comes after the run
never reaches the request's own code, and the pool's bound still counts the run. On threads
every run keeps its own thread (a thread cannot be cut: the send answers at the deadline from
outside). The gevent cases run in the patched session (tests/live/test_gevent_session.py).
"""

from __future__ import annotations

import threading
import typing as t

import pytest
from flask import Flask, current_app, g, has_request_context

from flask_a2a import Part, Skill, TaskContext
from flask_a2a.protocol.errors import TaskCanceled
from flask_a2a.testing import A2ATestClient
from tests.conftest import Gate, wait_for


def current_worker(runner_kind: str) -> object:
    """The greenlet (gevent) or thread running this code."""
    if runner_kind == "gevent":
        import gevent

        return gevent.getcurrent()
    return threading.current_thread()


def in_background(runner_kind: str, fn: t.Callable[[], t.Any]) -> t.Callable[[], t.Any]:
    """Run ``fn`` in another greenlet or thread; returns a join that gives its result."""
    box: list[t.Any] = []
    if runner_kind == "gevent":
        import gevent

        worker = gevent.spawn(lambda: box.append(fn()))
        return lambda: (worker.join(10), box[0])[1]
    thread = threading.Thread(target=lambda: box.append(fn()))
    thread.start()
    return lambda: (thread.join(10), box[0])[1]  # type: ignore[func-returns-value]


def app_with(
    make_app: t.Callable[..., Flask], **handlers: t.Callable[[TaskContext], t.Any]
) -> tuple[Flask, A2ATestClient]:
    """An app serving ``handlers``; a blocking send's task is written at once (no
    ``A2A_BLOCKING_WRITE_DELAY``), so the test can find it and cancel it."""
    skills = [Skill(id=k, name=k, description=k, handler=v) for k, v in handlers.items()]
    app = make_app(skills=skills, config={"A2A_BLOCKING_WRITE_DELAY": 0})
    return app, A2ATestClient(app, token="alice")


def test_a_blocking_send_runs_in_the_senders_greenlet_only_under_gevent(
    make_app: t.Callable[..., Flask], runner_kind: str
) -> None:
    seen: list[object] = []

    def where(task: TaskContext) -> None:
        seen.append(current_worker(runner_kind))

    app, client = app_with(make_app, where=where)
    me = current_worker(runner_kind)
    assert client.send("x", skill="where")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    detached = client.send("x", skill="where", configuration={"returnImmediately": True})
    assert wait_for(lambda: len(seen) == 2)
    blocking, returned_at_once = seen
    assert (blocking is me) == (runner_kind == "gevent")
    assert returned_at_once is not me  # its request answered before the run ended
    assert client.rpc("GetTask", {"id": detached["task"]["id"]}).result["id"]


def test_the_handler_sees_the_app_but_not_the_request(
    make_app: t.Callable[..., Flask], runner_kind: str
) -> None:
    seen: list[tuple[bool, bool, bool]] = []

    def look(task: TaskContext) -> None:
        seen.append((has_request_context(), current_app.name == "test_app", hasattr(g, "mark")))

    app, client = app_with(make_app, look=look)

    @app.before_request
    def mark() -> None:
        g.mark = True  # the request's g: a run has its own app context and g

    client.send("x", skill="look")
    client.send("x", skill="look", configuration={"returnImmediately": True})
    assert wait_for(lambda: len(seen) == 2)
    assert seen == [(False, True, False), (False, True, False)]


def test_a_cancel_cuts_a_blocking_send_and_it_answers(
    make_app: t.Callable[..., Flask], runner_kind: str
) -> None:
    entered, release = threading.Event(), threading.Event()
    ended: list[str] = []

    def deaf(task: TaskContext) -> None:
        """Never checks its task: only a cut (gevent) ends it early."""
        task.working()
        entered.set()
        try:
            release.wait(10)
            ended.append("released")
        except TaskCanceled:
            ended.append("cut")
            raise

    app, client = app_with(make_app, deaf=deaf, echo=lambda task: "echoed")
    join = in_background(runner_kind, lambda: client.send("x", skill="deaf"))
    assert entered.wait(10)
    task_id = client.rpc("ListTasks", {}).result["tasks"][0]["id"]
    canceled = client.rpc("CancelTask", {"id": task_id}).result
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    answer = join()  # on threads the send answers while the handler still waits
    release.set()
    assert answer["task"]["id"] == task_id
    assert answer["task"]["status"]["state"] == "TASK_STATE_CANCELED"
    assert wait_for(lambda: len(ended) == 1)
    assert ended == (["cut"] if runner_kind == "gevent" else ["released"])
    later = in_background(runner_kind, lambda: client.send("y", skill="echo"))
    assert later()["task"]["artifacts"][0]["parts"] == [{"text": "echoed"}]


def test_inline_runs_count_against_the_pool(
    make_app: t.Callable[..., Flask], runner_kind: str, gate: Gate
) -> None:
    app = make_app(
        skills=[
            Skill(id="gate", name="gate", description="gate", handler=gate.handler),
            Skill(
                id="echo",
                name="echo",
                description="echo",
                handler=lambda task: task.artifact([Part(text="e")]),
            ),
        ],
        runner_size=1,
        config={"A2A_BLOCKING_WRITE_DELAY": 0},
    )
    client = A2ATestClient(app, token="alice")
    join = in_background(runner_kind, lambda: client.send("x", skill="gate"))
    assert gate.entered.wait(10)
    refused = client.rpc(
        "SendMessage",
        {
            "message": {
                "messageId": "m-2",
                "role": "ROLE_USER",
                "parts": [{"text": "y"}],
                "metadata": {"skill": "echo"},
            }
        },
    )
    assert refused.code == -32004
    assert "server" in refused.error["message"]
    gate.release.set()
    assert join()["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert client.send("z", skill="echo")["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


@pytest.mark.gevent_session  # only GeventRunner runs a run in its caller's greenlet
def test_a_cut_after_the_run_never_reaches_the_caller() -> None:
    import gevent

    from flask_a2a.exchange.runner import GeventRunner

    runner = GeventRunner(2)
    assert runner.reserve()
    handle = runner.here()
    handle.run(lambda: None)
    handle.kill(TaskCanceled)  # the run is over: nothing is thrown
    gevent.sleep(0)
    gevent.sleep(0.01)

    assert runner.reserve()
    cut = runner.here()

    def waits() -> None:
        cut.kill(TaskCanceled)  # thrown into this greenlet at its next switch
        gevent.sleep(5)

    with pytest.raises(TaskCanceled):
        cut.run(waits)
    assert runner.reserve() and runner.reserve()  # both slots were given back
