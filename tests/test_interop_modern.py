"""Llama, Qwen2 and Mistral through our own CausalLM, checked against ``transformers`` with eager attention:
logits and every attention map ≤ 1e-4 on random configurations (GQA, untied heads, θ ≠ 10 000, inputs longer
than the window). (timm ViTs without a Q/K/V bias are among test_vit.py's timm configurations.)"""

from __future__ import annotations

import pytest
import torch
import transformers as tf

from tests.checkpoints import CONFIGS, hf_model
from tx_explorer.interop.llama import causal_lm_from_llama, config_from_llama
from tx_explorer.modules.cache import KVCache
from tx_explorer.trace import Trace

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = {"atol": 1e-4, "rtol": 1e-4}

CASES = {  # family, overrides of tests/checkpoints.py's tiny configs, what the case is about
    "llama-gqa-untied-theta500": ("llama", {}),
    "llama-mqa-tied-biased": ("llama", dict(num_key_value_heads=1, tie_word_embeddings=True, attention_bias=True)),
    "llama-mha": ("llama", dict(num_key_value_heads=8, rope_theta=1e6)),
    "qwen2-qkv-bias-tied": ("qwen2", {}),
    "qwen2-untied-window": (
        "qwen2",
        dict(tie_word_embeddings=False, use_sliding_window=True, sliding_window=4, max_window_layers=0),
    ),
    "mistral-window6": ("mistral", {}),
    "mistral-window1-theta": ("mistral", dict(sliding_window=1, rope_theta=2000.0, num_key_value_heads=4)),
}


def _compare(hf, ours, idx):
    trace = Trace()
    with torch.no_grad():
        ref = hf(idx, output_attentions=True)
        got = ours(idx, trace)
    torch.testing.assert_close(got, ref.logits, **TOL)
    records = list(trace)
    assert len(records) == len(ref.attentions) == hf.config.num_hidden_layers
    for record, theirs in zip(records, ref.attentions, strict=True):
        assert record.weights.shape == theirs.shape == (idx.shape[0], hf.config.num_attention_heads, *idx.shape[1:] * 2)
        torch.testing.assert_close(record.weights, theirs, **TOL)
    return records


@pytest.mark.parametrize("case", list(CASES))
def test_logits_and_every_attention_map_match_transformers(case):
    family, overrides = CASES[case]
    hf = hf_model(family, **overrides)
    ours = causal_lm_from_llama(hf)
    cfg = hf.config
    assert ours.cfg.num_kv_heads == cfg.num_key_value_heads
    assert ours.cfg.tie_embeddings == cfg.tie_word_embeddings
    assert (ours.head.weight is ours.embed.tok_embed.weight) == cfg.tie_word_embeddings
    assert ours.cfg.rope_theta == cfg.rope_parameters["rope_theta"]
    idx = torch.randint(0, cfg.vocab_size, (2, 13))  # longer than every window above
    records = _compare(hf, ours, idx)
    window = ours.cfg.sliding_window
    if window is not None:  # the window really cuts: the last query sees exactly `window` keys
        assert window < idx.shape[1]
        assert int((records[0].weights[0, 0, -1] > 0).sum()) == window
    groups = records[0].meta["groups"]
    assert groups == tuple(h // (8 // cfg.num_key_value_heads) for h in range(8))  # transformers' repeat_kv order


def test_cached_decoding_of_an_imported_mistral_matches_transformers():
    hf = hf_model("mistral")
    ours = causal_lm_from_llama(hf)
    idx = torch.randint(0, hf.config.vocab_size, (1, 12))
    cache = KVCache()
    with torch.no_grad():
        ref = hf(idx).logits
        got = torch.cat(
            [ours(idx[:, :5], cache=cache), *(ours(idx[:, i : i + 1], cache=cache) for i in range(5, 12))], 1
        )
    torch.testing.assert_close(got, ref, **TOL)
    assert len(cache) == hf.config.sliding_window


REFUSED = [
    ("llama", dict(head_dim=16), "head_dim"),
    ("llama", dict(rope_parameters={"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}), "linear"),
    ("llama", dict(mlp_bias=True), "mlp_bias"),
    ("llama", dict(hidden_act="gelu"), "SiLU"),
    ("qwen2", dict(use_sliding_window=True, sliding_window=4, max_window_layers=1), "some layers"),
]


@pytest.mark.parametrize(("family", "overrides", "message"), REFUSED)
def test_unsupported_variants_are_refused_with_the_reason(family, overrides, message):
    config_cls = {"llama": tf.LlamaConfig, "qwen2": tf.Qwen2Config}[family]
    config = config_cls(**(CONFIGS[family] | overrides)).to_dict()
    with pytest.raises(ValueError, match=message):
        config_from_llama(config)


def test_older_config_files_with_a_top_level_rope_theta_still_read():
    cfg = hf_model("llama").config.to_dict()
    cfg.pop("rope_parameters")
    cfg |= {"rope_theta": 321.0, "rope_scaling": None}
    assert config_from_llama(cfg).rope_theta == 321.0
