"""``serve.py``'s cold start: what the first chart waits for, and what waits until the server is idle (then every
bundled model loads into the shared cache, once)."""

from __future__ import annotations

import asyncio
import gc
import gzip
import re
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest
from streamlit import delta_generator, env_util
from streamlit.runtime.pages_manager import PagesManager
from streamlit.runtime.scriptrunner_utils.script_requests import ScriptRequests, ScriptRequestType
from streamlit.runtime.scriptrunner_utils.script_run_context import SCRIPT_RUN_CONTEXT_ATTR_NAME

import serve
from tx_explorer import model_cache, models
from tx_explorer.ui import compat


@pytest.fixture(autouse=True)
def unfreeze():
    """serve.warm freezes what it loaded (gc.freeze, for the server); later tests keep a collector that sees all."""
    yield
    gc.unfreeze()


def test_models_wait_until_the_server_is_idle(monkeypatch: pytest.MonkeyPatch):
    looks, loads = [], []
    monkeypatch.setattr(model_cache, "preload", lambda: loads.append(len(looks)) or [])

    def idle() -> bool:
        looks.append(True)
        return len(looks) == 3  # a visitor's script runs during the first two looks

    serve.warm(ready=lambda: True, idle=idle, poll_s=0.0)
    assert loads == [3]


def test_models_load_after_patience_even_if_never_idle(monkeypatch: pytest.MonkeyPatch):
    loads = []
    monkeypatch.setattr(model_cache, "preload", lambda: loads.append(True) or [])
    serve.warm(ready=lambda: True, idle=lambda: False, poll_s=0.0, patience_s=0.0)
    assert loads == [True]


def test_the_warm_up_freezes_what_it_imported(monkeypatch: pytest.MonkeyPatch):
    """Frozen objects are out of the cyclic collector's sight: Streamlit's gc.collect after each run skips them."""
    monkeypatch.setattr(model_cache, "preload", lambda: [])
    gc.unfreeze()
    serve.warm(ready=lambda: True, idle=lambda: True, poll_s=0.0)
    assert gc.get_freeze_count() > 0


def test_the_first_run_skips_the_legacy_mode_rerun_and_the_repl_check(monkeypatch: pytest.MonkeyPatch):
    # raising=True (the default): a Streamlit release without these attributes fails here, not silently.
    monkeypatch.setattr(PagesManager, "uses_pages_directory", None)
    monkeypatch.setattr(delta_generator, "_use_warning_has_been_displayed", False)
    compat.skip_first_run_detours()
    assert PagesManager.uses_pages_directory is False

    def no_stack_walk() -> bool:
        raise AssertionError("the first element asked inspect.stack() whether this is a REPL")

    monkeypatch.setattr(env_util, "is_repl", no_stack_walk)
    delta_generator._maybe_print_use_warning()  # what the first element drawn calls


def test_leaving_the_legacy_mode_asks_each_running_script_to_start_again_without_raising(
    monkeypatch: pytest.MonkeyPatch,
):
    """A plain ``streamlit run app.py``: the first import of the ui package happens inside runs that began in the
    legacy multipage mode (issue 42). It must not raise there (an abandoned import failed the sessions waiting on
    it); each running script is asked to start again, on the page its visitor asked for."""
    monkeypatch.setattr(PagesManager, "uses_pages_directory", True)
    requests = ScriptRequests()
    intent = SimpleNamespace(intended_page_script_hash=None, intended_page_name="seq2seq")
    ctx = SimpleNamespace(script_requests=requests, pages_manager=intent, query_string="lang=zh", context_info=None)
    release = threading.Event()
    script = threading.Thread(target=release.wait, daemon=True)  # a session's script thread, mid-run
    setattr(script, SCRIPT_RUN_CONTEXT_ATTR_NAME, ctx)
    script.start()
    try:
        assert compat.leave_legacy_multipage_mode() == 1
        assert compat.leave_legacy_multipage_mode() == 0  # once: the mode is off for every later run
    finally:
        release.set()
    assert PagesManager.uses_pages_directory is False
    request = requests.on_scriptrunner_yield()  # what the script's next Streamlit call finds
    assert request.type == ScriptRequestType.RERUN
    assert (request.rerun_data.page_name, request.rerun_data.query_string) == ("seq2seq", "lang=zh")


def test_ui_compat_refuses_another_streamlit_release():
    """Its pokes were read against one release: another fails loudly at import, naming what to check."""
    compat.check_version("1.67.3")
    with pytest.raises(RuntimeError, match=re.escape("written for Streamlit 1.67.x and found 1.68.0")):
        compat.check_version("1.68.0")


def test_serve_warm_up_loads_every_bundled_model_once():
    bundled = [n for n in models.available_models() if models.REGISTRY[n].bundled]
    assert bundled  # the repository ships its bundles
    names = serve.warm(ready=lambda: True, idle=lambda: True)
    assert set(bundled) <= set(names)
    before = {n: model_cache.shared_model(n) for n in bundled}
    serve.warm(ready=lambda: True, idle=lambda: True)  # a second warm-up loads nothing again
    assert all(model_cache.shared_model(n) is before[n] for n in bundled)


def test_serve_warm_up_waits_for_the_server_before_loading_models(monkeypatch: pytest.MonkeyPatch):
    asked, loads = [], []
    monkeypatch.setattr(model_cache, "preload", lambda: loads.append(len(asked)) or [])

    def ready() -> bool:
        asked.append(True)
        return len(asked) == 3  # the server answers at the third look

    serve.warm(ready=ready, idle=lambda: True, poll_s=0.0)
    assert loads == [3]


def _asgi(app, path: str, *, method: str = "GET", gzip_ok: bool = True) -> tuple[dict, bytes]:
    """One request through the ASGI ``app``: (the response's headers, its body)."""
    scope = {
        "type": "http",
        "method": method,
        "path": path,
        "headers": [(b"accept-encoding", b"gzip, deflate, br")] if gzip_ok else [],
    }
    sent = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    return dict(sent[0]["headers"]), b"".join(m.get("body", b"") for m in sent[1:])


async def _streamlits(scope, receive, send) -> None:
    """Stands for Streamlit's own app: answers every request it gets with its path."""
    await send({"type": "http.response.start", "status": 200, "headers": [(b"x-by", b"streamlit")]})
    await send({"type": "http.response.body", "body": scope["path"].encode()})


def test_frontend_files_go_out_gzipped_each_compressed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "js").mkdir()
    script = b"console.log('a hashed bundle');\n" * 2000
    (tmp_path / "js" / "index.AbC123.js").write_bytes(script)
    (tmp_path / "font.woff2").write_bytes(b"\x00compressed already")
    compressions = []
    real = compat._gzipped
    monkeypatch.setattr(compat, "_gzipped", lambda path: compressions.append(path.name) or real(path))
    app = compat.GzippedStatic(_streamlits, tmp_path, "/base/static/")

    for _ in range(3):
        headers, body = _asgi(app, "/base/static/js/index.AbC123.js")
        assert gzip.decompress(body) == script
        assert len(body) < len(script) / 10
        assert headers[b"content-encoding"] == b"gzip"
        assert headers[b"content-length"] == str(len(body)).encode()
        assert headers[b"cache-control"].startswith(b"public, immutable, max-age=")
        assert b"javascript" in headers[b"content-type"]
    assert compressions == ["index.AbC123.js"]  # once for the three requests

    # Everything else is Streamlit's: a font, a missing or escaping path, a HEAD, a client without gzip, the page.
    for path, kwargs in [
        ("/base/static/font.woff2", {}),
        ("/base/static/js/missing.js", {}),
        ("/base/static/../static/js/index.AbC123.js", {}),
        ("/base/static/js/index.AbC123.js", {"method": "HEAD"}),
        ("/base/static/js/index.AbC123.js", {"gzip_ok": False}),
        ("/masks", {}),
    ]:
        headers, body = _asgi(app, path, **kwargs)
        assert (headers, body) == ({b"x-by": b"streamlit"}, path.encode()), (path, kwargs)


def test_serve_puts_the_gzipped_files_in_front_of_streamlits_app(monkeypatch: pytest.MonkeyPatch):
    from streamlit.web.server.starlette import starlette_server

    built = []
    monkeypatch.setattr(starlette_server, "create_starlette_app", lambda runtime: built.append(runtime) or _streamlits)
    compat.serve_static_compressed()
    app = starlette_server.create_starlette_app("runtime")  # what Streamlit's server calls when it starts
    assert built == ["runtime"]
    assert isinstance(app, compat.GzippedStatic) and app.app is _streamlits
    assert "/static/static/js/" not in "".join(app.files)
    assert any(path.startswith("/static/js/index.") for path in app.files)  # Streamlit's own bundle is among them
