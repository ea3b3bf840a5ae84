"""Replicas of the app behind nginx run from ``deploy/nginx.conf``, unprivileged: for the scale-out test and the load
benchmark's ``--replicas``.

The repository's sample configuration is used as it is, with only the listen port (a free loopback one), the
replicas' addresses and the paths (pid, logs and nginx's temporary files in a folder of the caller's) replaced, so
what is tested and measured is what the README tells a teacher to run. Requests are routed on the ``tx_route``
cookie; the access log names each request's routing key and the replica that served it.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from harness.browser import ROOT, free_port, process_cpu_s

NGINX = shutil.which("nginx") or next((p for p in ("/usr/sbin/nginx",) if Path(p).exists()), None)
CONF = ROOT / "deploy" / "nginx.conf"
COOKIE = "tx_route"  # the routing key's cookie in deploy/nginx.conf
# the proxy's log_format `routed`: $upstream_addr lists every replica tried ("a, b") when one failed
ROUTED = re.compile(r'"(\S+ \S+) [^"]*" \d+ route=(\S+) upstream=(.+)$')


def route_header(key: str) -> dict[str, str]:
    """The header that keeps a client on the replica ``key`` hashes to, as a browser sends its cookie."""
    return {"Cookie": f"{COOKIE}={key}"}


def proxy_config(text: str, port: int, replicas: list[int], folder: Path) -> str:
    """deploy/nginx.conf with its listen port, replicas and log path replaced, and pid/temp files in ``folder``."""
    text, n = re.subn(r"listen \d+;", f"listen 127.0.0.1:{port};", text)
    assert n == 1, "deploy/nginx.conf has one listen directive"
    upstreams = "\n".join(f"        server 127.0.0.1:{p};" for p in replicas)
    text, n = re.subn(r"(?:^\s*server 127\.0\.0\.1:\d+;\n)+", upstreams + "\n", text, flags=re.M)
    assert n == 1, "deploy/nginx.conf lists its replicas together"
    text = text.replace("/var/log/nginx/tx_explorer.log", str(folder / "access.log"))
    temp = "\n".join(
        f"    {kind}_temp_path {folder / kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    text = text.replace("http {\n", "http {\n" + temp + "\n", 1)
    return f"daemon off;\npid {folder / 'nginx.pid'};\nerror_log {folder / 'error.log'} warn;\n{text}"


def routes(folder: Path) -> list[tuple[str, str, str]]:
    """(request, routing key, replica addresses) of every request the proxy in ``folder`` logged so far."""
    lines = (folder / "access.log").read_text().splitlines()
    return [m.groups() for m in map(ROUTED.search, lines) if m]


def replicas_reached(log: list[tuple[str, str, str]], keys: list[str]) -> dict[str, list[str]]:
    """Each of ``keys``: the replica addresses its requests in ``log`` reached, in order of first use (none: it sent
    nothing through the proxy; more than one: its session was split across replicas)."""
    reached: dict[str, list[str]] = {key: [] for key in keys}
    for _, key, upstreams in log:
        if key not in reached:
            continue  # another client's request (e.g. the start-up health check)
        for address in upstreams.split(", "):
            if address not in reached[key]:
                reached[key].append(address)
    return reached


@dataclass
class Proxy:
    """nginx in front of the replicas: its address, its folder (configuration, logs) and its master process."""

    url: str
    folder: Path
    proc: subprocess.Popen

    def cpu_s(self) -> float:
        """CPU seconds the master and its worker processes have used so far (a worker's are not its master's until
        it exits)."""
        pid = self.proc.pid
        workers = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        return sum(process_cpu_s(p) for p in (pid, *map(int, workers)))


@contextlib.contextmanager
def behind_nginx(replicas: list[int], folder: Path) -> Iterator[Proxy]:
    """deploy/nginx.conf on a free loopback port in front of the servers on ports ``replicas``, its files in
    ``folder``; waits until a request passes through it."""
    if NGINX is None:
        raise RuntimeError("nginx is not installed (make chromium installs Debian's nginx-light)")
    port = free_port()
    conf = folder / "nginx.conf"
    conf.write_text(proxy_config(CONF.read_text(), port, replicas, folder))
    proc = subprocess.Popen(
        [NGINX, "-p", str(folder), "-c", str(conf), "-e", str(folder / "error.log")],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    proxy = Proxy(f"http://127.0.0.1:{port}", folder, proc)
    try:
        for _ in range(100):
            with contextlib.suppress(OSError):
                urllib.request.urlopen(f"{proxy.url}/_stcore/health", timeout=2)
                break
            if proc.poll() is not None:
                raise RuntimeError("nginx stopped:\n" + (folder / "error.log").read_text(errors="replace"))
            time.sleep(0.1)
        yield proxy
    finally:
        proc.terminate()
        proc.wait(timeout=10)
