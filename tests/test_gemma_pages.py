"""Gemma 3 270M on the pages that show what is new in it (issue 41 item 3): its own mask per layer (local layers
stop at 512 keys, global ones do not), its KV cache past the window (local layers keep 512 rows, cached = uncached),
the atlas's tiles under its windows, the head tools (taxonomy, multi-head, flow through its frozen output norms) and
the pages drawing it. Each test loads the real model (the model tier)."""

from __future__ import annotations

import json

import pytest
import torch
from conftest import assert_clean, open_page, open_sections, plotly_specs

from tx_explorer import locales, models
from tx_explorer.analysis import atlas, flow
from tx_explorer.analysis import kv_cache as kv
from tx_explorer.analysis import mask_gallery as mg
from tx_explorer.analysis import qk_norm as qk
from tx_explorer.analysis.memory import kv_cache_bytes
from tx_explorer.modules.cache import KVCache
from tx_explorer.trace import Trace
from tx_explorer.views import flow as flow_view
from tx_explorer.views import model_sizes as sizes

pytestmark = pytest.mark.usefixtures("one_thread")
NAME = "gemma3-270m"
N = 600  # past the 512-token window of the local layers
WINDOW = 512
GLOBAL = (5, 11, 17)


@pytest.fixture(scope="module")
def gemma3_270m():
    if NAME not in models.available_models("text"):
        pytest.skip(f"{NAME} is not installed on this machine (make run assembles it)")
    return models.load_model(NAME)


@pytest.fixture(scope="module")
def ids(gemma3_270m) -> list[int]:
    return atlas.corpus_ids(gemma3_270m, N)


def test_each_layers_mask_is_the_one_its_weights_obey_on_gemma3_270m(gemma3_270m, ids):
    found = mg.model_masks(gemma3_270m, ids)
    assert [layer.window for layer in found.layers] == [None if i in GLOBAL else WINDOW for i in range(18)]
    assert [layer.theta for layer in found.layers] == [1e6 if i in GLOBAL else 1e4 for i in range(18)]
    assert all(layer.max_hidden == 0.0 for layer in found.layers)
    assert [layer.reach for layer in found.layers] == [N - 1 if i in GLOBAL else WINDOW - 1 for i in range(18)]
    assert sorted(found.shown) == [0, 5]  # the first local and the first global layer
    assert not found.sinks and all(abs(layer.row_min - 1) < 1e-5 for layer in found.layers)  # no learned sinks
    assert all(shown.shape == (120, 120) for shown in found.shown.values())  # blocks of 5 positions, no sink column
    # independently, from one ordinary traced forward over the whole text: a local layer's row i gives weight to
    # exactly min(i + 1, 512) keys, a global layer's to all i + 1 (softmax leaves no visible weight at 0 here)
    trace = Trace()
    with torch.no_grad():
        gemma3_270m.model(torch.tensor([ids]), trace)
    maps = trace.stack(name_contains="attn")[:, 0]  # (18, 4, N, N)
    seen = (maps > 0).sum(dim=-1)  # (18, 4, N)
    rows = torch.arange(1, N + 1)
    for layer in range(18):
        expected = rows if layer in GLOBAL else rows.clamp(max=WINDOW)
        assert torch.equal(seen[layer], expected.expand(4, N)), layer


def test_kv_cache_keeps_512_rows_on_local_layers_and_decodes_as_uncached_on_gemma3_270m(gemma3_270m, ids):
    model, cfg = gemma3_270m.model.eval(), gemma3_270m.config
    prefill, steps = 500, 30  # the steps carry the cache past the window
    cache = KVCache()
    with torch.no_grad():
        cached = [gemma3_270m.model(torch.tensor([ids[:prefill]]), cache=cache)[0, -1]]
        for t in range(prefill, prefill + steps):
            cached.append(model(torch.tensor([[ids[t]]]), cache=cache)[0, -1])
        full = model(torch.tensor([ids[: prefill + steps]]))[0]  # (T, V): no cache
    seen = prefill + steps
    assert [k.shape[2] for k in cache.keys] == [seen if i in GLOBAL else WINDOW for i in range(18)]
    assert cache.nbytes == kv_cache_bytes(cfg, seen) == 2 * 1 * 256 * 4 * (15 * WINDOW + 3 * seen)
    diff = max(float((c - full[prefill - 1 + i]).abs().max()) for i, c in enumerate(cached))
    assert diff <= kv.tolerance(cfg, float(full.abs().max()))
    assert all(int(c.argmax()) == int(full[prefill - 1 + i].argmax()) for i, c in enumerate(cached))


def test_atlas_tiles_honour_the_local_windows_on_gemma3_270m(gemma3_270m, ids):
    stats = atlas.head_stats(gemma3_270m, ids, window=WINDOW)
    distance = stats.stat("distance")  # (18, 4, N): mean i − j, at most 511 where the window holds
    local = [i for i in range(18) if i not in GLOBAL]
    assert float(distance[local].max()) <= WINDOW - 1
    assert float(stats.stat("local")[local].min()) > 1 - 1e-5  # every local layer's weight lies in its window
    with torch.no_grad():  # the tiled pass computed what the model does
        hidden = gemma3_270m.model.hidden(gemma3_270m.model.embed(torch.tensor([ids])), gemma3_270m.mask(N), None)
    torch.testing.assert_close(stats.hidden, hidden[0], rtol=0, atol=1e-4 * float(hidden.abs().max()))


def test_masks_kv_cache_and_atlas_pages_draw_gemma3_270m(gemma3_270m):
    at = open_page("masks", timeout=600, masks_model=NAME)
    assert_clean(at)
    assert any("local layers (15, window 512)" in s.value and "exactly 0" in s.value for s in at.success)
    assert len(at.table[-1].value) == 18  # a row per layer
    at = open_page("kv_cache", timeout=600, kv_model=NAME)
    open_sections(at, "kv_cache").run()
    assert_clean(at)
    own = at.table[0].value.iloc[-1]  # the model's own pattern of local and global layers, formula = tensors
    assert own.iloc[-1] == "✓" and "(15 · " in own.iloc[2]
    assert any("15 of this model's 18 layers keep only the last 512 rows" in i.value for i in at.info)
    at = open_page("atlas", timeout=600, atlas_model=NAME, **{f"atlas_tokens_{NAME}": N})  # past the window
    assert_clean(at)
    kinds = next(m.value for m in at.markdown if m.value.startswith("**Local and global layers.**"))
    assert "no query's mean distance exceeds" in kinds and "(5, 11, 17) see all 600" in kinds


def test_qk_norm_fixes_the_scores_scale_on_gemma3_270m(gemma3_270m):
    found = qk.qk_norm_effect(gemma3_270m, atlas.corpus_ids(gemma3_270m, qk.QK_TOKENS))
    assert len(found) == 18
    normed = [r.normed.spread for r in found]
    raw = [r.raw.spread for r in found]
    # with the norm every layer's spread lies within a factor of 3 of the others; without it, over 1000 apart
    assert max(normed) / min(normed) < 3 < 1000 < max(raw) / min(raw)
    assert found[0].raw.entropy < 0.01 < 1 < found[0].normed.entropy  # layer 0 without the norm: one-hot rows
    # the normed side is what the model computes: its entropies from the model's own traced weights
    trace = Trace()
    with torch.no_grad():
        gemma3_270m.model(torch.tensor([atlas.corpus_ids(gemma3_270m, qk.QK_TOKENS)]), trace)
    a = trace.stack(name_contains="attn")[:, 0].double()  # (18, 4, N, N)
    entropy = -torch.special.xlogy(a, a).sum(dim=-1).mean(dim=(1, 2))  # (18,)
    torch.testing.assert_close(
        entropy, torch.tensor([r.normed.entropy for r in found], dtype=torch.double), atol=1e-4, rtol=0
    )
    at = open_page("operator", timeout=600, op_open_qknorm=True, op_qk_model=NAME)
    assert_clean(at)
    assert any("with the norm the scores' standard deviation" in m.value for m in at.markdown)


def test_model_sizes_counts_gemma3_270m_as_loaded_and_shows_the_vocabulary_share(gemma3_270m):
    loaded = sum(p.numel() for p in gemma3_270m.model.parameters())  # tied head: counted once
    formula, measured = sizes.counted(sizes.GEMMA3.to_dict(), "causal")
    assert formula == measured and sum(measured.values()) == loaded == 268_098_176
    assert measured["embeddings"] == 262_144 * 640  # 62.6 % of the model
    for field in ("dim", "num_layers", "num_heads", "head_dim", "kv_heads", "mlp_hidden", "vocab_size", "qk_norm"):
        assert getattr(sizes.GEMMA3, field) == getattr(gemma3_270m.config, field), field
    at = open_page("model_sizes", timeout=600)
    assert_clean(at)
    assert any("268,098,176" in m.value and "62.6%" in m.value for m in at.markdown)


def test_the_head_tools_draw_gemma3_270m(gemma3_270m):
    """The head tools on Gemma 3 beside SmolLM2 (issue 41): its 18 layers × 4 query heads reading one key/value head
    (heads 256 wide on D = 640, sandwich norms, local and global layers) in the taxonomy, in every view of the
    multi-head page, and on the flow page, which draws its routes and says that its output norms are frozen."""
    layers, heads, mqa = 18, 4, "4 query heads share one key/value head"
    assert (gemma3_270m.config.num_layers, gemma3_270m.config.num_heads, gemma3_270m.config.kv_heads) == (18, 4, 1)
    at = open_page("head_science", timeout=600, hs_view="taxonomy", hs_model=NAME)
    assert_clean(at)
    assert any(mqa in c.value for c in at.caption)
    assert any("Strongest induction heads" in c.value for c in at.caption)
    assert len(at.dataframe[0].value) == layers * heads  # a row per head

    at = open_page("multihead", timeout=600, mh_model=NAME, mh_text_example_code="def add(a, b):\n    return a + b")
    assert_clean(at)
    facts = " ".join(c.value for c in at.caption)
    assert f"{layers} layers × {heads} heads" in facts and mqa in facts
    grid = plotly_specs(at)[0]
    assert grid["layout"]["title"]["text"].startswith(f"{layers} layers × {heads} heads")
    assert "key/value head 0" in json.dumps(grid)  # each thumbnail names the one key/value head its head reads
    assert not any("Learned attention sinks" in i.value for i in at.info)  # Gemma's rows sum to 1
    for tab in ("head", "search", "compare", "qk"):
        at.segmented_control(key="mh_view").set_value(tab).run()
        assert_clean(at)
    assert any("Query heads 0, 1, 2, 3 all read these columns" in m.value for m in at.markdown)  # the qk inspector
    at.segmented_control(key="mh_view").set_value("head").run()
    at.radio(key="mh_lens").set_value("norm").run()  # ‖αf(x)‖ through W_O's 4 × 256 columns
    assert_clean(at)

    at = open_page("flow", timeout=600, flow_model=NAME)
    assert_clean(at)
    assert any(mqa in c.value for c in at.caption)
    assert any("frozen at this run" in i.value and "linearisation" in i.value for i in at.info)
    assert len(plotly_specs(at)) == 4  # the routes, an edge's two views, a node's lens
    assert any("rebuild the model's own residual stream after each of the 18 layers" in c.value for c in at.caption)


def test_flow_decomposes_gemma3_270m_through_its_frozen_norms(gemma3_270m):
    """Gemma 3's sandwich norms frozen at the run (about 20 tokens): the parts add up to the model's own residual
    after every block (the page's live check, relative to the residual's size: Gemma's reaches 10⁵), per-token
    writes add up to the heads', and the routes, an edge's heads and a node's read-out are drawn."""
    an = flow_view.analyse(gemma3_270m, locales.table("flow")["text_default"]["en"])
    dec = an.dec
    assert flow.frozen_norms(gemma3_270m) and 15 <= dec.num_tokens <= 25
    assert an.relative < 1e-5
    assert (dec.attn_scale - 1).abs().max() > 1 and (dec.mlp_scale - 1).abs().max() > 1  # far from the identity
    size = float(dec.residual.abs().max())
    for layer in (0, 5):  # a local and a global layer
        writes = flow.token_writes(gemma3_270m, dec, layer)  # (T, T, D)
        assert float((writes.sum(1) - dec.heads[layer].sum(0)).abs().max()) < 1e-6 * size
    result = flow_view.route(gemma3_270m, an)
    g = flow.routes(an.imp)
    kinds = {k: sum(e.kind == k for e in g.edges) for k in ("attn", "residual", "mlp")}
    assert g.nodes[0] == ("x", 18, dec.num_tokens - 1) and min(kinds.values()) > 0
    assert result.panels[0].figure.data and result.edge is not None
    assert flow_view.edge(gemma3_270m, an, *result.edge).table
    assert flow_view.node(gemma3_270m, an, "x", 18, -1).table
