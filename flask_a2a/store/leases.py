"""Run leases: who runs a task, until when, and by when its run must end, kept in its row.

A task is running (SUBMITTED or WORKING) only while some process runs it. The SQL store keeps
three columns beside each task: ``run_by`` (the process, :func:`holder`), ``lease_until`` (the
wall-clock instant, in microseconds, until which that process vouches for the run) and
``run_deadline`` (the run's ``A2A_TASK_TIMEOUT``). The run's first write (the task's creation)
takes the lease, the process renews every lease it holds in one statement
(``exchange/run_leases.py``), and the write that settles or pauses the task clears it. So a
lease that lapsed names a task no process runs any more: any process sharing the store settles
it FAILED (:data:`WORKER_STOPPED`). The memory store is one process: nothing outlives it, it
keeps no lease.
"""

from __future__ import annotations

import dataclasses
import os
import socket
import typing as t
import uuid

from ..protocol.model import TaskState

#: The states a run holds a lease in: neither settled nor paused for input or auth.
LEASED_STATES: t.Final = frozenset({TaskState.SUBMITTED, TaskState.WORKING})
#: The agent message of a task settled because its run's lease lapsed.
WORKER_STOPPED: t.Final = "the run's worker stopped"
#: ... because its run's deadline passed with nobody left to say so.
TIMED_OUT: t.Final = "task timed out"

_holder: tuple[int, str] | None = None


def holder() -> str:
    """This process: host, pid and a random tag (a forked worker gets its own, and a
    restarted process with a reused pid is still another holder)."""
    global _holder
    pid = os.getpid()
    if _holder is None or _holder[0] != pid:
        _holder = (pid, f"{socket.gethostname()[:150]}/{pid}/{uuid.uuid4().hex[:8]}")
    return _holder[1]


@dataclasses.dataclass(frozen=True)
class LeaseTerms:
    """What a store writes with a running task it creates (set by the exchange)."""

    #: Seconds a lease lives without renewal.
    ttl: float
    #: ``A2A_TASK_TIMEOUT``: a run's deadline after its start (<= 0: no deadline).
    timeout: float


class LapsedRun(t.NamedTuple):
    """A running task whose lease lapsed: its id, who held it, its deadline (micros, or None)."""

    task_id: str
    run_by: str | None
    deadline: int | None
