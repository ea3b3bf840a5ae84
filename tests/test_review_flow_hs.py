"""Review of *Information flow* and *What a head does* on Gemma 3 270M (then SmolLM2). What a visitor met before each
fix:

- Information flow, Gemma 3, both languages: the route graph's layer axis ticked every other layer (L0, L2, …, L16),
  so Gemma 3's global layers 5, 11 and 17 were never named, where every layers × heads map of the app names them
  "L5 · global" / "L5 · 全局".
- Information flow, Gemma 3, both languages: the edge section defined the write norm as ‖a_ij v_j W_O^h‖ and the
  scatter's axis said "‖a·v W_O‖", but on a model with norms after its sub-layers the figure and the table measure
  the write through the frozen norm, ‖(a_ij v_j W_O^h) ⊙ w / rms(a_i)‖, whose per-dimension scale can reorder the
  heads: the formula beside the numbers was not the one that made them.
- Information flow, English: the node's logit lens was titled "Logit lens at after the attention of block 5 · …".
- What a head does, Gemma 3, both languages: activation patching's residual map (layer × position) and the logit
  lens (rows after each sub-layer) named no global layer, while the patching heads map beside them did
  ("L5 · global").
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tx_explorer import models
from tx_explorer.analysis import flow
from tx_explorer.analysis import head_science as hs
from tx_explorer.views import flow as flow_view
from tx_explorer.views import head_science as hs_view
from tx_explorer.views import texts
from tx_explorer.viz import flow as vf

GLOBAL = {"en": "global", "zh": "全局"}
TEXT = "If the file is missing, the function returns None."


@pytest.fixture(scope="module")
def gemma3_270m():
    torch.set_num_threads(1)
    return hs.text_model(models.load_model("gemma3-270m"))


@pytest.fixture(scope="module")
def gemma3_270m_flow(gemma3_270m):
    return flow_view.analyse(gemma3_270m, TEXT)


@pytest.fixture(scope="module")
def tiny_llama():
    return hs.text_model(models.load_model("tiny-llama"))


def test_the_route_graph_ticks_each_marked_layer_beside_its_every_other_layer_ticks() -> None:
    nodes = [("x", 18, 0)]
    fig = vf.route_graph(
        nodes, [], ["a"], 18, node_hover=["n"], edge_hover=[], names={}, title="t", x_title="x", y_title="y",
        layer_label="L{layer}", final_label="final", layer_marks={5: "global", 11: "global", 17: "global"},
    )  # fmt: skip
    ticks = dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext))
    assert ticks[10] == "L5 · global" and ticks[22] == "L11 · global" and ticks[34] == "L17 · global", ticks
    assert ticks[0] == "L0" and ticks[4] == "L2" and ticks[36] == "final", ticks  # the other ticks as they were


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gemma3_270m_route_graph_names_its_global_layers(gemma3_270m, gemma3_270m_flow, lang) -> None:
    fig = flow_view.route(gemma3_270m, gemma3_270m_flow, lang=lang).panels[0].figure
    ticks = dict(zip(fig.layout.yaxis.tickvals, fig.layout.yaxis.ticktext))
    for layer in gemma3_270m.config.global_layers:  # (5, 11, 17)
        assert ticks.get(2 * layer) == f"L{layer} · {GLOBAL[lang]}", ticks


def test_gemma3_270m_write_norm_is_the_frozen_norms_and_the_page_says_so(gemma3_270m, gemma3_270m_flow) -> None:
    tm, an = gemma3_270m, gemma3_270m_flow
    layer, query, key = 5, len(an.ids) - 1, 0  # a global layer, the last token reading <bos>
    e = flow.edge_heads(tm, an.dec, layer, query, key)
    dec = an.dec
    pieces = dec.weights[layer, :, query, key][:, None] * dec.values[layer, :, key]  # (H, Dh)
    bare = torch.einsum("hk,dhk->hd", pieces, flow.head_projection(tm, layer))  # a_ij v_j W_O^h, (H, D)
    scaled = (bare * dec.attn_scale[layer, query]).norm(dim=-1).numpy()
    np.testing.assert_allclose(e.norm, scaled, rtol=1e-4)  # what the figure and the table show …
    assert not np.allclose(e.norm, bare.norm(dim=-1).numpy(), rtol=1e-2)  # … is not ‖a_ij v_j W_O^h‖
    for lang in ("en", "zh"):
        intro = flow_view.edge_intro(tm, lang=lang)
        assert r"\odot w / \mathrm{rms}(a_i)" in intro, intro
        fig = flow_view.edge(tm, an, layer, query, key, lang=lang).panels[1].figure
        assert "⊙ w / rms" in fig.layout.yaxis.title.text, fig.layout.yaxis.title.text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_pre_norm_model_keeps_the_plain_write_norm(tiny_llama, lang) -> None:
    assert not flow.frozen_norms(tiny_llama)
    assert flow_view.edge_intro(tiny_llama, lang=lang) == texts("flow", lang)("edge_intro")
    an = flow_view.analyse(tiny_llama, "The cat sat on the mat.")
    fig = flow_view.edge(tiny_llama, an, 1, len(an.ids) - 1, 0, lang=lang).panels[1].figure
    assert fig.layout.yaxis.title.text == texts("flow", lang)("axis_norm")


def test_the_node_lens_title_reads_as_english(gemma3_270m, gemma3_270m_flow) -> None:
    an, last = gemma3_270m_flow, len(gemma3_270m_flow.ids) - 1
    for kind, layer in (("m", 5), ("x", 3), ("x", an.dec.num_layers)):
        title = flow_view.node(gemma3_270m, an, kind, layer, last).panels[0].figure.layout.title.text
        assert title.startswith("Logit lens: ") and " at after " not in title, title


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gemma3_270m_patching_residual_rows_name_the_global_layers(gemma3_270m, lang) -> None:
    ids = hs.encode(gemma3_270m, "It is not", hs_view.LIMIT)
    layers, heads = gemma3_270m.config.num_layers, gemma3_270m.config.num_heads
    p = hs.Patching(np.zeros((layers, len(ids))), np.zeros((layers, heads)), 1.0, 0.0, "m")
    result = hs_view.patching_words(gemma3_270m, hs_view.Patched(p, ids, ids), lang=lang)
    residual, per_head = (panel.figure for panel in result.panels)
    assert list(residual.layout.yaxis.ticktext) == list(per_head.layout.yaxis.ticktext), "the two maps name rows alike"
    assert residual.layout.yaxis.ticktext[5] == f"L5 · {GLOBAL[lang]}"
    assert f"L11 · {GLOBAL[lang]}" in residual.data[0].text[11][0]  # the hover too


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gemma3_270m_lens_rows_name_the_global_layers_attention(gemma3_270m, lang) -> None:
    m = hs_view.lens_numbers(gemma3_270m, "The cat sat.")
    fig = hs_view.lens_words(gemma3_270m, m, "kl", lang=lang).panels[0].figure
    rows = list(fig.layout.yaxis.ticktext)
    T = texts("head_science", lang)
    assert rows[10] == f"{T('row_attn', layer=5)} · {GLOBAL[lang]}", rows[10]  # after layer 5's attention
    assert rows[11] == T("row_mlp", layer=5), rows[11]  # the MLP is no more global than any other
    assert sum(GLOBAL[lang] in r for r in rows) == len(gemma3_270m.config.global_layers)


def test_a_model_without_local_layers_marks_no_row(tiny_llama) -> None:
    """As SmolLM2: the patching and lens rows as before."""
    layers, heads = tiny_llama.config.num_layers, tiny_llama.config.num_heads
    assert hs_view.lens_rows(tiny_llama, 2) == [
        "L0 after attention",
        "L0 after MLP",
        "L1 after attention",
        "L1 after MLP",
    ]
    ids = hs.encode(tiny_llama, "It is not", hs_view.LIMIT)
    p = hs.Patching(np.zeros((layers, len(ids))), np.zeros((layers, heads)), 1.0, 0.0, "m")
    fig = hs_view.patching_words(tiny_llama, hs_view.Patched(p, ids, ids)).panels[0].figure
    assert list(fig.layout.yaxis.ticktext) == [f"L{i}" for i in range(layers)]
