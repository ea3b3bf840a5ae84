"""Position lab: the shipped runs reproduce from their seeds (three per scheme), the measurements
match direct recomputation, rotary's relative property holds exactly, the sinusoidal table is scaled to the token
embeddings' size, and the verdicts read the numbers they cite, holding only beyond the spread over seeds."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from tx_explorer.analysis import position_lab as lab
from tx_explorer.config import TransformerConfig
from tx_explorer.families import positions as positions_family
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.train import positions as trainer

BUNDLE = Path(os.environ.get("TX_POSITIONS_BUNDLE", positions_family.BUNDLE))
SMALL = TransformerConfig(vocab_size=32, max_len=16, dim=16, num_layers=2, num_heads=2)


pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.fixture(scope="module")
def results() -> positions_family.Results:
    return positions_family.load_results(BUNDLE)


# The shipped runs reproduce ----------------------------------------------------------------------------------
def test_batches_follow_from_the_seed_and_the_stream_length(results):
    """The first batches' window starts depend only on the seed and the number of training tokens."""
    fake = torch.arange(results.summary["train_tokens"])  # a stream of that length: windows are its offsets
    replay = results.replay()
    for seed in results.seeds:
        s = trainer.Settings(**results.summary["settings"], seed=seed)
        for i, (starts, x, _) in zip(range(trainer.REPLAY_STEPS), trainer.batches(fake, s)):
            assert torch.equal(starts, replay[f"seed{seed}.batch{i}.starts"])
            assert torch.equal(x[:, 0], starts)
    assert not torch.equal(replay["seed0.batch0.starts"], replay["seed1.batch0.starts"])


@pytest.mark.parametrize("scheme", lab.SCHEMES)
def test_first_steps_reproduce_the_recorded_losses(results, scheme):
    """``build`` at each shipped seed, trained on that seed's first batches, gives the losses the run logged."""
    replay = results.replay()
    vocab = results.summary["schemes"][scheme]["config"]["vocab_size"]
    for run in results.seed_runs(scheme):
        seed = run["seed"]
        s = trainer.Settings(**results.summary["settings"], seed=seed)
        data = iter([(replay[f"seed{seed}.batch{i}.x"], replay[f"seed{seed}.batch{i}.y"]) for i in range(3)])
        model = trainer.build(scheme, seed=seed, vocab_size=vocab)
        losses = [loss for _, loss in zip(range(trainer.REPLAY_STEPS), trainer.train(model, data, s))]
        assert losses == pytest.approx(run["replay_loss"], abs=1e-5), seed


def test_every_scheme_starts_from_the_same_weights():
    models = {s: trainer.build(s, seed=3, vocab_size=64) for s in lab.SCHEMES}
    ref = models["none"].state_dict()
    for scheme, m in models.items():
        assert m.cfg.positions == scheme
        for k, v in m.state_dict().items():
            if k != "embed.pos_embed.weight":
                assert torch.equal(v, ref[k]), (scheme, k)


def test_bundle_holds_every_scheme_at_three_seeds_and_its_curves(results):
    n, long = results.context, results.context * results.summary["settings"]["eval_factor"]
    assert results.schemes == list(lab.SCHEMES)
    assert results.seeds == list(trainer.SEEDS) == [0, 1, 2]
    for scheme in results.schemes:
        assert [r["seed"] for r in results.seed_runs(scheme)] == results.seeds
        for r in results.seed_runs(scheme):
            curve = r["loss_by_position"]
            assert len(curve) == long
            assert (curve[n] is None) == (scheme == "learned")  # a learned table stops at its length
            assert len(r["attention_by_distance"][0][0]) == n
        # three trained models, not one copied: each seed's weights differ
        a, b = (results.model(scheme, seed).embed.tok_embed.weight for seed in results.seeds[:2])
        assert not torch.equal(a, b)
    model = results.model("rotary")
    assert model.cfg.positions == "rotary" and model.cfg.max_len == n
    with pytest.raises(KeyError, match="seed 7"):
        results.model("rotary", 7)


@pytest.mark.parametrize("scheme", ["sinusoidal", "learned", "rotary"])
def test_each_seeds_relative_spread_is_its_own_models(results, scheme):
    """The first layer's relative spread, recomputed from each seed's shipped weights (float16), is the number that
    seed recorded: the per-seed results belong to the per-seed models."""
    for r in results.seed_runs(scheme):
        model = results.model(scheme, r["seed"])
        tokens = torch.randint(0, model.cfg.vocab_size, (8,), generator=torch.Generator().manual_seed(r["seed"]))
        got = lab.relative_spread(model, tokens.tolist(), results.context)
        ratio = got["spread"] / got["scale"]
        assert ratio == pytest.approx(lab.relative(r), rel=0.05, abs=1e-5), r["seed"]


def test_the_sinusoidal_table_is_scaled_to_the_embeddings_size(results):
    """The lab's sinusoidal model adds a table of RMS 0.02 (the token embeddings' initial std), not of RMS 1/√2;
    every other sinusoidal model keeps the 2017 table."""
    cfg = TransformerConfig.from_dict(results.summary["schemes"]["sinusoidal"]["config"])
    assert cfg.sinusoidal_scale == pytest.approx(positions_family.SINUSOIDAL_SCALE)
    fresh = trainer.build("sinusoidal", seed=0, vocab_size=64)
    table = fresh.embed.pos_embed(results.context)  # (N, D)
    assert float(table.pow(2).mean().sqrt()) == pytest.approx(0.02, rel=1e-3)
    assert float(fresh.embed.tok_embed.weight.std()) == pytest.approx(0.02, rel=0.05)
    plain = CausalLM(SMALL.replace(positions="sinusoidal")).embed.pos_embed(16)
    assert float(plain.pow(2).mean().sqrt()) == pytest.approx(math.sqrt(0.5), rel=1e-3)
    past = fresh.embed.pos_embed(3 * results.context)  # beyond the buffer: the formula, scaled the same
    torch.testing.assert_close(past[: results.context], table)


# Measurements against direct recomputation ---------------------------------------------------------------------
@pytest.mark.parametrize("positions", ["learned", "rotary"])
def test_loss_by_position_averages_to_the_loss(positions):
    torch.manual_seed(0)
    model = CausalLM(SMALL.replace(positions=positions)).eval()
    windows = torch.randint(0, 32, (5, 33))  # twice the context
    curve = lab.loss_by_position(model, windows, batch=2)
    m = lab.reach(model, 32)
    assert m == (16 if positions == "learned" else 32)
    assert torch.isnan(curve[m:]).all() and not torch.isnan(curve[:m]).any()
    with torch.no_grad():
        ref = F.cross_entropy(model(windows[:, :m]).flatten(0, 1), windows[:, 1 : m + 1].flatten())
    assert float(curve[:m].mean()) == pytest.approx(float(ref), abs=1e-5)


def test_attention_by_distance_matches_a_loop():
    torch.manual_seed(0)
    model = CausalLM(SMALL.replace(positions="alibi")).eval()
    x = torch.randint(0, 32, (3, 8))
    got = lab.attention_by_distance(model, x)  # (L, H, N)
    from tx_explorer.trace import Trace

    trace = Trace()
    model(x, trace)
    w = trace.stack()  # (L, B, H, N, N)
    for d in (0, 3, 7):
        ref = torch.stack([w[..., i, i - d] for i in range(d, 8)], -1).mean(dim=(1, -1))
        torch.testing.assert_close(got[..., d], ref)
    assert float(got[..., 0].min()) > 0


def test_one_layer_without_positions_is_blind_to_the_order_of_its_context():
    """One causal layer, no positions: the last query attends to a set, so shuffling the context changes
    nothing (exactly); a second layer sees order through the causal mask of the first."""
    torch.manual_seed(0)
    windows = torch.randint(0, 32, (6, 12))
    one = CausalLM(SMALL.replace(positions="none", num_layers=1)).eval()
    original, shuffled = lab.order_probe(one, windows)
    assert shuffled == pytest.approx(original, abs=1e-5)
    two = CausalLM(SMALL.replace(positions="none", dim=32, num_heads=4)).eval()
    for p in two.parameters():
        torch.nn.init.normal_(p, std=0.5)
    original, shuffled = lab.order_probe(two, windows)
    assert abs(shuffled - original) > 1e-3


# Rotary: the relative property --------------------------------------------------------------------------------
@pytest.mark.parametrize("head_dim, base", [(2, 10000.0), (16, 10000.0), (64, 500000.0)])
def test_rotary_score_depends_only_on_distance(head_dim, base):
    check = lab.rotary_relative_check(head_dim, 40, base=base, seed=1)
    assert check.max_deviation < 1e-10 * max(1.0, check.scale)
    assert check.scores.shape == (40, 40) and check.by_distance.shape == (79,)
    # an independent reference: the complex-number form of the same rotation, pairs (i, i + Dh/2)
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, head_dim, generator=gen, dtype=torch.float64)
    h = head_dim // 2
    freq = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # θᵢ = b^(−2i/Dh), float64
    zq, zk = torch.complex(q[:h], q[h:]), torch.complex(k[:h], k[h:])
    m, n = 17, 5
    ref = (zq * torch.exp(1j * m * freq) * (zk * torch.exp(1j * n * freq)).conj()).real.sum()
    assert float(check.scores[m, n]) == pytest.approx(float(ref), abs=1e-10)


def test_rotary_check_rejects_odd_head_dims():
    with pytest.raises(ValueError):
        lab.rotary_relative_check(7, 10)


def test_rotation_path_turns_each_pair_at_its_frequency():
    q = torch.randn(8, dtype=torch.float64)
    pos = torch.arange(5)
    path = lab.rotation_path(q, pos, base=100.0)  # (4, 5, 2)
    assert path.shape == (4, 5, 2)
    torch.testing.assert_close(path.norm(dim=-1), path[:, :1].norm(dim=-1).expand(4, 5))  # lengths kept
    angle = torch.atan2(path[..., 1], path[..., 0]) - torch.atan2(path[:, :1, 1], path[:, :1, 0])
    freq = 100.0 ** (-torch.arange(0, 8, 2, dtype=torch.float64) / 8)
    expected = pos[None, :] * freq[:, None]
    torch.testing.assert_close(torch.remainder(angle - expected + math.pi, 2 * math.pi) - math.pi, 0 * angle)


def test_first_layer_scores_are_relative_for_relative_schemes_only():
    torch.manual_seed(0)
    spread = {}
    for scheme in lab.SCHEMES:
        model = CausalLM(SMALL.replace(positions=scheme, max_len=24))
        r = lab.relative_spread(model, [3, 7], 24)
        spread[scheme] = r["spread"] / r["scale"]
    assert spread["none"] == spread["alibi"] == 0.0
    assert spread["rotary"] < 1e-5
    assert spread["learned"] > 1e-2 and spread["sinusoidal"] > 1e-2


# Verdicts ----------------------------------------------------------------------------------------------------
def _run(inside, beyond, original, shuffled, spread, seed=0):
    loss = [inside] * 4 + ([None] * 4 if beyond is None else [beyond] * 4)
    return {
        "seed": seed,
        "loss_by_position": loss,
        "order_probe": {"original": original, "shuffled": shuffled},
        "relative": {"spread": spread, "scale": 1.0},
    }


def _seeds(*runs):
    """A scheme's bundle entry: the same run at three seeds, each number moved by the seed's ``jitter``."""
    return {"seeds": [_run(*r, seed=i) for i, r in enumerate(runs)]}


def _jitter(args, d):
    return tuple(None if a is None else a + d for a in args[:4]) + args[4:]


def _bundle(table, noise=0.0):
    return {s: _seeds(*(_jitter(args, d) for d in (-noise, 0.0, noise))) for s, args in table.items()}


CLEAR = {
    "none": (5.0, 5.1, 4.0, 4.0, 0.0),
    "sinusoidal": (4.5, 7.0, 3.5, 4.5, 1.0),
    "learned": (4.5, None, 3.5, 4.5, 1.0),
    "rotary": (4.4, 6.0, 3.5, 4.4, 1e-7),
    "alibi": (4.4, 4.6, 3.5, 4.4, 0.0),
}


def test_verdicts_read_the_numbers_at_every_seed():
    got = {(v.key, v.scheme): v for v in lab.verdicts(_bundle(CLEAR, noise=0.01), context=4, bigram=[5.2] * 8)}
    for scheme in ("sinusoidal", "learned", "rotary", "alibi"):
        assert got["orders", scheme].holds and got["helps_inside", scheme].holds
    assert got["orders", "sinusoidal"].numbers["sinusoidal"].mean == pytest.approx(1.0)
    assert got["orders", "rotary"].comparisons[0].gap == pytest.approx(0.9)  # rotary's harm 0.9, none's 0
    assert got["helps_inside", "alibi"].comparisons[0].gap == pytest.approx(5.0 - 4.4)
    floor = got["beats_bigram", ""]
    assert floor.holds and floor.numbers["bigram"].std == 0 and len(floor.comparisons) == 5
    alibi = got["alibi_extrapolates", ""]
    assert alibi.holds and math.isnan(alibi.numbers["learned"].mean) and len(alibi.comparisons) == 2
    assert alibi.comparisons[1].gap == pytest.approx(2.5 - 0.2)  # rise: sinusoidal 2.5, ALiBi 0.2
    assert got["rotary_relative", ""].holds
    assert lab.seeds_of(_bundle(CLEAR)) == [0, 1, 2]
    assert "beats_bigram" not in {v.key for v in lab.verdicts(_bundle(CLEAR), context=4)}  # no bigram, no claim
    runs = {s: (5.0, *rest) for s, (_, *rest) in CLEAR.items()}  # every scheme at none's loss inside
    runs["alibi"] = (4.0, 6.5, 3.5, 4.4, 0.0)  # lower loss beyond than sinusoidal, but a larger rise
    runs["none"] = (5.0, 5.1, 4.0, 5.5, 0.0)  # shuffling hurts none more than any scheme
    runs["rotary"] = (5.0, 6.0, 3.5, 4.4, 0.01)
    states = {(v.key, v.scheme): v.state for v in lab.verdicts(_bundle(runs, noise=0.01), 4, bigram=[4.0] * 8)}
    assert {s for k, s in states.items() if k[0] != "helps_inside"} == {"not_holds"}
    inside = {k[1]: s for k, s in states.items() if k[0] == "helps_inside"}
    assert inside == {"sinusoidal": "noise", "learned": "noise", "rotary": "noise", "alibi": "holds"}  # equal: noise


def test_order_is_judged_scheme_by_scheme():
    """Two schemes that learned order do not carry two that did not (a mean over the four would have)."""
    runs = dict(CLEAR, sinusoidal=(4.5, 7.0, 3.5, 3.5, 1.0), learned=(4.5, None, 3.5, 3.5, 1.0))
    runs["none"] = (5.0, 5.1, 4.0, 4.001, 0.0)
    got = {v.scheme: v for v in lab.verdicts(_bundle(runs, noise=0.001), context=4) if v.key == "orders"}
    assert {s: v.state for s, v in got.items()} == {
        "sinusoidal": "not_holds",
        "learned": "not_holds",
        "rotary": "holds",
        "alibi": "holds",
    }
    assert set(got["learned"].numbers) == {"none", "learned"}  # each row reads none and its own scheme only


def test_the_bigram_on_the_held_out_windows_matches_a_loop():
    """The trainer's bigram curve: add-k probabilities counted by hand, averaged per position over the windows."""
    train = torch.tensor([0, 1, 2, 1, 2, 2, 0, 1, 1, 2, 3, 0, 2, 3, 1])
    val = torch.tensor([2, 0, 1, 2, 3, 3, 1, 0, 2, 1, 0, 3, 2])
    settings = trainer.Settings(seq_len=2, eval_factor=2, eval_windows=2)
    got = trainer.bigram(train, val, settings, vocab_size=4)
    k = got["k"]
    counts = [[0] * 4 for _ in range(4)]
    for a, b in zip(train[:-1].tolist(), train[1:].tolist(), strict=True):
        counts[a][b] += 1
    windows = [val[0:5].tolist(), val[5:10].tolist()]  # 2 windows of 2 × 2 tokens + the next one
    want = [
        sum(-math.log((counts[w[t]][w[t + 1]] + k) / (sum(counts[w[t]]) + 4 * k)) for w in windows) / 2
        for t in range(4)
    ]
    assert got["loss_by_position"] == pytest.approx(want, rel=1e-4)


def test_the_shipped_bigram_reads_the_same_windows(results):
    """One value per position the schemes were read at, below every scheme inside the context here."""
    bigram = results.summary["bigram"]["loss_by_position"]
    assert len(bigram) == len(results.seed_runs("none")[0]["loss_by_position"])
    assert results.summary["bigram"]["k"] > 0 and all(math.isfinite(v) for v in bigram)


def test_a_gap_inside_the_seed_spread_is_within_noise():
    """ALiBi ahead of sinusoidal by 0.1 nats past the context: a verdict with seeds 0.3 apart is noise."""
    runs = dict(CLEAR, alibi=(4.4, 6.9, 3.5, 4.4, 0.0), sinusoidal=(4.4, 7.0, 3.5, 4.5, 1.0))
    quiet = {v.key: v.state for v in lab.verdicts(_bundle(runs, noise=0.001), context=4)}
    assert quiet["alibi_extrapolates"] == "holds"
    loud = {s: _seeds(*(_jitter(a, d) for d in (-0.3, 0.0, 0.3))) for s, a in runs.items() if s != "alibi"}
    loud["alibi"] = _seeds(*(_jitter(runs["alibi"], d) for d in (0.3, 0.0, -0.3)))  # seeds move apart
    assert {v.key: v.state for v in lab.verdicts(loud, context=4)}["alibi_extrapolates"] == "noise"


def test_alibi_is_tested_against_each_scheme_that_runs_past_the_context():
    """Each comparison names its quantity and rival; learned positions, which cannot run there, are not scored."""
    (alibi,) = [v for v in lab.verdicts(_bundle(CLEAR, noise=0.01), context=4) if v.key == "alibi_extrapolates"]
    assert alibi.tested == (("beyond", "alibi", "sinusoidal"), ("rise", "alibi", "sinusoidal"))
    assert alibi.untestable == ("learned",) and alibi.holds
    assert alibi.comparisons[0].gap == pytest.approx(7.0 - 4.6)  # loss beyond: sinusoidal 7.0, ALiBi 4.6
    runs = dict(CLEAR, learned=(4.5, 4.55, 3.5, 4.5, 1.0))  # a table that could run there, beating ALiBi
    (alibi,) = [v for v in lab.verdicts(_bundle(runs, noise=0.01), context=4) if v.key == "alibi_extrapolates"]
    assert [(q, b) for q, _, b in alibi.tested] == [
        (q, s) for s in ("sinusoidal", "learned") for q in ("beyond", "rise")
    ]
    assert alibi.untestable == () and alibi.state == "not_holds"  # measured, not assumed
    assert [c.state for c in alibi.comparisons] == ["holds", "holds", "not_holds", "not_holds"]  # 4.55, rise 0.05


def test_the_alibi_row_says_what_each_gap_compares(results):
    from tx_explorer import locales
    from tx_explorer.views import position_lab as view

    (v,) = [v for v in view._verdicts(results) if v.key == "alibi_extrapolates"]
    beyond, rise = v.comparisons
    for lang, labelled, untested in (
        (
            "en",
            "mean loss beyond the context, ALiBi {} against sinusoidal {}: gap {}",
            "against learned positions: cannot be tested here",
        ),
        ("zh", "超出上下文后的平均损失：ALiBi {}，对比正弦 {}，差距 {}", "对可学习位置：无法在此检验"),
    ):
        claim = locales.text("position_lab", "claim_alibi_extrapolates", lang)
        (row,) = [r for r in view.verdict_rows(results, lang=lang) if claim in r.values()]
        verdict = row[locales.text("position_lab", "col_verdict", lang)]
        pm = lambda x: x.plus_minus(3)  # noqa: E731
        assert labelled.format(pm(beyond.left), pm(beyond.right), f"{beyond.gap:.3g}") in verdict
        assert f"{rise.gap:.3g}" in verdict.split(locales.text("position_lab", "test_rise", lang))[1]
        assert untested in verdict


def test_benchmarks_state_the_pages_verdicts(results, tmp_path):
    """BENCHMARKS.md's claims are the page's rows, word for word (it said "holds" for ALiBi against learned
    positions, which cannot run past the context), and the bigram claim names the scheme of each gap."""
    from tx_explorer import locales
    from tx_explorer.train import positions as train_positions
    from tx_explorer.views import position_lab as view

    path = tmp_path / "BENCHMARKS.md"
    path.write_text("<!-- positions:start -->\n<!-- positions:end -->\n")
    train_positions.update_benchmarks(path, results.summary)
    written = path.read_text()
    col = lambda c: locales.text("position_lab", f"col_{c}")  # noqa: E731
    rows = view.verdict_rows(results)
    for row in rows:
        assert f"- {row[col('claim')]}: **{row[col('verdict')]}** — {row[col('numbers')]}" in written
    assert "cannot be tested here" in written
    (bigram,) = [r for r in rows if r[col("claim")] == locales.text("position_lab", "claim_beats_bigram")]
    gaps = bigram[col("verdict")].split("; ")[:-1]  # the last part names the seeds
    assert [g.split(",")[1].split()[0] for g in gaps] == ["none", "sinusoidal", "learned", "rotary", "ALiBi"]
