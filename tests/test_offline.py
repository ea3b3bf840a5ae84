"""The app makes no network request at run time: every page runs with non-loopback sockets refused."""

from __future__ import annotations

import ipaddress
import socket

import pytest

from harness.browser import app_pages
from tests.conftest import assert_clean, open_page

_real_connect = socket.socket.connect
_real_getaddrinfo = socket.getaddrinfo


def _is_loopback(host: str) -> bool:
    if host in ("localhost", ""):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@pytest.fixture
def no_network(monkeypatch):
    attempts: list[str] = []

    def guarded_connect(self, address):
        host = address[0] if isinstance(address, tuple) else ""
        if isinstance(address, tuple) and not _is_loopback(host):
            attempts.append(str(address))
            raise OSError(f"network access blocked in tests: {address}")
        return _real_connect(self, address)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if host is not None and not _is_loopback(str(host)):
            attempts.append(f"resolve {host}")
            raise socket.gaierror(f"name resolution blocked in tests: {host}")
        return _real_getaddrinfo(host, *args, **kwargs)

    monkeypatch.setattr(socket.socket, "connect", guarded_connect)
    monkeypatch.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
    return attempts


@pytest.mark.parametrize("path", app_pages())
def test_every_page_runs_offline(no_network, path):
    at = open_page(path.removeprefix("pages/").removesuffix(".py"))
    assert_clean(at)
    assert no_network == [], no_network
