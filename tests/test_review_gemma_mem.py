"""Memory and time with Gemma 3's 262 144-token vocabulary, on the language-model page and the KV cache stepper.

The language-model page read a text's logits ``[N, V]`` all at once, and its softmax, loss and prefix check each made
another of that size: 1.2 GB above the model for Gemma 3 at 512 tokens. :func:`lm.read` now turns the final states
into logits :data:`lm.LOGIT_ROWS` positions at a time, the same numbers. The KV stepper's cache after an earlier step
was replayed a pass of the whole model per token, its LM head included (20 s for step 100 of Gemma 3): it is now the
first rows of the decoding's last cache, bit for bit, and a replay runs the blocks alone."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.nn import functional as F

from tx_explorer import models
from tx_explorer.analysis import kv_cache as kv
from tx_explorer.analysis import lm
from tx_explorer.analysis.heads import max_tokens
from tx_explorer.config import TransformerConfig
from tx_explorer.modules.cache import KVCache
from tx_explorer.modules.transformer import CausalLM

TEXT = (
    "The function returns a list of the keys in the dictionary, and the list is sorted. The keys are strings, "
    "and the values are the counts of each word in the text."
)

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def tm():
    return models.load_model("tiny-gpt")


def _spy_rows(monkeypatch, model) -> list[int]:
    """The rows of every call of ``model.logits`` (positions whose V logits it makes at once)."""
    rows, logits = [], model.logits
    monkeypatch.setattr(model, "logits", lambda h, *a, **k: rows.append(h.numel() // h.shape[-1]) or logits(h, *a, **k))
    return rows


def _old_read(tm, text: str, k: int):
    """The page's numbers as they were computed before: every position's logits at once."""
    enc = tm.encode(text, max_tokens(tm))
    logits, trace = tm.attention(enc)  # (1, N, V)
    top = torch.topk(logits[0], min(k, logits.shape[-1]), dim=-1)
    probs = torch.exp(top.values.double() - torch.logsumexp(logits[0].float(), dim=-1, keepdim=True).double())
    target = torch.as_tensor(enc.ids[1:], dtype=torch.long)
    losses = F.cross_entropy(logits[0, :-1].float(), target, reduction="none").double().numpy()
    cut = (len(enc.ids) + 1) // 2
    with torch.no_grad():
        delta = float((tm.model.logits(lm.alone_states(tm, enc.ids[:cut])) - logits[0, :cut]).abs().max())
    scale = float(logits[0, :cut].abs().max())
    return top.indices.numpy(), probs.numpy(), losses, trace.stack()[:, 0].numpy(), delta, scale


@pytest.mark.parametrize("text", [TEXT, "Hi", "猫坐在垫子上。"])
def test_the_reading_makes_a_few_positions_logits_at_a_time_and_the_same_numbers(tm, monkeypatch, text) -> None:
    monkeypatch.setattr(lm, "LOGIT_ROWS", 5, raising=False)  # absent before: all at once
    rows = _spy_rows(monkeypatch, tm.model)
    r = lm.read(tm, text, 7)
    monkeypatch.undo()
    n = len(r.ids)
    assert rows and max(rows) <= 5, f"{max(rows)} positions' logits at once, of {n}"
    ids, probs, losses, maps, delta, scale = _old_read(tm, text, 7)
    # The same numbers, up to float32 rounding of products of another shape (Gemma 3 and SmolLM2 at the page's 64
    # positions a slice: bit for bit)
    np.testing.assert_array_equal(r.top_ids, ids)
    np.testing.assert_allclose(r.top_probs, probs, rtol=1e-5, atol=1e-9)
    np.testing.assert_allclose(r.losses, losses, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(r.maps, maps)
    assert r.prefix_delta == pytest.approx(delta, abs=1e-5) and r.prefix_scale == pytest.approx(scale, rel=1e-6)
    assert r.prefix_len == (n + 1) // 2
    assert r.top_labels == [tm.labels(row) for row in ids.tolist()]


def test_the_prefix_check_makes_a_few_positions_logits_at_a_time(tm, monkeypatch) -> None:
    ids = tm.encode(TEXT).ids
    with torch.no_grad():
        full = tm.run(ids)  # (1, N, V)
    monkeypatch.setattr(lm, "LOGIT_ROWS", 4, raising=False)
    rows = _spy_rows(monkeypatch, tm.model)
    assert lm.prefix_invariance(tm, ids, full + 0.5, 11) == pytest.approx(0.5, abs=1e-4)
    assert rows and max(rows) <= 4


WINDOWLESS = TransformerConfig(vocab_size=40, max_len=64, dim=16, num_layers=2, num_heads=4, positions="rotary")


def _model(cfg: TransformerConfig) -> CausalLM:
    torch.manual_seed(0)
    return CausalLM(cfg).eval()


def _replayed(model: CausalLM, ids, step: int, start: KVCache | None = None) -> KVCache:
    """The cache after ``ids[: step + 1]`` fed a token a pass through the whole model, as it was replayed before."""
    cache = KVCache() if start is None else start
    with torch.no_grad():
        for t in range(cache.seen, step + 1):
            model(torch.tensor([[ids[t]]]), cache=cache)
    return cache


def _same(a: KVCache, b: KVCache) -> bool:
    return (
        a.seen == b.seen
        and a.nbytes == b.nbytes
        and torch.equal(a.positions, b.positions)
        and all(torch.equal(x, y) for x, y in zip(a.keys + a.values, b.keys + b.values, strict=True))
    )


def test_an_earlier_step_is_the_first_rows_of_the_last_cache_without_running_the_model(monkeypatch) -> None:
    model = _model(WINDOWLESS)
    d = kv.decode(model, [3, 1, 4, 1, 5, 9, 2, 6], 12)
    passes = []
    states = model.states
    monkeypatch.setattr(model, "states", lambda *a, **k: passes.append(1) or states(*a, **k))
    steps = (0, 5, 11, len(d.ids) - 3)  # the last step (len − 2) is the cache itself
    caches = [kv.cache_at(model, d.ids, step, decoding=d) for step in steps]
    assert not passes, f"{len(passes)} passes of the model for steps its last cache holds"
    monkeypatch.undo()
    for step, cache in zip(steps, caches):
        assert _same(cache, _replayed(model, d.ids, step)), step
        assert cache is not d.cache and cache.keys[0] is not d.cache.keys[0]  # a copy: the kept one stays whole
    assert d.cache.seen == len(d.ids) - 1  # left as it was


@pytest.mark.parametrize("prefill", [0, 4])
def test_a_replay_runs_the_blocks_alone_and_gives_the_same_cache(monkeypatch, prefill) -> None:
    """Past a window (rows dropped) a step is replayed, from the prefill's cache where it has one: no LM head."""
    model = _model(WINDOWLESS.replace(sliding_window=5))
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    d = kv.decode(model, prompt, 8, prefill=prefill)
    assert not d.cache.complete()
    rows = _spy_rows(monkeypatch, model)
    step = 10
    cache = kv.cache_at(model, d.ids, step, decoding=d)
    assert not rows, "the replay made logits nobody reads"
    monkeypatch.undo()
    start = None if not prefill else kv.cache_at(model, d.ids, prefill - 1, decoding=d)
    assert start is None or start is not d.start  # the prefill's own cache is copied, not appended to
    import copy

    assert _same(cache, _replayed(model, d.ids, step, None if start is None else copy.deepcopy(d.start)))


def test_a_prefill_makes_the_logits_of_its_last_position_alone(monkeypatch) -> None:
    """A run past the window read its 516-token prefill's logits [516, V] (half a GB on Gemma 3) to keep one row;
    the steps of one token are the whole model's pass, bit for bit."""
    model = _model(WINDOWLESS)
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    before = kv.decode(model, prompt, 4, prefill=6)
    rows = _spy_rows(monkeypatch, model)
    after = kv.decode(model, prompt, 4, prefill=6)
    assert rows[:-1] == [1] * (len(rows) - 1)  # every cached step one position; the last call: the uncached check
    assert (
        after.ids == before.ids and [s.logit_diff for s in after.steps][1:] == [s.logit_diff for s in before.steps][1:]
    )


def test_generation_reads_its_prompt_without_the_lm_head_but_for_its_last_row(monkeypatch) -> None:
    """TextModel.stream read its prompt 256 tokens a pass, each pass's logits [256, V] (268 MB on Gemma 3) for the
    last row alone."""
    from tx_explorer.families import text

    tm = models.load_model("tiny-gpt")
    monkeypatch.setattr(text, "PREFILL", 8)  # its prompt of 30-odd tokens read in several pieces
    ids = tm.encode(TEXT).ids
    rows = _spy_rows(monkeypatch, tm.model)
    out = list(tm.stream(ids, 3))
    assert max(rows) == 1 and len(out) == 3
