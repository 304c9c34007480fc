"""Profile one gevent worker under SendMessage load: ``python bench/profile.py [memory|sql]``.

Runs the bench app on one worker, drives it with concurrency 32 for ``--seconds``, samples it
with ``py-spy record --format raw`` (pip install py-spy) and prints the functions that cost the
most, by own time and by inclusive time, as a share of all samples.
"""

from __future__ import annotations

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import threading
import typing as t
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench import loadgen  # noqa: E402
from bench.run import A2A_ENV, DB_URL, SEND_BODY, TOKEN, drop_tables  # noqa: E402
from bench.servers import Server, gunicorn_command  # noqa: E402


def samples(collapsed: Path) -> t.Iterator[tuple[str, int]]:
    """(stack, sample count) for each line of py-spy's raw (collapsed) output."""
    for line in collapsed.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            yield stack, int(count)


def top(collapsed: Path, n: int, prefix_filter: str = "") -> str:
    own: collections.Counter[str] = collections.Counter()
    incl: collections.Counter[str] = collections.Counter()
    total = 0
    for stack, count in samples(collapsed):
        total += count
        frames = [
            f.split(" (", 1)[0] + " (" + f.rsplit("/", 1)[-1] if " (" in f else f
            for f in stack.split(";")
        ]
        frames = [f.rsplit(":", 1)[0] + ")" if f.endswith(")") else f for f in frames]
        own[frames[-1]] += count
        for frame in set(frames):
            incl[frame] += count
    lines = [f"{total} samples", "", "own time:"]
    lines += [f"  {100 * c / total:5.1f} %  {f}" for f, c in own.most_common(n)]
    lines += ["", "inclusive time:"]
    lines += [
        f"  {100 * c / total:5.1f} %  {f}" for f, c in incl.most_common(n * 2) if prefix_filter in f
    ]
    return "\n".join(lines)


#: What cost what: a sample counts toward the first group one of whose frames it holds.
GROUPS: t.Final = (
    (
        "JSON-RPC params validation (marshmallow / the fast reader)",
        ("load_params (", "read_send_params ("),
    ),
    ("retention trim after settle", ("Retention.after_final (",)),
    ("skill run: artifact + complete (store writes, events)", ("Runs._execute (",)),
    ("task create + run start", ("Runs.start (",)),
    (
        "answer: store read + dump_task + JSON",
        (
            "get_task (",
            "dump_task (",
            "task_json (",
            "success (",
        ),
    ),
    ("JSON-RPC envelope decode", ("decode_request (",)),
    ("other flask_a2a request code", ("(flask_a2a/",)),
    ("Flask request/response (as bare Flask)", ("(flask/", "(werkzeug/")),
    ("gunicorn parse + write, gevent hub", ("(gunicorn/", "(gevent/")),
)


def groups(collapsed: Path) -> str:
    counts: collections.Counter[str] = collections.Counter()
    total = 0
    for stack, count in samples(collapsed):
        total += count
        name = next((name for name, needles in GROUPS if any(n in stack for n in needles)), "other")
        counts[name] += count
    return "\n".join(f"  {100 * c / total:5.1f} %  {name}" for name, c in counts.most_common())


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("store", nargs="?", default="memory", choices=("memory", "sql", "bare"))
    parser.add_argument("--seconds", type=float, default=15)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--svg", help="also write a flame graph here")
    args = parser.parse_args()
    os.chdir(HERE.parent)
    env = dict(A2A_ENV)
    spec, path, expect = "bench.apps:create_app()", "/a2a", "TASK_STATE_COMPLETED"
    prefix = f"bench_prof_{os.getpid()}_"
    if args.store == "sql":
        env.update(BENCH_STORE="sql", BENCH_TABLE_PREFIX=prefix, A2A_DATABASE_URL=DB_URL)
    if args.store == "bare":
        spec, path, expect = "bench.apps:create_bare_app()", "/echo", '"ok":true'
    out = Path(tempfile.mkdtemp()) / "profile.txt"
    try:
        with Server(gunicorn_command(spec, 1), env, "/bench/ping") as server:
            url = server.base + path
            loadgen.run("wrk", url, SEND_BODY, TOKEN, expect, 32, 2)
            worker = server.workers()[0]
            load = threading.Thread(
                target=loadgen.run,
                args=("wrk", url, SEND_BODY, TOKEN, expect, 32, args.seconds + 2),
            )
            load.start()
            command = [
                "py-spy",
                "record",
                "--format",
                "raw",
                "-r",
                "200",
                "-d",
                str(int(args.seconds)),
                "-o",
                str(out),
                "--pid",
                str(worker),
            ]
            subprocess.run(command, check=True, capture_output=True, timeout=args.seconds + 60)
            if args.svg:
                print("(flame graph: rerun py-spy record without --format raw)")
            load.join(args.seconds + 60)
    finally:
        if args.store == "sql":
            drop_tables(prefix)
    print(top(out, args.top))
    print("\nby part of the request:")
    print(groups(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
