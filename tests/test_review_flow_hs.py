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
- What a head does, Gemma 3, both languages: the taxonomy's score bars (ticks and hovers), its table's head column and
  the map's hover named heads "L5 H0" with no mark, and the pattern's title read "Layer 5, head 1: …" /
  "第 5 层第 1 个头：…"; now "L5 H0 · global" / "L5 H0 · 全局" and "Layer 5 (global), head 1: …" / "第 5 层（全局）第 1
  个头的注意力" (中文 drops "在你的文本上": with the mark it wrapped onto a second line).
- Information flow, Gemma 3, both languages: the route graph's hovers of an attention edge and of the node after a
  block's attention, the edge views' title and the node's direct-logit table named "block 5" / "第 5 块" / "L5 H0"
  alone; now "block 5 (global)" / "第 5 块（全局）" and "L5 H0 · global". The MLP, the residual entering a block, the
  bars' title beside the views and the lens's title stay unmarked (the last two: the mark wrapped them).
- SmolLM2 and every model without local layers: all of these as before.
"""

from __future__ import annotations

import numpy as np
import plotly.graph_objects as go
import pytest
import torch

from tx_explorer import models
from tx_explorer.analysis import flow
from tx_explorer.analysis import head_science as hs
from tx_explorer.views import flow as flow_view
from tx_explorer.views import head_science as hs_view
from tx_explorer.views import texts
from tx_explorer.viz import flow as vf
from tx_explorer.viz import style

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


# --- every other place that names a layer, marked on Gemma 3 (and only there) -----------------------------------
MARK = {"en": " (global)", "zh": "（全局）"}  # the sentence-like titles' and hovers' form


@pytest.fixture(scope="module")
def gemma3_270m_taxonomy(gemma3_270m):
    return hs_view.taxonomy_numbers(gemma3_270m, TEXT)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gemma3_270m_taxonomy_names_the_global_layers_heads(gemma3_270m, gemma3_270m_taxonomy, lang) -> None:
    result = hs_view.taxonomy_words(gemma3_270m, gemma3_270m_taxonomy, lang=lang)
    heads = gemma3_270m.config.num_heads
    bars, scatter = result.panels[0].figure, result.panels[1].figure
    word = GLOBAL[lang]
    assert f"L5 H0 · {word}" in bars.layout.xaxis.ticktext, bars.layout.xaxis.ticktext  # the ticks …
    assert "L4 H0" in bars.layout.xaxis.ticktext and "L6 H0" in bars.layout.xaxis.ticktext  # … the others as they were
    hovers = list(bars.data[0].customdata)
    assert hovers[5 * heads + 1] == f"L5 H1 · {word}" and hovers[17 * heads + heads - 1] == f"L17 H{heads - 1} · {word}"
    assert sum(word in h for h in hovers) == 3 * heads, hovers  # every head of 5, 11 and 17, no other
    column = result.table[texts("head_science", lang)("col_head")]
    assert column == hovers, "the table names the heads as the bars do"
    points = [h for trace in scatter.data for h in trace.customdata]
    assert sum(h.startswith(f"L11 H2 · {word}<br>") for h in points) == 1  # the map's hover
    assert not any(word in t for trace in scatter.data for t in trace.text)  # its point names kept short


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gemma3_270m_pattern_title_names_a_global_layer(gemma3_270m, lang) -> None:
    T = texts("head_science", lang)
    marked = {
        "en": "Layer 17 (global), head 3: attention on your text",
        "zh": "第 17 层（全局）第 3 个头的注意力",  # on one line, as the unmarked title (below)
    }[lang]
    fig = hs_view.pattern_words(hs_view.pattern_numbers(gemma3_270m, TEXT, 17, 3), lang=lang).figure
    assert fig.layout.title.text == marked
    plain = go.Figure(fig).update_layout(title_text=T("pattern_title", layer=17, head=3))  # SmolLM2's, as before
    lines = lambda f: style.tidy(go.Figure(f)).layout.title.text.count("<br>")  # noqa: E731
    assert lines(fig) == lines(plain), (style.tidy(go.Figure(fig)).layout.title.text, lines(plain))
    local = hs_view.pattern_words(hs_view.pattern_numbers(gemma3_270m, TEXT, 4, 1), lang=lang).figure
    assert local.layout.title.text == T("pattern_title", layer=4, head=1)  # a local layer's as before


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gemma3_270m_flow_edge_titles_name_a_global_block(gemma3_270m, gemma3_270m_flow, lang) -> None:
    an, last = gemma3_270m_flow, len(gemma3_270m_flow.ids) - 1
    split, views = (p.figure for p in flow_view.edge(gemma3_270m, an, 5, last, 0, lang=lang).panels)
    assert views.layout.title.text.startswith({"en": "Block 5 (global), 0 → ", "zh": "第 5 块（全局），0 → "}[lang])
    # the bars' title beside it as it was: marked, it wrapped onto a second line ("… → 11: ., per head")
    assert split.layout.title.text.startswith({"en": "Block 5: 0: ", "zh": "第 5 块：0: "}[lang]), split.layout.title
    lines = lambda f: style.tidy(go.Figure(f), style.PAGE_PX / 2).layout.title.text.count("<br>")  # noqa: E731
    plain = go.Figure(views).update_layout(title_text=views.layout.title.text.replace(MARK[lang], ""))
    assert lines(views) == lines(plain), "the mark wraps the views' title no differently"
    other = flow_view.edge(gemma3_270m, an, 4, last, 0, lang=lang).panels[1].figure.layout.title.text
    assert GLOBAL[lang] not in other, other


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gemma3_270m_flow_node_marks_the_attention_of_a_global_block(gemma3_270m, gemma3_270m_flow, lang) -> None:
    an, last = gemma3_270m_flow, len(gemma3_270m_flow.ids) - 1
    result = flow_view.node(gemma3_270m, an, "m", 5, last, lang=lang)
    title = result.panels[0].figure.layout.title.text  # unmarked: 中文 titles wrapped (the table marks the heads)
    assert {"en": "after the attention of block 5 · ", "zh": "第 5 块注意力之后 · "}[lang] in title, title
    parts = result.table[texts("flow", lang)("col_part")]
    assert parts == [*(f"L5 H{h} · {GLOBAL[lang]}" for h in range(gemma3_270m.config.num_heads)), "L5 MLP"], parts
    for kind, layer in (("x", 5), ("m", 4)):  # the residual entering a global block; a local block's attention
        title = flow_view.node(gemma3_270m, an, kind, layer, last, lang=lang).panels[0].figure.layout.title.text
        assert GLOBAL[lang] not in title, title


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gemma3_270m_route_hovers_mark_a_global_blocks_attention(gemma3_270m, gemma3_270m_flow, lang) -> None:
    fig = flow_view.route(gemma3_270m, gemma3_270m_flow, threshold=0.01, lang=lang).panels[0].figure
    said: dict[str, list] = {"edge": [], "node": []}  # each clickable point's (layer, …) and hover
    for trace in fig.data:
        if trace.customdata is not None:
            for custom, text in zip(trace.customdata, trace.text):
                said.setdefault(custom[0], []).append((tuple(custom[1:]), text))
    edges, nodes = said["edge"], said["node"]
    global_layers = set(gemma3_270m.config.global_layers)
    assert any(layer in global_layers for (layer, _, _), _ in edges), "the route crosses a global block's attention"
    for (layer, _, _), text in edges:
        assert (MARK[lang] in text) == (layer in global_layers), text
    assert any(kind == "m" and layer in global_layers for (kind, layer, _), _ in nodes), len(nodes)
    for (kind, layer, _), text in nodes:
        assert (MARK[lang] in text) == (kind == "m" and layer in global_layers), text


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_model_without_local_layers_marks_no_head_block_or_title(tiny_llama, lang) -> None:
    """As SmolLM2: the taxonomy's heads, the pattern's title and the flow's titles and hovers as before."""
    T, F = texts("head_science", lang), texts("flow", lang)
    layers, heads = tiny_llama.config.num_layers, tiny_llama.config.num_heads
    assert hs_view.head_names(tiny_llama, layers, heads, lang) == [
        f"L{layer} H{head}" for layer in range(layers) for head in range(heads)
    ]
    title = hs_view.pattern_words(hs_view.pattern_numbers(tiny_llama, TEXT, 1, 0), lang=lang).figure.layout.title.text
    assert (
        title == {"en": "Layer 1, head 0: attention on your text", "zh": "第 1 层第 0 个头：在你的文本上的注意力"}[lang]
    )
    an = flow_view.analyse(tiny_llama, "The cat sat on the mat.")
    last = len(an.ids) - 1
    split = flow_view.edge(tiny_llama, an, 1, last, 0, lang=lang).panels[0].figure.layout.title.text
    assert split.startswith({"en": "Block 1: ", "zh": "第 1 块："}[lang]), split
    node = flow_view.node(tiny_llama, an, "m", 1, last, lang=lang)
    after = {"en": "after the attention of block 1 · ", "zh": "第 1 块注意力之后 · "}[lang]
    assert after in node.panels[0].figure.layout.title.text, node.panels[0].figure.layout.title.text
    assert node.table[F("col_part")] == [*(f"L1 H{h}" for h in range(heads)), "L1 MLP"]
    fig = flow_view.route(tiny_llama, an, threshold=0.01, lang=lang).panels[0].figure
    hovers = [t for trace in fig.data if trace.text is not None for t in trace.text]
    assert hovers and not any(MARK[lang] in t for t in hovers), hovers
    taxonomy = hs_view.taxonomy_words(tiny_llama, hs_view.taxonomy_numbers(tiny_llama, TEXT), lang=lang)
    assert taxonomy.table[T("col_head")] == hs_view.head_names(tiny_llama, layers, heads, lang)
