"""gpt-oss's routed experts on the MoE page (issue 41): our ClampedSwiGLUExperts records its router as tiny-moe's MoE
layer does (kind "router", probabilities ``[B, 1, T, E]``, chosen experts and gates), equal to transformers' router
on the same hidden states; the page's section "Routed experts of a checkpoint" shows the held-out section's
statistics for a random gpt-oss folder, and says what it needs when no model with experts is at hand."""

from __future__ import annotations

import math

import pytest
import torch
from conftest import assert_clean, open_page, plotly_specs
from torch.nn import functional as F

from tests.test_architectures import CASES, TINY, saved
from tests.test_sinks_pages import folders  # noqa: F401 (a fixture: a gpt-oss and a llama folder, their root)
from tx_explorer import locales, ui
from tx_explorer.analysis import routing
from tx_explorer.interop.checkpoint import load_checkpoint
from tx_explorer.trace import Trace
from tx_explorer.views import moe as view

pytestmark = pytest.mark.usefixtures("one_thread")
E, K = CASES["gpt_oss"][2]["num_local_experts"], CASES["gpt_oss"][2]["num_experts_per_tok"]
LAYERS = TINY["num_hidden_layers"]


def test_the_traced_router_is_transformers_router_on_the_same_hidden_states(tmp_path):
    folder, ref = saved(tmp_path, "gpt_oss")
    tm = load_checkpoint(folder)
    idx = torch.randint(0, TINY["vocab_size"], (2, 13), generator=torch.Generator().manual_seed(3))
    inputs = []  # each layer's MLP input in transformers: [B·T, D] (GptOssMLP flattens it itself)
    hooks = [
        layer.mlp.register_forward_hook(lambda m, args, out: inputs.append(args[0].reshape(-1, args[0].shape[-1])))
        for layer in ref.model.layers
    ]
    trace = Trace()
    with torch.no_grad():
        ref(idx)
        tm.model(idx, trace)
    for h in hooks:
        h.remove()
    tables = routing.routing_tables(trace)
    assert len(tables) == LAYERS and [r.name for r in trace.select("router")] == ["blocks.0.router", "blocks.1.router"]
    for table, hidden, layer in zip(tables, inputs, ref.model.layers, strict=True):
        assert table.probs.shape == (2, 13, E) and table.chosen.shape == table.gates.shape == (2, 13, K)
        assert not table.dropped.any()  # no capacity
        router = layer.mlp.router
        with torch.no_grad():
            logits, gates, chosen = router(hidden)  # (B·T, E), (B·T, k), (B·T, k)
        exact = F.linear(hidden.double(), router.weight.double(), router.bias.double()).softmax(-1)  # float64
        torch.testing.assert_close(table.probs.reshape(-1, E).double(), exact, atol=1e-5, rtol=0)
        torch.testing.assert_close(exact, logits.double().softmax(-1), atol=1e-6, rtol=0)
        assert torch.equal(table.chosen.reshape(-1, K), chosen)  # the same experts, first choice first
        # gpt-oss's gates (a softmax over the k chosen scores) are the recorded renormalised top-k probabilities
        torch.testing.assert_close(table.gates.reshape(-1, K), gates, atol=1e-5, rtol=0)
        torch.testing.assert_close(table.gates.sum(-1), torch.ones(2, 13))


def test_the_view_gives_every_layers_statistics_of_a_gpt_oss_folder(folders):  # noqa: F811
    tm = load_checkpoint(folders["gpt_oss"])
    assert view.has_experts(tm)
    shown = view.checkpoint(tm)  # the corpus's first tokens: the whole context of the tiny model
    tokens = min(view.CHECKPOINT_TOKENS, tm.max_len)
    assert len(shown.tables) == LAYERS and all(t.chosen.shape == (1, tokens, K) for t in shown.tables)
    stats = shown.statistics
    assert stats.layers == ["layer\u00a00", "layer\u00a01"]  # a no-break space: one line in the table
    assert "drop rate at this factor" not in stats.stats  # no capacity
    for name, values in stats.stats.items():
        assert len(values) == LAYERS and all(math.isfinite(v) for v in values), name
    loads = stats.load.data  # (L, E) assignments
    assert loads.shape == (LAYERS, E) and (loads.sum(axis=1) == tokens * K).all()
    ln_e = math.log(E)
    assert stats.stats["ln E (uniform)"] == [pytest.approx(ln_e)] * LAYERS
    for key in ("per-token router entropy (nats)", "marginal expert entropy (nats)"):
        assert all(0 <= v <= ln_e + 1e-9 for v in stats.stats[key]), key
    for table in shown.tables:  # each token's entropy, not only the mean
        assert (routing.token_entropy(table.probs.reshape(-1, E).double()) <= ln_e + 1e-9).all()
    first, overlap = routing.repetition_baseline(E, K)
    assert f"{first:.3f}" in stats.caption and f"{overlap:.3f}" in stats.caption
    assert f"{tokens} tokens routed, {tokens * K} assignments" in shown.about and "drops nothing" in shown.about
    cooc = view.cooccurrence(shown.tables[0], view.CHECKPOINT_KEY)
    assert cooc.key == "moe_ckpt_cooc" and cooc.data.sum() == tokens and cooc.data.trace() == 0
    zh = view.checkpoint(tm, "The router sends each token to two of four experts.", lang="zh")
    assert "不丢弃" in zh.about and zh.statistics.layers == ["第\u00a00\u00a0层", "第\u00a01\u00a0层"]


def test_a_typed_text_longer_than_the_context_is_cut_and_said(folders):  # noqa: F811
    tm = load_checkpoint(folders["gpt_oss"])
    shown = view.checkpoint(tm, "word " * 200)
    assert shown.tables[0].chosen.shape[1] == tm.max_len
    assert f"only the first {tm.max_len}" in shown.about


def test_a_dense_model_has_no_experts_and_no_router_records(folders):  # noqa: F811
    tm = load_checkpoint(folders["llama"])
    assert not view.has_experts(tm)
    with pytest.raises(LookupError, match="no Mixture-of-Experts layers"):
        view.checkpoint(tm)


def _opened(**state):
    return open_page("moe", moe_open_ckpt=True, **state)


def test_the_page_shows_the_routing_statistics_of_a_gpt_oss_folder(folders, roots):  # noqa: F811
    at = _opened(moe_ckpt_model=ui.FOLDER, moe_ckpt_model_folder=str(folders["gpt_oss"]))
    assert_clean(at)
    texts = [m.value for m in at.markdown]
    assert any("No capacity factor" in t and f"$k = {K}$ per token" in t for t in texts), texts
    none = locales.text("moe", "ckpt_none")
    # the temporary hub cache holds no checkpoint with experts, but a folder is typed: no "type its folder's path"
    assert not any(i.value == none for i in at.info)
    table = at.table[-1].value
    assert len(table) == LAYERS and "drop rate at this factor" not in table.columns
    assert "per-token router entropy (nats)" in table.columns and "k-sets of neighbours overlap" in table.columns
    titles = [s["layout"]["title"]["text"] for s in plotly_specs(at)]
    for title in ("load_title", "entropy_title", "cooc_title"):
        assert locales.text("moe", title) in titles, (title, titles)
    at.selectbox(key="moe_ckpt_layer").set_value(1).run()
    assert_clean(at)


def test_the_page_says_what_it_needs_for_a_model_without_experts(folders, roots):  # noqa: F811
    at = _opened(moe_ckpt_model=ui.FOLDER, moe_ckpt_model_folder=str(folders["llama"]))
    assert_clean(at)
    assert locales.text("moe", "ckpt_dense") in [i.value for i in at.info]
    assert not any(el.key == "moe_ckpt_text" for el in at.text_area)
    at.session_state["lang"] = "zh"
    at.run()
    assert locales.text("moe", "ckpt_dense", "zh") in [i.value for i in at.info]


def test_odd_text_in_the_sections_box_is_routed_or_cut_and_never_rendered(folders, roots):  # noqa: F811
    """The text box shows only when a model with experts is picked, so the bad-input table (no such model in its
    roots) cannot reach it: its odd values here."""
    at = _opened(moe_ckpt_model=ui.FOLDER, moe_ckpt_model_folder=str(folders["gpt_oss"]))
    tokens = min(view.CHECKPOINT_TOKENS, TINY["max_position_embeddings"])
    for text, says in (
        ("<script>alert('x')</script><b>bold</b> **bold** :red[red]", "tokens routed"),
        (" \t\n ", f"{tokens} tokens routed"),  # blank: the corpus
        ("dog 🐕 bites man 👨‍👩‍👧 \u202eevil\x00", "tokens routed"),
        ("word " * 5000, f"only the first {TINY['max_position_embeddings']}"),
    ):
        at.text_area(key="moe_ckpt_text").set_value(text).run()
        assert_clean(at)
        shown = [m.value for m in at.markdown]
        assert any(says in m for m in shown), (text[:20], shown)
        assert not any(bad in m for m in shown for bad in ("<script", "<b>bold", ":red[red]"))
        assert len(at.table[-1].value) == LAYERS
