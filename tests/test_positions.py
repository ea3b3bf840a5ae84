"""Position lab (issue 17): the shipped runs reproduce from their seed, the measurements match direct
recomputation, rotary's relative property holds exactly, and the verdicts read the numbers they cite."""

from __future__ import annotations

import math
import os
from pathlib import Path

import pytest
import torch
from torch.nn import functional as F

from tx_explorer.analysis import position_lab as lab
from tx_explorer.config import TransformerConfig
from tx_explorer.families import positions as shipped
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.train import positions as trainer

BUNDLE = Path(os.environ.get("TX_POSITIONS_BUNDLE", shipped.BUNDLE))
SMALL = TransformerConfig(vocab_size=32, max_len=16, dim=16, num_layers=2, num_heads=2)


pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.fixture(scope="module")
def results() -> shipped.Results:
    return shipped.load_results(BUNDLE)


# The shipped runs reproduce ----------------------------------------------------------------------------------
def test_batches_follow_from_the_seed_and_the_stream_length(results):
    """The first batches' window starts depend only on the seed and the number of training tokens."""
    s = trainer.Settings(**results.summary["settings"])
    fake = torch.arange(results.summary["train_tokens"])  # a stream of that length: windows are its offsets
    replay = results.replay()
    for i, (starts, x, _) in zip(range(trainer.REPLAY_STEPS), trainer.batches(fake, s)):
        assert torch.equal(starts, replay[f"batch{i}.starts"])
        assert torch.equal(x[:, 0], starts)


@pytest.mark.parametrize("scheme", lab.SCHEMES)
def test_first_steps_reproduce_the_recorded_losses(results, scheme):
    """``build`` at the shipped seed, trained on the shipped first batches, gives the losses the run logged."""
    s = trainer.Settings(**results.summary["settings"])
    replay = results.replay()
    data = iter([(replay[f"batch{i}.x"], replay[f"batch{i}.y"]) for i in range(trainer.REPLAY_STEPS)])
    model = trainer.build(scheme, seed=s.seed, vocab_size=results.summary["schemes"][scheme]["config"]["vocab_size"])
    losses = [loss for _, loss in zip(range(trainer.REPLAY_STEPS), trainer.train(model, data, s))]
    assert losses == pytest.approx(results.summary["schemes"][scheme]["replay_loss"], abs=1e-5)


def test_every_scheme_starts_from_the_same_weights():
    models = {s: trainer.build(s, seed=3, vocab_size=64) for s in lab.SCHEMES}
    ref = models["none"].state_dict()
    for scheme, m in models.items():
        assert m.cfg.positions == scheme
        for k, v in m.state_dict().items():
            if k != "embed.pos_embed.weight":
                assert torch.equal(v, ref[k]), (scheme, k)


def test_bundle_holds_every_scheme_and_its_curves(results):
    n, long = results.context, results.context * results.summary["settings"]["eval_factor"]
    assert results.schemes == list(lab.SCHEMES)
    for scheme, r in results.summary["schemes"].items():
        curve = r["loss_by_position"]
        assert len(curve) == long
        assert (curve[n] is None) == (scheme == "learned")  # a learned table stops at its length
        assert len(r["attention_by_distance"][0][0]) == n
    model = results.model("rotary")
    assert model.cfg.positions == "rotary" and model.cfg.max_len == n


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
@pytest.mark.parametrize("head_dim, theta", [(2, 10000.0), (16, 10000.0), (64, 500000.0)])
def test_rotary_score_depends_only_on_distance(head_dim, theta):
    check = lab.rotary_relative_check(head_dim, 40, theta=theta, seed=1)
    assert check.max_deviation < 1e-10 * max(1.0, check.scale)
    assert check.scores.shape == (40, 40) and check.by_distance.shape == (79,)
    # an independent reference: the complex-number form of the same rotation, pairs (i, i + Dh/2)
    gen = torch.Generator().manual_seed(1)
    q, k = torch.randn(2, head_dim, generator=gen, dtype=torch.float64)
    h = head_dim // 2
    freq = theta ** (-torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim)  # θ^(−2i/Dh), float64
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
    path = lab.rotation_path(q, pos, theta=100.0)  # (4, 5, 2)
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
def _run(inside, beyond, original, shuffled, spread):
    loss = [inside] * 4 + ([None] * 4 if beyond is None else [beyond] * 4)
    return {
        "loss_by_position": loss,
        "order_probe": {"original": original, "shuffled": shuffled},
        "relative": {"spread": spread, "scale": 1.0},
    }


def test_verdicts_read_the_numbers():
    runs = {
        "none": _run(5.0, 5.1, 4.0, 4.0, 0.0),
        "sinusoidal": _run(4.5, 7.0, 3.5, 4.5, 1.0),
        "learned": _run(4.5, None, 3.5, 4.5, 1.0),
        "rotary": _run(4.4, 6.0, 3.5, 4.4, 1e-7),
        "alibi": _run(4.4, 4.6, 3.5, 4.4, 0.0),
    }
    got = {v.key: v for v in lab.verdicts(runs, context=4)}
    assert got["none_cannot_order"].holds and got["none_cannot_order"].numbers["sinusoidal"] == 1.0
    assert got["alibi_extrapolates"].holds and math.isnan(got["alibi_extrapolates"].numbers["learned"])
    assert got["rotary_relative"].holds
    runs["alibi"] = _run(3.0, 6.5, 3.5, 4.4, 0.0)  # lower loss beyond than sinusoidal, but a larger rise
    runs["none"] = _run(5.0, 5.1, 4.0, 4.5, 0.0)
    runs["rotary"] = _run(4.4, 6.0, 3.5, 4.4, 0.01)
    assert not any(v.holds for v in lab.verdicts(runs, context=4))
