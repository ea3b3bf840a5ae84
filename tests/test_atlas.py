"""The long-context atlas: statistics from tiles equal the same statistics of the dense maps of a normal
traced forward (float64, written here independently), the layer outputs equal the model's, memory stays below
one dense map, and the needle test's pieces (planting, greedy decoding through the cache) match references."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tx_explorer import models
from tx_explorer.analysis import atlas
from tx_explorer.analysis.memory import peak_memory
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.trace import Trace

pytestmark = pytest.mark.usefixtures("one_thread")
SMOLLM2 = "smollm2-135m-instruct"
N = 512
WINDOW = 48


@pytest.fixture(scope="module")
def tiny_llama() -> TextModel:
    return models.load_model("tiny-llama")


def _random(tm: TextModel, name: str, **changes) -> TextModel:
    """A seeded random model of tiny-llama's shape with ``changes`` (positions, window), tiny-llama's tokenizer."""
    torch.manual_seed(0)
    cfg = PRESETS["tiny-llama"].replace(max_len=N, **changes)
    model = CausalLM(cfg)
    for p in model.parameters():  # larger weights than the 0.02 init: peaked heads, scores far from 0
        p.data.mul_(2.0)
    return TextModel(name=name, model=model, tokenizer=tm.tokenizer, kind="causal", max_len=N)


def _dense_reference(tm: TextModel, ids: list[int]) -> tuple[dict[str, np.ndarray], torch.Tensor]:
    """Every statistic from the dense maps of a traced forward, in float64; and the final hidden state."""
    trace = Trace()
    with torch.no_grad():
        model = tm.model
        x = model.embed(torch.tensor([ids]))
        hidden = model.hidden(x, tm.mask(len(ids)), trace)[0]
    a = trace.stack(name_contains="attn")[:, 0].double().numpy()  # (L, H, T, T)
    i, j = np.arange(len(ids))[:, None], np.arange(len(ids))[None, :]
    back = np.where(j <= i, i - j, 0)  # (T, T)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(a > 0, a * np.log(a), 0.0)
    ref = {
        "first": a[..., 0],
        "entropy": -plogp.sum(-1),
        "local": (a * ((j <= i) & (i - j < WINDOW))).sum(-1),
        "distance": (a * back).sum(-1),
        "received": a.sum(-2),
    }
    return ref, hidden


def _assert_equal_to_dense(tm: TextModel, ids: list[int]) -> None:
    stats = atlas.head_stats(tm, ids, window=WINDOW, tile=128)
    ref, hidden = _dense_reference(tm, ids)
    L, H = len(tm.model.blocks), tm.config.num_heads
    for name in atlas.STATS:
        got = stats.stat(name).double().numpy()
        assert got.shape == (L, H, len(ids)), name
        # shares and entropy within 1e-5 (absolute and relative: SmolLM2's scores reach tens, where float32's
        # spacing is ~4e-6, and both paths round them); distance (tokens) and received (a sum over up to T
        # queries) are sums of up to T terms of size ≤ T: within 1e-5 of the context length
        tol = 1e-5 * (len(ids) if name in ("distance", "received") else 1)
        np.testing.assert_allclose(got, ref[name], rtol=1e-5, atol=tol, err_msg=name)
    # the layers computed what the model does (float32 rounding, relative to the largest activation)
    torch.testing.assert_close(stats.hidden, hidden, rtol=0, atol=1e-5 * float(hidden.abs().max()))


def test_equal_to_dense_maps_on_tiny_llama(tiny_llama):
    ids = torch.randint(0, tiny_llama.config.vocab_size, (N,), generator=torch.Generator().manual_seed(1)).tolist()
    _assert_equal_to_dense(tiny_llama, ids)


@pytest.mark.parametrize(
    "changes",
    [
        dict(positions="alibi"),
        dict(sliding_window=100),
        dict(positions="alibi", sliding_window=37),
        # Gemma 3's shape in small: local layers with their own window and θ among a global one, one K/V head of a
        # width ≠ D / H, QK-norm, sandwich norms and its own score scale
        dict(
            sliding_window=37,
            layer_types=("sliding", "full", "sliding", "sliding"),
            rope_local_theta=100.0,
            head_width=48,
            num_kv_heads=1,
            qk_norm=True,
            norm_position="sandwich",
            attn_scale=0.1,
        ),
    ],
    ids=["alibi", "sliding-window", "alibi-window", "gemma3-shape"],
)
def test_equal_to_dense_maps_on_alibi_and_sliding_window_models(tiny_llama, changes):
    tm = _random(tiny_llama, "random", **changes)
    ids = torch.randint(0, tm.config.vocab_size, (N,), generator=torch.Generator().manual_seed(2)).tolist()
    _assert_equal_to_dense(tm, ids)


@pytest.mark.parametrize(
    "changes",
    [
        dict(attn_softcap=1.0),
        dict(attention_sinks=True),
        dict(attn_softcap=2.0, attention_sinks=True, sliding_window=37),
    ],
    ids=["soft-cap", "sinks", "cap-sinks-window"],
)
def test_equal_to_dense_maps_with_soft_capped_scores_and_learned_sinks(tiny_llama, changes):
    """Gemma 2's cap on the scaled scores and gpt-oss's sink logit in each row's softmax, as the layers apply them
    (the atlas's tiles had computed a plain softmax: another model's statistics, refused until then)."""
    tm = _random(tiny_llama, "random", **changes)
    sinks = [b.attn.sinks for b in tm.model.blocks if b.attn.sinks is not None]
    with torch.no_grad():
        for s in sinks:  # some heads sink most of each row, some hardly: rows summing to 0.1 … 0.99
            s.logits.copy_(torch.linspace(-3.0, 4.0, s.logits.numel()))
    ids = torch.randint(0, tm.config.vocab_size, (N,), generator=torch.Generator().manual_seed(3)).tolist()
    _assert_equal_to_dense(tm, ids)
    trace = Trace()
    with torch.no_grad():
        tm.model.hidden(tm.model.embed(torch.tensor([ids])), tm.mask(N), trace)
    dense = atlas.dense_rows(tm, ids, 1, (40, 120), window=WINDOW)
    torch.testing.assert_close(dense.weights, trace.stack(name_contains="attn")[1, 0, :, 40:120], rtol=0, atol=1e-6)
    if sinks:
        assert float(dense.weights.sum(-1).min()) < 0.5  # the sinks took their share


def test_equal_to_dense_maps_on_smollm2():
    if SMOLLM2 not in models.available_models("text"):
        pytest.skip(f"{SMOLLM2} is not registered on this machine")
    tm = models.load_model(SMOLLM2)
    ids = atlas.corpus_ids(tm, N)
    _assert_equal_to_dense(tm, ids)


def test_the_first_token_sinks_are_real_numbers_not_a_constant(tiny_llama):
    """Guards the test above against a vacuous pass: the statistics vary over heads and positions."""
    ids = atlas.corpus_ids(tiny_llama, 128)
    stats = atlas.head_stats(tiny_llama, ids)
    for name in atlas.STATS:
        assert float(stats.stat(name).std()) > 1e-3, name
    torch.testing.assert_close(stats.received.sum(-1), torch.full(stats.received.shape[:2], 128.0))  # rows sum to 1


def test_memory_grows_linearly_not_with_the_square(tiny_llama):
    """Twice the tokens, about twice the peak (dense maps would take four times); far below the dense maps."""
    peaks = {}
    for n in (512, 1024):
        ids = torch.randint(0, tiny_llama.config.vocab_size, (n,), generator=torch.Generator().manual_seed(3)).tolist()
        _, peaks[n] = peak_memory(lambda ids=ids: atlas.head_stats(tiny_llama, ids, tile=128))
    assert peaks[1024] < 2.3 * peaks[512], peaks
    dense = len(tiny_llama.model.blocks) * tiny_llama.config.num_heads * 1024**2 * 4  # every layer's maps, float32
    assert peaks[1024] < dense / 5, (peaks, dense)


def test_progress_reports_rows_and_raising_there_cancels(tiny_llama):
    seen = []

    def progress(layer: int, rows: int) -> None:
        seen.append((layer, rows))
        if layer == 1:
            raise KeyboardInterrupt  # what a cancelled job's report does (jobs.Cancelled), here any exception

    with pytest.raises(KeyboardInterrupt):
        atlas.head_stats(tiny_llama, list(range(300)), tile=128, progress=progress)
    assert seen == [(0, 128), (0, 256), (0, 300), (1, 128)]


def test_dense_rows_equal_the_traced_map_and_give_the_atlas_numbers(tiny_llama):
    tm = _random(tiny_llama, "random", positions="alibi", sliding_window=90)
    ids = torch.randint(0, tm.config.vocab_size, (300,), generator=torch.Generator().manual_seed(4)).tolist()
    trace = Trace()
    with torch.no_grad():
        tm.model.hidden(tm.model.embed(torch.tensor([ids])), tm.mask(300), trace)
    dense = atlas.dense_rows(tm, ids, 2, (100, 220), window=WINDOW)
    torch.testing.assert_close(dense.weights, trace.stack(name_contains="attn")[2, 0, :, 100:220], rtol=0, atol=1e-6)
    stats = atlas.head_stats(tm, ids, window=WINDOW, tile=64)
    for name, values in dense.stats.items():
        torch.testing.assert_close(values, stats.stat(name)[2, :, 100:220], rtol=0, atol=1e-4, msg=name)
    with pytest.raises(InputError):
        atlas.dense_rows(tm, ids, 2, (0, 600))
    with pytest.raises(InputError):
        atlas.dense_rows(tm, ids, 9, (0, 10))


def test_span_share_is_the_dense_sum_over_the_span(tiny_llama):
    ids = atlas.corpus_ids(tiny_llama, 128)
    stats = atlas.head_stats(tiny_llama, ids, span=(40, 47), tile=48)
    trace = Trace()
    tiny_llama.run(ids, trace=trace)
    ref = trace.stack(name_contains="attn")[:, 0, :, :, 40:47].sum(-1)  # (L, H, T)
    torch.testing.assert_close(stats.span, ref, rtol=0, atol=1e-5)


def test_needle_is_planted_at_its_depth_and_greedy_decoding_matches_generate(tiny_llama):
    hay = atlas.corpus_ids(tiny_llama, 100)
    needle = atlas.plant(tiny_llama, hay, "The code is 4417.", "What is the code?", "4417", 0.5)
    a, b = needle.span
    assert a == 50 and "The code is 4417." in tiny_llama.decode(needle.ids[a:b])
    assert needle.ids[:a] == hay[:50] and needle.ids[b : b + 50] == hay[50:]
    prompt = needle.ids[-40:]
    reference = tiny_llama.model.generate(torch.tensor([prompt]), 6, greedy=True)[0, 40:].tolist()
    assert atlas.greedy(tiny_llama, prompt, 6, chunk=16) == reference
    assert atlas.answered(" the code is 4417 and", "4417") and not atlas.answered("no idea", "4417")
    with pytest.raises(InputError):
        atlas.plant(tiny_llama, hay, "x", "y", "z", 1.5)
    with pytest.raises(InputError):
        atlas.plant(tiny_llama, hay * 2, "x", "y", "z", 0.5)  # 200 tokens > tiny-llama's 128


def test_bad_inputs_are_clear_messages(tiny_llama):
    with pytest.raises(InputError, match="empty"):
        atlas.head_stats(tiny_llama, [])
    with pytest.raises(InputError, match="window"):
        atlas.head_stats(tiny_llama, [1, 2, 3], window=0)
    with pytest.raises(InputError, match="context"):
        atlas.encode_text(tiny_llama, "word " * 400)
    with pytest.raises(InputError, match="not text"):
        atlas.read_upload(b"\x89PNG\r\n\x1a\n\x00\x00\x00binary")
    assert atlas.read_upload("café\n".encode()) == "café\n"
    for encoding in ("utf-8-sig", "utf-16", "utf-16-le", "utf-16-be"):  # the last two with Notepad's mark first
        mark = "\ufeff" if encoding.endswith(("le", "be")) else ""
        assert atlas.read_upload((mark + "注意力 attention\n").encode(encoding)) == "注意力 attention\n"
    with pytest.raises(InputError, match="not text"):
        atlas.read_upload("注意力".encode("gbk"))
    with pytest.raises(InputError, match="not text"):
        atlas.read_upload(b"\xff\xfe" + "a".encode("utf-16-le") + b"\x00")  # an odd byte: cut UTF-16
    with pytest.raises(InputError, match="is an encoder"):  # in the visitor's language, as every refusal
        encoder = TextModel(name="enc", model=CausalLM(TransformerConfig()), tokenizer=tiny_llama.tokenizer,
                            kind="encoder", max_len=128)  # fmt: skip
        atlas.head_stats(encoder, [1, 2])


def test_a_needle_at_depth_0_goes_after_the_texts_opening_special_token(tiny_llama, monkeypatch):
    """Gemma 3's haystack opens with <bos> (corpus_ids): at depth 0 the needle went before it, and the model read a
    <bos> in the middle of its text."""
    bos = min(tiny_llama.special_ids)
    hay = [bos, *atlas.corpus_ids(tiny_llama, 60)]
    needle = atlas.plant(tiny_llama, hay, "The code is 4417.", "What is the code?", "4417", 0.0)
    assert needle.ids[0] == bos and needle.span[0] == 1 and bos not in needle.ids[1:]


def test_greedy_reads_the_logits_of_the_prompt_s_last_row_alone(tiny_llama, monkeypatch):
    """A chunk's logits [chunk, V] (0.5 GB for Gemma 3 at 512 tokens) were made to read one row."""
    model, rows = tiny_llama.model, []
    logits = model.logits
    monkeypatch.setattr(model, "logits", lambda h, *a, **k: rows.append(h.numel() // h.shape[-1]) or logits(h, *a, **k))
    atlas.greedy(tiny_llama, atlas.corpus_ids(tiny_llama, 60), 3, chunk=16)
    assert rows and max(rows) == 1
