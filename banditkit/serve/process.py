"""Run ``banditkit serve`` as a child process on a free loopback port (for tests, benchmarks and notebooks).

::

    with ServerProcess(["--agent", "linear-thompson", "--store", "s.db", "--context-dim", "2"]) as srv:
        answer = srv.post("/rank", {...})          # (status, JSON body)

:meth:`ServerProcess.kill` sends SIGKILL (a crash), :meth:`ServerProcess.stop` SIGTERM (a clean stop: the learner
applies what is committed and saves a snapshot).  The server's stderr goes to ``log_path``.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import time


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ServerProcess:
    """``python -m banditkit serve ARGS --port PORT`` (see the module docstring); ``token``: the bearer token."""

    def __init__(self, args: list[str], *, port: int | None = None, token: str | None = None,
                 log_path: str | None = None, env: dict | None = None, ready_timeout: float = 300.0):
        self.port = port or free_port()
        self.token = token
        self.args = list(args)
        self.log_path = log_path or os.devnull
        self.ready_timeout = ready_timeout
        self.env = dict(os.environ if env is None else env)
        if token is not None:
            self.env["BANDITKIT_SERVE_TOKEN"] = token
        self.proc: subprocess.Popen | None = None

    # ------------------------------------------------------------------------------------------------ lifecycle
    def start(self) -> ServerProcess:
        cmd = [sys.executable, "-m", "banditkit", "serve", *self.args, "--host", "127.0.0.1", "--port", str(self.port)]
        self._log = open(self.log_path, "ab")
        self.proc = subprocess.Popen(cmd, stdout=self._log, stderr=subprocess.STDOUT, env=self.env)
        deadline = time.time() + self.ready_timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"banditkit serve exited with status {self.proc.returncode}: {self.log()[-2000:]}")
            try:
                status, _ = self.get("/health")
                if status == 200:
                    return self
            except OSError:
                pass
            time.sleep(0.2)
        self.kill()
        raise TimeoutError(f"banditkit serve did not answer /health within {self.ready_timeout} s: "
                           f"{self.log()[-2000:]}")

    def log(self) -> str:
        if self.log_path == os.devnull:
            return ""
        with open(self.log_path, encoding="utf-8", errors="replace") as fh:
            return fh.read()

    def kill(self) -> None:
        """SIGKILL: the process dies at once, as in a crash."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(30)
        self._close_log()

    def stop(self, timeout: float = 60.0) -> int:
        """SIGTERM and wait: a clean stop; returns the exit status (0 also when uvicorn, having shut down cleanly,
        re-raised the SIGTERM it caught)."""
        if self.proc is None:
            return 0
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_log()
        code = int(self.proc.returncode)
        return 0 if code == -signal.SIGTERM else code

    def _close_log(self) -> None:
        log = getattr(self, "_log", None)
        if log is not None and not log.closed:
            log.close()

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------------------------------------ requests
    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict | None = None,
                timeout: float = 60.0) -> tuple[int, object]:
        """One request on a new connection: ``(status, parsed JSON body or the text)``."""
        h = {"Content-Type": "application/json"}
        if self.token is not None:
            h["Authorization"] = f"Bearer {self.token}"
        h.update(headers or {})
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            conn.request(method, path, body=body, headers=h)
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        try:
            return resp.status, json.loads(data)
        except ValueError:
            return resp.status, data.decode("utf-8", errors="replace")

    def get(self, path: str) -> tuple[int, object]:
        return self.request("GET", path)

    def post(self, path: str, payload) -> tuple[int, object]:
        body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
        return self.request("POST", path, body)
