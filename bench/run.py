"""One command for every number in docs/performance.md: ``python bench/run.py [--quick]``.

Servers run one at a time on 127.0.0.1 (the load generator shares the machine with them):
flask_a2a SendMessage echo on ``gunicorn -k gevent`` (memory, PostgreSQL and MariaDB stores, 1
and 2 workers), a bare Flask JSON endpoint on the same server, and the official A2A SDK's echo agent
on uvicorn (installed into ``bench/.venv-sdk``). Then idle SubscribeToTask streams held by one
worker, ListTasks latency for a small and a large owner on MariaDB and PostgreSQL, and the
fleet: two replicas on PostgreSQL with the Redis bus or the store poll (bench/fleet.py).
Results go to ``bench/results/latest.json`` and ``latest.md``. See bench/README.md.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import resource
import subprocess
import sys
import time
import typing as t
import urllib.error
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from bench import fleet, loadgen, report, sections  # noqa: E402
from bench.servers import Server, free_port, gunicorn_command, post_json  # noqa: E402

DB_URL = os.environ.get("A2A_DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
#: MariaDB/MySQL for the ``a2a-mariadb`` rows and ``list-mariadb`` (override: BENCH_MYSQL_URL).
MYSQL_URL = os.environ.get(
    "BENCH_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/test?charset=utf8mb4"
)
REDIS_URL = os.environ.get("BENCH_REDIS_URL", "redis://127.0.0.1:6379/0")
SDK_VENV = HERE / ".venv-sdk"
SDK_SPEC = "a2a-sdk[http-server]==1.3.0"
TOKEN = "bench-token"
SEND_BODY = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": "bench-1",
                "role": "ROLE_USER",
                "parts": [{"text": "hello bench"}],
                "metadata": {"skill": "echo"},
            }
        },
    },
    separators=(",", ":"),
)
#: The same SendMessage over the HTTP+JSON binding: the bare SendMessageRequest.
REST_SEND_BODY = json.dumps(json.loads(SEND_BODY)["params"], separators=(",", ":"))
#: Raised caps so 32 concurrent sends of one owner are never refused.
A2A_ENV: t.Final = {"A2A_MAX_CONCURRENT_RUNS_PER_OWNER": "-1"}


class Plan(t.NamedTuple):
    duration: float
    warmup: float
    #: Idle streams held at once, measured at each count in turn on one worker.
    streams: tuple[int, ...]
    list_sizes: tuple[int, int]
    budget: float
    two_worker_pg: bool
    #: Each load level runs this many times; the best run is reported (others' load only
    #: ever slows a run down, so the best is the closest to the undisturbed machine).
    repeats: int


#: 12 throughput rows (two loads, two runs each), streams, two ListTasks sections, the fleet.
FULL = Plan(5.0, 2.0, (2_000, 10_000), (1_000, 100_000), 900.0, True, 2)
QUICK = Plan(2.0, 0.5, (1_000,), (1_000, 10_000), 110.0, False, 1)


def sql_available(url: str = DB_URL, name: str = "PostgreSQL") -> str | None:
    """None when the SQL store imports and the database answers; else why not."""
    try:
        import sqlalchemy as sa

        from flask_a2a.store.sql import SQLStore  # noqa: F401
    except Exception as exc:  # the store is being written: skip, say why
        return f"flask_a2a.store.sql is not importable: {exc!r}"
    try:
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
        engine.dispose()
    except Exception as exc:
        return f"{name} at {url} does not answer: {exc.__class__.__name__}"
    return None


def redis_available() -> str | None:
    """None when the redis extra imports and Redis answers; else why not."""
    try:
        import redis
    except ImportError:
        return "the redis extra is not installed (pip install -e .[redis])"
    try:
        redis.Redis.from_url(REDIS_URL, socket_timeout=1, socket_connect_timeout=1).ping()
    except Exception as exc:
        return f"Redis at {REDIS_URL} does not answer: {exc.__class__.__name__}"
    return None


def redis_commands(url: str) -> int:
    """Commands the Redis at ``url`` has served so far (``INFO stats``)."""
    import redis

    client = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
    try:
        # The INFO call itself is one command: take it off so a quiet row reads 0.
        return int(client.info("stats")["total_commands_processed"]) - 1
    finally:
        client.close()


@contextlib.contextmanager
def private_redis() -> t.Iterator[tuple[str | None, str]]:
    """A throwaway ``redis-server`` on a free 127.0.0.1 port: (its URL, "") or (None, why)."""
    try:
        import redis
    except ImportError:
        yield None, "the redis extra is not installed (pip install -e .[redis])"
        return
    port = free_port()
    try:
        proc = subprocess.Popen(
            [
                "redis-server",
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    except OSError as exc:
        yield None, f"redis-server cannot start: {exc}"
        return
    url = f"redis://127.0.0.1:{port}/0"
    try:
        client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
        deadline = time.monotonic() + 10
        while True:
            try:
                client.ping()
                break
            except redis.RedisError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    yield None, "a private redis-server did not answer within 10 s"
                    return
                time.sleep(0.05)
        client.close()
        yield url, ""
    finally:
        proc.terminate()
        proc.wait(10)


def ensure_sdk_venv(log: t.Callable[[str], None]) -> tuple[Path | None, str]:
    python = SDK_VENV / "bin" / "python"
    check = [str(python), "-c", "import a2a, uvicorn, starlette"]
    if python.exists() and subprocess.run(check, capture_output=True).returncode == 0:
        return python, ""
    log(f"installing {SDK_SPEC} + uvicorn into {SDK_VENV} (one time)")
    try:
        subprocess.run([sys.executable, "-m", "venv", str(SDK_VENV)], check=True, timeout=120)
        subprocess.run(
            [str(python), "-m", "pip", "install", "-q", SDK_SPEC, "uvicorn"],
            check=True,
            timeout=300,
        )
    except (subprocess.SubprocessError, OSError) as exc:
        return None, f"could not install the SDK venv: {exc}"
    return python, ""


def sdk_version(python: Path) -> str:
    out = subprocess.run(
        [
            str(python),
            "-c",
            ("import importlib.metadata as m; print(m.version('a2a-sdk'), m.version('uvicorn'))"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return out.stdout.strip()


class Bench:
    def __init__(
        self, plan: Plan, generator: str, only: set[str] | None, telemetry: bool = False
    ) -> None:
        #: Also run the 1-worker memory row with metrics and traces off, and with both on.
        self.telemetry = telemetry
        self.plan = plan
        self.generator = generator
        self.only = only
        self.started = time.monotonic()
        self.results: dict[str, t.Any] = {"rows": [], "skipped": []}

    def log(self, text: str) -> None:
        print(f"[{time.monotonic() - self.started:6.1f}s] {text}", flush=True)

    def left(self) -> float:
        return self.plan.budget - (time.monotonic() - self.started)

    def skip(self, name: str, reason: str) -> None:
        self.log(f"skip {name}: {reason}")
        self.results["skipped"].append({"name": name, "reason": reason})

    def wanted(self, name: str) -> bool:
        return self.only is None or any(name.startswith(o) for o in self.only)

    # -- throughput rows

    def measure(
        self,
        server: Server,
        url: str,
        body: str,
        token: str | None,
        expect: str,
        concurrency: int,
        duration: float,
    ) -> dict[str, t.Any]:
        cpu0, busy0, own0 = server.cpu_seconds(), machine_busy(), own_cpu()
        out = loadgen.run(self.generator, url, body, token, expect, concurrency, duration)
        server_cpu = server.cpu_seconds() - cpu0
        others = machine_busy() - busy0 - server_cpu - (own_cpu() - own0)
        out["server_cpu_pct"] = round(100 * server_cpu / duration, 1)
        out["server_cpu_ms_per_req"] = round(1000 * server_cpu / max(1, out["requests"]), 3)
        #: Cores busy with anything but this server, the generator and this script.
        out["other_load_cores"] = round(max(0.0, others) / duration, 2)
        return out

    def throughput(
        self,
        name: str,
        label: str,
        command: list[str],
        env: dict[str, str],
        url_path: str,
        expect: str,
        ready: str,
        workers: int,
        store: str,
        body: str = SEND_BODY,
        redis_url: str | None = None,
    ) -> None:
        if not self.wanted(name):
            return
        need = 2 * self.plan.repeats * self.plan.duration + self.plan.warmup + 8
        if self.left() < need:
            self.skip(name, f"time bound: {self.left():.0f}s left, {need:.0f}s needed")
            return
        self.log(f"{name}: starting")
        with Server(command, env, ready) as server:
            url = server.base + url_path
            first = post_json(url, body, TOKEN)
            if expect not in json.dumps(first, separators=(",", ":")):
                raise RuntimeError(f"{name}: unexpected answer {first!r:.300}")
            loadgen.run(self.generator, url, body, TOKEN, expect, 32, self.plan.warmup)
            row: dict[str, t.Any] = {
                "name": name,
                "label": label,
                "workers": workers,
                "store": store,
            }
            commands0 = redis_commands(redis_url) if redis_url else 0
            sent = 0
            for conc in (1, 32):
                trials = [
                    self.measure(server, url, body, TOKEN, expect, conc, self.plan.duration)
                    for _ in range(self.plan.repeats)
                ]
                sent += sum(int(trial["requests"]) for trial in trials)
                best = max(trials, key=lambda trial: float(trial["rps"]))
                best["trials_rps"] = [trial["rps"] for trial in trials]
                best["bad"] = sum(trial["bad"] for trial in trials)
                best["socket_errors"] = sum(trial["socket_errors"] for trial in trials)
                row[f"c{conc}"] = best
                self.log(
                    f"{name} c={conc}: {row[f'c{conc}']['rps']:.0f} req/s, "
                    f"p50 {row[f'c{conc}']['p50_ms']:.2f} ms, "
                    f"p99 {row[f'c{conc}']['p99_ms']:.2f} ms, bad {row[f'c{conc}']['bad']}"
                )
            row["rss_mb"] = round(server.worker_rss_kb() / 1024, 1)
            if redis_url:  # every command the row's Redis served during the measured runs
                row["redis_commands"] = redis_commands(redis_url) - commands0
                row["redis_requests"] = sent
                row["redis_commands_per_request"] = round(row["redis_commands"] / max(1, sent), 4)
        self.results["rows"].append(row)

    def run_throughput(
        self,
        sdk_python: Path | None,
        sdk_reason: str,
        sql_reason: str | None,
        mysql_reason: str | None = "not requested",
    ) -> None:
        a2a = "bench.apps:create_app()"
        bare = "bench.apps:create_bare_app()"
        completed = "TASK_STATE_COMPLETED"
        for workers in (1, 2):
            w = f"{workers}w"
            self.throughput(
                f"bare-{w}",
                "bare Flask JSON",
                gunicorn_command(bare, workers),
                {},
                "/echo",
                '"ok":true',
                "/bench/ping",
                workers,
                "-",
            )
            # Blocking echoes never ask another worker about a task: two workers may each
            # keep their own memory store (the opt-in; without it they refuse to boot).
            memory = {**A2A_ENV, "A2A_ALLOW_MEMORY_STORE_IN_WORKERS": "true"}
            self.throughput(
                f"a2a-memory-{w}",
                "flask_a2a SendMessage",
                gunicorn_command(a2a, workers),
                memory,
                "/a2a",
                completed,
                "/bench/ping",
                workers,
                "memory",
            )
            if workers == 1 and self.telemetry:
                for suffix, label, extra in (
                    (
                        "off",
                        "flask_a2a SendMessage, metrics and traces off",
                        {"A2A_METRICS": "false"},
                    ),
                    (
                        "otel",
                        "flask_a2a SendMessage, metrics and every span recorded",
                        {"BENCH_TRACING": "1"},
                    ),
                ):
                    self.throughput(
                        f"a2a-memory-{w}-{suffix}",
                        label,
                        gunicorn_command(a2a, workers),
                        {**memory, **extra},
                        "/a2a",
                        completed,
                        "/bench/ping",
                        workers,
                        "memory",
                    )
            if workers == 1 and self.wanted("a2a-redis-memory-1w"):
                # The Redis bus must cost a blocking send nothing (issue 19): a Redis server of
                # the row's own, so every command it counts is the bench server's.
                with private_redis() as (url, reason):
                    if url is None:
                        self.skip("a2a-redis-memory-1w", reason)
                    else:
                        self.throughput(
                            "a2a-redis-memory-1w",
                            "flask_a2a SendMessage, Redis bus",
                            gunicorn_command(a2a, workers),
                            {**memory, "A2A_REDIS_URL": url},
                            "/a2a",
                            completed,
                            "/bench/ping",
                            workers,
                            "memory",
                            redis_url=url,
                        )
            self.throughput(  # the same echo over the HTTP+JSON binding (docs/rest.md)
                f"a2a-rest-memory-{w}",
                "flask_a2a SendMessage (REST)",
                gunicorn_command(a2a, workers),
                memory,
                "/a2a/rest/message:send",
                completed,
                "/bench/ping",
                workers,
                "memory",
                body=REST_SEND_BODY,
            )
            if workers == 1 or self.plan.two_worker_pg:
                if sql_reason:
                    if self.wanted(f"a2a-postgres-{w}"):
                        self.skip(f"a2a-postgres-{w}", sql_reason)
                else:
                    prefix = f"bench_{os.getpid()}_{workers}_"
                    env = {
                        **A2A_ENV,
                        "BENCH_STORE": "sql",
                        "BENCH_TABLE_PREFIX": prefix,
                        "A2A_DATABASE_URL": DB_URL,
                    }
                    try:
                        self.throughput(
                            f"a2a-postgres-{w}",
                            "flask_a2a SendMessage",
                            gunicorn_command(a2a, workers),
                            env,
                            "/a2a",
                            completed,
                            "/bench/ping",
                            workers,
                            "postgres",
                        )
                    finally:
                        drop_tables(prefix)
            if workers == 1 or self.plan.two_worker_pg:
                self.sql_row("a2a-mariadb", "mariadb", MYSQL_URL, mysql_reason, workers)
            if workers == 1:
                if sdk_python is None:
                    if self.wanted("sdk-1w"):
                        self.skip("sdk-1w", sdk_reason)
                else:
                    port = free_port()
                    command = [str(sdk_python), str(HERE / "sdk_echo_agent.py"), str(port), TOKEN]
                    self.throughput(
                        "sdk-1w",
                        "a2a-sdk SendMessage (uvicorn)",
                        command,
                        {"PORT": str(port)},
                        "/",
                        completed,
                        "/.well-known/agent-card.json",
                        1,
                        "memory",
                    )

    def sql_row(
        self,
        name: str,
        store: str,
        url: str,
        reason: str | None,
        workers: int,
        label: str = "flask_a2a SendMessage",
        extra: dict[str, str] | None = None,
    ) -> None:
        """One echo row on the SQL store at ``url`` (a fresh table prefix, dropped after)."""
        name = f"{name}-{workers}w"
        if reason:
            if self.wanted(name):
                self.skip(name, reason)
            return
        if not self.wanted(name):
            return
        prefix = f"bench_{os.getpid()}_{workers}_"
        env = {
            **A2A_ENV,
            "BENCH_STORE": "sql",
            "BENCH_TABLE_PREFIX": prefix,
            "A2A_DATABASE_URL": url,
            **(extra or {}),
        }
        try:
            self.throughput(
                name,
                label,
                gunicorn_command("bench.apps:create_app()", workers),
                env,
                "/a2a",
                "TASK_STATE_COMPLETED",
                "/bench/ping",
                workers,
                store,
            )
        finally:
            drop_tables(prefix, url)

    def lease_rows(self, reason: str | None) -> None:
        """The run leases' cost (issue 23): the PostgreSQL echo with leases and without
        (``A2A_RUN_LEASES``), as a blocking send writes it (one INSERT of the settled task,
        which takes no lease) and with every change written at once (the task created
        WORKING with its lease, the settle ending it: what a stream's or a
        ``returnImmediately`` task costs)."""
        for name, delay in (("leases", "1.0"), ("leases-written", "0")):
            for on in ("true", "false"):
                self.sql_row(
                    f"{name}-{'on' if on == 'true' else 'off'}",
                    "postgres",
                    DB_URL,
                    reason,
                    1,
                    label=f"SendMessage, A2A_RUN_LEASES={on}, write delay {delay} s",
                    extra={"A2A_RUN_LEASES": on, "A2A_BLOCKING_WRITE_DELAY": delay},
                )


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy since boot (/proc/stat)."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_cpu() -> float:
    """CPU seconds of this process and its finished children (wrk)."""
    me = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def drop_tables(prefix: str, url: str = DB_URL) -> None:
    try:
        from flask_a2a.store.sql import SQLStore, engine_from_url

        engine = engine_from_url(url)
        SQLStore(engine, table_prefix=prefix).drop()
        engine.dispose()
    except Exception as exc:
        print(f"could not drop {prefix}* tables: {exc!r}", file=sys.stderr)


def raise_nofile() -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def environment(generator: str, sdk: str) -> dict[str, t.Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    from importlib.metadata import version

    import gevent
    import gunicorn

    return {
        "cpu": model,
        "cores": os.cpu_count(),
        "python": platform.python_version(),
        "flask": version("flask"),
        "gunicorn": gunicorn.__version__,
        "gevent": gevent.__version__,
        "sdk": sdk,
        "generator": generator,
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "shared_machine": "load generator and server share the same cores",
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="short run (under ~90 s)")
    parser.add_argument("--generator", choices=("auto", "wrk", "gevent"), default="auto")
    parser.add_argument(
        "--only",
        nargs="*",
        help="run only rows/sections with these prefixes "
        "(bare, a2a-memory, a2a-redis, a2a-rest, a2a-postgres, a2a-mariadb, leases, sdk, streams, "
        "list, list-mariadb, fleet)",
    )
    parser.add_argument(
        "--telemetry",
        action="store_true",
        help="also run a2a-memory-1w with metrics and traces off (-off) and both on (-otel)",
    )
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    generator = loadgen.pick(args.generator)
    os.chdir(ROOT)
    nofile = raise_nofile()
    bench = Bench(plan, generator, set(args.only) if args.only else None, args.telemetry)
    bench.log(
        f"plan: {'quick' if args.quick else 'full'}; generator {generator}; "
        f"RLIMIT_NOFILE {nofile}; budget {plan.budget:.0f}s"
    )
    sql_reason = sql_available()
    if sql_reason:
        bench.log(f"PostgreSQL rows skipped: {sql_reason}")
    mysql_reason = sql_available(MYSQL_URL, "MariaDB")
    if mysql_reason:
        bench.log(f"MariaDB rows skipped: {mysql_reason}")
    sdk_python, sdk_reason = (None, "not requested")
    if bench.wanted("sdk"):
        sdk_python, sdk_reason = ensure_sdk_venv(bench.log)
    bench.started = time.monotonic()  # the budget counts the measurements, not the install
    sdk = sdk_version(sdk_python) if sdk_python else ""
    bench.results["environment"] = environment(generator, sdk)
    bench.results["plan"] = plan._asdict()
    try:
        bench.run_throughput(sdk_python, sdk_reason, sql_reason, mysql_reason)
        if bench.wanted("streams"):
            bench.results["streams"] = sections.idle_streams(bench, plan.streams)
        if bench.wanted("list-mariadb"):
            if mysql_reason:
                bench.skip("list-mariadb", mysql_reason)
            else:
                bench.results["list_mariadb"] = sections.list_tasks(
                    bench, MYSQL_URL, plan.list_sizes
                )
        if bench.wanted("list"):
            if sql_reason:
                bench.skip("list", sql_reason)
            else:
                bench.results["list"] = sections.list_tasks(bench, DB_URL, plan.list_sizes)
        if bench.wanted("fleet"):
            reason = sql_reason or redis_available()
            if reason:
                bench.skip("fleet", reason)
            elif bench.left() < 3 * plan.duration + 40:
                bench.skip("fleet", f"time bound: {bench.left():.0f}s left")
            else:
                bench.results["fleet"] = fleet.run(bench, DB_URL, REDIS_URL, SEND_BODY)
        if bench.wanted("leases"):  # last: over the budget, these are skipped first
            bench.lease_rows(sql_reason)
    finally:
        bench.results["elapsed_s"] = round(time.monotonic() - bench.started, 1)
        out = HERE / "results"
        out.mkdir(exist_ok=True)
        text = report.markdown(bench.results)
        (out / "latest.json").write_text(json.dumps(bench.results, indent=2) + "\n")
        (out / "latest.md").write_text(text)
        print()
        print(text)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except urllib.error.URLError as exc:
        print(f"bench: a server did not answer: {exc}", file=sys.stderr)
        sys.exit(1)
