"""Gemma 3 through our own modules: its new parts (heads wider than D/H, QK-norm, local and global layers with a
RoPE base each, sandwich norms, GeGLU, √D embeddings, its score scale, one key/value head) against transformers'
Gemma 3 on a random model saved with ``save_pretrained`` and read back by our ``load_checkpoint`` (logits and every
attention map ≤ 1e-4, on inputs longer than the window); and the packaged Gemma 3 270M GGUF file."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.checkpoints import perturb, write_tokenizer
from tx_explorer.interop.checkpoint import load_checkpoint
from tx_explorer.trace import Trace

pytestmark = pytest.mark.usefixtures("one_thread")
TOL = {"atol": 1e-4, "rtol": 1e-4}
WINDOW = 5
TINY = dict(
    vocab_size=300,
    hidden_size=48,
    intermediate_size=80,
    num_hidden_layers=7,  # layers 0–4 and 6 local, layer 5 global (every sixth)
    num_attention_heads=4,
    num_key_value_heads=1,  # MQA, as Gemma 3 270M
    head_dim=16,  # 4 × 16 = 64 ≠ D = 48
    query_pre_attn_scalar=24,  # a score scale other than 1/√D_H
    max_position_embeddings=64,
    sliding_window=WINDOW,
)


def gemma3_reference(seed: int = 0, **overrides) -> torch.nn.Module:
    """A random float32 ``Gemma3ForCausalLM`` (eager attention), every weight perturbed (norms, too)."""
    import transformers as tf

    torch.manual_seed(seed)
    config = tf.Gemma3TextConfig(**(TINY | overrides), attn_implementation="eager")
    return perturb(tf.Gemma3ForCausalLM(config).eval(), scale=0.2)


def compare(reference: torch.nn.Module, model: torch.nn.Module, idx: torch.Tensor, tol=TOL) -> None:
    """Logits and every layer's attention map ``[B, H, N, N]`` of ours against transformers'."""
    trace = Trace()
    with torch.no_grad():
        ref = reference(idx, output_attentions=True)
        got = model(idx, trace)
    torch.testing.assert_close(got, ref.logits, **tol)
    assert len(trace) == len(ref.attentions)
    for record, theirs in zip(trace, ref.attentions, strict=True):
        assert record.weights.shape[1] == theirs.shape[1]
        torch.testing.assert_close(record.weights, theirs, **tol)


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> tuple[Path, torch.nn.Module]:
    out = tmp_path_factory.mktemp("gemma3")
    reference = gemma3_reference()
    reference.save_pretrained(out)
    write_tokenizer(out, "llama")
    return out, reference


def test_a_gemma3_folder_matches_transformers_past_the_window(folder):
    path, reference = folder
    tm = load_checkpoint(path)
    cfg = tm.config
    assert tm.info["model_type"] == "gemma3_text" and tm.kind == "causal"
    assert (cfg.head_dim, cfg.num_kv_heads, cfg.norm_position, cfg.mlp) == (16, 1, "sandwich", "geglu")
    assert cfg.layer_types == ("sliding",) * 5 + ("full", "sliding")
    idx = torch.randint(0, TINY["vocab_size"], (2, 23), generator=torch.Generator().manual_seed(1))
    compare(reference, tm.model, idx)
    trace = Trace()
    with torch.no_grad():
        tm.model(idx, trace)
    for layer, record in enumerate(trace):
        visible = (record.weights[0, 0] > 0).sum(dim=-1)  # keys each query row reads
        expected = torch.arange(1, 24).clamp(max=WINDOW) if layer != 5 else torch.arange(1, 24)
        assert torch.equal(visible, expected), layer


def test_cached_decoding_equals_the_full_pass_on_mixed_layers(folder):
    from tx_explorer.modules.cache import KVCache

    tm = load_checkpoint(folder[0])
    idx = torch.randint(0, TINY["vocab_size"], (1, 14), generator=torch.Generator().manual_seed(2))
    cache = KVCache()
    with torch.no_grad():
        full = tm.model(idx)
        steps = [tm.model(idx[:, :6], cache=cache)] + [tm.model(idx[:, i : i + 1], cache=cache) for i in range(6, 14)]
    torch.testing.assert_close(torch.cat(steps, dim=1), full, **TOL)


@pytest.mark.parametrize(
    "overrides",
    [
        {"num_key_value_heads": 2, "tie_word_embeddings": False},  # grouped heads, an LM head of its own
        {"num_hidden_layers": 3, "layer_types": ["full_attention", "sliding_attention", "full_attention"]},
        {
            "rope_parameters": {
                "full_attention": {"rope_type": "default", "rope_theta": 50.0},
                "sliding_attention": {"rope_type": "default", "rope_theta": 7.0},
            }
        },
    ],
    ids=["gqa-untied", "own-pattern", "thetas"],
)
def test_variants_of_the_config_match_too(tmp_path, overrides):
    reference = gemma3_reference(seed=3, **overrides)
    reference.save_pretrained(tmp_path)
    write_tokenizer(tmp_path, "llama")
    idx = torch.randint(0, TINY["vocab_size"], (1, 17), generator=torch.Generator().manual_seed(4))
    compare(reference, load_checkpoint(tmp_path).model, idx)
