"""Block variants: construction, the zero-branch identity, norm formulas, diagnostics, the mini-run
and the shipped results bundle — each against an independent reference (torch's own norms, float64
recomputation, ``clip_grad_norm_``, the manifest's SHA-256)."""

from __future__ import annotations

import dataclasses
import json
import math
import shutil

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from tx_explorer.analysis import norm_lab, variant_claims
from tx_explorer.bundle import BundleError, verify
from tx_explorer.config import TransformerConfig
from tx_explorer.families import variants as variants_family
from tx_explorer.modules.mlp import MLP, SwiGLU
from tx_explorer.modules.norms import LayerNorm, RMSNorm
from tx_explorer.train import variants

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


SMALL = TransformerConfig(vocab_size=32, max_len=16, dim=16, num_layers=2, num_heads=2)
finite = st.floats(-50, 50, allow_nan=False, allow_infinity=False, width=32)


# Variant construction -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", list(variants.VARIANTS))
def test_variant_is_built_from_its_config(name):
    v = variants.VARIANTS[name]
    cfg = variants.variant_config(name, vocab_size=64, max_len=32)
    model = variants.build(name, vocab_size=64, max_len=32)
    assert model.cfg == cfg
    assert len(model.blocks) == (16 if v.deep else 4) and cfg.dim == (32 if v.deep else 64)
    block = model.blocks[0]
    assert block.norm_position == v.changes.get("norm_position", "pre")
    assert isinstance(block.norm1, RMSNorm if "rms" in name else LayerNorm)
    assert isinstance(block.mlp, SwiGLU if "swiglu" in name else MLP)
    assert isinstance(model.norm, torch.nn.Identity) == (block.norm_position == "post")  # post blocks end in a norm


def test_variants_share_one_parameter_budget():
    """12·L·D² is equal for 4 × 64 and 16 × 32; norms, biases and SwiGLU rounding move it by under 2 %."""
    counts = {n: norm_lab.count_parameters(variants.build(n), non_embedding=True) for n in variants.VARIANTS}
    ref = counts["pre-ln"]
    assert all(abs(c - ref) / ref < 0.02 for c in counts.values()), counts
    assert variants.SHALLOW.num_layers * variants.SHALLOW.dim**2 == variants.DEEP.num_layers * variants.DEEP.dim**2


def test_build_is_seeded_and_unknown_names_are_rejected():
    torch.manual_seed(1)  # the server's global RNG is shared by every session: what it holds must not matter
    a = variants.build("pre-ln", seed=3)
    torch.manual_seed(2)
    b, c = variants.build("pre-ln", seed=3), variants.build("pre-ln", seed=4)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))
    assert not torch.equal(a.blocks[0].attn.qkv.weight, c.blocks[0].attn.qkv.weight)
    w = a.blocks[0].mlp.fc1.weight  # GPT-2's init: N(0, 0.02²), zero biases, unit norm gains
    assert abs(w.std().item() - 0.02) < 0.002 and not a.blocks[0].mlp.fc1.bias.any()
    assert torch.equal(a.blocks[0].norm1.weight, torch.ones_like(a.blocks[0].norm1.weight))
    with pytest.raises(KeyError, match="unknown variant"):
        variants.variant_config("sandwich-ln")


# The identity argument (§8.1) ---------------------------------------------------------------------------------
@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 6),
    norm=st.sampled_from(["layernorm", "rmsnorm"]),
    mlp=st.sampled_from(["mlp", "swiglu"]),
    scale=st.floats(0.01, 100),
    offset=st.floats(-20, 20),
    seed=st.integers(0, 1000),
)
def test_zero_branch_pre_norm_is_exactly_the_identity(n, norm, mlp, scale, offset, seed):
    cfg = SMALL.replace(norm=norm, mlp=mlp)
    x = norm_lab.sample_residual(n, cfg.dim, scale=scale, offset=offset, seed=seed)
    demo = norm_lab.identity_demo(cfg, x, seed=seed)
    assert torch.equal(demo.pre, x) and demo.pre_error == 0.0
    assert demo.post_vs_norm == 0.0


def test_zero_branch_blocks_do_not_depend_on_the_global_rng():
    torch.manual_seed(1)
    a = norm_lab.zero_branch_block(SMALL, "pre", seed=5)
    torch.manual_seed(2)
    b = norm_lab.zero_branch_block(SMALL, "pre", seed=5)
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


def test_zero_branch_post_norm_returns_the_norm_of_x():
    """Checked against torch's own norms: Post-Norm(x) = LN(LN(x)) ≠ x."""
    x = norm_lab.sample_residual(5, SMALL.dim, scale=4.0, offset=2.0, seed=1)
    ln = norm_lab.identity_demo(SMALL, x)
    ref = F.layer_norm(F.layer_norm(x, (SMALL.dim,), eps=SMALL.norm_eps), (SMALL.dim,), eps=SMALL.norm_eps)
    torch.testing.assert_close(ln.post, ref)
    assert ln.post_change > 1.0
    rms = norm_lab.identity_demo(SMALL.replace(norm="rmsnorm"), x)
    ref = F.rms_norm(F.rms_norm(x, (SMALL.dim,), eps=SMALL.norm_eps), (SMALL.dim,), eps=SMALL.norm_eps)
    torch.testing.assert_close(rms.post, ref)


def test_identity_demo_rejects_a_wrong_width():
    with pytest.raises(ValueError, match=r"\[N, 16\]"):
        norm_lab.identity_demo(SMALL, torch.zeros(3, 8))


# LayerNorm and RMSNorm step by step (§5.2, §8.2) --------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(data=st.data(), d=st.integers(2, 24), eps=st.sampled_from([1e-5, 1e-6, 0.1]))
def test_norm_steps_match_torch_layer_norm_and_rms_norm(data, d, eps):
    x = torch.tensor(data.draw(st.lists(finite, min_size=d, max_size=d)), dtype=torch.float64)
    g = torch.tensor(data.draw(st.lists(finite, min_size=d, max_size=d)), dtype=torch.float64)
    b = torch.tensor(data.draw(st.lists(finite, min_size=d, max_size=d)), dtype=torch.float64)
    s = norm_lab.norm_steps(x, g, b, eps=eps)
    torch.testing.assert_close(s.ln_out, F.layer_norm(x, (d,), g, b, eps=eps))
    torch.testing.assert_close(s.rms_out, F.rms_norm(x, (d,), g, eps=eps))
    torch.testing.assert_close(
        s.centred.sum(), torch.zeros((), dtype=torch.float64), atol=1e-9 * (1 + x.abs().sum()), rtol=0
    )


def test_norm_steps_agree_with_the_project_modules_and_differ_when_the_mean_is_large():
    x = torch.tensor([4.0, 6.0, 5.0, 9.0, 3.0, 7.0])
    s = norm_lab.norm_steps(x)
    torch.testing.assert_close(s.ln_out.float(), LayerNorm(6)(x))
    torch.testing.assert_close(s.rms_out.float(), RMSNorm(6)(x))
    assert s.mean == pytest.approx(34 / 6)
    assert (s.ln_out - s.rms_out).abs().max() > 0.5  # mean-centring matters when μ ≫ σ
    shifted = norm_lab.norm_steps(x + 100)
    torch.testing.assert_close(shifted.ln_out, s.ln_out, atol=1e-4, rtol=0)  # LayerNorm ignores a shift
    assert (shifted.rms_out - s.rms_out).abs().max() > 0.3  # RMSNorm does not


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("1, x, 3", "not a number"),
        ("1, inf", "finite"),
        ("5", "at least 2"),
        (", ".join(["1"] * 65), "at most 64"),
    ],
)
def test_bad_vectors_give_clear_messages(text, message):
    with pytest.raises(ValueError, match=message):
        norm_lab.norm_steps(norm_lab.parse_vector(text))


def test_constant_vector_with_zero_eps_is_refused_and_gamma_must_fit():
    with pytest.raises(ValueError, match="ε > 0"):
        norm_lab.norm_steps([0.0, 0.0], eps=0.0)
    with pytest.raises(ValueError, match="one per dimension"):
        norm_lab.norm_steps([1.0, 2.0, 3.0], gamma=[1.0, 2.0])


# MLP vs SwiGLU parameter counts (§8.3) ------------------------------------------------------------------------
@settings(max_examples=30, deadline=None)
@given(dim=st.integers(1, 2048), ratio=st.sampled_from([1.0, 2.0, 4.0, 8.0 / 3.0]), bias=st.booleans())
def test_mlp_counts_formula_equals_the_modules_own_count(dim, ratio, bias):
    c = norm_lab.mlp_param_counts(dim, ratio, bias=bias)
    assert c["mlp_formula"] == c["mlp_counted"] and c["swiglu_formula"] == c["swiglu_counted"]


def test_swiglu_at_8d_over_3_matches_the_4d_mlp():
    c = norm_lab.mlp_param_counts(768, 4.0, bias=False)  # LLaMA-style: hidden 2048
    assert c["swiglu_hidden"] == 2048 and c["swiglu_counted"] == c["mlp_counted"] == 8 * 768**2
    c = norm_lab.mlp_param_counts(64)
    assert abs(c["swiglu_counted"] - c["mlp_counted"]) / c["mlp_counted"] < 0.01


@pytest.mark.parametrize(("dim", "ratio"), [(64, 4.0), (5000, 2.0), (1, 4.0)])
def test_swiglu_by_hand_equals_the_module(dim, ratio):
    """The check's own number, and the module against torch's SiLU and sigmoid: gate and value are not
    interchangeable, so a formula with W₁ and W₂ swapped is far off (the check can tell)."""
    check = norm_lab.swiglu_by_hand(dim, ratio)
    assert check.dim == min(dim, norm_lab.SWIGLU_CHECK_MAX_DIM) and check.max_diff < 1e-5
    torch.manual_seed(0)
    module = SwiGLU(16, 40)
    x = torch.randn(6, 16)
    with torch.no_grad():
        a, b = x @ module.w1.weight.T, x @ module.w2.weight.T
        torch.testing.assert_close(module(x), (F.silu(a) * b) @ module.w3.weight.T)
        torch.testing.assert_close(module(x), (a * torch.sigmoid(a) * b) @ module.w3.weight.T)
        assert float((module(x) - (F.silu(b) * a) @ module.w3.weight.T).abs().max()) > 1e-2


# Diagnostics without hooks ------------------------------------------------------------------------------------
def test_forward_with_stats_is_the_model_forward_and_measures_rms():
    torch.manual_seed(0)
    from tx_explorer.modules.transformer import CausalLM

    model = CausalLM(SMALL)
    idx = torch.randint(0, SMALL.vocab_size, (3, 10))
    logits, rms = norm_lab.forward_with_stats(model, idx)
    assert torch.equal(logits, model(idx))
    emb = model.embed(idx).detach().double()
    assert rms.shape == (SMALL.num_layers + 1,)
    assert float(rms[0]) == pytest.approx(float(emb.pow(2).mean().sqrt()), rel=1e-5)


def test_grad_norms_match_clip_grad_norm():
    torch.manual_seed(0)
    model = variants.build("deep-post-ln", vocab_size=32, max_len=16)
    idx = torch.randint(0, 32, (2, 16))
    model.loss(model(idx), idx).backward()
    total, per_layer = norm_lab.grad_norms(model)
    ref = torch.nn.utils.clip_grad_norm_(model.parameters(), float("inf"))
    assert total == pytest.approx(float(ref), rel=1e-5)
    assert len(per_layer) == 16 and sum(g * g for g in per_layer) < total**2


def test_depth_profile_restores_existing_gradients():
    model = variants.build("pre-ln", vocab_size=32, max_len=16)
    idx = torch.randint(0, 32, (2, 16))
    model.loss(model(idx), idx).backward()
    before = [p.grad.clone() for p in model.parameters()]
    prof = norm_lab.depth_profile(model, idx, idx)
    assert len(prof["grad_norm"]) == 4 and len(prof["residual_rms"]) == 5
    assert all(torch.equal(a, p.grad) for a, p in zip(before, model.parameters()))


def test_ema_is_debiased_and_skips_missing_values():
    assert norm_lab.ema([2.0, 2.0, 2.0], 0.9) == pytest.approx([2.0, 2.0, 2.0])
    out = norm_lab.ema([1.0, None, 3.0], 0.5)
    assert math.isnan(out[1]) and out[2] == pytest.approx((0.5 * 1 + 3) / 1.5)


# Training: identical data, the mini-run -----------------------------------------------------------------------
def _pattern(n: int = 4000, vocab: int = 16) -> torch.Tensor:
    return torch.arange(n) % vocab  # a predictable stream: 0 1 2 … 15 0 1 …


def test_identically_seeded_runs_see_identical_batches_and_repeat_exactly():
    s = variants.Settings(steps=2, batch_size=4, seq_len=8, warmup=0)
    runs = [
        list(variants.train_steps(variants.build("pre-rms", vocab_size=16, max_len=8), _pattern(), s)) for _ in range(2)
    ]
    assert [r.train_loss for r in runs[0]] == [r.train_loss for r in runs[1]]
    g1, g2 = torch.Generator().manual_seed(0), torch.Generator().manual_seed(0)
    for _ in range(3):
        assert all(
            torch.equal(a, b)
            for a, b in zip(variants.sample_batch(_pattern(), 8, 4, g1), variants.sample_batch(_pattern(), 8, 4, g2))
        )


def test_mini_run_lowers_the_loss_in_a_few_steps():
    s = variants.Settings(steps=10, batch_size=8, seq_len=16, lr=1e-2, warmup=0)
    records: dict[str, list] = {"post-ln": [], "pre-ln": []}
    for name, rec in variants.live_run(list(records), _pattern(), s, time_budget=600, vocab_size=16):
        records[name].append(rec)
    for name, recs in records.items():
        assert [r.step for r in recs] == list(range(1, 11)), name
        assert recs[-1].train_loss < recs[0].train_loss - 0.5, (name, recs[0].train_loss, recs[-1].train_loss)
        assert len(recs[0].layer_grad_norm) == 4 and len(recs[0].residual_rms) == 5


def test_mini_run_stops_on_request_and_on_its_time_budget():
    s = variants.Settings(steps=50, batch_size=2, seq_len=8)
    assert list(variants.live_run(["pre-ln"], _pattern(), s, should_stop=lambda: True, vocab_size=16)) == []
    assert list(variants.live_run(["pre-ln"], _pattern(), s, time_budget=0.0, vocab_size=16)) == []
    calls = iter(range(1000))
    got = list(
        variants.live_run(["pre-ln", "post-ln"], _pattern(), s, should_stop=lambda: next(calls) >= 3, vocab_size=16)
    )
    assert [n for n, _ in got] == ["pre-ln", "post-ln", "pre-ln"]
    with pytest.raises(ValueError, match="at least one"):
        list(variants.live_run([], _pattern(), s))


def _variant(losses, params=100_000):
    """A bundle entry: the final validation loss at each seed (None = diverged)."""
    seeds = [{"seed": i, "final_val_loss": x} for i, x in enumerate(losses)]
    return {"seeds": seeds, "non_embedding_parameters": params, "label": ""}


def _summary(spread_of_seeds=0.01, **losses):
    d = spread_of_seeds
    return {
        "variants": {
            n.replace("_", "-"): _variant([x if x is None else x + e for e in (-d, 0, d)]) for n, x in losses.items()
        }
    }


def test_claims_are_computed_from_every_seed():
    summary = _summary(post_ln=6.0, pre_ln=5.5, pre_rms=5.49, pre_rms_swiglu=5.6, deep_post_ln=None, deep_pre_ln=5.9)
    summary["variants"]["pre-rms-swiglu"]["non_embedding_parameters"] = 99_800
    verdicts = {c["key"]: c["state"] for c in variant_claims.claims(summary)}
    assert verdicts == {
        "pre_beats_post": "holds",
        "deep_pre_beats_post": "holds",  # a diverged run loses
        "gap_grows_with_depth": "holds",
        "rms_matches_ln": "holds",  # 5.49 < 5.5 + 0.02, by more than the spread
        "swiglu_same_params": "holds",  # counts do not depend on the seed: no spread
        "swiglu_beats_mlp": "not_holds",
    }
    pre = next(c for c in variant_claims.claims(summary) if c["key"] == "pre_beats_post")
    assert pre["losses"]["pre-ln"].values == pytest.approx((5.49, 5.5, 5.51)) and pre["holds"]
    assert pre["comparison"].gap == pytest.approx(0.5) and pre["comparison"].spread == pytest.approx(0.02)
    summary["variants"]["deep-post-ln"] = _variant([6.19, 6.2, 6.21])
    states = {c["key"]: c["state"] for c in variant_claims.claims(summary)}
    assert states["gap_grows_with_depth"] == "not_holds"  # 0.3 < 0.5
    del summary["variants"]["deep-pre-ln"]
    assert "deep_pre_beats_post" not in {c["key"] for c in variant_claims.claims(summary)}


def test_a_gap_within_the_seed_spread_is_noise():
    """SwiGLU 0.05 nats ahead: a verdict when the seeds agree to 0.01, noise when they scatter by 0.1."""
    same = dict(post_ln=6.0, pre_ln=5.5, pre_rms=5.55, pre_rms_swiglu=5.5, deep_post_ln=6.3, deep_pre_ln=5.9)
    states = lambda summary: {c["key"]: c["state"] for c in variant_claims.claims(summary)}  # noqa: E731
    assert states(_summary(0.01, **same))["swiglu_beats_mlp"] == "holds"
    loud = states(_summary(0.1, **same))
    assert loud["swiglu_beats_mlp"] == "noise" and loud["pre_beats_post"] == "holds"  # 0.5 still beats 0.2


def test_a_claim_with_a_tolerance_names_its_difference_apart_from_its_gap():
    """RMSNorm 0.01 nats behind LayerNorm, SwiGLU 1,000 parameters short: the gap is the room left in the tolerance,
    the difference is what the two variants differ by."""
    summary = _summary(post_ln=6.0, pre_ln=5.5, pre_rms=5.51, pre_rms_swiglu=5.6, deep_post_ln=6.3, deep_pre_ln=5.9)
    summary["variants"]["pre-rms-swiglu"]["non_embedding_parameters"] = 99_000
    got = {c["key"]: c for c in variant_claims.claims(summary)}
    rms, params = got["rms_matches_ln"], got["swiglu_same_params"]
    assert rms["difference"] == pytest.approx(0.01) and rms["tolerance"] == 0.02
    assert rms["comparison"].gap == pytest.approx(0.01)  # 0.02 − 0.01
    assert params["difference"] == pytest.approx(1_000) and params["comparison"].gap == pytest.approx(0)
    assert got["pre_beats_post"]["tolerance"] is None and got["pre_beats_post"]["difference"] is None


# The shipped results ------------------------------------------------------------------------------------------
def test_shipped_results_validate_against_their_manifest():
    verify(variants_family.BUNDLE, variants_family.RETRAIN)
    manifest = json.loads((variants_family.BUNDLE / "manifest.json").read_text())
    assert set(manifest) == set(variants_family.BUNDLE_FILES) - {"manifest.json"}
    res = variants_family.load_results()
    assert set(res.names) == set(variants.VARIANTS)
    assert sum((variants_family.BUNDLE / f).stat().st_size for f in manifest) < 8_000_000
    assert res.summary["seeds"] == list(variants.SEEDS) == [0, 1, 2]
    for name in res.names:
        h, r = res.history[name], res.summary["variants"][name]
        assert [run["seed"] for run in r["seeds"]] == res.summary["seeds"]  # three runs of every variant
        n, first = len(h["step"]), r["seeds"][0]
        assert h["step"] == list(range(1, n + 1)) and n == (first["diverged_at"] or r["settings"]["steps"])
        assert first["final_val_loss"] is None or h["val_loss"][-1] == pytest.approx(first["final_val_loss"], abs=0.3)
        assert len(h["layer_grad_norm"]) == n and len(h["layer_grad_norm"][0]) == r["config"]["num_layers"]
        assert len(h["residual_rms"][0]) == r["config"]["num_layers"] + 1
        assert len(res.profiles[name]["init"]["grad_norm"]) == r["config"]["num_layers"]
        # Read back as a config (fields added since default to their values), the stored one is the variant's.
        assert variants.variant_config(
            name, vocab_size=r["config"]["vocab_size"], max_len=r["config"]["max_len"]
        ) == TransformerConfig.from_dict(r["config"])


def test_shipped_weights_reproduce_the_recorded_validation_loss_roughly():
    res = variants_family.load_results()
    tm = res.text_model("pre-ln")
    val = res.tokens("val")
    from tx_explorer.train.lm import evaluate, windows

    loss = evaluate(tm.model, windows(val, tm.max_len)[:16])
    first = res.summary["variants"]["pre-ln"]["seeds"][0]  # the shipped weights are the first seed's
    assert abs(loss - first["final_val_loss"]) < 0.3  # float16 weights, fewer windows


def test_the_pages_claims_are_every_seeds_numbers():
    """The claims table shows each variant's mean ± std over the shipped seeds, recomputed here from the summary,
    and names the seeds."""
    import statistics

    from tx_explorer.views import norms as view

    res = variants_family.load_results()
    rows = view.runs(res, res.names).claims
    assert len(rows) == len(variant_claims.CLAIMS)
    pre = next(r for r in rows if r["Claim"].startswith("Pre-Norm trains better than Post-Norm (4"))
    losses = [run["final_val_loss"] for run in res.summary["variants"]["pre-ln"]["seeds"]]
    assert f"{statistics.fmean(losses):.3f} ± {statistics.stdev(losses):.3f}" in pre["Numbers"]
    assert all("seeds 0, 1, 2" in r["At this scale"] and "spread" in r["At this scale"] for r in rows)
    assert "seeds 0, 1, 2" in view.runs(res, res.names).caption


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_parameter_claims_difference_is_the_two_counts_difference(lang):
    """The row says what its numbers are: the SwiGLU claim shows the counts' difference (not the tolerance's
    margin) under the word for difference, and the margin as the gap."""
    from tx_explorer.views import norms as view
    from tx_explorer.views import texts

    res = variants_family.load_results()
    counts = [res.summary["variants"][n]["non_embedding_parameters"] for n in ("pre-rms-swiglu", "pre-rms")]
    diff, tol = abs(counts[0] - counts[1]), variant_claims.PARAM_TOLERANCE * counts[1]
    T = texts("norms", lang)
    row = next(r for r in view.runs(res, res.names, lang=lang).claims if r[T("claim")] == T("claim_swiglu_same_params"))
    shown = T("margin_spread", difference=f"{diff:,}", tolerance=f"{tol:,.0f}", gap=f"{tol - diff:,.0f}", spread="0")
    assert shown in row[T("verdict")], row[T("verdict")]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_depth_note_measures_each_deep_runs_spread_from_the_captions_numbers(lang):
    """The note says how far each deep run's trained gradient norm moves from the first block to the last, and
    which way: the ratio of the caption's two numbers (to their rounding), not a typed "Pre-LN stays even"."""
    from tx_explorer.views import norms as view
    from tx_explorer.views import texts

    T, res = texts("norms", lang), variants_family.load_results()
    deep = ["deep-post-ln", "deep-pre-ln"]
    note, caption = view.depth_note(res, lang=lang), view.depth(res, deep, lang=lang)[1]
    assert "stays even" not in note and "保持均衡" not in note
    for name, direction in zip(deep, ("depth_rises", "depth_falls")):
        label = res.label(name, lang)
        shown_pair = caption.split(T("name_value", name=label, value=""))[1].split(" · ")[0].rstrip("。.")
        first, last = (float(v.replace("−", "-")) for v in shown_pair.split(" → "))  # a true minus in 8.4e−06
        shown = note.split(f"{label}{' ' if lang == 'en' else ''}{T(direction)} ")[1].split("×")[0]
        assert float(shown.replace(",", "")) == pytest.approx(max(first, last) / min(first, last), rel=0.05)
    assert "across 16 blocks" in note if lang == "en" else "16 个 block 间" in note


def test_a_tampered_results_file_is_rejected(tmp_path):
    copy = tmp_path / "variants"
    shutil.copytree(variants_family.BUNDLE, copy)
    (copy / "history.json").write_text((copy / "history.json").read_text().replace("1", "2", 1))
    with pytest.raises(BundleError, match=r"history\.json.*python -m tx_explorer\.train variants"):
        variants_family.load_results(copy)


def test_kept_runs_are_reused_only_with_the_same_recipe():
    """``--keep``: a run of an earlier bundle is reused at its seed when its recipe equals this run's; a bundle from
    before seeds were added holds its one run at the seed in its settings."""
    s = variants.variant_settings("pre-ln", variants.Settings())
    recipe = {k: v for k, v in vars(s).items() if k != "seed"}
    fields = {"final_val_loss": 6.0, "final_train_loss_avg20": 6.1, "max_grad_norm": 1.0, "diverged_at": None}
    old = {"variants": {"pre-ln": {"settings": {**recipe, "seed": 0}, **fields, "seconds": 1.0}}}
    assert variants.Kept(old).entry("pre-ln", s) == {0: {"seed": 0, **fields, "seconds": 1.0}}
    runs = [{"seed": i, **fields, "seconds": 1.0} for i in (0, 1, 2)]
    new = {"seeds": [0, 1, 2], "variants": {"pre-ln": {"settings": recipe, "seeds": runs}}}
    assert sorted(variants.Kept(new).entry("pre-ln", s)) == [0, 1, 2]
    assert variants.Kept(new).entry("pre-ln", dataclasses.replace(s, steps=s.steps + 1)) == {}  # another recipe
    assert variants.Kept(new).entry("post-ln", s) == {} and variants.Kept().entry("pre-ln", s) == {}
