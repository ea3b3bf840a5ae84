"""One place per formula: parameter, FLOP and KV-cache formulas against the real modules, the MLP width,
entropy, the positive-integer check and config (de)serialisation."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from tx_explorer.analysis import cost, params, routing
from tx_explorer.analysis.information import entropy
from tx_explorer.analysis.memory import kv_cache_bytes
from tx_explorer.config import PRESETS, TransformerConfig, ViTConfig
from tx_explorer.errors import InputError, positive_int
from tx_explorer.modules.attention import make_attention
from tx_explorer.modules.block import make_mlp
from tx_explorer.modules.cache import KVCache
from tx_explorer.modules.moe_lm import MoECausalLM, MoEConfig
from tx_explorer.modules.seq2seq import RNNConfig
from tx_explorer.modules.transformer import CausalLM

SMALL = TransformerConfig(vocab_size=61, max_len=24, dim=32, num_layers=2, num_heads=4)
# Qwen2's layout: biases on the Q/K/V projections only, grouped-query attention, SwiGLU, RMSNorm, rotary.
QWEN2_LIKE = SMALL.replace(
    num_kv_heads=2, qkv_bias=True, bias=False, mlp="swiglu", norm="rmsnorm", positions="rotary", tie_embeddings=False
)
MODERN = {
    "tiny-llama": PRESETS["tiny-llama"],
    "qwen2-like": QWEN2_LIKE,
    "mqa": SMALL.replace(num_kv_heads=1),
    "gqa-biased": SMALL.replace(num_kv_heads=2),
    "out-bias-only": SMALL.replace(qkv_bias=False),
    "alibi-window": SMALL.replace(positions="alibi", sliding_window=5, num_kv_heads=2),
    "sinusoidal-untied": SMALL.replace(positions="sinusoidal", tie_embeddings=False, mlp_ratio=3.0),
    # Gemma 3's layout in small: heads wider than D / H sharing one K/V head, QK-norm, sandwich norms, GeGLU
    "gemma3-like": SMALL.replace(
        head_width=24,
        num_kv_heads=1,
        qk_norm=True,
        norm_position="sandwich",
        mlp="geglu",
        norm="rmsnorm",
        bias=False,
        positions="rotary",
        sliding_window=5,
        layer_types=("sliding", "full"),
    ),
    # OLMo 2's norms after the sub-layers and QK-norm over all heads; gpt-oss's sinks
    "olmo2-like": SMALL.replace(qk_norm=True, qk_norm_width="full", norm_position="after", norm="rmsnorm"),
    "sinks": SMALL.replace(attention_sinks=True, num_kv_heads=2),
}


def _numel(module: torch.nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


# --- parameters -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PRESETS) + sorted(MODERN))
def test_formula_equals_the_real_modules(name: str) -> None:
    cfg = PRESETS.get(name) or MODERN[name]
    kinds = ["encoder"] if name == "bert-base" else ["causal", "encoder"]
    if cfg.positions != "learned":  # the counting layout of the original Transformer has fixed positions
        kinds.append("encoder-decoder")
    for kind in kinds:
        model = params.build_on_meta(cfg, kind, decoder_layers=1)
        counted = params.count_params(cfg, kind, decoder_layers=1)
        assert counted == params.measure(model), (name, kind)
        assert sum(counted.values()) == _numel(model)


def test_building_on_meta_skips_initialisers_only_inside() -> None:
    """tests/test_serve.py checks what skipping them spares (no page imports TorchDynamo)."""
    with params.shapes_only():
        inside = torch.nn.Embedding(3, 2)
    outside = torch.nn.init.normal_(torch.zeros(64))
    assert inside.weight.is_meta and outside.std() > 0.5


@pytest.mark.parametrize("name", sorted(MODERN))
def test_attention_and_mlp_parts_equal_their_modules(name: str) -> None:
    cfg = MODERN[name]
    with torch.device("meta"):
        attention, cross, mlp = make_attention(cfg), make_attention(cfg, cross=True), make_mlp(cfg)
    # QK-norm's gains sit inside the attention module but count among the norms (the page's parts)
    assert params.attention_params(cfg) + params.qk_norm_params(cfg) == _numel(attention) == _numel(cross)
    assert params.attention_weights(cfg) == attention.qkv.weight.numel() + attention.proj.weight.numel()
    assert params.mlp_params(cfg) == _numel(mlp)


def test_grouped_query_attention_shrinks_only_keys_and_values() -> None:
    d, dh = SMALL.dim, SMALL.head_dim
    assert params.attention_weights(SMALL) == 4 * d * d  # multi-head: the lecture's 4·D²
    assert params.attention_weights(SMALL.replace(num_kv_heads=1)) == 2 * d * d + 2 * d * dh
    assert params.attention_params(SMALL) == 4 * d * d + 4 * d
    assert params.attention_params(QWEN2_LIKE) == params.attention_weights(QWEN2_LIKE) + d + 2 * 2 * dh


@pytest.mark.parametrize("cfg", [PRESETS["tiny-llama"], QWEN2_LIKE.replace(num_kv_heads=1, tie_embeddings=True)])
def test_moe_counts_equal_the_model(cfg: TransformerConfig) -> None:
    moe = MoEConfig(transformer=cfg, num_experts=4, top_k=2)
    with torch.device("meta"):
        model = MoECausalLM(moe)
    counts = routing.moe_params(moe)
    assert counts["total"] == _numel(model)
    expert = params.mlp_params(cfg, moe.expert_hidden)
    assert counts["total"] - counts["active"] == cfg.num_layers * 2 * expert


def test_rule_of_thumb_is_the_blocks_of_a_large_model() -> None:
    cfg = PRESETS["gpt3"]
    counted = params.count_params(cfg)
    assert params.rule_of_thumb(cfg) == pytest.approx(counted["attention"] + counted["mlp"], rel=1e-3)


# --- MLP width ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mlp", "ratio", "dim"), [("mlp", 4.0, 128), ("mlp", 3.5, 30), ("swiglu", 4.5, 128), ("swiglu", 4.0, 768)]
)
def test_mlp_hidden_is_the_width_the_modules_build(mlp: str, ratio: float, dim: int) -> None:
    cfg = TransformerConfig(dim=dim, num_heads=2, mlp=mlp, mlp_ratio=ratio)
    with torch.device("meta"):
        first = next(make_mlp(cfg).children())  # fc1 or w1
    assert first.out_features == cfg.mlp_hidden
    if mlp == "swiglu":
        assert cfg.mlp_hidden == round(2 * ratio * dim / 3)  # 2/3 of the width: three matrices instead of two
    else:
        assert cfg.mlp_hidden == int(ratio * dim)


def test_tiny_llama_blocks_weigh_what_tiny_gpt_blocks_weigh() -> None:
    """The preset's promise: GQA saves D² of attention, a SwiGLU of hidden 3D spends it (12·D² per block)."""
    llama, gpt = PRESETS["tiny-llama"], PRESETS["tiny"]
    assert llama.mlp_hidden == 3 * llama.dim
    for cfg in (llama, gpt):
        assert params.attention_weights(cfg) + params.mlp_weights(cfg) == 12 * cfg.dim**2


def test_experts_use_the_same_width_formula() -> None:
    moe = MoEConfig(transformer=PRESETS["tiny-llama"], expert_ratio=2.0)
    assert moe.expert_hidden == PRESETS["tiny-llama"].replace(mlp_ratio=2.0).mlp_hidden == round(4 * 128 / 3)


# --- FLOPs -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["tiny-llama", "qwen2-like", "mqa", "sinusoidal-untied"])
def test_flops_per_token_equal_torch_flop_counter(name: str) -> None:
    """The weight matmuls of a forward pass over N tokens, counted by PyTorch (``mm``/``addmm``: every Linear
    and the LM head), plus QKᵀ and AV over N keys — the products the cost page's test counts the same way."""
    cfg = MODERN[name].replace(vocab_size=61, max_len=24)
    model = CausalLM(cfg).eval().requires_grad_(False)  # (no_grad trips the counter's module tracker)
    n = 12
    with FlopCounterMode(display=False) as counter:
        model(torch.randint(0, 61, (1, n)))
    by_op = counter.get_flop_counts()["Global"]
    weights = sum(v for op, v in by_op.items() if str(op).split(".")[1] in ("mm", "addmm"))
    per_token = params.flops_per_token(cfg, context=n)
    products = cfg.num_layers * 2 * 2 * n * cfg.dim  # QKᵀ and AV per token
    assert weights == n * (per_token["total"] - products)
    quadratic = sum(mm.flops for mm in cost.four_matmuls(n, cfg.dim, cfg.num_heads) if mm.quadratic)  # one layer
    assert quadratic * cfg.num_layers == n * products
    assert per_token["total"] == sum(v for k, v in per_token.items() if k != "total")


def test_attention_flops_are_the_four_matmuls_of_the_cost_page() -> None:
    n, cfg = 256, TransformerConfig(dim=512, num_heads=8, num_layers=1)
    assert sum(mm.flops for mm in cost.four_matmuls(n, cfg.dim, cfg.num_heads)) == (
        n * params.flops_per_token(cfg, context=n)["attention"]
    )


def test_moe_flops_replace_the_mlp_with_k_experts_and_a_router() -> None:
    moe = MoEConfig(transformer=SMALL, num_experts=8, top_k=2, expert_ratio=2.0)
    dense = params.flops_per_token(moe.dense_counterpart(), context=8)
    sparse = routing.moe_flops_per_token(moe, context=8)
    assert sparse["mlp"] == dense["mlp"]  # two experts of 2D = one MLP of 4D
    assert sparse["router"] == SMALL.num_layers * 2 * SMALL.dim * 8
    assert sparse["total"] == dense["total"] + sparse["router"]


# --- KV cache ----------------------------------------------------------------------------------------------

CACHE_CASES = {
    "mha": SMALL,
    "gqa": SMALL.replace(num_kv_heads=2, positions="rotary"),
    "mqa": SMALL.replace(num_kv_heads=1),
    "window": SMALL.replace(num_kv_heads=2, sliding_window=5, positions="rotary"),
}


@pytest.mark.parametrize("name", sorted(CACHE_CASES))
@pytest.mark.parametrize("batch", [1, 3])
def test_kv_cache_bytes_equal_the_cache_after_decoding(name: str, batch: int) -> None:
    cfg = CACHE_CASES[name]
    model, cache, seen = CausalLM(cfg).eval(), KVCache(), 0
    with torch.no_grad():
        for chunk in (4, 1, 1, 3):  # a prompt, then tokens one by one and a short burst
            model(torch.randint(0, cfg.vocab_size, (batch, chunk)), cache=cache)
            seen += chunk
            assert cache.nbytes == kv_cache_bytes(cfg, seen, batch=batch), seen
    assert (
        kv_cache_bytes(cfg, seen, batch=batch)
        == 2 * cfg.num_layers * cfg.kv_heads * cfg.head_dim * 4 * min(seen, cfg.sliding_window or seen) * batch
    )


def test_kv_cache_bytes_follow_the_element_size() -> None:
    cfg = CACHE_CASES["gqa"]
    model, cache = CausalLM(cfg).eval().double(), KVCache()
    with torch.no_grad():
        model(torch.randint(0, cfg.vocab_size, (2, 7)), cache=cache)
    assert cache.nbytes == kv_cache_bytes(cfg, 7, bytes_per_element=8, batch=2)
    assert kv_cache_bytes(CACHE_CASES["mqa"], 7) * 4 == kv_cache_bytes(SMALL, 7)  # MQA: one KV head of four


# --- entropy -------------------------------------------------------------------------------------------------


def test_entropy_against_torch_categorical_and_its_bounds() -> None:
    p = torch.softmax(torch.randn(5, 7, generator=torch.Generator().manual_seed(0), dtype=torch.float64), -1)
    torch.testing.assert_close(entropy(p), torch.distributions.Categorical(probs=p).entropy())
    torch.testing.assert_close(entropy(p, bits=True), entropy(p) / math.log(2))
    assert entropy(torch.tensor([0.0, 1.0, 0.0])).item() == 0.0  # 0·log 0 = 0, no NaN
    assert entropy(torch.full((8,), 1 / 8, dtype=torch.float64), bits=True).item() == pytest.approx(3.0)


# --- shared checks and (de)serialisation ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", [0, -3, 2.5, True, None, "4", float("nan"), float("inf")])
def test_positive_int_refuses_with_the_name(bad: object) -> None:
    with pytest.raises(InputError, match=r"^width must be a positive integer") as info:
        positive_int("width", bad)
    assert "正整数" in info.value.message("zh")


def test_positive_int_returns_an_int() -> None:
    assert positive_int("n", 3.0) == 3 and isinstance(positive_int("n", 3.0), int)
    assert positive_int("n", torch.tensor(5)) == 5


@pytest.mark.parametrize(
    "make",
    [
        lambda: TransformerConfig(num_layers=0),
        lambda: TransformerConfig(num_kv_heads=0),
        lambda: TransformerConfig(sliding_window=0),
        lambda: ViTConfig(patch_size=0),
        lambda: MoEConfig(num_experts=0, top_k=0),
        lambda: make_attention(SMALL.replace(num_heads=0)),
    ],
)
def test_configs_and_modules_use_the_shared_check(make) -> None:
    with pytest.raises(InputError, match="must be a positive integer"):
        make()


@pytest.mark.parametrize(
    "cfg",
    [
        QWEN2_LIKE,
        ViTConfig(positions="sincos2d", pool="avg", class_token=False),
        MoEConfig(transformer=QWEN2_LIKE, num_experts=4, capacity_factor=None),
        RNNConfig(src_vocab=10, tgt_vocab=12, context="dot", dec_hidden=128),
    ],
)
def test_configs_round_trip_through_dicts_and_ignore_unknown_keys(cfg) -> None:
    d = cfg.to_dict()
    assert type(cfg).from_dict(d) == cfg
    assert type(cfg).from_dict({**d, "architecture": "from a newer version"}) == cfg
    assert cfg.replace() == cfg


# §5.4: a stack of identical blocks; one formula from 2017 to 2024 ----------------------------------------------
def test_block_table_reads_sizes_shapes_and_weights() -> None:
    torch.manual_seed(0)
    model = CausalLM(TransformerConfig(vocab_size=32, max_len=8, dim=16, num_layers=3, num_heads=2))
    with torch.no_grad():
        model.blocks[2].load_state_dict(model.blocks[0].state_dict())  # block 2 a copy of block 0
    rows = params.block_table(model.blocks)
    one = sum(p.numel() for p in model.blocks[0].parameters())
    assert [r.params for r in rows] == [one] * 3 and all(r.same_shapes for r in rows)
    assert rows[0].max_diff == 0 and rows[2].max_diff == 0
    want = max(float((a - b).abs().max()) for a, b in zip(model.blocks[1].parameters(), model.blocks[0].parameters()))
    assert rows[1].max_diff == pytest.approx(want) and want > 0  # drawn on its own: same form, other weights
    cfg = model.cfg
    assert one == params.attention_params(cfg) + params.mlp_params(cfg) + 2 * params.norm_params(cfg)
    wider = torch.nn.ModuleList([model.blocks[0], CausalLM(cfg.replace(dim=32, num_heads=2)).blocks[0]])
    other = params.block_table(wider)[1]
    assert not other.same_shapes and math.isnan(other.max_diff)


@pytest.mark.parametrize(
    ("cfg", "cross", "ratio"),
    [
        (params.TRANSFORMER_BIG, False, 1.0),
        (params.TRANSFORMER_BIG, True, 16 / 12),  # a decoder block: self- and cross-attention
        (PRESETS["gpt2-xl"], False, 1.0),
        (
            TransformerConfig(dim=576, num_heads=9, num_kv_heads=3, mlp="swiglu", norm="rmsnorm", bias=False),
            False,
            None,
        ),
    ],
)
def test_block_fit_counts_a_blocks_matrices_against_12_d_squared(cfg, cross, ratio) -> None:
    fit = params.block_fit(cfg, cross=cross)
    d, kv = cfg.dim, cfg.kv_heads * cfg.head_dim
    attention = (2 if cross else 1) * (2 * d * d + 2 * d * kv)  # W_Q, W_O: D × D; W_K, W_V: D × H_kv·D_H
    hidden = cfg.mlp_hidden
    mlp = (3 if cfg.mlp == "swiglu" else 2) * d * hidden
    assert (fit.attention, fit.mlp, fit.rule) == (attention, mlp, 12 * d * d)
    assert fit.ratio == pytest.approx((attention + mlp) / (12 * d * d) if ratio is None else ratio)


def test_architecture_changes_name_the_fields_not_the_sizes() -> None:
    big = params.TRANSFORMER_BIG
    assert params.architecture_changes(big, big.replace(dim=2048, num_heads=32, num_layers=12)) == {}
    smol = big.replace(mlp="swiglu", num_kv_heads=4, norm="rmsnorm")
    changes = params.architecture_changes(big, smol)
    assert changes == {
        "norm": ("layernorm", "rmsnorm"),
        "mlp": ("mlp", "swiglu"),
        "activation": ("relu", "silu"),
        "kv_heads": ("16/16", "4/16"),
    }
