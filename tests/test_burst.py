"""A class that arrives at once, seen by the server: 30 sessions speaking Streamlit's own protocol
(``harness.protocol``, no browser) open their pages within a second of each other on one fresh ``serve.py``.

Liveness only, no timings: every session's first run finishes and draws its page's input, every session's input is
answered, no page shows an error, and the sessions whose first run had to wait for a place were told so ("busy,
you are number n in line", n never growing). The browser-level burst is in ``tests/test_classroom.py``; the timings
of 30 and 100 such sessions are ``python -m benchmarks load``'s.
"""

from __future__ import annotations

import asyncio
import os
import re

import pytest

from harness.browser import Server
from harness.protocol import ProtocolSession
from tx_explorer import locales

SESSIONS = int(os.environ.get("TX_BURST_SESSIONS", "30"))
# (page, widget key, whether the key is a prefix, the value typed): light and heavy pages, as benchmarks/load.py
INPUTS = (
    ("masks", "sentence", False, "the cat sat again"),
    ("seq2seq", "s2s_text", False, None),  # its first demo sentence: in the toy language's vocabulary
    ("multihead", "mh_text_", True, "The cat is ready again"),
    ("language_model", "lm_text", False, "The cat is ready again"),
)


def _busy_places(notices: list[str]) -> list[int]:
    """The places ("number n in line") in the busy notices a session was shown, in order."""
    pattern = re.escape(locales.text("common", "busy_first_visit", "en")).replace(r"\{n\}", r"(\d+)")
    return [int(m.group(1)) for text in notices if (m := re.fullmatch(pattern, text))]


async def _visit(url: str, i: int) -> ProtocolSession:
    from tx_explorer.data import translation as tr

    page, key, prefix, text = INPUTS[i % len(INPUTS)]
    session = ProtocolSession(url, page)
    try:
        await session.open()
        typed = text if text is not None else tr.DEMO_SENTENCES[0]
        await session.input(key, lambda state, k: setattr(state, "string_value", typed), prefix=prefix)
    finally:
        await session.close()
    return session


@pytest.mark.skipif(SESSIONS == 0, reason="TX_BURST_SESSIONS=0")
def test_a_burst_of_sessions_is_drawn_answered_and_told_its_place():
    srv = Server()
    srv.start()
    try:
        srv.wait_healthy()
        srv.wait_settled()  # the teacher's server: started, models loaded, idle

        async def burst() -> list:
            return await asyncio.gather(*(_visit(srv.url, i) for i in range(SESSIONS)), return_exceptions=True)

        sessions = asyncio.run(burst())
        log = srv.output(tail=None)
    finally:
        srv.stop()
    failed = [f"session {i}: {s!r}" for i, s in enumerate(sessions) if isinstance(s, BaseException)]
    assert not failed, "\n".join(failed) + "\n" + log[-3000:]
    assert "Traceback" not in log, log[-3000:]
    for s in sessions:
        assert not s.errors, (s.page, s.errors)
        assert s.finished >= 2, f"{s.page}: first run and input not both finished"
        places = _busy_places(s.notices)
        assert places == sorted(places, reverse=True), f"{s.page}: the place grew: {places}"
    # 30 first runs at once through one place per core: most wait, and the later ones are told so
    assert sum(bool(_busy_places(s.notices)) for s in sessions) >= SESSIONS // 3, [s.notices for s in sessions]
