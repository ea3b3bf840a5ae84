"""Review of the atlas, circuit and block-roles pages: what a student read wrong there, each pinned by a test that
fails on the words the pages said before."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tx_explorer import locales, models
from tx_explorer.config import PRESETS
from tx_explorer.families import circuit
from tx_explorer.families.text import TextModel
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.views import atlas as atlas_view
from tx_explorer.views import block_roles as roles_view
from tx_explorer.views import circuit as circuit_view
from tx_explorer.viz import circuit as vc


@pytest.fixture(scope="module")
def local_global():
    """A random tiny model of local and global layers (Gemma 3's pattern): layers 0 and 2 local, 1 and 3 global."""
    torch.manual_seed(0)
    window, n = 16, 96
    cfg = PRESETS["tiny-llama"].replace(max_len=n, sliding_window=window, layer_types=("sliding", "full") * 2)
    tokenizer = models.load_model("tiny-llama").tokenizer
    tm = TextModel(name="random", model=CausalLM(cfg), tokenizer=tokenizer, kind="causal", max_len=n)
    ids = torch.randint(0, cfg.vocab_size, (n,), generator=torch.Generator().manual_seed(1)).tolist()
    return tm, atlas_view.compute(tm, ids, window=8)


def test_layer_kinds_count_the_local_layers_and_list_the_global_ones_in_each_language(local_global):
    """Gemma 3 on the atlas: "The local layers (15) see the last 512 keys" read as layer 15, beside "the global
    layers (5, 11, 17)" that are layer numbers; and 中文 listed them "第 5, 11, 17 层" with ASCII commas."""
    tm, stats = local_global
    en, zh = (atlas_view.layer_kinds(tm, stats, lang=lang) for lang in ("en", "zh"))
    assert "The 2 local layers see the last 16 keys" in en and "(2)" not in en
    assert "global layers (1, 3)" in en
    assert "第 1、3 层" in zh and "1, 3" not in zh


def test_the_needle_sentence_s_last_token_is_the_one_before_its_span_s_end():
    """The span is [start, end): "tokens 40 … 47" for 7 planted tokens named one token too many."""
    found = atlas_view.NeedleTest(0.5, 100, (40, 47), np.zeros((2, 2)), "no idea", "4417", False)
    en, zh = (atlas_view.needle(found, lang=lang).notes[0] for lang in ("en", "zh"))
    assert en.startswith("The sentence occupies tokens 40 … 46;") and "0.0700" in en
    assert zh.startswith("这句话占据第 40 … 46 个 token")


@pytest.mark.parametrize("lang", locales.LANGUAGES)
def test_changing_the_last_token_is_said_to_move_nothing_not_confirmed_as_moving_later_ones(lang):
    """The last token changed: "Confirmed: … moves other tokens only through attention — later tokens by up to 0",
    a confirmation of a move that cannot happen (no later token exists)."""
    tm = models.load_model("tiny-gpt")
    text = "The cat sat on the mat because it was warm."
    last = len(tm.encode(text, roles_view.MAX_TOKENS).ids) - 1
    said = roles_view.probe(tm, text, last, lang=lang).verdict
    assert "later tokens by up to" not in said and "后面的 token 最多变化" not in said, said
    assert said.startswith(locales.text("block_roles", "verdict_last", lang).split("{")[0]), said
    earlier = roles_view.probe(tm, text, last - 1, lang=lang).verdict  # one before: the usual confirmation
    assert earlier.startswith(locales.text("block_roles", "verdict_ok", lang).split("{")[0])


def test_the_llm_scatter_s_hover_names_each_score():
    """Hovering a head of SmolLM2 showed "L18H6 / 0.012, 0.917": which number was the induction score?"""
    previous, induction = np.array([[0.1, 0.2]]), np.array([[0.9, 0.0]])
    fig = vc.head_scores({"m": (previous, induction)}, x_title="前一个 token 得分", y_title="归纳得分")
    template = fig.data[0].hovertemplate
    assert "前一个 token 得分 %{x:.3f}" in template and "归纳得分 %{y:.3f}" in template


def test_the_recipe_says_every_window_is_random_rather_than_zero_per_cent_from_the_corpus():
    """The shipped run draws no window from the corpus: "0 % of the windows from tiny-gpt's corpus, the others
    random tokens" made a student look for the corpus windows."""
    bundle = circuit.load()
    assert bundle.training["settings"]["text_share"] == 0
    en, zh = (circuit_view.formation(bundle, lang=lang).settings for lang in ("en", "zh"))
    assert "every window random tokens" in en and "0 % of the windows" not in en
    assert "所有窗口都是随机 token" in zh and "其余为随机 token" not in zh


def test_the_probe_s_intro_does_not_count_a_sandwich_block_s_mlp_norm_as_the_second():
    """Gemma 3's block norms attention's output too: the MLP reads the third of its four norms, not "the second
    RMSNorm" the intro said (true of SmolLM2's pre-norm block only)."""
    from tx_explorer.views import model_facts

    cfg = PRESETS["tiny-llama"].replace(norm_position="sandwich")
    tokenizer = models.load_model("tiny-llama").tokenizer
    tm = TextModel(name="sandwich", model=CausalLM(cfg), tokenizer=tokenizer, kind="causal", max_len=cfg.max_len)
    en, zh = (model_facts.say("block_roles", "probe_intro", tm, lang) for lang in ("en", "zh"))
    assert "the MLP (after the RMSNorm in front of it)" in en and "second" not in en
    assert "MLP（先经过它前面的那个 RMSNorm）" in zh and "第二个" not in zh
