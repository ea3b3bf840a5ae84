"""The Edit contract: exact identities (ablation = zeroed W_O columns, self-patching and empty edits change nothing)."""

import copy

import pytest
import torch

from tx_explorer.attention import scaled_dot_product_attention
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.edit import Edit, HeadMeans, head_means
from tx_explorer.masks import causal
from tx_explorer.modules.moe_lm import MoECausalLM, MoEConfig
from tx_explorer.modules.transformer import CausalLM, Encoder

SMALL = dict(vocab_size=50, max_len=16, dim=32, num_layers=3, num_heads=4)
CONFIGS = {
    "gpt": TransformerConfig(**SMALL),
    "llama-gqa": PRESETS["tiny-llama"].replace(**SMALL),  # rotary, 4 query heads on 2 KV heads, RMSNorm, SwiGLU
    "post-norm": TransformerConfig(**SMALL, norm_position="post"),
}


def _model(name: str) -> torch.nn.Module:
    torch.manual_seed(0)
    if name == "encoder":
        return Encoder(TransformerConfig(**SMALL)).eval()
    if name == "moe":
        return MoECausalLM(MoEConfig(transformer=TransformerConfig(**SMALL), num_experts=4)).eval()
    return CausalLM(CONFIGS[name]).eval()


MODELS = [*CONFIGS, "encoder", "moe"]
IDS = torch.randint(0, 50, (2, 9), generator=torch.Generator().manual_seed(1))


def _zero_wo_columns(model: torch.nn.Module, layer: int, head: int) -> torch.nn.Module:
    other = copy.deepcopy(model)
    attn = other.blocks[layer].attn
    with torch.no_grad():
        attn.proj.weight[:, head * attn.head_dim : (head + 1) * attn.head_dim] = 0.0
    return other


@pytest.mark.parametrize("name", MODELS)
@torch.no_grad()
def test_zero_ablation_equals_zeroing_the_heads_wo_columns(name):
    model = _model(name)
    for layer, head in [(0, 1), (2, 3)]:
        edited = model(IDS, edit=Edit().ablate(layer, head, mode="zero"))
        reference = _zero_wo_columns(model, layer, head)(IDS)
        assert (edited - reference).abs().max() <= 1e-6
        assert not torch.equal(edited, model(IDS))  # the ablation did something
    assert model.cfg.num_kv_heads in (None, 2, 4)


@pytest.mark.parametrize("name", MODELS)
@torch.no_grad()
def test_empty_edit_and_self_patching_change_nothing(name):
    model = _model(name)
    clean = model(IDS)
    assert torch.equal(model(IDS, edit=Edit()), clean)
    rec = Edit().record()
    assert torch.equal(model(IDS, edit=rec), clean)  # recording alone changes nothing
    patch = Edit().patch_tokens(rec)
    for layer in range(len(model.blocks)):
        for head in range(model.cfg.num_heads):
            patch.patch_head(layer, head, rec)
        for site in ("pre", "mid", "post"):
            patch.patch_residual(layer, list(range(IDS.shape[1])), rec, site=site)
    assert torch.equal(model(IDS, edit=patch), clean)


@torch.no_grad()
def test_patching_from_another_run_moves_the_output_to_that_run():
    model = _model("gpt")
    other = torch.randint(0, 50, IDS.shape, generator=torch.Generator().manual_seed(7))
    rec = Edit().record()
    target = model(other, edit=rec)
    last = len(model.blocks) - 1
    patched = model(IDS, edit=Edit().patch_residual(last, list(range(IDS.shape[1])), rec, site="post"))
    assert torch.equal(patched, target)  # the whole final residual replaced: the other run's logits
    one = model(IDS, edit=Edit().patch_residual(1, 4, rec))  # one position: earlier positions are untouched
    assert torch.equal(one[:, :4], model(IDS)[:, :4]) and not torch.equal(one[:, 4:], model(IDS)[:, 4:])


@torch.no_grad()
def test_recorded_final_residual_reads_out_as_the_logits():
    model = _model("llama-gqa")
    rec = Edit().record()
    logits = model(IDS, edit=rec)
    last = rec.captured.get_site("post", len(model.blocks) - 1)
    assert torch.equal(model.head(model.norm(last)), logits)
    assert rec.captured.get_site("head", 0).shape == (2, 4, 9, 8)  # [B, H, N, Dh]: per query head under GQA


@pytest.mark.parametrize("name", ["gpt", "llama-gqa"])
@torch.no_grad()
def test_mean_ablation_uses_the_stated_reference(name):
    model = _model(name)
    windows = torch.randint(0, 50, (5, 8), generator=torch.Generator().manual_seed(3))
    means = head_means(lambda ids, e: model(ids, edit=e), windows, source="five random windows", batch_size=2)
    assert means.count == 40 and means.source == "five random windows"
    rec = Edit().record()
    model(windows, edit=rec)
    manual = torch.stack([rec.captured[("head", layer)].double().mean(dim=(0, 2)) for layer in range(3)])
    torch.testing.assert_close(means.values, manual.float(), rtol=0, atol=1e-6)
    layer, head = 1, 2
    edited = model(IDS, edit=Edit().ablate(layer, head, mode="mean", reference=means))
    # Reference: the head's output is the constant m, so W_O·m moves into the bias and its columns are zeroed.
    other = _zero_wo_columns(model, layer, head)
    attn, cols = model.blocks[layer].attn, slice(head * 8, (head + 1) * 8)
    shift = attn.proj.weight[:, cols] @ means.values[layer, head]
    proj = other.blocks[layer].attn.proj
    if proj.bias is None:
        proj.bias = torch.nn.Parameter(torch.zeros(proj.out_features))
    proj.bias.data += shift
    torch.testing.assert_close(edited, other(IDS), rtol=0, atol=1e-5)
    shifted = HeadMeans(values=means.values + 1.0, source="shifted", count=means.count)
    assert not torch.equal(edited, model(IDS, edit=Edit().ablate(layer, head, mode="mean", reference=shifted)))


def test_mean_ablation_without_a_reference_is_refused():
    with pytest.raises(ValueError, match="reference"):
        Edit().ablate(0, 0, mode="mean")
    with pytest.raises(ValueError, match="mode"):
        Edit().ablate(0, 0, mode="half")
    with pytest.raises(LookupError, match="record"):
        Edit().patch_head(0, 0, Edit())


@torch.no_grad()
def test_dropping_the_first_key_renormalises_over_the_rest():
    model = _model("gpt")
    attn, n = model.blocks[0].attn, IDS.shape[1]
    x = torch.randn(2, n, 32)
    mask = causal(n)
    edited = attn(x, mask=mask, edit=Edit().drop_keys(0, [0]).scope(0))
    # Independent reference: hide key 0 from every query that sees another key (query 0 keeps it).
    q, k, v = attn.project_qkv(x)
    hidden = mask.clone()
    hidden[1:, 0] = False
    y, _ = scaled_dot_product_attention(q, k, v, mask=hidden)  # (B, H, N, Dh)
    torch.testing.assert_close(edited, attn.proj(y.transpose(1, 2).reshape(2, n, 32)), rtol=0, atol=1e-6)
    only_head_1 = attn(x, mask=mask, edit=Edit().drop_keys(0, [0], heads=[1]).scope(0))
    assert not torch.equal(only_head_1, edited) and not torch.equal(only_head_1, attn(x, mask=mask))


@torch.no_grad()
def test_edits_apply_only_to_their_layer_and_chain():
    model = _model("gpt")
    both = model(IDS, edit=Edit().ablate(0, 0).ablate(2, 1))
    one_by_one = _zero_wo_columns(_zero_wo_columns(model, 0, 0), 2, 1)(IDS)
    assert (both - one_by_one).abs().max() <= 1e-6
