"""Information flow against independent references: the writes rebuild the hidden states of a block-by-block
rerun (float64, every block kind: MHA, GQA, MQA, rotary, ALiBi, sliding window, MoE, attention-only, a pre-norm
encoder, RMSNorms after the sub-layers as in Gemma and OLMo 2), per-source writes add up to each head's output,
random Gemma 3 and OLMo 2 folders rebuilt through their frozen output norms, the proximity shares on hand-made
vectors, the route walk on a hand-made importance, the causal effect against a full patched forward (its rerun from
the query on, over the recorded keys and values of earlier positions, against the rerun of every position, Gemma 3's
local and global layers included), the page's edge computed once, and direct logit attribution summing to the
logits."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

from tests.checkpoints import write_tokenizer
from tests.test_architectures import saved
from tests.test_gemma3 import gemma3_reference
from tx_explorer import models
from tx_explorer.analysis import flow
from tx_explorer.analysis import head_science as hs
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.edit import Edit
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.interop.checkpoint import load_checkpoint
from tx_explorer.models import WEIGHTS_DIR
from tx_explorer.modules.moe_lm import MoECausalLM, MoEConfig
from tx_explorer.modules.transformer import CausalLM, Encoder
from tx_explorer.views import flow as view
from tx_explorer.views import texts

SMALL = dict(vocab_size=2048, max_len=64, dim=48, num_layers=3, num_heads=6)  # tiny-gpt's tokenizer: 2048 ids
TEXT = "The function returns a list of the keys in the dictionary, and the list is sorted."
CONFIGS = {
    "mha-learned-layernorm": TransformerConfig(**SMALL),
    "gqa-rotary-rmsnorm-swiglu": PRESETS["tiny-llama"].replace(**SMALL, num_kv_heads=2),
    "mqa-rotary": PRESETS["tiny-llama"].replace(**SMALL, num_kv_heads=1),
    "alibi-gqa": TransformerConfig(**SMALL, positions="alibi", num_kv_heads=3),
    "sliding-window-qkv-bias": PRESETS["tiny-llama"].replace(**SMALL, sliding_window=4, qkv_bias=True),
    "final-softcap": PRESETS["tiny-llama"].replace(**SMALL, final_softcap=0.5),  # bites: the logits reach ±0.86
    "sandwich-rmsnorm": PRESETS["tiny-llama"].replace(**SMALL, norm_position="sandwich"),  # Gemma 2/3's norms
    "after-rmsnorm": PRESETS["tiny-llama"].replace(**SMALL, norm_position="after"),  # OLMo 2's: outputs only
}


def _text_model(model, kind: str = "causal") -> TextModel:
    tokenizer = Tokenizer.from_file(str(WEIGHTS_DIR / "tiny-gpt" / "tokenizer.json"))
    return TextModel(name="test", model=model, tokenizer=tokenizer, kind=kind, max_len=64, byte_level=True)


def _random(name: str) -> TextModel:
    torch.manual_seed(0)
    if name == "moe":
        model, kind = MoECausalLM(MoEConfig(transformer=TransformerConfig(**SMALL), num_experts=4)), "causal"
    elif name == "encoder-pre-norm":
        model, kind = Encoder(TransformerConfig(**SMALL)), "encoder"
    else:
        model, kind = CausalLM(CONFIGS[name]), "causal"
    with torch.no_grad():  # GPT-2's initialisation leaves the biases at 0: give them values so that they count
        for p in model.parameters():
            if p.dim() == 1:
                p.add_(0.1 * torch.randn_like(p))
    return _text_model(model.double(), kind)


def _hidden_states(tm: TextModel, ids: list[int]) -> torch.Tensor:
    """The reference: the residual after each block, the blocks called one by one (``[L, T, D]``)."""
    x = tm.model.embed(torch.tensor([ids]))
    mask = tm.mask(len(ids))
    out = []
    for block in tm.model.blocks:
        x = block(x, mask)
        out.append(x[0])
    return torch.stack(out)


def _rebuilt(dec: flow.Decomposition) -> torch.Tensor:
    return dec.embed + (dec.heads.sum(1) + dec.attn_bias + dec.mlp).cumsum(0)  # (L, T, D)


@pytest.mark.parametrize("name", [*CONFIGS, "moe", "encoder-pre-norm"])
def test_the_writes_rebuild_every_hidden_state_in_float64(name: str) -> None:
    tm = _random(name)
    ids = tm.encode(TEXT).ids
    dec = flow.decompose(tm, ids)
    reference = _hidden_states(tm, ids)
    assert dec.heads.dtype == torch.float64 and dec.heads.shape == (3, 6, len(ids), 48)
    assert (_rebuilt(dec) - reference).abs().max().item() < 1e-10
    assert (dec.heads.sum(1) + dec.attn_bias - (dec.mid - dec.residual[:-1])).abs().max() < 1e-10
    if CONFIGS.get(name, TransformerConfig()).bias:
        assert dec.attn_bias.abs().max() > 0.01  # the bias is a part of its own, not folded into the heads
    frozen = (dec.attn_scale - 1).abs().amax(), (dec.mlp_scale - 1).abs().amax()
    if flow.frozen_norms(tm):  # the rebuild above would fail without the scales: they are far from 1
        assert min(frozen) > 0.1
    else:
        assert max(frozen) == 0


@pytest.mark.parametrize("name", ["tiny-gpt", "tiny-llama", "tiny-moe"])
def test_the_bundled_models_decompose_within_1e_5(name: str, one_thread) -> None:
    tm = hs.text_model(models.load_model(name))
    ids = tm.encode(TEXT).ids
    dec = flow.decompose(tm, ids)
    assert (_rebuilt(dec) - _hidden_states(tm, ids)).abs().max().item() < 1e-5


@pytest.mark.parametrize(
    "name", ["gqa-rotary-rmsnorm-swiglu", "mqa-rotary", "alibi-gqa", "sliding-window-qkv-bias", "sandwich-rmsnorm"]
)
def test_per_source_writes_add_up_to_each_heads_write(name: str) -> None:
    """Σ_j a_ij v_j W_O^h (values through the GQA/MQA groups, weights under ALiBi or a window) = the head's output
    recorded by the model, projected by its slice of W_O."""
    tm = _random(name)
    dec = flow.decompose(tm, tm.encode(TEXT).ids)
    for layer in range(dec.num_layers):
        writes = flow.token_writes(tm, dec, layer)  # (T, T, D)
        # the weights come through the Trace in float32: the sum matches to float32's precision
        assert (writes.sum(1) - dec.heads[layer].sum(0)).abs().max() < 1e-5
        if name == "sliding-window-qkv-bias":
            i, j = torch.tril_indices(len(writes), len(writes), offset=-4)  # keys outside the window of 4
            assert writes[i, j].abs().max() == 0


def _spied_states(tm: TextModel) -> list[int]:
    """The token counts each run of ``tm.states`` is given from now on (the test deletes the spy)."""
    ran, states = [], tm.states
    tm.states = lambda ids, *a, **k: ran.append(len(ids)) or states(ids, *a, **k)
    return ran


def _assert_same_decomposition(a: flow.Decomposition, b: flow.Decomposition, atol: float) -> None:
    for f in dataclasses.fields(flow.Decomposition):
        if f.name != "cache":
            torch.testing.assert_close(getattr(a, f.name), getattr(b, f.name), rtol=0, atol=atol, msg=f.name)
    assert (a.cache is None) == (b.cache is None)
    if a.cache is not None:  # a joined run's keys and values: the whole run's, every layer and position
        assert a.cache.seen == b.cache.seen == a.num_tokens
        for kind in ("keys", "values"):
            for layer, (x, y) in enumerate(zip(getattr(a.cache, kind), getattr(b.cache, kind), strict=True)):
                torch.testing.assert_close(x, y, rtol=0, atol=atol, msg=f"{kind} {layer}")


@pytest.mark.parametrize("name", [*CONFIGS, "moe", "encoder-pre-norm"])
def test_a_shared_start_is_taken_from_an_earlier_text(name: str) -> None:
    """A text whose first 7 tokens an earlier one shares (edited at its end, or cut short): a decoder runs only the
    rest (at least the last token), over keys and values projected from the earlier residuals; every tensor and
    every share equals the whole text's, to float64's rounding (rotary, ALiBi, a window of 4 keys passed, sandwich
    norms, experts). An encoder (every position reads the later ones) runs whole."""
    tm = _random(name)
    ids = tm.encode(TEXT).ids
    edited = ids[:7] + ids[:6:-1]  # the same start, then the rest reversed
    whole = flow.decompose(tm, ids)
    imp = flow.importance(tm, whole)
    for earlier_ids, shared in ((edited, 7), (ids + ids[:5], len(ids))):
        earlier = flow.decompose(tm, earlier_ids)
        ran = _spied_states(tm)
        try:
            dec = flow.decompose(tm, ids, reuse=(earlier, shared))
        finally:
            del tm.states
        causal = tm.kind == "causal"
        assert ran == [len(ids) - min(shared, len(ids) - 1) if causal else len(ids)]
        _assert_same_decomposition(dec, whole, atol=1e-12 * whole.residual.abs().max().item())
        got = flow.importance(tm, dec, reuse=(flow.importance(tm, earlier), shared))
        for f in dataclasses.fields(flow.Importance):
            np.testing.assert_allclose(getattr(got, f.name), getattr(imp, f.name), rtol=0, atol=1e-6, err_msg=f.name)


@pytest.mark.parametrize("name", ["gqa-rotary-rmsnorm-swiglu", "sliding-window-qkv-bias"])
def test_a_shared_start_reads_the_earlier_runs_own_keys_and_values(name: str) -> None:
    """The earlier run kept its keys and values (``Decomposition.cache``): an edit at the text's end projects none of
    the shared positions again, and an edge's rerun neither; a window that has dropped rows (4 keys, a text of more)
    leaves them to be projected from the residuals, as before."""
    tm = _random(name)
    ids = tm.encode(TEXT).ids
    earlier = flow.decompose(tm, ids[:-1] + ids[:1])
    projected: list[int] = []  # token counts given to the blocks' key/value projections
    for block in tm.model.blocks:
        qkv = block.attn.project_qkv
        block.attn.project_qkv = lambda x, *a, _f=qkv, **k: projected.append(x.shape[1]) or _f(x, *a, **k)
    dec = flow.decompose(tm, ids, reuse=(earlier, len(ids) - 1))
    flow.rerun_without_pieces(tm, dec, 1, 3, len(ids) - 1, torch.zeros(dec.heads.shape[1], tm.config.head_dim).double())
    windowed = tm.config.sliding_window is not None
    assert earlier.cache.complete() is not windowed
    assert (len(ids) - 1 in projected) is windowed, projected  # the shared positions projected again
    assert (3 in projected) is windowed, projected  # the edge's prefix: the positions before its query


def test_the_page_reruns_a_text_from_its_edit() -> None:
    """The page's analysis of a text edited at its end, given the earlier text's: the same numbers as a fresh one,
    and only the tokens after the shared start run."""
    tm = _random("gqa-rotary-rmsnorm-swiglu")
    earlier = view.analyse(tm, TEXT)
    edited = TEXT.replace("sorted.", "kept in order.")
    fresh = view.analyse(tm, edited)
    ran = _spied_states(tm)
    try:
        an = view.analyse(tm, edited, earlier)
    finally:
        del tm.states
    shared = next(i for i, (a, b) in enumerate(zip(earlier.ids, fresh.ids)) if a != b)
    assert shared > 10 and ran == [len(fresh.ids) - shared]
    assert an.ids == fresh.ids and an.tokens == fresh.tokens and an.exactness < 1e-10
    _assert_same_decomposition(an.dec, fresh.dec, atol=1e-12 * fresh.dec.residual.abs().max().item())
    np.testing.assert_allclose(an.imp.attn_tokens, fresh.imp.attn_tokens, rtol=0, atol=1e-6)


def test_proximity_shares_by_hand() -> None:
    y = torch.tensor([[1.0, 1.0]])
    parts = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]]])  # two halves of y, and one pointing away
    prox = flow.proximity(parts, y)  # ‖y‖₁ = 2; ‖y − z‖₁ = 1, 1, 3
    assert prox.tolist() == [[1.0, 1.0, 0.0]]
    assert flow._shares(prox).tolist() == [[0.5, 0.5, 0.0]]
    assert flow._shares(torch.zeros(1, 3)).tolist() == [[0.0, 0.0, 0.0]]  # no part near the whole: no share


def test_importance_shares_sum_to_one_per_update() -> None:
    tm = _random("gqa-rotary-rmsnorm-swiglu")
    imp = flow.importance(tm, flow.decompose(tm, tm.encode(TEXT).ids))
    attn = imp.attn_residual + imp.attn_tokens.sum(-1) + imp.attn_bias
    np.testing.assert_allclose(attn, 1, atol=1e-6)
    np.testing.assert_allclose(imp.mlp_residual + imp.mlp, 1, atol=1e-6)
    assert np.triu(imp.attn_tokens, k=1).max() == 0  # a causal model: no later token reaches an earlier one


def _importance(layers: int = 2, n: int = 3) -> flow.Importance:
    z = np.zeros((layers, n))
    imp = flow.Importance(z.copy(), np.zeros((layers, n, n)), z.copy(), z.copy() + 1.0, z.copy())
    imp.attn_tokens[1, 2, 0] = 0.5  # layer 1: position 2 reads token 0 with share 0.5, its residual the rest
    imp.attn_residual[1, 2] = 0.5
    imp.attn_tokens[0, 0, 0] = 1.0  # layer 0: token 0 reads only itself
    imp.mlp[0, 0], imp.mlp_residual[0, 0] = 0.3, 0.7
    return flow.Importance(imp.attn_residual, imp.attn_tokens, imp.attn_bias, imp.mlp_residual, imp.mlp)


def test_routes_walk_back_from_the_target() -> None:
    g = flow.routes(_importance(), target=-1, threshold=0.04)
    edges = {(e.source, e.target, e.kind): e.weight for e in g.edges}
    assert edges == {
        (("m", 1, 2), ("x", 2, 2), "residual"): 1.0,
        (("x", 1, 2), ("m", 1, 2), "residual"): 0.5,
        (("x", 1, 0), ("m", 1, 2), "attn"): 0.5,
        (("m", 0, 2), ("x", 1, 2), "residual"): 1.0,
        (("m", 0, 0), ("x", 1, 0), "residual"): 0.7,
        (("mlp", 0, 0), ("x", 1, 0), "mlp"): 0.3,
        (("m", 0, 0), ("mlp", 0, 0), "mlp"): 0.3,
        (("x", 0, 0), ("m", 0, 0), "attn"): 1.0,
    }  # position 2's own layer-0 update has no part above the threshold: its route stops there
    assert g.nodes[0] == ("x", 2, 2) and set(g.nodes) == {n for e in edges for n in e[:2]}
    higher = flow.routes(_importance(), target=2, threshold=0.6)
    assert {(e.source, e.target) for e in higher.edges} == {(("m", 1, 2), ("x", 2, 2))}


def test_routes_refuse_positions_and_thresholds_out_of_range() -> None:
    with pytest.raises(InputError, match="outside the text"):
        flow.routes(_importance(), target=3)
    with pytest.raises(InputError, match="threshold"):
        flow.routes(_importance(), threshold=0.0)


@pytest.mark.parametrize("before", [0, 6], ids=["query-at-target", "query-before-target"])
@pytest.mark.parametrize("name", ["gqa-rotary-rmsnorm-swiglu", "final-softcap", "sandwich-rmsnorm"])
def test_the_causal_effect_equals_a_full_patched_forward(name: str, before: int) -> None:
    """The batched rerun from the layer (one row per head, from the query on) against the whole model run with one
    head's output patched, the piece a_ij·v_j taken out of it (with a final soft cap, on the capped logits the
    model outputs)."""
    tm = _random(name)
    ids = tm.encode(TEXT).ids
    dec = flow.decompose(tm, ids)
    layer, query, key, target = 1, len(ids) - 1 - before, 3, len(ids) - 1
    e = flow.edge_heads(tm, dec, layer, query, key, target)
    token = flow.predicted(tm, dec, target)
    x = torch.tensor([ids])
    clean = tm.model(x)[0, target, token]
    for h in range(tm.config.num_heads):
        out = dec.head_out[layer][None].clone()  # (1, H, T, Dh)
        out[0, h, query] -= dec.weights[layer, h, query, key] * dec.values[layer, h, key]
        patched = tm.model(x, edit=Edit().patch_head(layer, h, out))[0, target, token]
        assert e.effect[h] == pytest.approx((patched - clean).item(), abs=1e-6)
    assert e.weight.tolist() == pytest.approx(dec.weights[layer, :, query, key].tolist())
    assert all(-1 <= r <= 1 for r in e.correlations.values())


# (layer, query, key, target): the query at the target, before it (past a window of 4 keys), at the first layer and
# the last, at position 0, and after the target (nothing reaches the target: every row is the reference).
EDGES = [(1, 18, 3, 18), (1, 9, 8, 18), (0, 12, 2, 15), (2, 11, 4, 11), (1, 0, 0, 7), (1, 14, 5, 10)]


def _reruns(tm: TextModel, dec: flow.Decomposition, layer: int, query: int, key: int, target: int):
    """The final hidden states ``[H + 1, D]`` of the rerun from the query (the cache of the earlier positions) and
    of the plain rerun of every position, and the positions each ran."""
    pieces = dec.weights[layer, :, query, key, None] * dec.values[layer, :, key]  # (H, Dh)
    ran, hidden = [], tm.model.hidden

    def spy(x, *args, **kwargs):
        ran.append(x.shape[1])
        return hidden(x, *args, **kwargs)

    tm.model.hidden = spy
    try:
        fast, plain = (flow.rerun_without_pieces(tm, dec, layer, query, target, pieces, prefix=p) for p in (1, 0))
    finally:
        del tm.model.hidden
    return fast, plain, ran


@pytest.mark.parametrize("name", [*CONFIGS, "moe"])
def test_the_rerun_from_the_query_equals_the_rerun_of_every_position(name: str) -> None:
    """Under a causal mask positions before the query cannot change: rerunning only the query … the target, their
    queries at their true positions over the recorded keys and values of the earlier ones (rotary, ALiBi, a sliding
    window, sandwich norms, experts), gives the plain rerun's final hidden states to float64's rounding."""
    tm = _random(name)
    dec = flow.decompose(tm, tm.encode(TEXT).ids)
    for layer, query, key, target in EDGES:
        fast, plain, ran = _reruns(tm, dec, layer, query, key, target)
        assert ran == [target + 1 - min(query, target), target + 1]
        torch.testing.assert_close(fast, plain, rtol=0, atol=1e-12 * plain.abs().max().item())
        change = (fast[:-1] - fast[-1]).abs().max().item()
        if query > target:
            assert change < 1e-12  # no row differs from the reference but by rounding
        elif "window" not in name:  # (a window of 4 keys over 3 layers does not reach 9 positions on)
            assert change > 1e-6


def test_an_encoder_reruns_every_position() -> None:
    """Every position of an encoder reads the query: no shortcut, the rerun is the plain one."""
    tm = _random("encoder-pre-norm")
    dec = flow.decompose(tm, tm.encode(TEXT).ids)
    fast, plain, ran = _reruns(tm, dec, 1, 9, 3, 2)
    assert ran == [dec.num_tokens, dec.num_tokens] and torch.equal(fast, plain)


def test_the_page_computes_an_edge_and_a_node_once(monkeypatch) -> None:
    """A click or the threshold reruns the page: the edge's reruns and the node's read-out are remembered with the
    text's analysis, the prediction computed once for the graph's title and the edge's effect."""
    tm = _random("gqa-rotary-rmsnorm-swiglu")
    an = view.analyse(tm, TEXT)
    calls = []
    for name in ("edge_heads", "node_readout", "predicted"):
        original = getattr(flow, name)
        monkeypatch.setattr(flow, name, lambda *a, f=original, n=name, **k: calls.append(n) or f(*a, **k))
    first = [view.route(tm, an), view.edge(tm, an, 1, 9, 3), view.node(tm, an, "m", 1, 9)]
    again = [view.route(tm, an, threshold=0.1), view.edge(tm, an, 1, 9, 3, target=18), view.node(tm, an, "m", 1, 9)]
    assert calls == ["predicted", "edge_heads", "node_readout"]
    assert first[1].table == again[1].table and first[2].table == again[2].table
    direct = flow.edge_heads(tm, an.dec, 1, 9, 3)
    np.testing.assert_array_equal(direct.effect, first[1].panels[0].data["effect"])


def test_the_effects_logit_is_the_models() -> None:
    """One column of the LM head, then the final soft cap: the model's own logit of that token."""
    tm = _random("final-softcap")
    hidden = torch.randn(3, 5, 48, dtype=torch.float64)
    for token in (0, 17, 2047):
        torch.testing.assert_close(flow.token_logit(tm, hidden, token), tm.model.logits(hidden)[..., token])


def _parts_at(dec: flow.Decomposition, pos: int) -> torch.Tensor:
    """Every write at position ``pos`` ``[1 + L·H + 2L, D]``: the embeddings, each head, each bias, each MLP."""
    return torch.cat([dec.embed[pos][None], dec.heads[:, :, pos].flatten(0, 1), dec.attn_bias[:, pos], dec.mlp[:, pos]])


def test_a_final_soft_cap_is_in_the_lens_and_the_direct_logits_are_before_it() -> None:
    """With a final soft cap c·tanh(z/c) the logit lens at the final residual is the model's own distribution,
    and the direct logit attribution, linear by design, adds up to the logits before the cap."""
    tm = _random("final-softcap")
    ids = tm.encode(TEXT).ids
    dec = flow.decompose(tm, ids)
    pos, cap = len(ids) - 1, tm.config.final_softcap
    logits = tm.model(torch.tensor([ids]))[0, pos]
    r = flow.node_readout(tm, dec, ("x", dec.num_layers, pos))
    top = logits.softmax(-1).topk(len(r.lens_probs))
    assert r.lens_ids.tolist() == top.indices.tolist()
    np.testing.assert_allclose(r.lens_probs, top.values.numpy(), atol=1e-12)
    parts = _parts_at(dec, pos)
    total = flow.direct_logits(tm, dec, parts, pos).sum(0)
    assert total.abs().max() > cap  # the cap bites: the uncapped sum differs from the output
    assert (cap * torch.tanh(total / cap) - logits).abs().max() < 1e-9


def test_rank_correlation() -> None:
    assert flow.rank_correlation(np.array([1, 2, 3]), np.array([10, 30, 20])) == pytest.approx(0.5)
    assert flow.rank_correlation(np.array([1, 2, 3, 4]), np.array([4, 3, 2, 1])) == pytest.approx(-1)
    assert flow.rank_correlation(np.array([1, 1, 2]), np.array([5, 6, 7])) == pytest.approx(np.sqrt(3) / 2)
    assert np.isnan(flow.rank_correlation(np.ones(3), np.arange(3)))


@pytest.mark.parametrize("name", ["mha-learned-layernorm", "gqa-rotary-rmsnorm-swiglu", "after-rmsnorm"])
def test_direct_logit_attribution_adds_up_to_the_logits(name: str) -> None:
    """Every part's direct logits at a position (frozen final norm), plus LayerNorm's β through the head, are the
    model's logits there."""
    tm = _random(name)
    ids = tm.encode(TEXT).ids
    dec = flow.decompose(tm, ids)
    pos = 5
    parts = _parts_at(dec, pos)
    total = flow.direct_logits(tm, dec, parts, pos).sum(0)
    beta = getattr(tm.model.norm, "bias", None)
    if beta is not None:
        total = total + tm.model.head(beta)
    logits = tm.model(torch.tensor([ids]))[0, pos]
    assert (total - logits).abs().max() < 1e-9
    r = flow.node_readout(tm, dec, ("x", dec.num_layers, pos))
    assert r.lens_ids[0] == int(logits.argmax()) and r.parts[-1] == "MLP" and len(r.parts) == 7
    # Each part's pushes are against its own mean over the vocabulary (a shift of every logit alike is no push):
    # up ≥ 0 ≥ down, and the values are the centred attribution's extremes
    block = torch.cat([dec.heads[-1, :, pos], dec.mlp[-1, pos][None]])
    centred = flow.direct_logits(tm, dec, block, pos)
    centred = centred - centred.mean(-1, keepdim=True)
    np.testing.assert_allclose(r.up, centred.topk(r.up.shape[1]).values.numpy(), atol=1e-9)
    np.testing.assert_allclose(r.down, -(-centred).topk(r.down.shape[1]).values.numpy(), atol=1e-9)
    assert (r.up >= 0).all() and (r.down <= 0).all()


def test_post_norm_models_are_refused_with_a_statement() -> None:
    torch.manual_seed(0)
    tm = _text_model(Encoder(PRESETS["bert-base"].replace(**SMALL)), "encoder")
    assert not flow.decomposable(tm) and flow.undecomposable_norm(tm) == "post"
    for position in ("sandwich", "after"):  # a LayerNorm on each sub-layer's output: no per-position scale
        other = _text_model(CausalLM(TransformerConfig(**SMALL, norm_position=position)))
        assert not flow.decomposable(other) and flow.undecomposable_norm(other) == "sandwich"
        rms = _text_model(CausalLM(TransformerConfig(**SMALL, norm_position=position, norm="rmsnorm")))
        assert flow.decomposable(rms) and flow.frozen_norms(rms)  # Gemma 2/3's and OLMo 2's RMSNorms: frozen
    assert not flow.frozen_norms(_random("gqa-rotary-rmsnorm-swiglu"))
    with pytest.raises(InputError, match="post-norm"):
        flow.decompose(tm, tm.encode(TEXT).ids)
    # The advice names the models that have routes, found among those given (not a list typed in the locale,
    # which had left out the page's own default)
    loaded = {"post": tm, "pre": _random("gqa-rotary-rmsnorm-swiglu"), "sandwich-rms": rms, "sandwich-ln": other}
    for lang, sep in (("en", ", "), ("zh", "、")):
        note = view.undecomposable(tm, "bert", list(loaded), loaded.__getitem__, lang=lang)
        assert f"pre{sep}sandwich-rms" in note and "sandwich-ln" not in note.replace("sandwich-rms", "")
        assert note.startswith(texts("flow", lang)("post_norm", model="bert"))


@pytest.fixture(scope="module", params=["gemma3_text", "olmo2"])
def sandwich(request, tmp_path_factory, one_thread) -> TextModel:
    """A random Gemma 3 (sandwich norms, local and global layers, MQA) or OLMo 2 (norms after the sub-layers only)
    folder, saved by transformers and read back by our loader, float32."""
    folder = tmp_path_factory.mktemp(request.param)
    if request.param == "gemma3_text":
        gemma3_reference().save_pretrained(folder)
        write_tokenizer(folder, "llama")
    else:
        saved(folder, "olmo2")
    return load_checkpoint(folder)


def test_frozen_output_norms_rebuild_a_sandwich_models_residual(sandwich: TextModel) -> None:
    """``residual[l + 1] = embed + Σ parts`` to float32 precision: each head's, the bias's and the MLP's write
    through the output norm frozen at this run (w / rms of the sub-layer's whole output, the module's own formula),
    per-token writes summing to the heads' writes; without the scales the rebuild is far off."""
    ids = torch.randint(0, 300, (20,), generator=torch.Generator().manual_seed(2)).tolist()  # past Gemma's window 5
    assert flow.decomposable(sandwich) and flow.frozen_norms(sandwich)
    dec = flow.decompose(sandwich, ids)
    size = dec.residual.abs().max().item()
    tol = dict(rtol=0, atol=1e-6 * size)
    torch.testing.assert_close(_rebuilt(dec), dec.residual[1:], **tol)
    for layer, block in enumerate(sandwich.model.blocks):
        a = torch.einsum("htk,dhk->td", dec.head_out[layer], flow.head_projection(sandwich, layer))  # (T, D)
        torch.testing.assert_close(block.post_attn_norm(a), a * dec.attn_scale[layer], **tol)
        torch.testing.assert_close(dec.heads[layer].sum(0), dec.mid[layer] - dec.residual[layer], **tol)
        writes = flow.token_writes(sandwich, dec, layer)  # (T, T, D)
        torch.testing.assert_close(writes.sum(1), dec.heads[layer].sum(0), **tol)
    raw = dec.embed + ((dec.heads.sum(1) + dec.attn_bias) / dec.attn_scale + dec.mlp / dec.mlp_scale).cumsum(0)
    assert (raw - dec.residual[1:]).abs().max().item() > 1000 * tol["atol"]  # the scales are what makes it exact


def test_the_rerun_from_the_query_on_gemma3_and_olmo2(sandwich: TextModel) -> None:
    """Gemma 3's local layers (a window of 5 keys, rotary of their own θ) and global one, MQA, sandwich norms; OLMo
    2's norms after the sub-layers: the rerun from the query equals the plain one to float32's rounding, effects
    included."""
    ids = torch.randint(0, 300, (20,), generator=torch.Generator().manual_seed(2)).tolist()
    dec = flow.decompose(sandwich, ids)
    for layer, query, key, target in [(1, 12, 9, 19), (5, 19, 2, 19), (0, 8, 8, 15), (6, 17, 13, 17), (3, 18, 16, 12)]:
        layer = min(layer, dec.num_layers - 1)  # OLMo 2's folder has 2 layers, Gemma 3's 7
        fast, plain, ran = _reruns(sandwich, dec, layer, query, key, target)
        assert ran == [target + 1 - min(query, target), target + 1]
        torch.testing.assert_close(fast, plain, rtol=0, atol=1e-5 * plain.abs().max().item())
        token = flow.predicted(sandwich, dec, target)
        logits = [flow.token_logit(sandwich, h, token) for h in (fast, plain)]  # (H + 1,) each
        effects = [t[:-1] - t[-1] for t in logits]  # float32 rounding: of the size of the logits, not of their changes
        torch.testing.assert_close(*effects, rtol=0, atol=1e-5 * logits[1].abs().max().item())
    e = flow.edge_heads(sandwich, dec, 0, 12, 9, 19)
    assert np.abs(e.effect).max() > 1e-4 and np.isfinite(e.effect).all()


def test_the_graph_reaches_the_target_on_tiny_llama(one_thread) -> None:
    tm = hs.text_model(models.load_model("tiny-llama"))
    ids = tm.encode(TEXT).ids
    g = flow.graph(tm, ids, target=-1, threshold=0.04)
    assert g.nodes[0] == ("x", g.num_layers, len(ids) - 1)
    reached = {g.nodes[0]}
    for e in g.edges:  # edges come top-down: each one's target is reached before it is listed
        assert e.target in reached and e.weight >= 0.04
        reached.add(e.source)
    assert reached == set(g.nodes)
    assert len(flow.graph(tm, ids, threshold=0.01).edges) > len(g.edges)


def test_the_graphs_lines_carry_their_own_alpha_not_a_trace_opacity(one_thread) -> None:
    """A trace's ``opacity`` makes the browser paint it into a layer of its own and blend it at every redraw; the
    lines are drawn translucent by their colour's alpha instead (the same 0.75)."""
    tm = hs.text_model(models.load_model("tiny-llama"))
    fig = view.route(tm, view.analyse(tm, TEXT), -1, 0.02).panels[0].figure
    lines = [t for t in fig.data if t.mode == "lines"]
    assert lines and all(t.opacity is None and t.line.color.startswith("rgba(") for t in lines)
    assert {t.line.color.rsplit(",", 1)[1] for t in lines} == {" 0.75)"}


def test_a_pre_norm_encoder_has_routes_and_effects_but_no_lens() -> None:
    """Keys after the query count in an encoder; its effect is the relative change of the target's hidden state."""
    tm = _random("encoder-pre-norm")
    ids = tm.encode(TEXT).ids
    dec = flow.decompose(tm, ids)
    assert np.triu(flow.importance(tm, dec).attn_tokens, k=1).max() > 0
    e = flow.edge_heads(tm, dec, 1, 2, 5, target=0)
    assert e.metric == "‖Δh‖ / ‖h‖" and (e.effect > 0).all() and np.isfinite(e.effect).all()
    with pytest.raises(InputError, match="encoder"):
        flow.node_readout(tm, dec, ("x", 1, 0))


def test_the_node_tables_cells_show_every_token_found_strongest_first() -> None:
    """The direct-logit table's cells: every token the readout found (a grid once showed 3 of 5), the strongest
    first with its value, long tokens cut."""
    tm = _random("gqa-rotary-rmsnorm-swiglu")
    an = view.analyse(tm, TEXT)
    r = flow.node_readout(tm, an.dec, ("m", 1, 9))
    table = view.node(tm, an, "m", 1, 9).table
    for column, values in ((1, r.up), (2, r.down)):
        cells = list(table.values())[column]
        for cell, row_values in zip(cells, values, strict=True):
            items = cell.split(", ")
            assert len(items) == r.up_ids.shape[1] == hs.TOP_K
            assert all(len(i.rsplit(" ", 1)[0]) <= view.CELL_CHARS for i in items)
            shown = [float(i.rsplit(" ", 1)[1].replace("−", "-")) for i in items]  # a true minus in the cells
            assert shown == [float(f"{v:+.2f}") for v in row_values]


@pytest.mark.parametrize("bias", [True, False])
def test_the_notes_name_w_os_bias_only_where_the_model_has_one(bias: bool) -> None:
    """Gemma 3 (no biases) was told each head's, token's, bias's and MLP's write passes through the frozen norm,
    under a formula with + b_O; the check under the graph added "bias's" writes too."""
    torch.manual_seed(0)
    cfg = TransformerConfig(**SMALL, norm="rmsnorm", norm_position="sandwich", bias=bias)
    tm = _text_model(CausalLM(cfg))
    assert flow.frozen_norms(tm) and tm.config.attention_bias[1] == bias
    an = view.analyse(tm, TEXT)
    for lang, word in (("en", "bias"), ("zh", "偏置")):
        frozen, exactness = view.frozen_norms(tm, "m", lang=lang), view.route(tm, an, lang=lang).notes[-1]
        assert ("b_O" in frozen) == (word in frozen) == bias, frozen
        assert exactness.startswith(texts("flow", lang)("exactness").split("{")[0][:10])  # the check's note
        assert (word in exactness) == bias, exactness
