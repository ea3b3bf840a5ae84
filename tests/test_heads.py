"""Head metrics, similarities, lenses and the query/key inspector, against float64 recomputations."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer

from tx_explorer import models
from tx_explorer.analysis import heads, lm
from tx_explorer.analysis.rollout import rollout
from tx_explorer.config import TransformerConfig
from tx_explorer.data.tokenizer import EOT, train_bpe
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.modules.attention import MultiHeadAttention
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.trace import Trace
from tx_explorer.viz import heads as vh

TOL = {"atol": 1e-5, "rtol": 1e-5}
TEXTS = ["Return the value of the named attribute of the object.", "Open the file and read every line of it."]


pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.fixture(scope="module")
def tm() -> TextModel:
    """A randomly initialised causal TextModel with a small byte-level BPE."""
    torch.manual_seed(0)
    tok: Tokenizer = train_bpe(TEXTS * 20, vocab_size=300)
    cfg = TransformerConfig(vocab_size=300, max_len=24, dim=32, num_layers=3, num_heads=4)
    return TextModel("test", CausalLM(cfg), tok, "causal", cfg.max_len, special_tokens=(EOT,), byte_level=True)


def _random_maps(l: int, h: int, n: int, seed: int = 0, causal: bool = True) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    scores = torch.randn(l, h, n, n, generator=g, dtype=torch.float64) * 2
    if causal:
        scores = scores.masked_fill(~torch.ones(n, n, dtype=torch.bool).tril(), float("-inf"))
    return torch.softmax(scores, -1)


def test_metrics_match_a_loop() -> None:
    maps = _random_maps(2, 3, 6)
    got = heads.head_metrics(maps)
    a = maps.numpy()
    for l in range(2):
        for h in range(3):
            m = a[l, h]
            ent = np.mean([-sum(p * math.log(p) for p in row if p > 0) for row in m])
            dist = np.mean([sum(m[i, j] * abs(i - j) for j in range(6)) for i in range(6)])
            assert got["entropy"][l, h] == pytest.approx(ent)
            assert got["distance"][l, h] == pytest.approx(dist)
            assert got["previous"][l, h] == pytest.approx(np.mean([m[i, i - 1] for i in range(1, 6)]))
            assert got["first"][l, h] == pytest.approx(np.mean([m[i, 0] for i in range(1, 6)]))
            assert got["self"][l, h] == pytest.approx(np.mean([m[i, i] for i in range(1, 6)]))


def test_metrics_of_pure_patterns() -> None:
    n = 7
    eye = torch.eye(n, dtype=torch.float64)
    prev = torch.diag(torch.ones(n - 1, dtype=torch.float64), -1)
    prev[0, 0] = 1.0
    first = torch.zeros(n, n, dtype=torch.float64)
    first[:, 0] = 1.0
    m = heads.head_metrics(torch.stack([eye, prev, first])[None])
    assert m["self"][0].tolist() == [1.0, 0.0, 0.0]
    # For query 1 the previous token *is* token 0, so those two patterns overlap in one row of six.
    assert m["previous"][0].tolist() == pytest.approx([0.0, 1.0, 1.0 / 6])
    assert m["first"][0].tolist() == pytest.approx([0.0, 1.0 / 6, 1.0])
    assert m["entropy"][0].tolist() == [0.0, 0.0, 0.0]
    assert m["distance"][0, 0] == 0 and m["distance"][0, 1] == pytest.approx(6 / 7)
    uniform = torch.full((1, 1, n, n), 1.0 / n, dtype=torch.float64)
    assert heads.head_metrics(uniform)["entropy"][0, 0] == pytest.approx(math.log(n))


def _js_reference(p: np.ndarray, q: np.ndarray) -> float:
    m = 0.5 * (p + q)
    kl = lambda a, b: sum(x * math.log2(x / y) for x, y in zip(a, b) if x > 0)  # noqa: E731
    return math.sqrt(max(0.0, 0.5 * kl(p, m) + 0.5 * kl(q, m)))  # two near-equal rows: rounding may go below 0


distributions = (
    st.lists(st.one_of(st.just(0.0), st.floats(1e-6, 1)), min_size=5, max_size=5)
    .filter(lambda v: sum(v) > 1e-3)
    .map(lambda v: np.array(v) / sum(v))
)


@settings(max_examples=40, deadline=None)
@given(p=distributions, q=distributions, r=distributions)
def test_js_distance_is_a_bounded_metric(p: np.ndarray, q: np.ndarray, r: np.ndarray) -> None:
    d = lambda a, b: float(heads.js_distance(torch.tensor(a), torch.tensor(b)))  # noqa: E731
    # The divergences, not their square roots: √ of float64 rounding (1e-17) is 3e-9 between near-equal rows
    assert d(p, q) ** 2 == pytest.approx(_js_reference(p, q) ** 2, abs=1e-12)
    assert d(p, q) == pytest.approx(d(q, p), abs=1e-12)
    assert 0.0 <= d(p, q) <= 1.0 + 1e-12
    assert d(p, p) == pytest.approx(0.0, abs=1e-7)
    assert d(p, r) <= d(p, q) + d(q, r) + 1e-7


def test_js_distance_of_disjoint_rows_is_one() -> None:
    assert float(heads.js_distance(torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0]))) == pytest.approx(1.0)


def test_head_similarity() -> None:
    maps = _random_maps(2, 3, 9, seed=1)
    maps[1, 2] = maps[0, 0]  # two identical heads
    d = heads.head_similarity(maps)
    assert d.shape == (6, 6)
    np.testing.assert_allclose(d, d.T, atol=1e-12)
    np.testing.assert_allclose(np.diag(d), 0, atol=1e-7)
    assert d[0, 5] == pytest.approx(0.0, abs=1e-7) and d[0, 1] > 0.05
    want = np.mean([_js_reference(maps[0, 0, i].numpy(), maps[0, 1, i].numpy()) for i in range(9)])
    assert d[0, 1] == pytest.approx(want, abs=1e-9)
    assert heads.head_labels(2, 3)[5] == "L1 H2"


def test_keep_tokens_drops_rows_and_columns() -> None:
    maps = np.arange(2 * 16, dtype=float).reshape(2, 4, 4)
    kept = heads.keep_tokens(maps, [False, True, True, False])
    np.testing.assert_array_equal(kept, maps[:, 1:3, 1:3])
    with pytest.raises(ValueError, match="hidden"):
        heads.keep_tokens(maps, [False] * 4)


@pytest.mark.parametrize("kv_heads", [3, 1])  # multi-head and multi-query (each head reads the shared values)
def test_norm_weighted_decomposes_the_attention_output(kv_heads: int) -> None:
    """Σ_h Σ_j α_ij f_h(x_j) + b_O is exactly the attention output — the identity Kobayashi et al. build on."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(24, 3, num_kv_heads=kv_heads).eval()
    x = torch.randn(1, 6, 24)
    trace = Trace()
    out = mha(x, trace=trace)
    w = trace.records[0].weights  # (1, H, N, N)
    f = heads.value_vectors_out(mha, x)  # (1, H, N, D)
    rebuilt = torch.einsum("bhij,bhjd->bid", w, f) + mha.proj.bias
    torch.testing.assert_close(rebuilt, out, **TOL)
    nw = heads.norm_weighted(mha, x, w)
    want = (w[0, :, :, :, None] * f[0, :, None, :, :]).norm(dim=-1)  # ‖α_ij f(x_j)‖, the vector's norm itself
    torch.testing.assert_close(nw[0], want, **TOL)


def test_query_key_inspector_matches_the_model(tm: TextModel) -> None:
    text = TEXTS[0]
    data = heads.analyse(tm, text)
    layer, head, query = 1, 2, 5
    v = heads.inspect_text(tm, text, layer, head, query)
    np.testing.assert_allclose(v.weights, data.maps[layer, head, query], atol=1e-6)
    finite = np.isfinite(v.scores)
    assert finite.sum() == query + 1  # the causal mask hides the future keys
    np.testing.assert_allclose(v.scores[finite], (v.k @ v.q)[: query + 1] / math.sqrt(len(v.q)), atol=1e-5)
    np.testing.assert_allclose(v.out, v.weighted.sum(0), atol=1e-6)
    n = len(data.tokens)
    assert v.shapes[1][1] == f"[4, {n}, 8] · [4, 8, {n}] → [4, {n}, {n}]"
    with pytest.raises(ValueError, match="head"):
        heads.inspect_text(tm, text, 0, 9, 0)


def _random_text_model(**cfg) -> TextModel:
    torch.manual_seed(0)
    tok: Tokenizer = train_bpe(TEXTS * 20, vocab_size=300)
    config = TransformerConfig(vocab_size=300, max_len=24, dim=32, num_layers=2, **cfg)
    return TextModel("test", CausalLM(config), tok, "causal", config.max_len, special_tokens=(EOT,), byte_level=True)


GROUPED = {  # name → a TextModel whose query heads share key/value heads
    "tiny-llama": lambda: models.load_model("tiny-llama"),  # GQA: 4 query heads, 2 key/value heads, rotary
    "mqa": lambda: _random_text_model(num_heads=4, num_kv_heads=1),
    "mqa-alibi": lambda: _random_text_model(num_heads=4, num_kv_heads=1, positions="alibi"),
}


@pytest.mark.parametrize("name", GROUPED)
def test_inspector_reads_each_heads_key_value_group(name: str) -> None:
    """Every head and query: the inspector's weights are the model's own traced map, and its per-head outputs
    through W_O rebuild the attention layer's output (so the values are the group's, not the head index's)."""
    tm = GROUPED[name]()
    text = TEXTS[0]
    data = heads.analyse(tm, text)
    ids = tm.encode(text, heads.MAX_TOKENS).ids
    n = len(ids)
    for layer, x in enumerate(tm.attention_inputs(ids)):
        mha = tm.attention_module(layer)
        assert mha.num_kv_heads < mha.num_heads
        with torch.no_grad():
            want = mha(x, mask=tm.mask(n))[0]  # (N, D): the layer's own output
        for query in range(n):
            views = [heads.inspect_query(mha, x, h, query, tm.mask(n)) for h in range(mha.num_heads)]
            for h, v in enumerate(views):
                np.testing.assert_allclose(v.weights, data.maps[layer, h, query], atol=1e-5)
                assert v.kv_head == h // (mha.num_heads // mha.num_kv_heads)
            y = torch.as_tensor(np.concatenate([v.out for v in views]))  # (H·Dh,): heads side by side
            rebuilt = mha.proj(y)
            torch.testing.assert_close(rebuilt, want[query], atol=1e-4, rtol=1e-4)
    w_qkv = tm.attention_module(0).qkv.weight  # (D + 2·H_kv·Dh, D)
    d, fused = w_qkv.shape[1], w_qkv.shape[0]
    assert fused < 3 * d  # the shape row reads the weights: fewer key/value columns than 3·D
    assert views[0].shapes[0][1] == f"[{n}, {d}] · [{d}, {fused}] → [{n}, {fused}]"
    h, hkv, dh = mha.num_heads, mha.num_kv_heads, mha.head_dim
    assert views[0].shapes[1][1] == f"[{h}, {n}, {dh}] · [{hkv}, {dh}, {n}] → [{h}, {n}, {n}]"


@pytest.mark.parametrize(
    "cfg",
    [
        {"num_heads": 4},  # one key/value head per query head, biases, learned positions
        {"num_heads": 4, "num_kv_heads": 2, "positions": "rotary", "bias": False},  # GQA, keys turned
        {"num_heads": 4, "num_kv_heads": 1, "positions": "alibi"},  # MQA, the bias on the scores only
        # QK-norm before rotary: per head (Gemma 3, Qwen3) and over a token's key heads together (OLMo 2)
        {"num_heads": 4, "num_kv_heads": 1, "positions": "rotary", "bias": False, "qk_norm": True},
        {"num_heads": 4, "num_kv_heads": 2, "positions": "rotary", "qk_norm": True, "qk_norm_width": "full"},
    ],
)
def test_keys_and_values_are_x_times_their_rows_of_the_fused_weight(cfg) -> None:
    """§2.4 checked: the rows the check names, read off a float64 projection of the whole fused weight split by
    reshaping (not by slicing rows), and the model's keys and values within float32 rounding."""
    tm = _random_text_model(**cfg)
    x, n = heads.attention_input(tm, TEXTS[0], 1)
    mha = tm.attention_module(1)
    if mha.qk_norm is not None:  # a γ other than ones, so that the check must apply it
        with torch.no_grad():
            mha.qk_norm.k.weight.uniform_(0.5, 2.0, generator=torch.Generator().manual_seed(1))
    dh, h, hkv = mha.head_dim, mha.num_heads, mha.num_kv_heads
    w, b = mha.qkv.weight.double(), mha.qkv.bias
    full = torch.nn.functional.linear(x[0].double(), w, None if b is None else b.double())  # (N, (H + 2·H_kv)·Dh)
    by_head = {
        "k": full[:, h * dh : (h + hkv) * dh].reshape(n, hkv, dh),
        "v": full[:, (h + hkv) * dh :].reshape(n, hkv, dh),
    }

    def rows(lo_hi: tuple[int, int]) -> torch.Tensor:
        lo, hi = lo_hi
        return x[0].double() @ w[lo:hi].T + (0 if b is None else b.double()[lo:hi])

    for head in range(h):
        check = heads.projection_check(mha, x, head)
        g = head // (h // hkv)
        assert check.kv_head == g and check.readers == tuple(r for r in range(h) if r // (h // hkv) == g)
        torch.testing.assert_close(rows(check.v_rows), by_head["v"][:, g])
        if cfg.get("positions") != "rotary":  # unturned keys: the named rows are the head's W_K
            torch.testing.assert_close(rows(check.k_rows), by_head["k"][:, g])
        assert check.holds and max(check.k_diff, check.v_diff) < 1e-5 and check.scale > 0
        assert check.qk_norm == cfg.get("qk_norm", False)


def test_the_check_fails_when_the_qk_norms_weight_is_not_the_one_the_model_applies(monkeypatch) -> None:
    """The keys rebuilt by hand take γ from the norm: a model applying another γ than the one it holds fails."""
    tm = _random_text_model(num_heads=4, num_kv_heads=2, positions="rotary", qk_norm=True)
    mha = tm.attention_module(0)
    x, _ = heads.attention_input(tm, TEXTS[0], 0)
    assert heads.projection_check(mha, x, 0).holds
    norm = mha.qk_norm.k
    monkeypatch.setattr(norm, "forward", lambda t: 1.5 * type(norm).forward(norm, t))
    check = heads.projection_check(mha, x, 0)
    assert not check.holds and check.k_diff > 1e-2 and check.v_diff < 1e-5


def test_a_model_that_changes_its_keys_after_the_projection_fails_the_check(monkeypatch) -> None:
    tm = _random_text_model(num_heads=4)
    mha = tm.attention_module(0)
    x, _ = heads.attention_input(tm, TEXTS[0], 0)
    project = mha.project_qkv
    monkeypatch.setattr(mha, "project_qkv", lambda x: (lambda q, k, v: (q, 2 * k, v))(*project(x)))
    check = heads.projection_check(mha, x, 0)
    assert not check.holds and check.k_diff > 1e-2 and check.v_diff < 1e-5


def test_rollout_maps(tm: TextModel) -> None:
    data = heads.analyse(tm, TEXTS[1])
    roll = heads.rollout_maps(data.maps)
    assert roll.shape == (3, *data.maps.shape[-2:])
    np.testing.assert_allclose(roll.sum(-1), 1.0, atol=1e-5)
    full = rollout(torch.as_tensor(data.maps)[:, None])[0].numpy()
    np.testing.assert_allclose(roll[-1], full, atol=1e-6)
    np.testing.assert_allclose(np.triu(roll[-1], 1), 0.0, atol=0)  # causal in, causal out
    nw = heads.norm_weighted_maps(tm, TEXTS[1], data.maps)
    assert nw.shape == data.maps.shape
    np.testing.assert_allclose(nw.sum(-1), 1.0, atol=1e-5)


def test_generated_tokens_attention_equals_the_step_by_step_attention(tm: TextModel) -> None:
    prompt = tm.encode(TEXTS[0]).ids[:5]
    g = lm.generate(tm, prompt, 6, temperature=1.0, seed=3)
    assert g.ids[:5] == prompt and len(g.ids) == 11 and not g.prompt_cut
    for t in range(5, 11):  # the step that produced token t saw tokens 0…t−1
        trace = Trace()
        tm.run(g.ids[:t], trace=trace)
        step = trace.stack()[:, 0, :, -1].numpy()  # (L, H, t): the newest query's row
        np.testing.assert_allclose(g.maps[:, :, t - 1, :t], step, atol=1e-6)
    assert lm.above_diagonal_max(g.maps) == 0.0
    assert lm.generate(tm, prompt, 6, temperature=1.0, seed=3).ids == g.ids


def test_generation_keeps_within_the_context(tm: TextModel) -> None:
    g = lm.generate(tm, list(range(40)), 10, greedy=True)
    assert g.prompt_cut and g.prompt_len == 14 and len(g.ids) == 24
    with pytest.raises(ValueError, match="“New tokens” must lie between 1 and 23"):
        lm.generate(tm, [1, 2], 24)


def test_reading_losses_are_the_cross_entropy(tm: TextModel) -> None:
    r = lm.read(tm, TEXTS[1], k=5)
    logits = tm.run(r.ids).double()
    want = [-torch.log_softmax(logits[0, t], -1)[r.ids[t + 1]].item() for t in range(len(r.ids) - 1)]
    np.testing.assert_allclose(r.losses, want, atol=1e-6)
    assert r.top_probs.shape == (len(r.ids), 5) and np.all(np.diff(r.top_probs, axis=1) <= 0)
    np.testing.assert_allclose(r.embeddings, tm.model.embed.tok_embed.weight[r.ids].numpy())


# --- figures ------------------------------------------------------------------------------------------


def test_pool_peaks_keeps_the_peaks() -> None:
    maps = np.zeros((1, 1, 512, 500), dtype=np.float32)
    maps[0, 0, 100, 7] = 0.9
    maps[0, 0, 101, 6] = -0.95  # the same 8 × 8 block: the stronger value wins, with its sign
    maps[0, 0, 511, 499] = 0.5  # the last, partly padded block
    small, k = vh.pool_peaks(maps, 64)
    assert k == 8 and small.shape == (1, 1, 64, 63)
    assert small[0, 0, 12, 0] == pytest.approx(-0.95) and small[0, 0, 63, 62] == pytest.approx(0.5)
    assert np.count_nonzero(small) == 2
    assert vh.pool_peaks(maps[..., :30, :30], 64)[1] == 1


def test_large_maps_name_axes_once_and_pool_beyond_the_detail_size() -> None:
    tokens = [f"t{i % 7}" for i in range(300)]  # repeated tokens: names must stay unique
    w = np.random.default_rng(0).dirichlet(np.ones(300), 300).astype(np.float32)
    fig = vh.attention_map(w, tokens, tokens)
    assert fig.data[0].customdata is None and len(set(fig.data[0].y)) == 300 and fig.data[0].y[8] == "8: t1"
    pooled = vh.attention_map(w, tokens, tokens, max_side=100)
    assert np.asarray(pooled.data[0].z).shape == (100, 100) and pooled.data[0].x[1] == "3–5"
    assert "max-pooled 3×3" in pooled.layout.title.text


def test_figures_build() -> None:
    maps = _random_maps(6, 12, 100).numpy()
    grid = vh.head_grid(maps, title="grid", cells=48)
    image = grid.data[0]  # the mosaic: one PNG; 100 tokens pooled 3 × 3 → 34 cells a head, then a one-cell gap
    assert "max-pooled" in grid.layout.title.text and image.type == "image"
    assert grid.layout.xaxis.tickvals[-1] == 11 * 35 + 33 / 2  # the last head's column centred on its tile
    tokens = [f"t{i}" for i in range(100)]
    lines = vh.attention_lines(maps[0, 0], tokens, max_lines=500)
    drawn = sum(np.isfinite(np.asarray(t.x, dtype=float)).sum() // 2 for t in lines.data if t.mode == "lines")
    assert 0 < drawn <= 500
    focus = vh.attention_lines(maps[0, 0], tokens, focus=50, min_weight=0.0)
    assert sum(np.isfinite(np.asarray(t.x, dtype=float)).sum() // 2 for t in focus.data if t.mode == "lines") == 51
    vh.similarity_matrix(np.zeros((3, 3)), ["a", "b", "c"])


# ---- finding the head: pattern scores and the ranking ------------------------------------------------------------
def _pure(n: int, key_of) -> np.ndarray:
    """A map ``[N, N]`` whose query i puts all its weight on ``key_of(i)``."""
    m = np.zeros((n, n))
    for i in range(n):
        m[i, key_of(i)] = 1.0
    return m


REPEATED = [7, 11, 12, 13, 14, 11, 12, 13, 14]  # a first token, then four tokens twice (second copy at 5…8)


def test_pattern_scores_of_pure_heads() -> None:
    n = len(REPEATED)
    previous = _pure(n, lambda i: max(i - 1, 0))
    sink = _pure(n, lambda i: 0)
    induction = _pure(n, lambda i: i - 3 if i >= 5 else 0)  # second copy: the token after the first occurrence
    duplicate = _pure(n, lambda i: i - 4 if i >= 5 else 0)
    s = heads.pattern_scores(np.stack([previous, sink, induction, duplicate])[None], REPEATED)  # (1, 4, N, N)
    assert set(heads.PATTERNS) <= set(s) and all(v.shape == (1, 4) for v in s.values())
    assert s["previous"][0].tolist() == pytest.approx([1.0, 1 / 8, 1 / 8, 1 / 8])  # query 1's previous is token 0
    assert s["first"][0].tolist() == pytest.approx([1 / 8, 1.0, 4 / 8, 4 / 8])
    assert s["induction"][0].tolist() == pytest.approx([0.0, 0.0, 1.0, 0.0])
    assert s["duplicate"][0].tolist() == pytest.approx([0.0, 0.0, 0.0, 1.0])
    assert s["self"][0].tolist() == pytest.approx([0.0, 0.0, 0.0, 0.0])
    assert heads.top_heads(s["induction"], 1) == [(0, 2, 1.0)]


def test_leaving_out_the_sink_renormalises_the_rows() -> None:
    n = len(REPEATED)
    half = 0.5 * _pure(n, lambda i: 0) + 0.5 * _pure(n, lambda i: i - 3 if i >= 5 else i)  # half on the sink
    s = heads.pattern_scores(half[None, None], REPEATED)
    kept = heads.pattern_scores(half[None, None], REPEATED, skip_first=True)
    assert s["induction"][0, 0] == pytest.approx(0.5) and kept["induction"][0, 0] == pytest.approx(1.0)
    assert kept["first"][0, 0] == s["first"][0, 0] == pytest.approx(0.5)  # the share left out, shown apart
    all_sink = heads.pattern_scores(_pure(n, lambda i: 0)[None, None], REPEATED, skip_first=True)
    assert all_sink["previous"][0, 0] == 0.0  # nothing left once the sink is out


def test_leaving_out_the_first_token_renormalises_rows_that_a_learned_sink_left_below_one() -> None:
    """gpt-oss: a learned sink took 0.4 of each row, token 0 0.3, the induction key 0.3 — left out, token 0's rows
    renormalise over what they give keys 1…, 0.3 / (0.6 − 0.3) = 1, not 0.3 / (1 − 0.3)."""
    n = len(REPEATED)
    rows = 0.3 * _pure(n, lambda i: 0) + 0.3 * _pure(n, lambda i: i - 3 if i >= 5 else i)  # (N, N), sums 0.6
    kept = heads.pattern_scores(rows[None, None], REPEATED, skip_first=True)
    assert kept["induction"][0, 0] == pytest.approx(1.0)
    assert heads.rank(rows[None, None], 6, 3, skip_first=True)[0][2] == pytest.approx(1.0)


def test_pattern_scores_match_a_loop_and_name_missing_patterns() -> None:
    ids = [3, 1, 2, 1, 2, 2, 4, 1]
    maps = _random_maps(2, 3, len(ids), seed=4).numpy()
    s = heads.pattern_scores(maps, ids)
    for l in range(2):
        for h in range(3):
            a, dup, ind = maps[l, h], [], []
            for i in range(1, len(ids)):
                d = [a[i, j] for j in range(i) if ids[j] == ids[i]]
                k = [a[i, j] for j in range(1, i + 1) if ids[j - 1] == ids[i]]
                dup += [sum(d)] if d else []
                ind += [sum(k)] if k else []
            assert s["duplicate"][l, h] == pytest.approx(np.mean(dup))
            assert s["induction"][l, h] == pytest.approx(np.mean(ind))
    unique = heads.pattern_scores(maps[..., :3, :3], [5, 6, 7])
    assert np.isnan(unique["duplicate"]).all() and np.isnan(unique["induction"]).all()
    with pytest.raises(ValueError, match="token ids"):
        heads.pattern_scores(maps, ids[:-1])


def test_rank_orders_every_head_and_refuses_what_a_causal_model_cannot_see() -> None:
    maps = _random_maps(3, 4, 6, seed=2).numpy()
    ranked = heads.rank(maps, 5, 2)
    assert len(ranked) == 12 and [w for *_, w in ranked] == sorted(maps[..., 5, 2].ravel(), reverse=True)
    layer, head, w = ranked[0]
    assert maps[layer, head, 5, 2] == w
    assert heads.rank(maps, 5, 2, top=3) == ranked[:3]
    kept = heads.rank(maps, 5, 2, skip_first=True)
    assert {(l, h): w for l, h, w in kept}[(layer, head)] == pytest.approx(w / (1 - maps[layer, head, 5, 0]))
    for query, key, error in ((2, 3, "heads_look_ahead"), (6, 0, "heads_token_range"), (-1, 0, "heads_token_range")):
        with pytest.raises(InputError) as info:
            heads.rank(maps, query, key)
        assert info.value.key == error
    with pytest.raises(InputError, match="first token"):
        heads.rank(maps, 5, 0, skip_first=True)
    assert len(heads.rank(_random_maps(1, 2, 4, causal=False).numpy(), 1, 3, causal=False)) == 2  # an encoder


def test_top_heads_puts_missing_scores_last() -> None:
    scores = np.array([[0.2, np.nan], [0.9, 0.1]])
    assert heads.top_heads(scores)[:3] == [(1, 0, 0.9), (0, 0, 0.2), (1, 1, 0.1)]
    assert np.isnan(heads.top_heads(scores)[3][2])


def test_pattern_scores_find_the_taxonomys_heads_on_smollm2() -> None:
    """On the taxonomy's own repeated random tokens, scores read from the token ids over every query equal the
    taxonomy's positional ones over the second copy (no id repeats inside a copy), and name the same heads."""
    from tx_explorer.analysis import head_science as hs
    from tx_explorer.model_cache import shared_model

    tm = shared_model("smollm2-135m-instruct")
    ids = hs.repeated_random_tokens(tm, 24)
    assert len(set(ids)) == 25  # a first token and 24 distinct ones
    trace = Trace()
    tm.run(ids, trace=trace)
    s = heads.pattern_scores(trace.stack()[:, 0], ids)  # (L, H) each
    taxonomy = hs.taxonomy(tm, tm.encode("The cat sat on the mat.").ids, repeat_length=24)
    for name in ("induction", "duplicate"):
        assert np.allclose(s[name], taxonomy.scores[name], atol=1e-5), name
        assert [b[:2] for b in heads.top_heads(s[name], 3)] == [b[:2] for b in hs.strongest(taxonomy.scores[name], 3)]
    assert heads.top_heads(s["induction"], 1)[0][2] >= 0.8  # README: induction heads scoring 0.97


def test_the_notebook_ranks_every_head_by_a_pattern_on_the_text_written_twice() -> None:
    from tx_explorer import explore
    from tx_explorer.views import multihead as view

    text = "one two three four five"
    figs = explore.heads("tiny-gpt", text, repeat=True, pattern="induction", skip_first=True)
    tm = models.load_model("tiny-gpt")
    data = heads.analyse(tm, view.repeated(text))
    s = view.shown(data)
    queries = view.repeat_queries(tm, text, s)
    assert data.ids[len(data.ids) - len(queries) :] == data.ids[: len(queries)]  # the second copy repeats the first
    want = heads.pattern_scores(data.maps, data.ids, skip_first=True, queries=queries)["induction"]
    np.testing.assert_allclose(np.array(figs["mh_rank"].data[0].z, dtype=float), want, atol=1e-9)
    assert {"mh_rank_top0", "mh_rank_top2"} <= set(figs)


@pytest.mark.parametrize("name", ["tiny-gpt", "minilm-l6"])
def test_the_second_copy_of_a_repeated_text_is_its_own_tokens_again(name: str) -> None:
    """Whatever wraps the text ([CLS] … [SEP]) or joins the copies (a line break), the queries scored on the text
    written twice are the second copy's tokens, with special tokens shown or hidden."""
    from tx_explorer.views import multihead as view

    if name not in models.available_models("text"):
        pytest.skip(f"{name} is not installed")
    tm, text = models.load_model(name), "one two three four five"
    enc = tm.encode(text)
    single = [t for t, special in zip(enc.tokens, enc.special) if not special]
    data = heads.analyse(tm, view.repeated(text))
    for hide in (False, True):
        s = view.shown(data, hide)
        assert [s.labels[i] for i in view.repeat_queries(tm, text, s)] == single


@pytest.mark.parametrize("name", ["tiny-gpt", "tiny-llama", "minilm-l6", "tiny-moe"])
def test_maps_alone_are_the_forwards_maps(name):
    """``TextModel.maps`` stops a causal model before its LM head: the same records, bitwise, as the whole forward."""
    tm = models.load_model(name)
    tm = getattr(tm, "text", tm)  # the MoE bundle's text model
    enc = tm.encode("The cat sat on the mat because it was warm")
    _, full = tm.attention(enc)
    alone = tm.maps(enc.ids, enc.tokens)
    about = lambda t: [(r.name, r.kind, r.layer, r.row_labels, r.col_labels) for r in t.records]  # noqa: E731
    assert about(alone) == about(full)
    assert all(torch.equal(a.weights, b.weights) for a, b in zip(alone.records, full.records))
    assert len(alone.records) >= tm.config.num_layers


def test_the_text_picture_colours_the_renormalised_weights_the_ranking_used() -> None:
    """With the first token left out, the colours are the weights of the ranked numbers (0.72 on key 1, none on the
    sink), not the raw map whose sink outweighs them (SmolLM2's "Return" shown darkest beside a note saying it was
    left out)."""
    from tx_explorer.views import multihead as view

    row = np.array([0.6, 0.288, 0.112])  # the query's raw weights: most on the sink, 0.72 of the rest on key 1
    m = np.tril(np.full((3, 3), 1.0))
    m /= m.sum(-1, keepdims=True)
    m[2] = row
    s = view.Shown(m[None, None], ["Return", "▁a", "."], [True] * 3, ["L0 H0"], False, [1, 2, 3])
    raw = view.text_picture(s, 2, [(0, 0)])
    assert raw.data.tolist() == pytest.approx(row.tolist())
    kept = view.text_picture(s, 2, [(0, 0)], skip_first=True)
    assert kept.data.tolist() == pytest.approx([0.0, 0.72, 0.28])
    assert kept.data[1] == pytest.approx(view.search_pair(s, 2, 1, skip_first=True).table["Score"][0], abs=1e-4)
    assert "first token left out" in kept.figure.layout.title.text


def test_the_chinese_page_names_its_pickers_and_lenses_in_chinese_and_breaks_its_titles_between_phrases() -> None:
    """The query pickers and the rollout lens were English on the 中文 page; the weighted values' title broke
    inside "（按列求和…）". Titles, their numbers filled in, end on more than a character at a column's width."""
    import re

    from tx_explorer import locales
    from tx_explorer.viz import style

    table = locales.table("multihead")
    for key in ("query", "query_token", "key_token", "lens_rollout"):
        assert re.search(r"[\u4e00-\u9fff]", table[key]["zh"]), key
    for key, entry in table.items():
        if "title" in key:
            zh = re.sub(r"\{(layer|head|g|n|a|b)\}", "17", entry["zh"])
            lines = style.wrap(re.sub(r"\{[a-z_]+\}", "▁order", zh), 0.9 * style.NARROWEST * style.COLUMN_PX).split(
                "<br>"
            )
            assert all(len(re.sub(r"<[^>]+>", "", line).strip()) > 2 for line in lines), (key, lines)
            assert "按列<br>" not in "<br>".join(lines), key
