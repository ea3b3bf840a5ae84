"""Review of the block probe (Inside a block) and of the heatmaps' hovers, as a demanding student read them.

* The probe fed each sub-layer its own input and called OLMo 2's first stage "no norm in front (identity)": a bar
  that is the identity by construction, while OLMo 2's own norms (on each sub-layer's output) were never measured
  on their own. Its stages now follow each block's real order, every norm measured, the last one the block's output.
* The token selector's label, "token to change (from 0)", wrapped onto two lines at 1100 px: the detail is its help.
* A heatmap's hover in 中文 read "查询 3: the", an ASCII colon in Chinese prose: the titles' language gives the colon.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from conftest import assert_clean, open_page

from tests.test_architectures import saved
from tx_explorer import locales, models
from tx_explorer.analysis import block_roles
from tx_explorer.analysis.seeding import generator
from tx_explorer.config import PRESETS
from tx_explorer.families.text import TextModel
from tx_explorer.interop.checkpoint import load_checkpoint
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.views import block_roles as view
from tx_explorer.viz.heatmap import heatmap

pytestmark = pytest.mark.usefixtures("one_thread")

TEXT = "The cat sat on the mat because it was warm."
ORDER = {  # each norm position's stages, in the order its block runs them
    "pre": ("norm", "attention", "sum1", "norm2", "mlp", "sum2"),
    "sandwich": ("norm", "attention", "attention_out_norm", "sum1", "norm2", "mlp", "mlp_out_norm", "sum2"),
    "after": ("attention", "attention_out_norm", "sum1", "mlp", "mlp_out_norm", "sum2"),
    "post": ("attention", "sum1", "sum1_norm", "mlp", "sum2", "sum2_norm"),
}


@pytest.fixture(scope="module")
def probed(tmp_path_factory, one_thread):
    """One text model per norm position: random OLMo 2 ("after") and Gemma 2 ("sandwich") checkpoints, tiny-gpt
    (Pre-Norm) and a random Post-Norm tiny-llama."""
    root = tmp_path_factory.mktemp("probe")
    out = {family: load_checkpoint(saved(root / family, family)[0]) for family in ("olmo2", "gemma2")}
    out["tiny-gpt"] = models.load_model("tiny-gpt")
    llama = models.load_model("tiny-llama")
    cfg = PRESETS["tiny-llama"].replace(norm_position="post")
    model = CausalLM(cfg).eval()
    out["post"] = TextModel(name="post", model=model, tokenizer=llama.tokenizer, kind="causal", max_len=cfg.max_len)
    return out


FAMILIES = {"olmo2": "after", "gemma2": "sandwich", "tiny-gpt": "pre", "post": "post"}


def own_stages(block, x: torch.Tensor, mask: torch.Tensor, pos: torch.Tensor) -> dict[str, torch.Tensor]:
    """Each stage's output as the block's own forward computes it, read by hooks on its modules: a sum is the input
    of the norm that follows it (OLMo 2's norm2 is the identity, still called), the last stage the block's output."""
    got: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
    names = ("norm1", "attn", "post_attn_norm", "norm2", "mlp", "post_mlp_norm")
    hooks = [
        getattr(block, n).register_forward_hook(lambda m, args, out, n=n: got.__setitem__(n, (args[0], out)))
        for n in names
        if getattr(block, n) is not None
    ]
    try:
        y = block(x, mask, pos=pos, k_pos=pos)
    finally:
        for h in hooks:
            h.remove()
    if block.norm_position == "post":
        return {
            "attention": got["attn"][1],
            "sum1": got["norm1"][0],
            "sum1_norm": got["norm1"][1],
            "mlp": got["mlp"][1],
            "sum2": got["norm2"][0],
            "sum2_norm": y,
        }
    stages = {
        "norm": got["norm1"][1],
        "attention": got["attn"][1],
        "sum1": got["norm2"][0],
        "norm2": got["norm2"][1],
        "mlp": got["mlp"][1],
        "sum2": y,
    }
    if block.post_attn_norm is not None:
        stages["attention_out_norm"] = got["post_attn_norm"][1]
        stages["mlp_out_norm"] = got["post_mlp_norm"][1]
    if block.norm_position == "after":  # norm1 and norm2 are identities there, not stages
        del stages["norm"], stages["norm2"]
    return stages


@pytest.mark.parametrize("family", list(FAMILIES))
def test_each_stage_is_the_block_s_own_computation_in_its_own_order(probed, family):
    tm, token, layer = probed[family], 3, 1
    model = tm.model
    ids = list(tm.encode(TEXT, view.MAX_TOKENS).ids)
    assert model.blocks[layer].norm_position == FAMILIES[family]
    p = block_roles.token_probe(model, ids, token=token, layer=layer)
    assert p.stages == ORDER[FAMILIES[family]]
    with torch.no_grad():
        idx = torch.tensor([ids])
        pos = torch.arange(len(ids))
        mask = model.mask_between(pos, pos)
        x = model.blocks[0](model.embed(idx), mask, pos=pos, k_pos=pos)  # block 1's input
        block = model.blocks[layer]
        r = torch.randn(x.shape[-1], generator=generator(0))
        moved = x.clone()
        moved[0, token] += 0.5 * x[0, token].norm() * r / r.norm()  # the probe's change (size 0.5, seed 0)
        ran, own, own_moved = (
            block_roles.run(block, x, mask, pos),
            own_stages(block, x, mask, pos),
            own_stages(block, moved, mask, pos),
        )
        assert list(ran) == list(p.stages) and set(own) == set(p.stages)
        for s in p.stages:  # each stage as the probe runs it is bit for bit the block's own
            assert torch.equal(ran[s], own[s]), s
            expected = (own_moved[s][0] - own[s][0]).double().norm(dim=-1).numpy()
            np.testing.assert_array_equal(p.delta[s], expected, err_msg=s)
        assert torch.equal(ran[p.stages[-1]], block(x, mask, pos=pos, k_pos=pos))  # the last stage is the output
    # causal: no stage moves a token before the changed one, and attention moves the later ones
    for s in p.stages:
        assert p.others(s, before=True) == 0.0, s
    assert p.others("attention", before=False) > 0 and p.others(p.stages[-1], before=False) > 0
    # fed alone, every norm and the MLP keep every other token bit for bit; attention alone moves later ones
    for s in p.part("norm") + p.part("mlp"):
        assert p.exact[s] and p.alone[s][token] > 0, s
    assert not p.exact["attention"] and p.others("attention", before=True, alone=True) == 0.0
    assert p.part("norm"), "every one of these blocks has a norm to measure"


STAGE_NAMES = {
    "en": [
        "after attention",
        "after RMSNorm on attention's output",
        "after the residual sum",
        "after the MLP",
        "after RMSNorm on the MLP's output",
        "after the second residual sum: the block's output",
    ],
    "zh": [
        "注意力之后",
        "注意力输出上的 RMSNorm 之后",
        "残差相加之后",
        "MLP 之后",
        "MLP 输出上的 RMSNorm 之后",
        "第二次残差相加之后，即 block 的输出",
    ],
}


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_olmo2_s_stages_are_its_own_and_its_norms_are_measured(probed, lang):
    """No identity bar where a Pre-Norm block has a norm: OLMo 2's norms on the outputs are stages of their own, and
    the table's norm row gives their numbers rather than a dash."""
    pv = view.probe(probed["olmo2"], TEXT, 2, lang=lang)
    names = [a.text for a in pv.bars.figure.layout.annotations]  # one subplot title per stage
    assert names == STAGE_NAMES[lang]
    assert pv.bars.data.shape[1] == len(names)
    T = view.texts("block_roles", lang)
    measured = [list(row.values())[-1] for row in pv.table]  # attention, MLP, norm, residual
    assert measured[1] == measured[2] == T("measured_exact", before="0", after="0")
    assert measured[3] == T("measured_residual")
    assert pv.verdict.startswith(locales.text("block_roles", "verdict_ok", lang).split("{")[0]), pv.verdict
    assert "RMSNorm" in pv.verdict and "identity" not in pv.verdict and "恒等" not in pv.verdict


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_gemma2_s_sandwich_shows_all_four_norms_in_order(probed, lang):
    pv = view.probe(probed["gemma2"], TEXT, 2, lang=lang)
    names = [a.text for a in pv.bars.figure.layout.annotations]
    T = view.texts("block_roles", lang)
    norms = [T(f"stage_{s}", norm="RMSNorm") for s in ("norm", "attention_out_norm", "norm2", "mlp_out_norm")]
    assert [n for n in names if "RMSNorm" in n] == norms
    assert names[-1] == T("stage_last", stage=T("stage_sum2"))
    assert pv.verdict.startswith(locales.text("block_roles", "verdict_ok", lang).split("{")[0]), pv.verdict


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_token_selector_s_label_is_short_and_its_detail_is_in_the_help(lang):
    at = open_page("block_roles", probe_model="tiny-gpt")
    at.session_state["lang"] = lang
    at.run()
    assert_clean(at)
    box = at.number_input(key="probe_token")
    T = view.texts("block_roles", lang)
    assert box.label == T("token") and box.help == T("token_help")
    assert ("counted from 0" if lang == "en" else "从 0 数起") in box.help
    assert len(box.label) <= {"en": 8, "zh": 4}[lang], box.label  # "token to change (from 0)" wrapped at 1100 px


@pytest.mark.parametrize(("lang", "sep"), [("en", ": "), ("zh", "：")])
def test_a_heatmap_s_hover_separates_index_and_label_in_the_caller_s_language(lang, sep):
    """Repeated tokens: the hover writes each cell's index before its label, "queries (rows) 2: the"; in 中文 with
    a full-width colon, "查询 query（行） 2：the", not "2: the"."""
    T = view.texts("common", lang)
    tokens = ["the", "cat", "the"]
    fig = heatmap(np.eye(3), tokens, tokens, x_title=T("axis_keys"), y_title=T("axis_queries"))
    template = fig.data[0].hovertemplate
    assert f"{T('axis_queries')} %{{y}}{sep}%{{customdata[0]}}" in template, template
    assert f"{T('axis_keys')} %{{x}}{sep}%{{customdata[1]}}" in template, template
    if lang == "zh":
        assert "}: %" not in template
