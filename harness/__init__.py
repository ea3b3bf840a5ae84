"""Drives the served app in Chromium for the browser tests and the benchmarks alike (``harness.browser``), a class
of sessions on one server (``harness.classroom``, ``harness.protocol``) and replicas behind nginx
(``harness.proxy``). Development only: it needs Playwright, which ``make run`` does not install."""
