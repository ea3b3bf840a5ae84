"""Mixture of Experts: routing invariants, capacity, losses, E = 1 equals dense, routing statistics, costs."""

from __future__ import annotations

import json
import math
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.nn import functional as F

from tx_explorer.analysis import params, routing, spread
from tx_explorer.config import TransformerConfig
from tx_explorer.modules.block import TransformerBlock
from tx_explorer.modules.mlp import MLP, SwiGLU
from tx_explorer.modules.moe import MoE, balance_loss, expert_capacity, route, z_loss
from tx_explorer.modules.moe_lm import MoECausalLM, MoEConfig
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.trace import Trace

SMALL = TransformerConfig(vocab_size=64, max_len=16, dim=16, num_layers=2, num_heads=2)


def _probs(n: int, e: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, e, generator=g).mul(2).softmax(dim=-1)


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 40), e=st.integers(1, 9), data=st.data())
def test_route_picks_exactly_k_distinct_experts_with_gates_summing_to_one(n, e, data):
    k = data.draw(st.integers(1, e))
    probs = _probs(n, e, data.draw(st.integers(0, 10_000)))
    r = route(probs, k)
    assert r.chosen.shape == r.gates.shape == r.kept.shape == (n, k)
    assert all(len(set(row.tolist())) == k for row in r.chosen)  # k *distinct* experts per token
    torch.testing.assert_close(r.gates.sum(-1), torch.ones(n))
    # The chosen ones are the k most probable: the smallest chosen beats every unchosen probability.
    unchosen = probs.scatter(1, r.chosen, -1.0)
    assert (probs.gather(1, r.chosen).min(-1).values >= unchosen.max(-1).values).all()
    # Gates are the softmax over the chosen logits (Mixtral's renormalisation).
    torch.testing.assert_close(r.gates, probs.log().gather(1, r.chosen).softmax(-1))
    assert r.kept.all()  # no capacity, nothing dropped


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 60), e=st.integers(2, 8), factor=st.floats(0.1, 3.0), data=st.data())
def test_capacity_is_respected_and_drops_are_counted_against_a_reference_loop(n, e, factor, data):
    k = data.draw(st.integers(1, e))
    probs = _probs(n, e, data.draw(st.integers(0, 10_000)))
    cap = expert_capacity(n, e, k, factor)
    assert cap == max(1, math.ceil(round(k * n / e * factor, 9)))
    r = route(probs, k, cap)
    # Independent reference: fill slots first choice first, token order, with a plain Python loop.
    load = [0] * e
    kept_ref = torch.zeros(n, k, dtype=torch.bool)
    for j in range(k):
        for i in range(n):
            ex = int(r.chosen[i, j])
            if load[ex] < cap:
                load[ex] += 1
                kept_ref[i, j] = True
    assert torch.equal(r.kept, kept_ref)
    served = routing.expert_counts(r.chosen, e, r.kept)
    assert (served <= cap).all()
    assert int((~r.kept).sum()) == n * k - int(served.sum())


def test_module_counts_drops_and_zeroes_dropped_slots():
    torch.manual_seed(0)
    moe = MoE(8, 16, num_experts=4, top_k=2, capacity_factor=0.5).train()
    with torch.no_grad():
        moe.router.weight.zero_()
        moe.router.weight[0] = 5.0  # push every token towards expert 0, which overflows
    x = torch.randn(2, 10, 8).abs()
    trace = Trace()
    y, aux = moe.forward_with_aux(x, trace)
    rec = trace.records[0]
    assert rec.kind == "router" and rec.weights.shape == (2, 1, 10, 4)
    cap = expert_capacity(20, 4, 2, 0.5)
    assert rec.meta["capacity"] == cap == 5
    assert int(aux["num_dropped"]) == int(rec.meta["dropped"].sum()) > 0
    assert int(aux["num_assignments"]) == 40
    # Recompute the output by hand from the recorded routing: dropped slots contribute nothing.
    flat = x.reshape(20, 8)
    chosen, gates, dropped = (rec.meta[k].reshape(20, 2) for k in ("chosen", "gates", "dropped"))
    ref = torch.zeros(20, 8)
    for i in range(20):
        for j in range(2):
            if not dropped[i, j]:
                ref[i] += gates[i, j] * moe.experts[int(chosen[i, j])](flat[i])
    torch.testing.assert_close(y.reshape(20, 8), ref)
    assert (routing.expert_counts(chosen, 4, ~dropped) <= cap).all()


def test_eval_mode_uses_the_eval_capacity_factor():
    moe = MoE(8, 16, num_experts=4, top_k=2, capacity_factor=0.25, eval_capacity_factor=None)
    x = torch.randn(1, 12, 8)
    assert int(moe.train().forward_with_aux(x)[1]["num_dropped"]) > 0
    assert int(moe.eval().forward_with_aux(x)[1]["num_dropped"]) == 0


def test_balancing_loss_is_one_under_uniform_routing_and_larger_when_skewed():
    chosen = torch.randint(0, 8, (50, 2))
    assert balance_loss(torch.full((50, 8), 1 / 8), chosen).item() == pytest.approx(1.0)  # P_i = 1/E
    balanced = torch.arange(48).reshape(24, 2) % 8  # f_i = 1/E exactly, any P
    assert balance_loss(_probs(24, 8, 1), balanced).item() == pytest.approx(1.0)
    skew = torch.zeros(10, 8)
    skew[:, 0] = 1.0
    assert balance_loss(skew, torch.zeros(10, 1, dtype=torch.long)).item() == pytest.approx(8.0)  # all on one: E
    # The module with a zero router: uniform probabilities, loss exactly 1.
    moe = MoE(8, 16, num_experts=4, top_k=2)
    with torch.no_grad():
        moe.router.weight.zero_()
    assert moe.forward_with_aux(torch.randn(2, 5, 8))[1]["balance_loss"].item() == pytest.approx(1.0)


def test_z_loss_matches_its_formula():
    logits = torch.randn(7, 5, dtype=torch.float64)
    ref = sum(math.log(sum(math.exp(v) for v in row)) ** 2 for row in logits.tolist()) / 7
    assert z_loss(logits).item() == pytest.approx(ref)


@pytest.mark.parametrize("expert", ["mlp", "swiglu"])
def test_one_expert_top1_equals_the_dense_mlp_exactly(expert):
    torch.manual_seed(0)
    moe = MoE(16, 32, num_experts=1, top_k=1, expert=expert, capacity_factor=1.0)
    dense = MLP(16, 32) if expert == "mlp" else SwiGLU(16, 32)
    dense.load_state_dict(moe.experts[0].state_dict())
    x = torch.randn(3, 7, 16)
    assert torch.equal(moe.train()(x), dense(x))
    assert torch.equal(moe.eval()(x), dense(x))
    # Inside a block too: TransformerBlock(cfg, mlp=MoE) with E = 1 equals the dense block.
    cfg = SMALL
    block_moe = TransformerBlock(cfg, mlp=MoE(16, 64, num_experts=1, top_k=1))
    block_dense = TransformerBlock(cfg)
    block_dense.load_state_dict(
        {k.replace("mlp.experts.0.", "mlp."): v for k, v in block_moe.state_dict().items() if "router" not in k}
    )
    assert torch.equal(block_moe(x), block_dense(x))


def test_router_runs_in_float32_inside_a_bfloat16_model():
    moe = MoE(8, 16, num_experts=4, top_k=2).to(torch.bfloat16)
    x = torch.randn(1, 6, 8).bfloat16()
    trace = Trace()
    assert moe(x, trace).dtype == torch.bfloat16
    ref = F.linear(x[0].float(), moe.router.weight.float()).softmax(-1)  # float32 logits and softmax
    assert torch.equal(trace.records[0].weights[0, 0], ref)


def test_a_float64_models_router_runs_in_float64():
    """A float64 model is the project's reference run: its router in float32 carried float32's rounding, which
    depends on how many tokens a call holds (a token alone and in its sentence differed by 1e-8 on some CPUs)."""
    torch.manual_seed(0)
    moe = MoE(8, 16, num_experts=4, top_k=2, capacity_factor=None).double().eval()
    x = torch.randn(1, 6, 8, dtype=torch.float64)
    trace = Trace()
    whole = moe(x, trace)
    ref = F.linear(x[0], moe.router.weight).softmax(-1)  # float64 logits and softmax
    assert torch.equal(trace.records[0].weights[0, 0], ref.float())  # recorded in float32, computed in float64
    alone = moe(x[:, -1:])  # the last token in a call of its own
    assert (alone[0, 0] - whole[0, -1]).abs().max() < 1e-15


def test_invalid_settings_are_rejected():
    with pytest.raises(ValueError, match="top_k"):
        MoE(8, 16, num_experts=4, top_k=5)
    with pytest.raises(ValueError, match="top_k"):
        route(torch.rand(3, 4).softmax(-1), 0)
    with pytest.raises(ValueError, match="capacity factor"):
        expert_capacity(10, 4, 2, 0.0)
    with pytest.raises(ValueError, match="top_k"):
        MoEConfig(num_experts=2, top_k=3)


def test_lm_records_one_router_per_layer_and_aux_losses_carry_gradients():
    torch.manual_seed(0)
    cfg = MoEConfig(transformer=SMALL, num_experts=4, top_k=2)
    model = MoECausalLM(cfg).train()
    idx = torch.randint(0, 64, (2, 12))
    trace = Trace()
    logits, aux = model.forward_with_aux(idx, trace)
    assert logits.shape == (2, 12, 64)
    routers = trace.select("router")
    assert [r.layer for r in routers] == [0, 1] and routers[0].name == "blocks.0.router"
    assert len(trace.select("causal")) == 2
    aux["balance_loss"].backward()
    assert model.blocks[0].mlp.router.weight.grad.abs().sum() > 0
    loss, parts = model.training_loss(idx[:, :-1], idx[:, 1:])
    assert set(parts) == {"ce", "balance_loss", "z_loss", "drop_rate"}
    assert loss.item() == pytest.approx(parts["ce"] + 1e-2 * parts["balance_loss"] + 1e-3 * parts["z_loss"], rel=1e-5)
    # Plain forward keeps CausalLM's return type and generate works unchanged.
    assert torch.equal(model.eval()(idx), model(idx))
    assert model.generate(idx[:1, :3], 4, seed=0).shape == (1, 7)


def test_config_round_trips_and_the_dense_counterpart_has_the_same_active_parameters():
    cfg = MoEConfig(transformer=SMALL, num_experts=8, top_k=2, expert_ratio=2.0)
    assert MoEConfig.from_dict(cfg.to_dict()) == cfg
    dense = CausalLM(cfg.dense_counterpart())
    n_dense = sum(p.numel() for p in dense.parameters())
    counts = routing.moe_params(cfg)
    router = counts["router"]
    # Same active parameters except the router (and the expert biases: k experts carry k output biases).
    assert counts["active"] - router - (cfg.top_k - 1) * SMALL.dim * SMALL.num_layers == n_dense


@pytest.mark.parametrize(
    "t",
    [
        SMALL,
        SMALL.replace(mlp="swiglu", norm="rmsnorm", bias=False, tie_embeddings=False, positions="sinusoidal"),
        SMALL.replace(embed_norm=True, type_vocab_size=2, final_norm=False),
    ],
)
@pytest.mark.parametrize(("e", "k"), [(1, 1), (4, 2), (8, 3)])
def test_parameter_counts_are_exact(t, e, k):
    cfg = MoEConfig(transformer=t, num_experts=e, top_k=k)
    with torch.device("meta"):
        model = MoECausalLM(cfg)
    counts = routing.moe_params(cfg)
    assert counts["total"] == sum(p.numel() for p in model.parameters())
    expert = sum(p.numel() for p in model.blocks[0].mlp.experts[0].parameters())
    assert counts["total"] - counts["active"] == t.num_layers * (e - k) * expert


def test_flops_scale_with_k_and_not_with_e():
    cfg = MoEConfig(transformer=SMALL, num_experts=4, top_k=1)
    f1 = routing.moe_flops_per_token(cfg, context=8)
    f2 = routing.moe_flops_per_token(cfg.replace(top_k=2), context=8)
    f8 = routing.moe_flops_per_token(cfg.replace(num_experts=16), context=8)
    assert f2["mlp"] == 2 * f1["mlp"] and f8["mlp"] == f1["mlp"]
    d, h = SMALL.dim, cfg.expert_hidden
    assert f1["mlp"] == SMALL.num_layers * 2 * 2 * d * h
    assert f8["router"] == 4 * f1["router"] == SMALL.num_layers * 2 * d * 16
    assert f1["total"] == sum(v for key, v in f1.items() if key != "total")
    assert (
        params.flops_per_token(cfg.replace(top_k=2).dense_counterpart(), context=8)["total"]
        == f2["total"] - f2["router"]
    )


# ---- statistics on hand-made routing tables -------------------------------------------------------------


def test_expert_counts_and_load_imbalance():
    chosen = torch.tensor([[0, 1], [0, 2], [0, 1], [3, 1]])
    counts = routing.expert_counts(chosen, 4)
    assert counts.tolist() == [3, 3, 1, 1]
    cv, peak = routing.load_imbalance(counts)
    assert cv == pytest.approx(1.0 / 2.0)  # mean 2, std 1
    assert peak == pytest.approx(1.5)
    assert routing.load_imbalance(torch.tensor([5, 5, 5])) == (0.0, 1.0)


def test_drop_rate_on_a_hand_made_table():
    # 4 tokens, 2 experts, top-1: three want expert 0. Capacity ceil(4/2·f): f=1 → 2 slots → one drop.
    probs = torch.tensor([[0.9, 0.1], [0.8, 0.2], [0.7, 0.3], [0.1, 0.9]])
    assert routing.drop_rate(probs, 1, 1.0) == pytest.approx(0.25)
    assert routing.drop_rate(probs, 1, 1.5) == 0.0  # 3 slots
    assert routing.drop_rate(probs, 1, None) == 0.0
    assert routing.drop_curve(probs, 1, [0.5, 1.0, 2.0]) == pytest.approx([0.5, 0.25, 0.0])
    # Groups of 2 tokens: group 1 = two for expert 0 with 1 slot each → one drop; group 2 fits.
    assert routing.drop_rate(probs, 1, 1.0, group_size=2) == pytest.approx(0.25)
    # max/mean load is the factor at which nothing drops.
    _, peak = routing.load_imbalance(routing.expert_counts(route(probs, 1).chosen, 2))
    assert routing.drop_rate(probs, 1, peak) == 0.0


def test_entropies_against_hand_values():
    onehot = torch.eye(4)
    uniform = torch.full((3, 4), 0.25)
    assert routing.token_entropy(onehot).tolist() == [0.0] * 4
    torch.testing.assert_close(routing.token_entropy(uniform), torch.full((3,), math.log(4)))
    assert routing.marginal_entropy(onehot) == pytest.approx(math.log(4))  # decisive and spread: max MI
    collapsed = torch.tensor([[1.0, 0, 0, 0]] * 5)
    assert routing.marginal_entropy(collapsed) == pytest.approx(0.0)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 30), e=st.integers(2, 8), seed=st.integers(0, 10_000))
def test_marginal_entropy_bounds_token_entropy(n, e, seed):
    probs = _probs(n, e, seed).double()
    h_tok = routing.token_entropy(probs).mean().item()
    h_marg = routing.marginal_entropy(probs)
    assert h_tok - 1e-9 <= h_marg <= math.log(e) + 1e-9  # concavity: mutual information ≥ 0


def test_cooccurrence_repetition_and_baselines():
    chosen = torch.tensor([[[0, 1], [0, 2], [1, 0], [3, 2]]])  # one sequence of 4 tokens, k = 2
    co = routing.cooccurrence(chosen, 4)
    assert co[0, 1] == 1 and co[0, 2] == 1 and co[1, 0] == 1 and co[3, 2] == 1 and co.sum() == 4
    same_first, overlap = routing.repetition(chosen)
    assert same_first == pytest.approx(1 / 3)  # (0→0) yes, (0→1) no, (1→3) no
    assert overlap == pytest.approx(2 / 3)  # {0,1}∩{0,2}, {0,2}∩{1,0} overlap; {1,0}∩{3,2} does not
    assert routing.repetition_baseline(8, 2) == pytest.approx((1 / 8, 1 - 15 / 28))  # Mixtral's ≈ 46 %
    with pytest.raises(ValueError):
        routing.cooccurrence(chosen[..., :1], 4)


def test_repetition_of_random_routing_approaches_the_baseline():
    g = torch.Generator().manual_seed(0)
    chosen = torch.stack([torch.randperm(8, generator=g)[:2] for _ in range(20_000)]).reshape(100, 200, 2)
    same_first, overlap = routing.repetition(chosen)
    base_first, base_overlap = routing.repetition_baseline(8, 2)
    assert same_first == pytest.approx(base_first, abs=0.01)
    assert overlap == pytest.approx(base_overlap, abs=0.01)


def test_specialisation_table_on_a_hand_made_table():
    # Token 7 always goes to expert 1; token 3 splits 2:1 between experts 0 and 1; token 9 is too rare.
    tokens = torch.tensor([7] * 6 + [3] * 6 + [9])
    first = torch.tensor([1] * 6 + [0, 0, 0, 0, 1, 1] + [0])
    table = routing.specialisation(first, tokens, 2, min_count=5)
    assert table[0] == [(3, 4, pytest.approx(4 / 6))]
    assert table[1] == [(7, 6, 1.0), (3, 2, pytest.approx(2 / 6))]


def test_balance_relative_on_a_hand_made_table():
    probs = torch.tensor([[0.5, 0.5], [0.5, 0.5]])
    assert routing.balance_relative(probs, torch.tensor([[0], [0]])) == pytest.approx(1.0)
    probs = torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    assert routing.balance_relative(probs, torch.tensor([[0], [0]])) == pytest.approx(2.0)


def test_collect_routing_matches_the_trace_and_gate_matrix_scatters_the_gates():
    torch.manual_seed(0)
    cfg = MoEConfig(transformer=SMALL, num_experts=4, top_k=2)
    model = MoECausalLM(cfg)
    idx = torch.randint(0, 64, (5, 8))
    tables = routing.collect_routing(model, idx, batch_size=2)  # three batches, concatenated
    assert len(tables) == 2 and tables[0].probs.shape == (5, 8, 4) and tables[1].chosen.shape == (5, 8, 2)
    trace = Trace()
    model.eval()(idx, trace=trace)
    whole = routing.routing_tables(trace)
    torch.testing.assert_close(tables[1].probs, whole[1].probs)
    assert torch.equal(tables[1].chosen, whole[1].chosen)
    g = tables[0].gate_matrix()
    torch.testing.assert_close(g.sum(-1), torch.ones(5, 8))
    assert ((g > 0).sum(-1) == 2).all()
    torch.testing.assert_close(g.gather(-1, tables[0].chosen), tables[0].gates)
    stats = routing.layer_statistics(tables[0], 1.0, group_size=16)
    assert stats["ln_e"] == pytest.approx(math.log(4))
    assert 0 <= stats["drop_rate"] <= 1 and stats["token_entropy"] <= stats["marginal_entropy"] + 1e-9
    with pytest.raises(LookupError):
        routing.routing_tables(Trace())


# ---- figure builders ------------------------------------------------------------------------------------


def test_figures_escape_tokens_and_place_validation_points_at_their_steps():
    import numpy as np

    from tx_explorer.viz import moe as vm

    tokens = ["<b>", "x"]
    gates = np.array([[[0.7, 0.3, 0.0], [0.0, 0.4, 0.6]]])  # (L=1, T=2, E=3)
    fig = vm.gate_heatmaps(gates, gates, tokens)
    assert fig.data[0].customdata[0][0][0] == "&lt;b&gt;"
    with pytest.raises(ValueError):
        vm.gate_heatmaps(gates, gates[:, :1], tokens)
    strip = vm.coloured_tokens(tokens, np.array([[0, 2]]), 3)
    assert strip.data[0].text[0][0] == "&lt;b&gt;" and list(strip.data[0].z[0]) == [0.5, 2.5]
    curves = {
        "moe": {"step": [1, 2, 3], "flops": [10, 20, 30], "train_loss": [3, 2, 1], "val_step": [3], "val_loss": [1.5]}
    }
    fig = vm.loss_curves(curves, "flops")
    assert list(fig.data[1].x) == [30] and list(fig.data[1].y) == [1.5]


def test_chinese_figures_name_a_layer_as_the_tables_do():
    """第 0 层, not 层 0 (the words put the number inside the phrase): subplot titles, hovers and legend entries."""
    import numpy as np

    from tx_explorer.views import moe as view
    from tx_explorer.viz import moe as vm

    words = view._words("zh")
    gates = np.array([[[0.7, 0.3]], [[0.2, 0.8]]])  # (L=2, T=1, E=2)
    heat = vm.gate_heatmaps(gates, gates, ["a"], words=words)
    assert [a.text for a in heat.layout.annotations] == ["第 0 层", "第 1 层"]
    assert heat.data[1].hovertemplate.endswith("<extra>第 1 层</extra>")
    strip = vm.coloured_tokens(["a"], np.array([[0], [1]]), 2, words=words)
    load = vm.load_heatmap(np.ones((2, 2)), words=words)
    assert all(f.data[0].hovertemplate.startswith("第 %{y} 层") for f in (strip, load))
    drops = vm.drop_curves([1.0, 2.0], np.zeros((2, 2)), current=1.0, words=words)
    assert [t.name for t in drops.data if t.name][:2] == ["第 0 层", "第 1 层"]


def test_per_layer_views_load_matrix_and_cost_sweep():
    torch.manual_seed(0)
    cfg = MoEConfig(transformer=SMALL, num_experts=4, top_k=2)
    tables = routing.collect_routing(MoECausalLM(cfg), torch.randint(0, 64, (3, 6)))
    view = routing.per_layer(tables, sequence=1)
    assert view["gates"].shape == view["probs"].shape == (2, 6, 4) and view["first"].shape == (2, 6)
    assert torch.equal(view["first"][1], tables[1].chosen[1, :, 0])
    loads = routing.load_matrix(tables)
    assert loads.shape == (2, 4) and (loads.sum(dim=1) == 3 * 6 * 2).all()
    sweep = routing.cost_sweep(cfg, [2, 4, 8])
    assert sweep["total"][1] == routing.moe_params(cfg)["total"]
    assert sweep["active"][2] - sweep["active"][0] == SMALL.num_layers * SMALL.dim * 6  # only the router grows
    assert sweep["total"][2] > sweep["total"][1] > sweep["total"][0]


@pytest.mark.parametrize("bias", [True, False])
def test_stacked_experts_are_the_expert_modules(bias):
    """W₁ [E, D, H] and W₂ [E, H, D] read back weight by weight, counted against the modules' own parameters, and
    one expert's output rebuilt from its slices by hand in float64."""
    torch.manual_seed(0)
    layer = MoE(8, 12, num_experts=3, top_k=2, bias=bias)
    x = torch.randn(5, 8)
    got = routing.stacked_experts(layer, x)
    assert got.w1 == (3, 8, 12) and got.w2 == (3, 12, 8)
    expert_params = sum(p.numel() for p in layer.experts.parameters())
    assert got.weights + got.biases == expert_params and got.weights == 2 * 3 * 8 * 12
    assert got.max_diff < 1e-5
    e = layer.experts[2]
    w1, w2 = e.fc1.weight.double(), e.fc2.weight.double()  # nn.Linear's [out, in]
    h = F.gelu(x.double() @ w1.T + (e.fc1.bias.double() if bias else 0))
    by_hand = h @ w2.T + (e.fc2.bias.double() if bias else 0)
    torch.testing.assert_close(e(x).double(), by_hand, atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="MLP experts"):
        routing.stacked_experts(MoE(8, 12, num_experts=2, top_k=1, expert="swiglu"), x)


def test_a_stacked_expert_that_differs_from_its_module_is_seen():
    """The check can fail: an expert module that computes something other than its stacked weights (here another
    activation than the one the stacked path applies) shows a difference."""
    torch.manual_seed(0)
    layer = MoE(8, 12, num_experts=2, top_k=1)
    layer.experts[1].act = torch.nn.ReLU()
    assert routing.stacked_experts(layer, torch.randn(5, 8)).max_diff > 1e-3


def test_one_seed_loss_gap_is_within_noise_and_read_against_a_borrowed_spread():
    gap = routing.loss_gap([5.680], [5.736], [0.006, 0.032, 0.010])
    assert gap.comparison.state == "noise" and gap.comparison.gap == pytest.approx(0.056)
    assert gap.borrowed == pytest.approx(0.064) and not gap.beyond_borrowed  # 0.056 < 2 × 0.032
    assert routing.loss_gap([5.6], [5.736], [0.006, 0.032]).beyond_borrowed  # 0.136 > 0.064
    alone = routing.loss_gap([5.680], [5.736])
    assert alone.reference is None and math.isnan(alone.borrowed) and not alone.beyond_borrowed
    seeds = routing.loss_gap([5.60, 5.61, 5.62], [5.73, 5.74, 5.75])  # with seeds of its own: a real verdict
    assert seeds.comparison.state == "holds"


def test_loss_gap_gives_each_seeds_gap():
    gap = routing.loss_gap([5.60, 5.61, 5.62], [5.73, 5.74, 5.77])
    assert gap.per_seed == pytest.approx([0.13, 0.13, 0.15])
    assert gap.comparison.gap == pytest.approx(0.13 + 0.02 / 3)


def _bundle(*runs: tuple[int, float, float]) -> SimpleNamespace:
    """What loss_verdict reads of a bundle: its record, the first run the shipped one, all listed under seeds."""
    seeds = [{"seed": s, "final_val_loss": {"moe": m, "dense": d}} for s, m, d in runs]
    return SimpleNamespace(summary={**seeds[0], "seeds": seeds})


@pytest.mark.parametrize(
    ("runs", "state", "words"),
    [
        (((0, 5.60, 5.73), (1, 5.61, 5.74), (2, 5.62, 5.77)), "holds", "Yes, at this scale"),
        (((0, 5.60, 5.66), (1, 5.70, 5.64), (2, 5.65, 5.68)), "noise", "Not established"),
        (((0, 5.80, 5.73), (1, 5.81, 5.74), (2, 5.82, 5.72)), "not_holds", "No: at this scale the dense model is"),
    ],
)
def test_the_loss_verdict_is_computed_from_every_recorded_seed(runs, state, words):
    from tx_explorer.views import moe as view

    comparison = spread.less([m for _, m, _ in runs], [d for _, _, d in runs])
    assert comparison.state == state
    text = view.loss_verdict(_bundle(*runs), None)
    assert text.startswith(f"**Is MoE ahead?** {words}") and "**one seed**" not in text
    assert f"at {len(runs)} seeds (0, 1, 2)" in text
    assert f"MoE **{comparison.left.plus_minus()}**, dense **{comparison.right.plus_minus()}**" in text
    assert f"gap (dense − MoE) of {comparison.gap:.3f} nats" in text and f"spread of {comparison.spread:.3f}" in text
    assert ", ".join(f"seed {s}: {d - m:+.3f}" for s, m, d in runs) in text
    zh = view.loss_verdict(_bundle(*runs), None, lang="zh")
    assert comparison.left.plus_minus() in zh and "种子 0：" in zh and "{" not in zh
    # the borrowed spread is for one seed only: with seeds of their own it is not read
    assert view.loss_verdict(_bundle(*runs), (3, [0.5])) == text


def test_a_record_without_seeds_is_one_seed_within_noise():
    from tx_explorer.views import moe as view

    record = SimpleNamespace(summary={"seed": 0, "final_val_loss": {"moe": 5.680, "dense": 5.736}})
    assert view.seed_runs(record.summary) == [{"seed": 0, "final_val_loss": {"moe": 5.680, "dense": 5.736}}]
    text = view.loss_verdict(record, (3, [0.006, 0.032]))
    assert "**one seed** (0)" in text and "0.056 nats" in text and "twice the largest, 0.064 nats" in text


def _run(folder, seed: int, moe: float, dense: float, command: str, **changes) -> None:
    """A finished run of ``train moe`` as record_seeds reads it: a record, a tokenizer, a model file, a manifest."""
    from tx_explorer.bundle import write_manifest
    from tx_explorer.train import moe as train

    folder.mkdir()
    record = {key: {"value": key} for key in train.RECIPE}
    cfg = MoEConfig(transformer=SMALL)
    record.update(config=cfg.to_dict(), dense_config=cfg.dense_counterpart().to_dict())
    record.update(seed=seed, final_val_loss={"moe": moe, "dense": dense}, minutes=1.0, command=command, **changes)
    (folder / "training.json").write_text(json.dumps(record))
    (folder / "tokenizer.json").write_text('{"vocab": {}}')
    (folder / "model.safetensors").write_bytes(bytes([seed]))
    write_manifest(folder)


def test_record_seeds_adds_runs_of_the_same_recipe_and_refuses_others(tmp_path):
    from tx_explorer.bundle import sha256, verify, write_manifest
    from tx_explorer.train import moe as train

    shipped = tmp_path / "tiny-moe"
    _run(shipped, 0, 5.68, 5.74, "python -m tx_explorer.train moe --threads 1")
    # The shipped record predates fields the configs gained since (at their defaults): still the same recipe.
    record = json.loads((shipped / "training.json").read_text())
    del record["dense_config"]["rope_theta"], record["config"]["transformer"]["qk_norm"]
    (shipped / "training.json").write_text(json.dumps(record))
    write_manifest(shipped)
    _run(tmp_path / "s2", 2, 5.66, 5.73, "python -m tx_explorer.train moe --seed 2 --threads 1 --out /tmp/s2")
    _run(tmp_path / "s1", 1, 5.70, 5.75, "python -m tx_explorer.train moe --seed=1 --out=/tmp/s1 --threads 2")
    model = sha256(shipped / "model.safetensors")
    train.main(["--out", str(shipped), "--record-seeds", str(tmp_path / "s2"), str(tmp_path / "s1")])
    verify(shipped)  # the manifest was rewritten for the new record
    assert sha256(shipped / "model.safetensors") == model
    record = json.loads((shipped / "training.json").read_text())
    assert [r["seed"] for r in record["seeds"]] == [0, 1, 2]
    assert [r["final_val_loss"]["moe"] for r in record["seeds"]] == [5.68, 5.70, 5.66]
    assert record["seeds"][2]["command"].endswith("--seed 2 --threads 1 --out /tmp/s2")
    assert record["seeds_command"].startswith("python -m tx_explorer.train moe --out ")
    assert record["final_val_loss"] == {"moe": 5.68, "dense": 5.74}  # the shipped run's own numbers stay
    # Another recipe (a setting recorded, an option given, another tokenizer) or a seed twice is refused.
    _run(tmp_path / "steps", 3, 5.6, 5.7, "python -m tx_explorer.train moe --seed 3", steps={"value": "other"})
    _run(tmp_path / "lr", 4, 5.6, 5.7, "python -m tx_explorer.train moe --seed 4 --lr 0.01")
    _run(tmp_path / "tok", 5, 5.6, 5.7, "python -m tx_explorer.train moe --seed 5")
    (tmp_path / "tok" / "tokenizer.json").write_text('{"vocab": {"a": 0}}')
    write_manifest(tmp_path / "tok")
    _run(tmp_path / "again", 0, 5.6, 5.7, "python -m tx_explorer.train moe --threads 1")
    _run(tmp_path / "cfg", 6, 5.6, 5.7, "python -m tx_explorer.train moe --seed 6")
    record = json.loads((tmp_path / "cfg" / "training.json").read_text())
    record["config"]["top_k"] = 1
    (tmp_path / "cfg" / "training.json").write_text(json.dumps(record))
    write_manifest(tmp_path / "cfg")
    refused = [("steps", "steps"), ("lr", "command"), ("tok", "tokenizer"), ("again", "already recorded")]
    for run, why in [*refused, ("cfg", "config")]:
        with pytest.raises(SystemExit, match=why):
            train.record_seeds(shipped, [tmp_path / run], "cmd")
    assert [r["seed"] for r in json.loads((shipped / "training.json").read_text())["seeds"]] == [0, 1, 2]


def test_seeds_on_one_side_within_noise_are_read_with_a_sign_test():
    """Each seed's gap positive but the means within the spread: the verdict stays "within noise" and says how
    often that many seeds fall on one side by chance (2 · 0.5ⁿ); with mixed signs it says nothing of the kind."""
    from tx_explorer.views import moe as view

    one_side = _bundle((0, 5.680, 5.736), (1, 5.651, 5.735), (2, 5.781, 5.845))
    text = view.loss_verdict(one_side, None)
    assert text.startswith("**Is MoE ahead?** Not established") and "with probability 0.25" in text
    assert "概率也有 0.25" in view.loss_verdict(one_side, None, lang="zh")
    mixed = _bundle((0, 5.60, 5.66), (1, 5.70, 5.64), (2, 5.65, 5.68))
    assert "probability" not in view.loss_verdict(mixed, None)
