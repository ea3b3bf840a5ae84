"""KV cache stepper and FlashAttention's IO counts: cached = uncached decoding for every model with a
cache, the bytes formula = the cache tensors' bytes, published numbers as their configs state them, and the IO
counts against a direct tally of each algorithm's reads and writes."""

from __future__ import annotations

import dataclasses
import math
import re

import pytest
import torch

from tx_explorer import locales, models
from tx_explorer.analysis import flash_io
from tx_explorer.analysis import kv_cache as kv
from tx_explorer.analysis.memory import kv_cache_bytes
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.modules.cache import KVCache
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.views import kv_cache as view
from tx_explorer.viz import kv_cache as vk

SMALL = TransformerConfig(vocab_size=40, max_len=24, dim=16, num_layers=2, num_heads=4)
SHAPES = {
    "learned-mha": SMALL,
    "sinusoidal": SMALL.replace(positions="sinusoidal"),
    "rotary-gqa": SMALL.replace(positions="rotary", num_kv_heads=2, norm="rmsnorm", mlp="swiglu", bias=False),
    "alibi-mqa": SMALL.replace(positions="alibi", num_kv_heads=1),
    "rotary-window": SMALL.replace(positions="rotary", num_kv_heads=2, sliding_window=5),
    "none": SMALL.replace(positions="none"),
    "tiny-llama": PRESETS["tiny-llama"].replace(vocab_size=64),
    # Gemma 3 in small: a local layer (window 5, its own θ) then a global one, one K/V head of width 8 ≠ D / H,
    # QK-norm and sandwich norms; decoding runs past the window, where the local layer's cache stops growing
    "gemma3-mixed": SMALL.replace(
        positions="rotary",
        num_kv_heads=1,
        head_width=8,
        sliding_window=5,
        layer_types=("sliding", "full"),
        rope_local_theta=100.0,
        qk_norm=True,
        norm="rmsnorm",
        norm_position="sandwich",
    ),
}


pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


def _model(cfg: TransformerConfig, seed: int = 0) -> CausalLM:
    torch.manual_seed(seed)
    return CausalLM(cfg).eval()


@pytest.mark.parametrize("shape", list(SHAPES))
def test_cached_decoding_equals_uncached(shape):
    cfg = SHAPES[shape]
    d = kv.decode(_model(cfg), [3, 1, 4, 1, 5, 9, 2], 9)
    assert len(d.ids) == 16 and len(d.steps) == 15
    assert d.identical and d.max_diff <= kv.LOGIT_TOLERANCE
    ref = _model(cfg).generate(torch.tensor([[3, 1, 4, 1, 5, 9, 2]]), 9, greedy=True)[0].tolist()
    assert d.ids == ref  # the same tokens as uncached greedy generation


def test_the_tolerance_grows_with_depth_and_logit_size_but_a_broken_cache_fails_it():
    cfg = SMALL.replace(num_layers=30)
    assert kv.tolerance(cfg) == pytest.approx(7.5e-4) and kv.tolerance(cfg, 37.0) == pytest.approx(7.5e-4 * 3.7)
    assert kv.tolerance(SMALL, 5.0) == kv.LOGIT_TOLERANCE  # small logits: the plain bound
    model = _model(SMALL)
    good = kv.decode(model, [1, 2, 3, 4], 3)
    assert good.logit_scale > 0 and good.max_diff <= kv.tolerance(SMALL, good.logit_scale)
    real = KVCache.update  # a cache that hands back its keys and values 1.5 times too large
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            KVCache, "update", lambda self, layer, k, v, w=None: tuple(1.5 * t for t in real(self, layer, k, v, w))
        )
        bad = kv.decode(model, [1, 2, 3, 4], 3)
    assert bad.max_diff > 100 * kv.tolerance(SMALL, bad.logit_scale)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_formula_bytes_equal_the_cache_tensors_at_every_step(shape):
    cfg = SHAPES[shape]
    d = kv.decode(_model(cfg), list(range(10)), 4)
    uniform = cfg.layer_types is None
    for s in d.steps:
        assert s.nbytes == s.formula
        assert s.rows == min(s.position + 1, (cfg.sliding_window if uniform else None) or math.inf)
    # the formula written out, independently of kv_cache_bytes: with local and global layers (gemma3-mixed) the
    # local one holds the last 5 rows of 13, the global one all 13
    t = len(d.steps)
    rows = cfg.num_layers * min(t, cfg.sliding_window or t) if uniform else min(t, cfg.sliding_window) + t
    assert d.steps[-1].nbytes == 2 * cfg.kv_heads * cfg.head_dim * 4 * rows
    assert [k.shape[2] for k in d.cache.keys] == ([s.rows] * cfg.num_layers if uniform else [5, t])


def test_every_registered_causal_model_decodes_the_same_with_its_cache():
    names = models.available_models("text", kind="causal")
    assert names
    for name in names:
        if not models.REGISTRY[name].bundled:
            continue  # large downloaded checkpoints: the shapes above cover their architectures
        tm = models.load_model(name)
        d = kv.decode(tm.model, list(tm.tokenizer.encode("The cache keeps keys and values").ids), 6)
        assert d.identical and d.max_diff <= kv.LOGIT_TOLERANCE, (name, d.max_diff)
        assert all(s.nbytes == s.formula for s in d.steps), name


def test_cache_at_replays_the_steps():
    model = _model(SHAPES["rotary-window"])
    ids = list(range(12))
    cache = kv.cache_at(model, ids, 7)
    assert cache.positions.tolist() == [3, 4, 5, 6, 7]  # window 5: the last five positions
    assert kv.tensor(cache, 1, "k").shape == (2, 5, 4)
    full = kv.cache_at(model, ids, 11)
    assert full.seen == 12 and len(full) == 5
    with pytest.raises(ValueError):
        kv.cache_at(model, ids, 12)


@pytest.mark.parametrize("shape", ["rotary-gqa", "rotary-window"])
def test_decoding_keeps_the_cache_a_replay_of_its_last_step_makes(shape):
    """The page shows decoding's own cache after the last step instead of replaying it: the same tensors, bit
    for bit; any other step, or other tokens, are replayed."""
    model = _model(SHAPES[shape])
    d = kv.decode(model, [3, 1, 4, 1, 5, 9, 2], 6)
    last = len(d.steps) - 1
    kept, replay = kv.cache_at(model, d.ids, last, decoding=d), kv.cache_at(model, d.ids, last)
    assert kept is d.cache and kept is not replay
    assert kept.seen == replay.seen and torch.equal(kept.positions, replay.positions)
    assert all(torch.equal(a, b) for a, b in zip(kept.keys + kept.values, replay.keys + replay.values, strict=True))
    assert kv.cache_at(model, d.ids, last - 1, decoding=d) is not d.cache
    assert kv.cache_at(model, [0, *d.ids[1:]], last, decoding=d) is not d.cache


@pytest.mark.parametrize("prompt_words", [3, 40])  # a labelled map, and one beyond LABELLED_CELLS (categorical axes)
def test_cache_maps_tick_every_quarter_head_and_name_every_column_on_hover(prompt_words):
    """The cache maps tick every quarter head (fewer labels for Plotly to draw and measure); hover names each
    column. Every figure skips Plotly's quadratic tick-label overflow check (the app's template allows overflow)."""
    tm = models.load_model("tiny-llama")  # 2 KV heads of 32 dimensions: 64 columns
    decoded = view.decode(tm, " ".join(["keys"] * prompt_words), 2)
    d = decoded.decoding
    cv = view.cache_view(tm, d.ids, decoded.labels, len(d.steps) - 1, 1, decoding=d)
    columns = [f"g{g}·{i}" for g in range(2) for i in range(32)]
    for panel in (cv.keys, cv.values):
        fig = panel.figure
        assert list(fig.layout.xaxis.ticktext) == columns[::8]
        trace = fig.data[0]
        named = [c[1] for c in trace.customdata[0]] if trace.customdata is not None else list(trace.x)
        assert named == columns and panel.data.shape == (len(d.steps), 64)
    for fig in (
        cv.keys.figure,
        decoded.growth.figure,
        decoded.diff.figure,
        cv.groups.figure,
        view.published()[0].figure,
    ):
        axes = fig.layout.template.layout
        assert axes.xaxis.ticklabeloverflow == axes.yaxis.ticklabeloverflow == "allow"


def test_sharing_table_formula_equals_measured():
    rows = kv.sharing_table(PRESETS["tiny-llama"], 20, 8)
    assert [r.name for r in rows] == list(kv.SHARING)
    assert [r.kv_heads for r in rows] == [4, 2, 1, 4]
    assert all(r.formula == r.measured for r in rows)
    mha = rows[0].formula
    assert rows[1].formula == mha // 2 and rows[2].formula == mha // 4 and rows[3].formula == mha * 8 // 20
    # a model of local and global layers adds its own row: 1 K/V head, the local layer 8 rows, the global one 20
    mixed = kv.sharing_table(SHAPES["gemma3-mixed"].replace(max_len=64), 20, 8)
    assert [r.name for r in mixed] == [*kv.SHARING, "own"]
    assert mixed[-1].formula == mixed[-1].measured == 2 * 1 * 8 * 4 * (8 + 20)


def test_kv_cache_bytes_counts_batch_dtype_and_window():
    cfg = SMALL.replace(num_kv_heads=2)
    assert kv_cache_bytes(cfg, 10) == 2 * 2 * 2 * 4 * 4 * 10
    assert kv_cache_bytes(cfg, 10, 2, batch=3) == 2 * 2 * 2 * 4 * 2 * 10 * 3
    assert kv_cache_bytes(cfg.replace(sliding_window=4), 10) == kv_cache_bytes(cfg, 4)
    cache = KVCache()
    model = _model(cfg)
    model(torch.zeros(3, 6, dtype=torch.long), cache=cache)  # batch 3, six tokens at once
    assert cache.nbytes == kv_cache_bytes(cfg, 6, batch=3)


def test_published_configs_match_the_cited_numbers():
    per_token = {name: p.per_token() // 1024 for name, p in kv.PUBLISHED.items()}  # fp16, KiB
    assert per_token == {
        "Llama-2-7B": 512,
        "Llama-3-8B": 128,
        "Mistral-7B": 128,
        "Qwen2-0.5B": 12,
        "Gemma-2-9B": 336,  # 2 · 42 · 8 · 256 · 2 bytes, every layer holding the token
        "Gemma-3-270M": 18,  # 2 · 18 · 1 · 256 · 2
        "Gemma-3-4B": 136,  # 2 · 34 · 4 · 256 · 2
        "gpt-oss-20b": 48,  # 2 · 24 · 8 · 64 · 2
    }
    # past the window only the global layers grow: Gemma 3 270M's 3 global layers of 18 at 131,072 tokens
    gemma = kv.published_curve([131072])["Gemma-3-270M"][0]
    assert gemma == 2 * 1 * 256 * 2 * (15 * 512 + 3 * 131072)
    curve = kv.published_curve([4096, 131072])
    assert curve["Mistral-7B"][0] == curve["Mistral-7B"][1]  # the 4096 window caps it
    assert curve["Llama-2-7B"][1] == 64 * 2**30  # 512 KiB × 128k = 64 GiB


@pytest.mark.parametrize(
    "prompt, new, prefill, key",
    [
        ([], 3, 0, "kv_prompt_empty"),
        (list(range(20)), 5, 0, "kv_prompt_too_long"),
        ([1], -1, 0, "kv_new_tokens"),
        (list(range(20)), 5, 10, "kv_prompt_too_long"),  # 15 to step are within the stepper, 25 beyond the context
    ],
)
def test_bad_decoding_requests_are_refused_with_a_message(prompt, new, prefill, key):
    with pytest.raises(InputError) as exc:
        kv.decode(_model(SMALL), prompt, new, prefill=prefill)
    assert exc.value.key == key and exc.value.message("zh")


def test_a_prefill_longer_than_the_prompt_is_a_programming_error():
    with pytest.raises(ValueError, match="prefill must lie in"):
        kv.check_prompt(SMALL, [1, 2, 3], 1, prefill=4)


@pytest.mark.parametrize("shape", ["rotary-window", "gemma3-mixed"])
@pytest.mark.parametrize("prefill", [3, 9])  # within the window of 5, and past it (the prefill's own mask holds it)
def test_a_prefill_then_single_steps_decode_as_uncached(shape, prefill):
    """The prompt's first tokens read in one pass with the cache, then one token a step: the same tokens as uncached
    greedy generation, logits within the tolerance, each layer's rows and bytes as the formula says; a step after
    the prefill is replayed from the cache the prefill left, not from the first token."""
    cfg, prompt = SHAPES[shape], [3, 1, 4, 1, 5, 9, 2, 6, 5, 3]
    model = _model(cfg)
    d = kv.decode(model, prompt, 4, prefill=prefill)
    assert d.ids == model.generate(torch.tensor([prompt]), 4, greedy=True)[0].tolist()
    assert [s.position for s in d.steps] == list(range(prefill - 1, len(prompt) + 3))
    assert d.identical and d.max_diff <= kv.LOGIT_TOLERANCE
    windows = [cfg.layer_window(i) or cfg.uniform_window or math.inf for i in range(cfg.num_layers)]
    for s in d.steps:
        assert s.layer_rows == tuple(min(s.position + 1, w) for w in windows) and s.nbytes == s.formula
    assert d.start.seen == prefill and d.cache.seen == len(prompt) + 3
    step = prefill + 1
    replayed, fresh = kv.cache_at(model, d.ids, step, decoding=d), kv.cache_at(model, d.ids, step)
    assert replayed.seen == fresh.seen == step + 1 and d.start.seen == prefill  # the prefill's cache left as it was
    for a, b in zip(replayed.keys + replayed.values, fresh.keys + fresh.values, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=1e-5)  # one pass of several tokens rounds unlike single steps


def _mixed_text_model(window: int = 128) -> view.TextModel:
    """tiny-llama's tokenizer over a random model of a local and a global layer (Gemma 3's pattern in small), whose
    window lies beyond the stepper's tokens and within its context: a run past the window is offered."""
    tm = models.load_model("tiny-llama")
    cfg = SHAPES["gemma3-mixed"].replace(vocab_size=tm.config.vocab_size, max_len=256, sliding_window=window)
    return dataclasses.replace(tm, name="tiny-mixed", model=_model(cfg), max_len=cfg.max_len)


def test_a_run_past_the_window_keeps_it_on_the_local_layer_only(monkeypatch):
    """The page's run past the window on a model of a local layer (window 128) and a global one: the local layer
    stops at 128 rows while the global one holds every token, bytes = formula at every step, cached = uncached; a
    cache that ignored the window would fail the check (cached = uncached alone would not notice: the mask hides
    the rows it kept)."""
    tm, window, new = _mixed_text_model(), 128, 3
    assert view.past_window(tm) == window and view.past_window(models.load_model("tiny-llama")) is None
    ids, fill = view.past_ids(tm, view.PROMPT)
    assert len(ids) == window + kv.PAST_TOKENS
    assert ids[fill:] == view.prompt_ids(tm, "\n\n" + view.PROMPT, opening=False)  # the prompt after the text
    d = view.decoding(tm, view.PROMPT, new, past=True)
    assert d.ids[: len(ids)] == ids and d.prefill == fill and d.steps[0].position == fill - 1
    tokens = len(ids) + new - 1  # fed by the last step
    assert d.steps[-1].position == tokens - 1 and [k.shape[2] for k in d.cache.keys] == [window, tokens]
    assert [s.layer_rows for s in d.steps] == [(min(s.position + 1, window), s.position + 1) for s in d.steps]
    assert d.steps[0].layer_rows[0] < window  # the prompt's own tokens are stepped across the window's edge
    assert all(s.nbytes == s.formula for s in d.steps) and d.steps[-1].nbytes == 2 * 1 * 8 * 4 * (window + tokens)
    assert d.identical and d.max_diff <= kv.tolerance(tm.config, d.logit_scale)
    decoded = view.decoded(tm, d)
    assert decoded.ok and f"hold {window} rows each, the global layers (1) {tokens}" in decoded.check
    assert f"{fill} tokens of the bundled text" in decoded.prompt_note
    cv = view.cache_view(tm, d.ids, decoded.labels, tokens - 1, 0, decoding=d)
    assert cv.keys.data.shape[0] == window and f"({1} · {window} + {1} · {tokens})" in cv.numbers
    assert list(cv.layers.data) == [window, tokens]
    with monkeypatch.context() as mp:
        mp.setattr(KVCache, "_keep", staticmethod(lambda t, w: t))  # a cache that keeps every row
        broken = view.decoded(tm, view.decoding(tm, view.PROMPT, new, past=True))
    assert broken.decoding.identical and broken.decoding.max_diff <= kv.tolerance(tm.config)
    assert not broken.ok and "DISAGREE" in broken.check and f"hold {tokens} rows each" in broken.check


def test_window_larger_than_the_context_is_refused():
    with pytest.raises(InputError) as exc:
        kv.sharing_configs(SMALL, SMALL.max_len + 1)
    assert exc.value.key == "kv_window_range"


# FlashAttention's IO counts --------------------------------------------------------------------------------------
def _tally_naive(n: int, d: int) -> int:
    """Algorithm 0 of Dao et al. 2022, one access per number moved."""
    reads = {"Q": n * d, "K": n * d, "S": n * n, "P": n * n, "V": n * d}
    writes = {"S": n * n, "P": n * n, "O": n * d}
    return sum(reads.values()) + sum(writes.values())


def _tally_tiled(n: int, d: int, b: int) -> int:
    """Algorithm 1 loop by loop: outer over key/value tiles, inner over query rows in tiles."""
    total = 0
    for j in range(0, n, b):
        kv_rows = min(b, n - j)
        total += 2 * kv_rows * d  # K_j, V_j into fast memory
        for i in range(0, n, b):
            q_rows = min(b, n - i)
            total += q_rows * d + q_rows * d + 2 * q_rows  # read Q_i, O_i, ℓ_i, m_i
            total += q_rows * d + 2 * q_rows  # write O_i, ℓ_i, m_i
    return total


@pytest.mark.parametrize("n, d, b", [(1, 1, 1), (7, 3, 2), (64, 16, 16), (100, 8, 32)])
def test_io_counts_match_a_direct_tally(n, d, b):
    assert flash_io.naive_io(n, d) == _tally_naive(n, d)
    assert flash_io.tiled_io(n, d, b) == _tally_tiled(n, d, b)


def test_tiled_io_follows_theorem_2():
    """Θ(N²d²/M): the ratio to N²d²/M tends to Algorithm 1's constant 4·(3d + 4)/d as N grows."""
    limit = 4 * (3 * 64 + 4) / 64
    ratios = [flash_io.tiled_io(n, 64, 128) / flash_io.theorem_bound(n, 64, 128) for n in (2**12, 2**16)]
    assert ratios[1] == pytest.approx(limit, rel=0.01) and abs(ratios[1] - limit) < abs(ratios[0] - limit)
    assert flash_io.tiled_io(8192, 64, 256) < flash_io.tiled_io(8192, 64, 64) < flash_io.naive_io(8192, 64)


def test_io_rejects_non_positive_sizes():
    with pytest.raises(InputError):
        flash_io.tiled_io(16, 8, 0)


# --- a prefix cache: the opening tokens an earlier decoding shares are not run again ---------------------------------
@pytest.mark.parametrize("shape", ["rotary-gqa", "learned-mha", "gemma3-mixed"])
def test_reusing_an_earlier_decodings_opening_equals_decoding_afresh(shape):
    cfg = SHAPES[shape]
    model = _model(cfg)
    first = kv.decode(model, [3, 1, 4, 1, 5], 3)  # 7 tokens fed: past gemma3-mixed's window of 5, rows dropped
    passes: list[int] = []
    again = kv.decode(model, [3, 1, 4, 2, 6, 5], 4, reuse=first, progress=lambda done, total: passes.append(total))
    fresh = kv.decode(model, [3, 1, 4, 2, 6, 5], 4)
    shared = 0 if not first.cache.complete() else 3  # [3, 1, 4] shared; a window that dropped rows: none
    assert again.reused == shared and again.ids == fresh.ids
    assert passes[0] == len(fresh.steps) - shared + 1  # the steps not taken over, and the uncached pass
    assert [s.position for s in again.steps] == [s.position for s in fresh.steps]
    for a, b in zip(again.steps, fresh.steps):
        assert (a.rows, a.layer_rows, a.nbytes, a.formula, a.same_next) == (
            b.rows,
            b.layer_rows,
            b.nbytes,
            b.formula,
            b.same_next,
        )
        assert a.logit_diff <= kv.tolerance(cfg, again.logit_scale)
    for k, k_fresh in zip(again.cache.keys + again.cache.values, fresh.cache.keys + fresh.cache.values):
        torch.testing.assert_close(k, k_fresh, rtol=1e-5, atol=1e-5)
    assert again.cache.seen == fresh.cache.seen
    assert torch.equal(again.cache.positions, fresh.cache.positions)


def test_what_an_earlier_decoding_can_serve():
    model = _model(SHAPES["rotary-gqa"])
    first = kv.decode(model, [3, 1, 4, 1, 5], 3)  # ids 3 1 4 1 5 + three greedy tokens, seven fed
    assert kv.shared_steps(first, [3, 1, 4, 1, 5]) == 4  # the same prompt: its last token is fed again
    assert kv.shared_steps(first, [*first.ids, 7]) == 7  # past the prompt, into the continuation: every fed token
    assert kv.shared_steps(first, [2, 1, 4]) == 0 and kv.shared_steps(None, [3, 1]) == 0
    assert kv.shared_steps(first, [3, 1, 4, 1, 5], prefill=2) == 0  # a prefill reads its tokens in one pass
    same = kv.decode(model, [3, 1, 4, 1, 5], 3, reuse=first)
    assert same.ids == first.ids and same.reused == 4
    window = _model(SHAPES["rotary-window"])  # window 5: after 7 tokens the first rows are gone
    assert kv.shared_steps(kv.decode(window, [3, 1, 4, 1, 5], 3), [3, 1, 4, 1, 5]) == 0


def test_a_cache_prefix_is_what_feeding_the_prefix_leaves():
    model = _model(SHAPES["rotary-gqa"])
    full, part = KVCache(), KVCache()
    with torch.no_grad():
        model(torch.tensor([[3, 1, 4, 1, 5]]), cache=full)
        model(torch.tensor([[3, 1]]), cache=part)
    cut = full.prefix(2)
    assert cut.seen == 2 and torch.equal(cut.positions, part.positions)
    for a, b in zip(cut.keys + cut.values, part.keys + part.values):
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-6)
    cut.keys[0].zero_()
    assert full.keys[0].abs().sum() > 0  # a copy: the cut cache goes on without touching the first
    with pytest.raises(ValueError):
        full.prefix(6)


def test_a_continuation_with_line_breaks_is_one_line(monkeypatch):
    """The page sets the continuation in bold Markdown, which a line break ends (Gemma 3 continues "the cache.↵The
    cache is a": the page showed the asterisks): newlines become ↵ (as in the token labels) on one line, a last one
    too (it is a token the model wrote)."""
    tm = models.load_model("tiny-llama")
    d = view.decoding(tm, view.PROMPT, 2)
    monkeypatch.setattr(tm, "decode", lambda ids: " the cache.\n\nThe cache is a\n")
    assert view.decoded(tm, d).text == "the cache.↵↵The cache is a↵"


def test_the_sharing_section_counts_its_rows_and_words_the_models_own_layout():
    """The sharing table's last row on a model of local and global layers (review 3): the model's layer layout,
    its local layers seeing only the window W the reader chose; the intro's count of ways follows the rows."""
    plain, mixed = models.load_model("tiny-llama"), _mixed_text_model()
    en = view.sharing_rows(mixed, kv.sharing_table(mixed.config, 20, 8), 20, 8)
    zh = view.sharing_rows(mixed, kv.sharing_table(mixed.config, 20, 8), 20, 8, lang="zh")
    assert len(en) == len(kv.sharing_kinds(mixed.config)) == len(kv.SHARING) + 1
    own_en, own_zh = en[-1]["attention"], zh[-1]["注意力"]
    assert own_en == "the model's layer layout: 1 of 2 layers see only a window of W = 8, the others everything"
    assert "1 层只看 W = 8 的窗口" in own_zh and "8 个窗口" not in own_zh  # a window of 8, not 8 windows
    assert "cached four ways;" in view.sharing_intro(plain) and "四种方式缓存" in view.sharing_intro(plain, lang="zh")
    for lang in ("en", "zh"):
        assert view.sharing_intro(mixed, lang=lang) != view.sharing_intro(plain, lang=lang)
    assert "a fifth, the model's own layout" in view.sharing_intro(mixed)
    assert "第五种" in view.sharing_intro(mixed, lang="zh")


def test_the_bytes_formula_has_a_window_only_where_the_model_has_one_and_its_word_in_the_language():
    """SmolLM2 (every layer holds every token) is shown bytes = … · T, not … · min(T, W), and its intro names no
    window; the formula's word is the locale's, 字节数 in 中文 (review 3)."""
    full = models.load_model("tiny-llama")
    window = dataclasses.replace(full, model=_model(SHAPES["rotary-window"]))
    cases = [
        (full, r"b\cdot T", "$T$ tokens):"),
        (window, r"\min(T,\,W)", "window $W$):"),
        (_mixed_text_model(), r"L_{\text{global}}\cdot T", "window $W$):"),
    ]
    for tm, end, symbols in cases:
        intro, formula = view.bytes_formula(tm)
        assert formula.startswith(r"\text{bytes}=") and end in formula and intro.endswith(symbols)
        assert ("min" in formula) == (tm is not full)
        zh_intro, zh_formula = view.bytes_formula(tm, lang="zh")
        assert zh_formula.startswith(r"\text{字节数}=") and zh_formula.endswith(formula.split("=", 1)[1])
        assert ("窗口 $W$" in zh_intro) == (tm is not full)
        prose = re.sub(r"\$[^$]*\$", "", intro + zh_intro)  # the symbols were plain letters beside $D_h$ (review)
        assert not re.search(r"(?<![\w\\])[LbTWt](?!\w)", prose), prose


def test_the_chinese_page_names_query_heads_one_way():
    """查询头, as the model's caption names them, never "query 头" (review 3)."""
    zh = [entry["zh"] for entry in locales.table("kv_cache").values()]
    assert not [s for s in zh if re.search(r"query\s*头", s)]
    assert sum("查询头" in s for s in zh) >= 3


def test_the_rows_per_layer_past_gemma3s_window_tell_512_from_523():
    """Past Gemma 3's window 15 local layers hold 512 rows and 3 global ones 523: each bar says its count, the axis
    starts near the window (said in its title) so the 11 rows show, and the window is named in the legend, not
    drawn over a bar (review 3)."""
    names = [f"{i} {'global' if i in (5, 11, 17) else 'local'}" for i in range(18)]
    rows = [523 if i in (5, 11, 17) else 512 for i in range(18)]
    fig = vk.layer_rows(names, rows, 512, title="", x_title="", y_title="", series="rows", window_name="window W")
    bars, line = fig.data
    assert bars.texttemplate == "%{y:,}" and bars.textposition == "outside" and not bars.showlegend
    low, high = fig.layout.yaxis.range
    assert 0 < low < 512 and (523 - 512) / (high - low) > 0.25 and high > 523
    assert line.name == "window W" and set(line.y) == {512} and not fig.layout.annotations
    assert vk.rows_floor([100, 100], 512) == 0  # short of the window the bars start at 0
    # through the view, on a random model of a local and a global layer run past its window of 128
    tm = _mixed_text_model()
    d = view.decoding(tm, view.PROMPT, 1, past=True)
    last = d.steps[-1].position
    for lang, said in (("en", "rows cached (axis from "), ("zh", "缓存的行数（纵轴从 ")):
        cv = view.cache_view(tm, d.ids, tm.labels(d.ids), last, 0, lang=lang, decoding=d)
        fig = cv.layers.figure
        floor = fig.layout.yaxis.range[0]
        assert list(cv.layers.data) == [128, last + 1] and 0 < floor < 128
        assert fig.layout.yaxis.title.text.startswith(said + f"{floor:,}")
        assert fig.data[1].name.endswith("W = 128")


def test_one_cached_row_is_a_row_in_every_count():
    """After step 0 the page said "1 rows per layer" (review B): one row is a row, in the numbers and the maps'
    titles, for layers alike and for local and global ones; Chinese has one form."""
    tm = models.load_model("tiny-llama")
    d = view.decoding(tm, view.PROMPT, 1)
    labels = tm.labels(d.ids)
    for step, said, title in ((0, "1 row per layer", "1 row × "), (2, "3 rows per layer", "3 rows × ")):
        cv = view.cache_view(tm, d.ids, labels, step, 0, decoding=d)
        assert f"After step {step}: {said};" in cv.numbers and title in cv.keys.figure.layout.title.text
    zh = view.cache_view(tm, d.ids, labels, 0, 0, lang="zh", decoding=d)
    assert "每层 1 行；" in zh.numbers and "1 行 × " in zh.values.figure.layout.title.text
    mixed = _mixed_text_model().config
    assert view.held(mixed, [1, 1]) == "the local layers (1) hold 1 row each, the global layers (1) 1 row"
    assert view.held(mixed, [2, 1]) == "the local layers (1) hold 2 rows each, the global layers (1) 1 row"
    assert view.held(mixed, [1, 1], lang="zh") == "1 个局部层各保留 1 行，1 个全局层各保留 1 行"


def test_the_window_box_tops_at_the_sections_tokens_and_says_so():
    """The window box took up to 1,000,000 and its help said "at most the model's context" (8,192 for SmolLM2), but
    the table runs only :func:`view.limit` tokens (review B): the help names that number, the model's own."""
    full = models.load_model("tiny-llama")
    short = dataclasses.replace(full, model=_model(SHAPES["rotary-window"]))  # a context of 24 tokens
    for tm in (full, short):
        most = view.limit(tm.config)
        assert f"at most {most}, " in view.window_help(tm) and f"最多 {most}，" in view.window_help(tm, lang="zh")
    assert view.limit(short.config) == 24 and view.limit(full.config) == kv.STEPPER_TOKENS
