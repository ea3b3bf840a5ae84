"""Two replicas of the app behind nginx with ``deploy/nginx.conf``: each browser stays on one replica, both serve.

The repository's sample configuration runs unprivileged (``harness.proxy``: a free loopback port, pid and logs in a
temporary folder; only the listen port, the replicas' addresses and the paths are replaced). Browsers whose routing
cookies hash to different replicas each open a page through the proxy and make an input that shows their own marker;
the proxy's log shows each browser's websocket on the replica its key chose, and both replicas in use. Skipped only
when nginx is not installed (``make chromium`` installs Debian's).
"""

from __future__ import annotations

import time
import urllib.request
from pathlib import Path

import pytest

from harness.browser import ARGS, CHROMIUM, CODE, IDLE, LONG, PLOT, assert_no_errors, running_server
from harness.proxy import COOKIE, NGINX, behind_nginx, route_header, routes

pytestmark = pytest.mark.browser


def keys_for_each_replica(url: str, folder: Path, replicas: list[int], per_replica: int) -> dict[int, list[str]]:
    """Routing keys that the proxy sends to each replica: asked with plain requests, each logged with its replica."""
    found: dict[int, list[str]] = {p: [] for p in replicas}
    for i in range(200):
        key = f"class-{i}"
        req = urllib.request.Request(f"{url}/_stcore/health", headers=route_header(key))
        urllib.request.urlopen(req, timeout=10).read()
        time.sleep(0.05)  # the log line is written as the request ends
        replica = int(next(up for _, k, up in reversed(routes(folder)) if k == key).rsplit(":", 1)[1])
        if len(found[replica]) < per_replica:
            found[replica].append(key)
        if all(len(v) == per_replica for v in found.values()):
            return found
    raise AssertionError(f"200 keys did not reach every replica: {found}")


@pytest.mark.skipif(NGINX is None, reason="nginx is not installed (make chromium installs Debian's nginx-light)")
def test_two_replicas_behind_nginx_keep_each_browser_on_one_and_both_serve(tmp_path):
    from playwright.sync_api import expect, sync_playwright

    with running_server() as a, running_server() as b:
        a.wait_healthy()
        b.wait_healthy()
        replicas = [a.port, b.port]
        with behind_nginx(replicas, tmp_path) as nginx, sync_playwright() as pw:
            proxy = nginx.url
            keys = keys_for_each_replica(proxy, tmp_path, replicas, per_replica=2)
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            markers = iter(["module", "thread", "window", "buffer"])
            sessions = []  # (routing key, its replica, marker)
            try:
                for replica, replica_keys in keys.items():
                    for key in replica_keys:
                        marker = next(markers)
                        ctx = browser.new_context(viewport={"width": 1200, "height": 900})
                        ctx.add_cookies([{"name": COOKIE, "value": key, "url": proxy}])
                        page = ctx.new_page()
                        page.goto(f"{proxy}/masks")
                        page.wait_for_selector(f"{PLOT} .main-svg", timeout=LONG)
                        box = page.locator(".st-key-sentence input").first
                        box.fill(f"the {marker} sat down")
                        box.press("Enter")
                        expect(page.locator(PLOT).filter(has_text=marker).first).to_be_attached(timeout=LONG)
                        page.wait_for_selector(IDLE, timeout=LONG)
                        assert_no_errors(page)
                        sessions.append((key, replica, marker))
                        ctx.close()  # the websocket closes: the proxy logs it
                # A browser without a cookie gets one on its first request and keeps to one replica.
                ctx = browser.new_context()
                page = ctx.new_page()
                page.goto(f"{proxy}/multihead")
                expect(page.locator(CODE).first).to_be_attached(timeout=LONG)
                page.wait_for_selector(IDLE, timeout=LONG)
                assert_no_errors(page)
                fresh = {c["name"]: c["value"] for c in ctx.cookies()}.get(COOKIE)
                ctx.close()
            finally:
                browser.close()
            time.sleep(0.5)
            log = routes(tmp_path)
    assert fresh, "the proxy set no routing cookie"
    for key, replica, _ in sessions:
        streams = [up for req, k, up in log if k == key and "/_stcore/stream" in req]
        assert streams and set(streams) == {f"127.0.0.1:{replica}"}, (key, replica, streams)
    fresh_upstreams = {up for _, k, up in log if k == fresh}
    assert len(fresh_upstreams) == 1, fresh_upstreams
    served = {up for req, _, up in log if "/_stcore/stream" in req}
    assert served == {f"127.0.0.1:{p}" for p in replicas}, served
