"""Bring your own checkpoint, in the app: the text pages list the local Hugging Face cache and open a typed folder
inside the allowed roots (tx_explorer.paths); tiny-llama is offered beside tiny-gpt with its GQA heads named."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.checkpoints import write_checkpoint, write_gguf
from tests.conftest import assert_clean, open_page
from tx_explorer import locales, paths, ui
from tx_explorer.interop import checkpoint, gguf
from tx_explorer.models import available_models
from tx_explorer.ui import pickers

OUTSIDE = "the app opens only folders inside the local Hugging Face cache"


@pytest.fixture(scope="module")
def disk(tmp_path_factory, one_thread) -> dict[str, Path]:
    """A random Qwen2 (8 query / 2 KV heads) in an allowed root, a Llama in the HF cache, one outside both; a GGUF
    file in the root and a copy of it cut short."""
    base = tmp_path_factory.mktemp("byoc")
    qwen = base / "roots" / "my-qwen2"
    write_checkpoint(qwen, "qwen2")
    write_gguf(base / "roots" / "tiny.gguf", "qwen2", "Q8_0")
    whole = (base / "roots" / "tiny.gguf").read_bytes()
    (base / "roots" / "cut.gguf").write_bytes(whole[: len(whole) // 2])
    cache = base / "hf" / "hub"
    llama = cache / "models--someone--tiny-llama-hf" / "snapshots" / "abc123"
    write_checkpoint(llama, "llama")
    outside = base / "elsewhere" / "model"
    write_checkpoint(outside, "qwen2")
    return {"roots": base / "roots", "qwen": qwen, "cache": cache, "llama": llama, "outside": outside}


@pytest.fixture
def env(disk, monkeypatch) -> dict[str, Path]:
    monkeypatch.setenv("HF_HUB_CACHE", str(disk["cache"]))
    monkeypatch.setenv(paths.ENV_ROOTS, str(disk["roots"]))
    monkeypatch.setenv(paths.ENV_CONFIG, str(disk["roots"] / "absent.toml"))
    pickers._cached_checkpoints.clear()  # the picker's directory scan is cached for 30 s
    return disk


def pick_folder(at, key: str, folder: str):
    at.selectbox(key=key).set_value(ui.FOLDER).run()
    assert [i.value for i in at.info] and not at.error  # asks for a path first
    at.text_input(key=f"{key}_folder").set_value(folder).run()
    return at


def captions(at) -> str:
    return " ".join(c.value for c in at.caption)


def test_tiny_llama_is_offered_wherever_tiny_gpt_is():
    if "tiny-llama" not in available_models("text"):
        pytest.skip("tiny-llama is not built yet: python -m tx_explorer.train lm --preset tiny-llama")
    for family, kind in (("text", None), ("text", "causal")):
        assert {"tiny-gpt", "tiny-llama"} <= set(available_models(family, kind=kind))
    at = open_page("multihead")
    at.selectbox(key="mh_model").set_value("tiny-llama").run()
    assert_clean(at)
    assert "4 query heads share 2 key/value heads" in captions(at) and "RoPE" in captions(at)
    grid = [s for s in _plotly_text(at) if "h3 · kv1" in s]
    assert grid, "the head grid names each head's key/value group"


def _plotly_text(at) -> list[str]:
    from tests.conftest import plotly_specs

    return [str(spec) for spec in plotly_specs(at)]


def test_multihead_opens_a_typed_qwen2_folder_and_shows_its_gqa_heads(env):
    at = pick_folder(open_page("multihead"), "mh_model", str(env["qwen"]))
    assert_clean(at)
    assert "8 query heads share 2 key/value heads" in captions(at) and "rotary positions" in captions(at)
    specs = " ".join(_plotly_text(at))
    assert "h7 · kv1" in specs and "h0 · kv0" in specs  # 2 layers × 8 heads, four per key/value head
    at.session_state["lang"] = "zh"  # the same page in Chinese
    at.run()
    assert_clean(at)
    assert "个查询头共享" in captions(at)


def test_the_local_cache_is_listed_and_opens_on_the_language_model_page(env):
    at = open_page("language_model")
    box = at.selectbox(key="lm_model")
    label = locales.text("common", "model_cached", repo="someone/tiny-llama-hf")
    assert str(env["llama"]) in box.options or label in box.options, box.options
    box.set_value(str(env["llama"])).run()
    assert_clean(at)
    assert "rotary positions (RoPE, θ = 500)" in captions(at)
    assert at.get("plotly_chart")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_each_listed_checkpoint_says_where_it_is_and_a_damaged_file_is_not_offered(env, lang):
    at = open_page("multihead")
    at.session_state["lang"] = lang
    at.run()
    options = at.selectbox(key="mh_model").options
    assert locales.text("common", "model_cached", lang, repo="someone/tiny-llama-hf") in options, options
    assert locales.text("common", "model_in_root", lang, repo="tiny.gguf") in options, options  # not "HF cache"
    assert locales.text("common", "model_cached", lang, repo="tiny.gguf") not in options
    assert not [o for o in options if "cut.gguf" in o]  # it would fail only once picked


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_path_box_says_what_loads_from_the_loaders_own_lists(env, lang):
    at = open_page("multihead")
    at.selectbox(key="mh_model").set_value(ui.FOLDER)
    at.session_state["lang"] = lang  # AppTest does not send the sidebar's switch back: set it for the run
    at.run()
    box = at.text_input(key="mh_model_folder")
    assert box.label == locales.text("common", "model_folder", lang) and "GGUF" in box.label.upper()
    assert all(name in box.help for name in [*checkpoint.FAMILIES, *gguf.ARCHITECTURES]), box.help
    assert [i.value for i in at.info] == [locales.text("common", "model_folder_empty", lang)]
    assert "GGUF" in at.info[0].value.upper()


@pytest.mark.parametrize("where", ["outside", "missing-outside", "dotdot", "symlink"])
def test_folders_outside_the_roots_get_one_message(env, where, tmp_path):
    link = env["roots"] / "link-out"
    if not link.exists():
        link.symlink_to(env["outside"], target_is_directory=True)
    typed = {
        "outside": str(env["outside"]),
        "missing-outside": str(env["outside"].parent / "nothing"),
        "dotdot": f"{env['roots']}/../elsewhere/model",
        "symlink": str(link),
    }[where]
    at = pick_folder(open_page("multihead"), "mh_model", typed)
    assert [e.value for e in at.error] == [
        locales.text("common", "error_input", message=ui.escape_markdown(_refusal()))
    ]
    assert not at.get("plotly_chart") and not at.exception


def _refusal() -> str:
    return locales.text("errors", "folder_not_allowed", variable=paths.ENV_ROOTS)


def test_a_bad_folder_inside_a_root_is_refused_and_the_page_recovers(env):
    bad = env["roots"] / "not-a-model"
    bad.mkdir(exist_ok=True)
    (bad / "config.json").write_text('{"model_type": "t5"}')
    at = pick_folder(open_page("multihead"), "mh_model", str(bad))
    assert any("not supported; supported: bert, gpt2, llama, qwen2, mistral" in e.value for e in at.error)
    at.text_input(key="mh_model_folder").set_value(str(env["qwen"])).run()
    assert_clean(at)
    assert at.get("plotly_chart")
