"""The RQ side of the push queue: lane jobs on an RQ queue, and the worker that runs them.

The default ``jobs`` of :class:`.queue.PushQueue` and the worker of ``flask a2a push-worker``;
another job system replaces it with any ``queue.Jobs``. RQ itself is imported on first use. The
job function is passed in (:func:`.queue.run_lane`, whose dotted name RQ stores with each job).
"""

from __future__ import annotations

import datetime
import math
import time
import typing as t

if t.TYPE_CHECKING:
    import redis


class RQJobs:
    """Lane jobs on an RQ queue (``flask a2a push-worker`` runs them)."""

    def __init__(
        self,
        connection: redis.Redis,
        name: str,
        job: t.Callable[[str, str], None],
        job_timeout: float,
        failure_ttl: int,
        ttl: float | None = None,
    ) -> None:
        from rq import Queue

        self.queue = Queue(name, connection=connection)
        #: Called in the worker as ``job(queue name, lane_job)``.
        self.job = job
        self.job_timeout = job_timeout
        self.failure_ttl = failure_ttl
        #: Seconds a job may wait for a worker before RQ discards it (its lane has lapsed by
        #: then: ``PushQueue.lane_seconds``); None: no bound.
        self.ttl = ttl

    def submit(self, lane_job: str, delay: float = 0.0) -> None:
        options: dict[str, t.Any] = {
            "job_timeout": int(math.ceil(self.job_timeout)),
            "result_ttl": 0,
            "failure_ttl": self.failure_ttl,
        }
        if self.ttl is not None:
            options["ttl"] = int(math.ceil(self.ttl))
        if delay <= 0:
            self.queue.enqueue(self.job, self.queue.name, lane_job, **options)
        else:  # RQ keeps whole seconds (floored): round the due time up, never early
            due = math.ceil(time.time() + delay)
            self.queue.enqueue_at(
                datetime.datetime.fromtimestamp(due, datetime.timezone.utc),
                self.job,
                self.queue.name,
                lane_job,
                **options,
            )


def rq_worker(name: str, url: str, **options: t.Any) -> t.Any:
    """An RQ worker on queue ``name``, in this process (jobs need the app's context)."""
    from redis import Redis
    from rq import SimpleWorker

    # The worker blocks on the queue for long: its own connection, without our timeout.
    return SimpleWorker([name], connection=Redis.from_url(url), **options)
