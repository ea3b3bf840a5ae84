"""Review "costgqa": the cost page's FLOP table for grouped-query / multi-query attention and heads wider than D/H
(H_kv and D_H, or a registered model's numbers read from its config), Gemma 3 270M in the model sizes page's "one
formula since 2017" table, and the language model page's prompt shown without Gemma 3's ``<bos>``."""

from __future__ import annotations

import re

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from tests.conftest import assert_clean, open_page
from tx_explorer import models
from tx_explorer.analysis import cost, memory, params
from tx_explorer.modules.attention import MultiHeadAttention
from tx_explorer.trace import Trace
from tx_explorer.views import cost_of_attention as view
from tx_explorer.views import language_model as lm_view
from tx_explorer.views import model_sizes as sizes

pytestmark = pytest.mark.usefixtures("one_thread")

SMOLLM2_SHAPE = (576, 9, 3, 64)  # D, H, H_kv, D_H
GEMMA3_SHAPE = (640, 4, 1, 256)


# ---- the analysis: four products of any attention shape ------------------------------------------------------


@pytest.mark.parametrize(("d", "h", "kv", "dh"), [(24, 6, 2, None), (20, 4, 1, 8), (16, 4, None, 6), (12, 3, 3, 4)])
def test_four_matmuls_of_shared_and_wide_heads_match_pytorchs_flop_counter(d, h, kv, dh):
    """Independent count: FlopCounterMode on our own MultiHeadAttention (explicit path: a trace makes it materialise
    the weights), grouped-query, multi-query and heads wider or narrower than D/H."""
    n = 7
    layer = MultiHeadAttention(d, h, num_kv_heads=kv, head_dim=dh, bias=False)
    with FlopCounterMode(display=False) as counter, torch.no_grad():
        layer(torch.randn(1, n, d, generator=torch.Generator().manual_seed(0)), trace=Trace())
    products = cost.four_matmuls(n, d, h, kv, dh)
    assert counter.get_total_flops() == sum(mm.flops for mm in products)
    width, keys = dh or d // h, kv or h
    assert products[0].out == (n, (h + 2 * keys) * width) and products[3].left == (n, h * width)


@pytest.mark.parametrize("shape", [SMOLLM2_SHAPE, GEMMA3_SHAPE, (512, 8, None, None)])
def test_the_projections_cost_two_flops_per_weight_of_the_parameter_formula(shape):
    n = 100
    products = cost.four_matmuls(n, *shape)
    proj = sum(mm.flops for mm in products if not mm.quadratic)
    assert proj == 2 * n * params.attention_weights(cost.attention_shape(*shape))


@pytest.mark.parametrize(("shape", "cross"), [(SMOLLM2_SHAPE, 768), (GEMMA3_SHAPE, 800), ((512, 8, None, None), 1024)])
def test_the_crossover_moves_with_shared_and_wide_heads(shape, cross):
    """N = 2D only for the lecture's shape: SmolLM2's shared heads bring it to 768 (not 1,152), Gemma 3's to 800."""
    assert cost.crossover_n(*shape) == cross
    products = cost.four_matmuls(cross, *shape)
    assert sum(m.flops for m in products if m.quadratic) == sum(m.flops for m in products if not m.quadratic)


def test_flops_per_token_counts_qk_and_av_over_the_heads_width():
    """Gemma 3's heads are 4 × 256 = 1,024 wide on D = 640: QKᵀ and AV cost 2·2·N·H·D_H per token, not 2·2·N·D."""
    cfg, n = sizes.GEMMA3, 1000
    per_layer = sum(mm.flops for mm in cost.four_matmuls(n, *GEMMA3_SHAPE)) // n  # N tokens, each reading N keys
    assert params.flops_per_token(cfg, context=n)["attention"] == cfg.num_layers * per_layer


def test_a_bad_key_value_head_count_is_refused_in_words():
    with pytest.raises(ValueError, match="must divide the number of query heads H = 8"):
        cost.four_matmuls(10, 512, 8, 3)


# ---- the view: what sharing key/value heads changes, in numbers -----------------------------------------------


def test_the_sharing_panel_says_what_grouped_query_attention_saves():
    mm = view.matmuls(1024, 576, 9, 3, 64)
    kv = params.kv_weights(cost.attention_shape(576, 9, 3, 64))
    assert kv == 576 * 2 * 3 * 64 == 221_184
    assert "the $H$ = 9 query heads share $H_{kv}$ = 3 key/value heads, 3 query heads to each" in mm.sharing_note
    assert "**221,184** weights instead of 663,552 (3× fewer)" in mm.sharing_note
    cache = memory.kv_cache_bytes(cost.attention_shape(576, 9, 3, 64), 1, 2)
    assert cache == 768 and "**768 B** of keys and values per layer" in mm.sharing_note
    assert mm.sharing["this shape ($H_{kv}$ = 3)"] == ["221,184", "884,736", "452,984,832", "768 B"]
    assert mm.sharing["multi-head ($H_{kv} = H$ = 9)"][0] == "663,552"
    assert "At $N$ = 768, next to where they meet for this shape" in mm.summary
    assert mm.flops.figure.layout.annotations[0].text == "N² products = projections (N = 768)"
    zh = view.matmuls(1024, 576, 9, 3, 64, lang="zh")
    assert "（仅为其 1/3）" in zh.sharing_note and "分组查询注意力" in zh.sharing_note
    assert "在 $N$ = 768 时" in zh.summary


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_sharing_tables_labels_write_their_maths_as_maths(lang: str):
    """The table is drawn by st.table, which renders $…$: every subscript in its labels sits inside one (W_K, H_kv
    had been plain text in a grid, which renders none)."""
    mm = view.matmuls(1024, 576, 9, 3, 64, lang=lang)
    labels = [*mm.sharing, *next(iter(mm.sharing.values()))]
    outside = [label for label in labels if "_" in re.sub(r"\$[^$]*\$", "", label)]
    assert not outside and all(label.count("$") % 2 == 0 for label in labels), outside


def test_gemma3s_wide_heads_are_said_with_their_matrices():
    mm = view.matmuls(1024, *GEMMA3_SHAPE)
    assert "Multi-query attention: all $H$ = 4 query heads read one key/value head." in mm.sharing_note
    assert "$W_Q$ is 640 × 1,024 and $W_O$ 1,024 × 640" in mm.sharing_note
    assert "the four matrices hold 1,638,400 weights, 1.000 × $4D^2$" in mm.sharing_note
    assert mm.rows["product"][0] == "[1024, 640] · [640, 1536] → [1024, 1536]"


def test_the_lectures_shape_reads_as_before():
    """H_kv = 0 and D_H = 0 (the boxes' defaults) are H and D/H: the table, the N = 2D sentences and the label."""
    mm = view.matmuls(16, 512, 8)
    assert mm.rows == view.matmuls(16, 512, 8, 8, 64).rows
    assert "At $N = 2D$ = 1,024 they take as many FLOPs as the projections (50%)." in mm.summary
    assert mm.flops.figure.layout.annotations[0].text == "N² products = projections (N = 2D)"
    assert mm.sharing_note.startswith("#### Sharing key/value heads\n\nEvery query head has its own")


# ---- the page: a model's numbers with one choice, read from its config ----------------------------------------


def test_picking_a_model_fills_the_boxes_from_its_config_and_says_what_was_changed():
    name = "tiny-llama"  # bundled: 4 query heads sharing 2 key/value heads
    cfg = models.load_model(name).config
    at = open_page("cost_of_attention")
    assert_clean(at)
    assert name in at.selectbox(key="cost_shape").options
    at.selectbox(key="cost_shape").set_value(name).run()
    assert_clean(at)
    shown = {k: at.number_input(key=f"cost_{k}").value for k in ("d", "h", "kv", "dh")}
    assert shown == {"d": cfg.dim, "h": cfg.num_heads, "kv": cfg.kv_heads, "dh": cfg.head_dim}
    assert cfg.kv_heads < cfg.num_heads
    read = f"Read from {name}'s config: $D$ = {cfg.dim}, $H$ = {cfg.num_heads}, $H_{{kv}}$ = {cfg.kv_heads}"
    assert any(m.value.startswith(read) for m in at.markdown)
    at.number_input(key="cost_dh").set_value(2 * cfg.head_dim).run()
    assert_clean(at)
    assert at.number_input(key="cost_d").value == cfg.dim  # the choice filled the boxes once, not on every run
    assert any("The boxes no longer hold its $D_H$." in m.value for m in at.markdown)
    at.session_state["lang"] = "zh"
    at.run()
    assert_clean(at)
    assert any("输入框中的 $D_H$ 已不再是它的值。" in m.value for m in at.markdown)


def test_too_many_key_value_heads_are_refused_with_a_message():
    """The row tests/test_bad_input.py derives for cost_kv at its maximum (1,024 with H = 8)."""
    at = open_page("cost_of_attention", cost_kv=1024)
    assert not at.exception
    assert any("must divide the number of query heads H = 8" in e.value for e in at.error)


# ---- model sizes: Gemma 3 in "one formula since 2017" ---------------------------------------------------------


def test_gemma3_joins_one_formula_since_2017_with_its_ratio_from_its_config():
    cfg = sizes.GEMMA3
    ratio = (params.attention_weights(cfg) + params.mlp_weights(cfg)) / (12 * cfg.dim**2)
    table, words = sizes.since_2017(lang="en")
    row = next(r for r in table if r["Model"] == "Gemma 3 270M (2025)")
    assert row["counted ÷ 12·D²"] == f"{ratio:.3f}" == "1.133"
    assert row["attention matrices"] == f"{4 * cfg.dim**2:,}"  # 640 × 1,024 + 2 × 640 × 256 + 1,024 × 640 = 4D²
    assert "Gemma 3 270M (2025): 1.133" in words
    assert "Gemma 3 270M (2025): attention 1.000 × $4D^2$, MLP 1.200 × $8D^2$" in words
    assert "query heads' total width $H D_H / D$ 1 → 1.6" in words and "MLP two matrices → GeGLU" in words
    _, zh = sizes.since_2017(lang="zh")
    assert "Gemma 3 270M（2025）：注意力为 $4D^2$ 的 1.000 倍，MLP 为 $8D^2$ 的 1.200 倍" in zh


# ---- language model: the prompt as typed ----------------------------------------------------------------------


class _Stub:
    """A model's tokenizer in three ids: 0 is a special token, 1 and 2 text."""

    special_ids = frozenset({0})

    @staticmethod
    def decode(ids):
        return "".join({0: "<bos>", 1: "Hi", 2: "!"}[i] for i in ids)


def test_the_continuation_shows_the_prompt_without_its_special_tokens():
    g = type("G", (), {"ids": [0, 1, 2, 0], "prompt_len": 2})()
    assert lm_view.continuation(_Stub(), g) == "Hi ⟶ !<bos>"  # a generated special token stays: the model wrote it


def test_gemma3s_prompt_reads_as_typed_and_its_tokens_keep_bos():
    if "gemma3-270m" not in models.available_models("text"):
        pytest.skip("gemma3-270m is not installed on this machine")
    tm = models.load_model("gemma3-270m")
    g = lm_view.generate(tm, "The cat sat.", 2)
    assert g.tokens[0] == "<bos>"
    assert lm_view.continuation(tm, g).startswith("The cat sat. ⟶ ")
