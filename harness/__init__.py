"""Drives the served app in Chromium for the browser tests and the benchmarks alike (``harness.browser``), and a
class of sessions on one server (``harness.classroom``). Development only: it needs Playwright, which ``make run``
does not install."""
