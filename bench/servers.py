"""One server under test at a time: start it on a free 127.0.0.1 port, read its RSS and CPU.

RSS and CPU are summed over the worker processes (gunicorn's children; uvicorn's own process),
read from /proc, so the gunicorn master, which serves no request, is left out.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import typing as t
import urllib.error
import urllib.request
from pathlib import Path

HOST: t.Final = "127.0.0.1"
ROOT = Path(__file__).resolve().parent.parent
_TICKS = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def gunicorn_command(spec: str, workers: int, connections: int = 1000) -> list[str]:
    """``gunicorn -k gevent`` on a port filled in by :class:`Server` (``{port}``)."""
    return [
        sys.executable, "-m", "gunicorn", "-k", "gevent", "-w", str(workers),
        "--worker-connections", str(connections), "--backlog", "4096",
        "-b", HOST + ":{port}", "--chdir", str(ROOT), "--timeout", "120",
        "--graceful-timeout", "5", "--log-level", "warning", spec,
    ]  # fmt: skip


def post_json(url: str, body: str, token: str | None = None, timeout: float = 10.0) -> t.Any:
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    req = urllib.request.Request(url, body.encode(), headers, method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return json.loads(resp.read())


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
            found.append(int(entry))
    return found


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


class Server:
    """``with Server(command, env, ready_path) as server:`` -> ``server.base`` answers."""

    def __init__(
        self,
        command: list[str],
        env: t.Mapping[str, str],
        ready_path: str,
        startup_timeout: float = 60.0,
    ) -> None:
        port = int(env["PORT"]) if "PORT" in env else free_port()
        self.base = f"http://{HOST}:{port}"
        self.command = [part.replace("{port}", str(port)) for part in command]
        self.env = {**os.environ, **env}
        self.ready = self.base + ready_path
        self.startup_timeout = startup_timeout
        self.log = tempfile.TemporaryFile()
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Server:
        self.proc = subprocess.Popen(
            self.command, env=self.env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT
        )
        deadline = time.monotonic() + self.startup_timeout
        while not self._answers():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError(f"server did not come up: {self.command}\n{self.output()}")
            time.sleep(0.1)  # polling a subprocess's socket: there is no event to await
        return self

    def _answers(self) -> bool:
        try:
            with urllib.request.urlopen(self.ready, timeout=1):
                return True
        except urllib.error.HTTPError:
            return True
        except OSError:
            return False

    def output(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-4000:]

    def workers(self) -> list[int]:
        assert self.proc is not None
        kids = children(self.proc.pid)
        return kids or [self.proc.pid]

    def worker_rss_kb(self) -> int:
        return sum(rss_kb(pid) for pid in self.workers())

    def cpu_seconds(self) -> float:
        return sum(cpu_seconds(pid) for pid in self.workers())

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.log.close()
