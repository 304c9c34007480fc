"""The system under test for the A2A 1.0 conformance suite (a2aproject/a2a-tck, its 1.0 line).

One skill does what the suite's Gherkin scenarios (``scenarios/*.feature``) say the agent does
for a message whose ``messageId`` starts with a given prefix: complete, add an artifact of each
part kind, reply with a message, pause for input, reject, stream a lifecycle, stream a chunked
artifact, stay working for twice the suite's streaming timeout. Any other message completes with
a note naming it. The suite sends no credentials, so every caller is one owner, and the card
declares no security scheme; an extended card is served. Served over gRPC by
``flask a2a grpc --http`` (one process: the card over HTTP, the RPCs over gRPC) with
``A2A_GRPC_URL`` set.
"""

from __future__ import annotations

import os
import threading

from flask import Flask

from flask_a2a import A2A, AgentCard, Part, Skill, TaskContext, from_prefixed_env
from flask_a2a.protocol.model import Principal

#: The suite's TCK_STREAMING_TIMEOUT (seconds; its default is 2).
STREAMING_TIMEOUT = float(os.environ.get("TCK_STREAMING_TIMEOUT") or 2.0)

FILE = Part(raw=b"tck", media_type="text/plain", filename="output.txt")
FILE_URL = Part(
    url="https://example.com/output.txt", media_type="text/plain", filename="output.txt"
)
DATA = Part(data={"key": "value", "count": 42})


def lifecycle(task: TaskContext, text: str) -> None:
    """working, one text artifact, completed (CORE-STREAM-001/003, STREAM-ORDER-001)."""
    task.working()
    task.artifact([Part(text=text)])
    task.complete()


def conformance(task: TaskContext) -> None:
    """What the scenario named by the messageId's prefix says the agent does."""
    message_id = task.message.message_id
    if message_id.startswith("tck-stream-artifact-chunked"):
        task.working()
        chunk = task.artifact([Part(text="chunk-1 ")])
        task.artifact([Part(text="chunk-2")], artifact_id=chunk, append=True, last_chunk=True)
        task.complete()
    elif message_id.startswith("tck-stream-artifact-file"):
        task.working()
        task.artifact([FILE])
        task.complete()
    elif message_id.startswith("tck-stream-artifact-text"):
        lifecycle(task, "Streamed text content")
    elif message_id.startswith("tck-stream-ordering-001"):
        lifecycle(task, "Ordered output")
    elif message_id.startswith("tck-stream-001"):
        lifecycle(task, "Stream hello from TCK")
    elif message_id.startswith("tck-stream-002"):
        task.complete()
    elif message_id.startswith("tck-stream-003"):
        lifecycle(task, "Stream task lifecycle")
    elif message_id.startswith("test-resubscribe-message-id"):
        task.working()
        wait = threading.Event()
        for _ in range(int(2 * STREAMING_TIMEOUT / 0.05)):  # bounded; a cancel ends it here
            wait.wait(0.05)
            task.check()
        task.complete()
    elif message_id.startswith("tck-artifact-file-url"):
        task.artifact([FILE_URL])
        task.complete()
    elif message_id.startswith("tck-artifact-file"):
        task.artifact([FILE])
        task.complete()
    elif message_id.startswith("tck-artifact-text"):
        task.artifact([Part(text="Generated text content")])
        task.complete()
    elif message_id.startswith("tck-artifact-data"):
        task.artifact([DATA])
        task.complete()
    elif message_id.startswith("tck-message-response"):
        task.reply("Direct message response")
    elif message_id.startswith("tck-input-required"):
        task.require_input("input required")
    elif message_id.startswith("tck-reject-task"):
        task.reject("rejected")
    elif message_id.startswith("tck-complete-task"):
        task.complete("Hello from TCK")
    else:
        task.complete(f"Unhandled messageId prefix: {message_id}")


def create_app() -> Flask:
    app = Flask(__name__)
    app.config["A2A_ALLOW_PRIVATE_PUSH"] = True  # the suite's webhook receiver is on localhost
    from_prefixed_env(app.config)
    A2A(
        app,
        skills=[
            Skill(
                id="tck",
                name="TCK conformance",
                description="Does what the conformance suite's scenarios say.",
                handler=conformance,
            )
        ],
        principal=lambda: Principal(owner="tck"),
        card=AgentCard(
            name="flask_a2a TCK 1.0 agent", security_schemes={}, security_requirements=[]
        ),
        # The extended card's tests run only when the card says there is one.
        extended_card=lambda caller: AgentCard(
            name="flask_a2a TCK 1.0 agent (extended)",
            security_schemes={},
            security_requirements=[],
        ),
    )
    return app
