"""Review with one's own checkpoints (B): the language model, masks and KV cache pages on checkpoint folders of
other families than the bundled models'.

Found there: an encoder folder (BERT) typed on the language model page gave two English errors (in 中文 too) and a
chat line calling it "a base model, pretrained to continue text"; on the masks page an English error; a model
whose every layer has a window (Mistral) was said to have "the global layers (0) reach 0 positions back"; the
language model's "causal mask in use" drew a plain causal mask on a windowed layer; a checkpoint folder without a
chat template was called a base model, which its files do not say; and an instruction-tuned folder's template was not
read at all (the loader read templates from GGUF files alone).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from tests.checkpoints import CHATML, write_checkpoint
from tests.conftest import open_page, open_sections
from tests.zh_text import english_words
from tx_explorer import locales, paths, ui
from tx_explorer.analysis import lm, mask_gallery
from tx_explorer.errors import InputError
from tx_explorer.interop.checkpoint import load_checkpoint
from tx_explorer.views import language_model as lm_view
from tx_explorer.views import masks as masks_view
from tx_explorer.views import model_facts

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def roots(tmp_path_factory) -> Path:
    """A root of the allowed folders holding a random BERT and a random Mistral (window 6 on every layer)."""
    root = tmp_path_factory.mktemp("byoc_b")
    for family in ("bert", "mistral"):
        write_checkpoint(root / family, family)
    return root


@pytest.fixture
def allowed(roots, monkeypatch) -> Path:
    monkeypatch.setenv(paths.ENV_ROOTS, str(roots))
    return roots


def _page(page: str, key: str, folder: Path, lang: str):
    at = open_page(page, lang=lang, **{key: ui.FOLDER, f"{key}_folder": str(folder)})
    open_sections(at, page)
    at.session_state["lang"] = lang
    return at.run()


@pytest.mark.parametrize("lang", locales.LANGUAGES)
@pytest.mark.parametrize(("page", "key", "message"), [("language_model", "lm_model", "not_causal")])
def test_an_encoder_folder_gets_one_message_in_the_users_language(allowed, page, key, message, lang):
    at = _page(page, key, allowed / "bert", lang)
    assert not at.exception and not at.error, [e.value for e in at.error]
    said = locales.text(page, message, lang, named="**bert**")  # the folder's name says its family: not twice
    assert [i.value for i in at.info] == [said]  # one line, no chat line calling it a base model
    assert not english_words(said, prose=True) if lang == "zh" else "encoder" in said


@pytest.mark.parametrize("lang", locales.LANGUAGES)
def test_the_masks_section_refuses_an_encoder_in_the_users_language(allowed, lang):
    at = _page("masks", "masks_model", allowed / "bert", lang)
    assert not at.exception and not at.error, [e.value for e in at.error]
    said = locales.text("masks", "model_not_causal", lang, named="**bert**")
    assert said in [i.value for i in at.info]
    if lang == "zh":
        assert not [w for e in at.get("info") + at.get("success") for w in english_words(e.value, prose=True)]


@pytest.fixture(scope="module")
def mistral(roots):
    return load_checkpoint(roots / "mistral")


@pytest.mark.parametrize("lang", locales.LANGUAGES)
def test_a_model_windowed_on_every_layer_names_no_global_layer(mistral, lang):
    m = masks_view.model_masks(mistral, masks_view.read_layers(mistral, 20), lang=lang)
    assert m.ok
    assert "global layers" not in m.check and "全局层最远" not in m.check
    assert ("window of 6 keys (no global layer)" in m.check) if lang == "en" else ("6 个 key 的滑动窗口" in m.check)


def test_the_mask_in_use_on_a_windowed_layer_is_the_band_and_is_checked(mistral):
    r = lm_view.read(mistral, "The cat sat on the mat because it was tired, and the dog sat too.", 5)
    n = len(r.tokens)
    assert n > 6
    shown = lm_view.causal(r, 0, 0, window=lm_view.layer_window(mistral, 0))
    band = np.asarray(shown.mask.data)
    assert band[n - 1, 0] == 0 and band[n - 1, n - 6] == 1 and band[n - 1, n - 7] == 0  # 6 keys, itself included
    assert "sliding window of 6 keys" in shown.check and "window of 6" in shown.mask.figure.layout.title.text
    plain = lm_view.causal(r, 0, 0, window=None)
    assert "window" not in plain.check and np.asarray(plain.mask.data)[n - 1].all()


def test_a_checkpoint_folder_without_a_chat_template_is_not_called_a_base_model(mistral):
    for lang in locales.LANGUAGES:
        said = lm_view.no_chat(mistral, ["smollm2-135m-instruct"], lang=lang)
        assert "base model" not in said and "基础模型" not in said
        assert "tokenizer_config.json" in said and "chat_template.jinja" in said


BOS_TEMPLATE = "{{ bos_token }}" + CHATML  # a template that names the file's begin-of-text token, as Llama's do


@pytest.mark.parametrize("saved", ["transformers", "named list", "chat_template.json"])
def test_an_instruct_folders_chat_template_is_read_and_written_as_transformers_writes_it(tmp_path, saved):
    """The loader read chat templates from GGUF files alone: an instruction-tuned checkpoint folder had no chat."""
    from transformers import PreTrainedTokenizerFast

    folder = tmp_path / "instruct"
    write_checkpoint(folder, "qwen2")
    tok = PreTrainedTokenizerFast(tokenizer_file=str(folder / "tokenizer.json"), bos_token="<s>", eos_token="</s>")
    tok.chat_template = BOS_TEMPLATE
    tok.save_pretrained(folder)  # transformers 5: chat_template.jinja beside tokenizer_config.json
    if saved != "transformers":
        (folder / "chat_template.jinja").unlink()
        config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
        if saved == "named list":  # as some older tokenizer_config.json files hold several templates
            config["chat_template"] = [
                {"name": "tool_use", "template": "x"},
                {"name": "default", "template": BOS_TEMPLATE},
            ]
        else:
            (folder / "chat_template.json").write_text(json.dumps({"chat_template": BOS_TEMPLATE}), encoding="utf-8")
        (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello there"}]
    theirs = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    assert theirs.startswith("<s><|im_start|>system")
    assert load_checkpoint(folder).chat_prompt(messages) == theirs


def test_an_unreadable_tokenizer_config_leaves_the_model_without_a_chat_not_unloaded(tmp_path):
    folder = tmp_path / "broken"
    write_checkpoint(folder, "qwen2")
    (folder / "tokenizer_config.json").write_bytes(b"{not json")
    tm = load_checkpoint(folder)
    assert tm.chat_template is None and tm.bos is None


@pytest.mark.parametrize(
    "call",
    [
        lambda tm: lm.read(tm, "the cat"),
        lambda tm: next(iter(tm.stream([1, 2], 2))),
        lambda tm: mask_gallery.model_masks(tm, [1, 2, 3]),
    ],
    ids=["lm.read", "TextModel.stream", "mask_gallery.model_masks"],
)
def test_an_encoder_reaching_the_causal_library_is_refused_in_the_users_language(roots, call):
    """They raised English TypeError / ValueError: any page reaching them would have shown English to 中文."""
    with pytest.raises(InputError) as e:
        call(load_checkpoint(roots / "bert"))
    assert e.value.key == "not_causal_lm" and "bert 是编码器" in e.value.message("zh")
    assert not english_words(e.value.message("zh"), prose=True)


def test_the_moe_checkpoint_section_stops_asking_for_a_folder_once_one_is_typed(allowed, monkeypatch):
    """ "No checkpoint with routed experts is cached …: type its folder's path below" stayed above a typed folder."""
    from tx_explorer.views import moe as moe_view

    monkeypatch.setattr(moe_view, "routed_checkpoints", lambda: [])  # a machine with no gpt-oss in its cache
    at = _page("moe", "moe_ckpt_model", allowed / "mistral", "en")
    said = [i.value for i in at.info]
    assert locales.text("moe", "ckpt_dense", "en") in said  # the typed folder was read: a dense model
    assert locales.text("moe", "ckpt_none", "en") not in said


@pytest.mark.parametrize("lang", locales.LANGUAGES)
def test_an_encoder_is_named_with_its_family_once(roots, tmp_path, lang):
    """A folder named after its family is not named twice ("**bert** (bert)"); another name: its family beside it."""
    shutil.copytree(roots / "bert", tmp_path / "reader")
    bert, other = load_checkpoint(roots / "bert"), load_checkpoint(tmp_path / "reader")
    assert model_facts.named(bert, lang) == "**bert**"
    assert model_facts.named(other, lang) == ("**reader** (bert)" if lang == "en" else "**reader**（bert）")
    for tm in (bert, other):
        said = lm_view.refusal(tm, lang=lang), masks_view.refusal(tm, lang=lang)
        assert all(s.startswith(model_facts.named(tm, lang)) and s.count("bert") == 1 for s in said), said
