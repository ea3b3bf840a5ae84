"""Head science against independent references: ablation = zeroed W_O columns, patching the one differing token
recovers exactly 1, the last logit-lens read-out is the output, induction scores of a perfect pattern, IG
completeness, and every view on a decoder with GQA (tiny-llama preset), an MoE LM and an encoder."""

import copy
import dataclasses
import functools

import numpy as np
import pytest
import torch
from tokenizers import Tokenizer

from tx_explorer import models
from tx_explorer.analysis import head_science as hs
from tx_explorer.analysis.heads import head_labels
from tx_explorer.config import PRESETS, TransformerConfig
from tx_explorer.errors import InputError
from tx_explorer.families.text import TextModel
from tx_explorer.models import WEIGHTS_DIR
from tx_explorer.modules.moe_lm import MoECausalLM, MoEConfig
from tx_explorer.modules.transformer import CausalLM, Encoder
from tx_explorer.views import head_science as view
from tx_explorer.views import texts

SMALL = dict(vocab_size=2048, max_len=64, dim=32, num_layers=2, num_heads=4)  # tiny-gpt's tokenizer: 2048 ids
TEXT = "The function returns a list of the keys in the dictionary, and the list is sorted."


def _text_model(kind: str) -> TextModel:
    torch.manual_seed(0)
    tokenizer = Tokenizer.from_file(str(WEIGHTS_DIR / "tiny-gpt" / "tokenizer.json"))
    if kind == "encoder":
        model, mode = Encoder(TransformerConfig(**SMALL)), "encoder"
    elif kind == "moe":
        model, mode = MoECausalLM(MoEConfig(transformer=TransformerConfig(**SMALL), num_experts=4)), "causal"
    else:
        model, mode = CausalLM(PRESETS["tiny-llama"].replace(**SMALL)), "causal"  # GQA 4/2, rotary
    return TextModel(name=kind, model=model, tokenizer=tokenizer, kind=mode, max_len=64, byte_level=True)


@pytest.fixture(scope="module", params=["llama", "moe", "encoder"])
def tm(request):
    return _text_model(request.param)


@pytest.fixture(scope="module")
def llama():
    return _text_model("llama")


def test_importance_matches_zeroed_wo_columns(llama):
    ids = hs.encode(llama, TEXT)
    r = hs.head_importance(llama, ids)
    other = copy.deepcopy(llama.model)
    with torch.no_grad():
        other.blocks[1].attn.proj.weight[:, 2 * 8 : 3 * 8] = 0.0  # head 2 of layer 1 (head_dim 8)
        x = torch.tensor([ids])
        loss = lambda m: torch.nn.functional.cross_entropy(m(x)[0, :-1], x[0, 1:]).item()  # noqa: E731
    assert abs(r.delta_loss[1, 2] - (loss(other) - loss(llama.model))) < 1e-5
    assert r.base_loss == pytest.approx(loss(llama.model), abs=1e-6)


def test_mean_ablation_states_its_reference(llama):
    means = hs.reference_means(llama, length=32, count=4)
    assert means.count == 128 and "held-out" in means.source and means.values.shape == (2, 4, 8)
    r = hs.head_importance(llama, hs.encode(llama, TEXT), mode="mean", reference=means)
    assert r.mode == "mean" and np.isfinite(r.delta_loss).all()


def test_patching_the_differing_token_recovers_exactly_one(llama):
    clean, corrupt = hs.encode(llama, "If the file is missing, the"), hs.encode(llama, "If the path is missing, the")
    assert len(clean) == len(corrupt)
    differ = [i for i, (a, b) in enumerate(zip(clean, corrupt)) if a != b]
    answers = hs.answer_ids(llama, (" file", " path"))
    p = hs.activation_patching(llama, clean, corrupt, answers=answers)
    # Layer 0's input differs only at the changed token: patching it there makes the run the clean one.
    assert np.abs(p.residual[0, differ].sum() - 1.0) < 1e-4
    others = [i for i in range(len(clean)) if i not in differ]
    assert np.abs(p.residual[0, others]).max() < 1e-4


def test_patching_refuses_unequal_lengths_and_equal_answers(tm):
    with pytest.raises(InputError, match="equal token length") as info:
        hs.activation_patching(tm, [1, 2, 3], [1, 2])
    assert "相同" in info.value.message("zh")
    if tm.kind == "causal":
        with pytest.raises(InputError, match="same"):
            hs.activation_patching(tm, [5, 6, 7], [5, 6, 8], answers=(9, 9))


def test_logit_lens_last_readout_is_the_output(tm):
    r = hs.logit_lens(tm, hs.encode(tm, TEXT))
    assert r.final_max_diff <= 1e-5 and len(r.rows) == 4
    assert np.allclose(r.cosine_to_final[-1], 1.0, atol=1e-5)
    if tm.kind == "causal":
        assert r.top_ids.shape[-1] == hs.TOP_K and np.abs(r.kl_to_final[-1]).max() < 1e-5
        assert (r.entropy >= 0).all()


def test_repeat_scores_of_perfect_patterns():
    n, m = 5, 11
    t = torch.arange(m)
    induction = torch.zeros(m, m)
    induction[t[n + 1 :], t[n + 1 :] - n + 1] = 1.0
    previous = torch.zeros(m, m)
    previous[t[1:], t[1:] - 1] = 1.0
    s = hs.repeat_scores(torch.stack([induction, previous])[None], n)  # (1, 2, M, M)
    assert s["induction"].tolist() == [[1.0, 0.0]] and s["previous"].tolist() == [[0.0, 1.0]]
    assert s["duplicate"].tolist() == [[0.0, 0.0]]


def test_taxonomy_scores_and_sinks(tm):
    r = hs.taxonomy(tm, hs.encode(tm, TEXT), repeat_length=12)
    for k in ("previous", "duplicate", "induction", "sink"):
        assert ((r.scores[k] >= 0) & (r.scores[k] <= 1 + 1e-6)).all()
    assert r.coords.shape == (8, 2) and r.sinks.shape == (2, 4)
    assert (r.sink_effect is None) == (not r.sinks.any())


def test_attribution_completeness_and_deletion(tm):
    r = hs.attribution(tm, hs.encode(tm, TEXT)[:12])
    assert set(r.scores) == set(hs.ATTRIBUTION_METHODS)
    sizes = np.abs(r.piece_errors)
    assert r.converged and sizes.sum() <= hs.IG_TOLERANCE * abs(r.f_input - r.f_baseline)
    assert r.completeness_gap <= sizes.sum() + 1e-6  # the whole path's error: at most its pieces' sizes added
    assert r.completeness_gap == pytest.approx(abs(r.piece_errors.sum()), abs=1e-6)  # …and their signed sum
    assert r.path[0] == 0 and r.path[-1] == 1 and (np.diff(r.path) > 0).all()
    for curve in r.deletion.values():
        assert curve[0] == pytest.approx(r.f_input, rel=1e-4, abs=1e-6)  # nothing removed yet
        assert curve[-1] == pytest.approx(r.f_baseline, rel=1e-4, abs=1e-6)  # everything removed: the baseline


def test_refined_integrated_gradients_match_a_fine_midpoint_rule(llama):
    """Halving the worst pieces keeps the integral: the converged scores are those of 512 even midpoints."""
    ids = hs.encode(llama, TEXT)[:12]
    r, fine = hs.attribution(llama, ids), hs.attribution(llama, ids, steps=512, budget=512)
    ig, reference = r.scores["integrated_gradients"], fine.scores["integrated_gradients"]
    assert r.converged and r.gradients <= hs.IG_BUDGET
    assert np.abs(ig - reference).max() <= 0.02 * np.abs(reference).max()


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_integrated_gradients_that_did_not_converge_are_said_so(lang):
    """SmolLM2's completeness error was larger than f(x) − f(0), yet its IG was shown as valid. The random MoE's
    routing jumps along the path of TEXT's 19 tokens: the budget is spent above the tolerance, and the page says
    so with the numbers and names the method as not converged in the bars and the table; a dense model converges."""
    moe = _text_model("moe")
    r = hs.attribution(moe, hs.encode(moe, TEXT))
    assert not r.converged and r.gradients == hs.IG_BUDGET
    result = view.attribution(moe, TEXT, lang=lang)
    verdict = result.notes[-1]
    ratio = np.abs(r.piece_errors).sum() / abs(r.f_input - r.f_baseline)
    assert ratio > hs.IG_TOLERANCE and f"{ratio:.0%}" in verdict and f"{hs.IG_TOLERANCE:.0%}" in verdict
    assert ("did not converge" if lang == "en" else "积分梯度未收敛") in verdict and f"{r.gradients} " in verdict
    method = next(iter(result.table.values()))[1]
    assert method.endswith("(not converged)" if lang == "en" else "（未收敛）")
    assert result.panels[0].figure.data[1].name == method  # the bars' legend
    dense = view.attribution(_text_model("llama"), TEXT, lang=lang)
    assert ("Integrated gradients converged" if lang == "en" else "积分梯度已收敛") in dense.notes[-1]
    assert not next(iter(dense.table.values()))[1].endswith(("(not converged)", "（未收敛）"))


def _attribution(piece_errors: list[float], f_input: float) -> hs.Attribution:
    """An attribution whose path has these signed piece errors (f(0) = 0): what the verdict reads."""
    errors = np.array(piece_errors)
    converged = np.abs(errors).sum() <= hs.IG_TOLERANCE * f_input
    return hs.Attribution(
        scores={}, removed=np.zeros(0), deletion={}, faithfulness={}, random_auc=0.0,
        completeness_gap=abs(errors.sum()), f_input=f_input, f_baseline=0.0, target="p",
        path=np.linspace(0, 1, len(errors) + 1), piece_errors=errors, gradients=hs.IG_BUDGET, converged=converged,
    )  # fmt: skip


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_whole_path_check_that_passes_by_cancelling_is_not_read_as_completeness(lang):
    """Gemma 3's review: pieces off by 36 % of f(x) − f(0) in all, "did not converge", then the whole path's
    |Σ IG − (f(x) − f(0))| at 1.2 % stood beside it as if completeness held. It passes only because the pieces'
    errors have opposite signs: the verdict says so with both sums, and that the per-piece sum decides."""
    cancelling = _attribution([0.0439, -0.05, 0.04, -0.0279], f_input=0.4886)  # Σ = 6.0e-03, Σ |·| = 0.1618
    verdict = view.completeness_verdict(cancelling, lang=lang)
    assert "+8.39e−02" in verdict and "−7.79e−02" in verdict and "6.00e−03" in verdict and "1%" in verdict
    assert ("only because the pieces' errors have opposite signs" if lang == "en" else "相互抵消") in verdict
    assert ("the per-piece sum decides" if lang == "en" else "由逐段误差之和来判定") in verdict
    one_sided = view.completeness_verdict(_attribution([0.05, 0.04, 0.03], f_input=0.4886), lang=lang)
    assert ("fails too" if lang == "en" else "同样不通过") in one_sided and "25%" in one_sided
    assert ("cancel" if lang == "en" else "抵消") not in one_sided
    converged = view.completeness_verdict(_attribution([0.01, -0.005], f_input=0.4886), lang=lang)
    assert ("Integrated gradients converged" if lang == "en" else "积分梯度已收敛") in converged
    assert ("cancel" if lang == "en" else "抵消") not in converged


def test_smollm2s_integrated_gradients_are_not_passed_off_as_valid(monkeypatch):
    """The reviewed case: on the page's text f swings along SmolLM2's path from the zero baseline (0.0001 to 0.11
    within α = 0.030…0.037); no affordable refinement converges, and the page says so."""
    # What is tested is the verdict on the path: the deletion curves at two points, and 8 gradients (the page's 20
    # do not converge either: 161 % of |f(x) − f(0)| left), to keep a test run short
    partial = functools.partial(hs.attribution, points=2, random_orders=1, budget=8)
    monkeypatch.setattr(view.hs, "attribution", partial)
    smollm2 = models.load_model("smollm2-135m-instruct")
    result = view.attribution(smollm2, texts("head_science", "zh")("text_default"), lang="zh")
    assert "积分梯度未收敛" in result.notes[-1], result.notes
    assert next(iter(result.table.values()))[1] == "积分梯度（未收敛）"


def test_attribution_explains_a_word_not_the_end_of_the_text():
    """After a full stop tiny-gpt's top token is <|endoftext|>, where every method ties: the target is the most
    likely token that is not special."""
    tiny = models.load_model("tiny-gpt")
    ids = hs.encode(tiny, "The function returns a list of the keys in the dictionary.")
    logits = tiny.run(ids)[0, -1]
    assert int(logits.argmax()) in tiny.special_ids  # the case this guards
    word = max((i for i in range(len(logits)) if i not in tiny.special_ids), key=lambda i: float(logits[i]))
    assert hs.attribution(tiny, ids, steps=2, budget=2).target == f"p(“{tiny.labels([word])[0]}” | …)"


def test_head_range_and_short_text_are_refused(llama):
    with pytest.raises(InputError, match="does not exist"):
        hs.check_head(llama, 2, 0)
    with pytest.raises(InputError, match="at least 2"):
        hs.encode(llama, "a")
    with pytest.raises(InputError, match="single token"):
        hs.answer_ids(llama, (" supercalifragilistic", " file"))


def test_progress_is_reported(llama):
    seen = []
    hs.head_importance(llama, hs.encode(llama, TEXT), progress=lambda f, what: seen.append(f))
    assert seen == [0.0, 0.5, 1.0]  # one batched pass per layer (2 layers), then done


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_induction_verdict_flips_at_the_stated_threshold(lang):
    """tiny-gpt's best induction score (0.028) is what uniform attention gives: no induction head; SmolLM2's 0.97
    is one. Both stated with the threshold and the uniform level."""
    from types import SimpleNamespace

    model = SimpleNamespace(name="some-model", kind="causal")
    none = np.full((2, 4), 0.02)
    none[0, 1] = 0.028
    found, note = view.induction_verdict(model, none, 24, lang=lang)
    assert not found and "some-model" in note and "0.028" in note and "0.3" in note
    one = none.copy()
    one[1, 2] = 0.968
    found, note = view.induction_verdict(model, one, 24, lang=lang)
    assert found and "0.968" in note and "0.3" in note and "some-model" not in note
    assert hs.uniform_induction(24) == pytest.approx(np.mean([1 / (t + 1) for t in range(25, 49)]))


def test_tiny_gpt_has_no_induction_head():
    tiny = models.load_model("tiny-gpt")
    notes = view.taxonomy(tiny, TEXT, "induction").notes
    assert any(n.startswith("No head of tiny-gpt scores as an induction head") for n in notes), notes
    assert not any("Strongest induction" in n for n in notes)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_every_view_builds_in_both_languages(tm, lang):
    assert view.importance(tm, TEXT, lang=lang).panels
    assert view.pattern(tm, TEXT, 1, 3, lang=lang).figure
    pair = hs.PatchPair("If the file is missing, the", "If the path is missing, the", (" file", " path"))
    assert len(view.patching(tm, pair.clean, pair.corrupt, pair.answers, lang=lang).panels) == 2
    assert view.lens(tm, TEXT, "kl", lang=lang).notes
    assert view.taxonomy(tm, TEXT, "induction", lang=lang).table
    assert len(view.attribution(tm, TEXT, lang=lang).table) == 2


def test_notebook_api_returns_the_page_figures():
    from tx_explorer import explore

    assert list(explore.head_importance()) == ["hs_importance_loss", "hs_importance_logit"]
    assert list(explore.patching("tiny-gpt", lang="zh")) == ["hs_patch_residual", "hs_patch_heads"]
    assert list(explore.head_taxonomy(score="sink")) == ["hs_scores", "hs_map", "hs_sink_layers"]


def test_the_head_maps_labels_do_not_overlap():
    """tiny-gpt's L1 H1 and L2 H2 lie 0.15 apart on a 7-unit axis: their names were drawn one on the other. Close
    points take turns above, below and beside (a label nowhere with room would go unnamed; its hover names it)."""
    from tx_explorer.viz import head_science as vhs
    from tx_explorer.viz import style

    coords = np.array([[-3.4, -1.1], [0.65, 0.36], [0.65, 0.21], [0.65, 0.28], [3.6, 2.9]])
    names = ["L0 H1", "L1 H1", "L2 H2", "L3 H3", "L2 H0"]
    where = style.label_positions(coords, names, vhs.SCATTER_PLOT_PX, marker_px=11, pad_px=vhs.SCATTER_PAD_PX)
    assert where[0] == where[4] == "top center"  # the axes' pads leave the outermost a label's room
    assert where[1:4] == ["top left", "bottom center", "top right"]  # three within a label's height of each other
    fig = vhs.head_scatter(coords, names, np.zeros(5, bool), names, title="", x_title="", y_title="", names=("a", "b"))
    assert list(fig.data[0].text) == [n if w else "" for n, w in zip(names, where)]
    assert list(fig.data[0].textposition) == [w or "top center" for w in where]


def test_270_heads_bars_name_one_head_per_layer_and_every_head_on_hover():
    """SmolLM2's 270 bar labels were a smear under the axis: one per layer is named there, each head on hover;
    tiny-gpt's 16 all fit."""
    from tx_explorer.viz import head_science as vhs

    names = head_labels(30, 9)
    fig = vhs.score_bars(np.arange(270.0).reshape(30, 9), names, title="", x_title="", y_title="")
    assert list(fig.layout.xaxis.ticktext) == [f"L{layer} H0" for layer in range(30)]
    assert list(fig.layout.xaxis.tickvals) == list(range(0, 270, 9))
    assert list(fig.data[0].customdata) == names and "%{customdata}" in fig.data[0].hovertemplate
    small = vhs.score_bars(np.zeros((4, 4)), head_labels(4, 4), title="", x_title="", y_title="")
    assert list(small.layout.xaxis.ticktext) == head_labels(4, 4)


def test_the_logit_lens_labels_every_second_of_60_rows_and_hovers_each():
    """SmolLM2's 60 read-outs at 12 px a row had their labels touching: every second is labelled, each hovered."""
    from tx_explorer.viz import head_science as vhs

    rows = [f"L{i // 2} {'attn' if i % 2 == 0 else 'mlp'}" for i in range(60)]
    fig = vhs.position_map(np.zeros((60, 5)), rows, list("abcde"), title="", x_title="", y_title="")
    labelled = list(fig.layout.yaxis.tickvals)
    pitch = (fig.layout.height - vhs.FRAME_PX) / 60 * (labelled[1] - labelled[0])
    assert labelled == list(range(0, 60, 2)) and pitch >= vhs.ROW_LABEL_PX
    assert [line[0].split(",")[0] for line in fig.data[0].text] == rows  # every row named on hover
    assert list(
        vhs.position_map(
            np.zeros((30, 5)), rows[:30], list("abcde"), title="", x_title="", y_title=""
        ).layout.yaxis.tickvals
    ) == list(range(30))


def test_the_map_of_270_heads_is_drawn_at_the_size_its_labels_assume():
    """SmolLM2's map: Plotly's autorange made room for the names' text (the points' span shrank) and the plot was
    shorter than SCATTER_PLOT_PX, so names lay on neighbours; and 270 points got a name wherever one fitted."""
    from tx_explorer.viz import head_science as vhs
    from tx_explorer.viz import style

    rng = np.random.default_rng(0)
    coords = np.concatenate([rng.normal(0, 0.5, (240, 2)), rng.normal(0, 3, (30, 2))])  # a cluster, outliers
    names = head_labels(30, 9)
    fig = vhs.head_scatter(
        coords, names, np.zeros(270, bool), names, title="All heads", x_title="x", y_title="y", names=("a", "b")
    )
    named = sum(bool(t) for trace in fig.data for t in trace.text)
    assert 0 < named <= vhs.SCATTER_LABELS
    style.tidy(fig)  # as the page shows it
    assert fig.layout.height - fig.layout.margin.t - fig.layout.margin.b == vhs.SCATTER_PLOT_PX[1]
    for axis, k, size in ((fig.layout.xaxis, 0, vhs.SCATTER_PLOT_PX[0]), (fig.layout.yaxis, 1, vhs.SCATTER_PLOT_PX[1])):
        px_per_unit = size / (axis.range[1] - axis.range[0])
        assert (coords[:, k].min() - axis.range[0]) * px_per_unit == pytest.approx(vhs.SCATTER_PAD_PX)
        assert (axis.range[1] - coords[:, k].max()) * px_per_unit == pytest.approx(vhs.SCATTER_PAD_PX)


def test_the_outermost_heads_are_drawn_whole_and_named():
    """Gemma 3's map (its heads' places as reviewed): the top-right head sat on the plot's edge, with no room for its
    name above or beside it and L2 H3 below it, so it went unnamed. The axes leave a marker's half and a label's line
    past the points, and every head at an edge is named."""
    from tx_explorer.viz import head_science as vhs
    from tx_explorer.viz import style

    heads = {
        "L6 H1": (3.0, 2.75), "L2 H3": (2.72, 2.5), "L10 H1": (1.7, 2.33), "L8 H2": (1.97, 1.7), "L3 H1": (2.4, 0.97),
        "L4 H2": (2.5, -0.2), "L5 H1": (-5.2, 0.9), "L5 H2": (-4.35, 0.47), "L17 H3": (-3.4, 0.45),
        "L1 H3": (-1.0, 2.68), "L1 H0": (-2.35, 2.15), "L1 H1": (-1.97, 2.28), "L3 H3": (-1.0, -3.55),
        "L0 H1": (-1.0, -4.35), "L7 H2": (0.9, -1.4),
    }  # fmt: skip
    names, coords = list(heads), np.array(list(heads.values()))
    fig = vhs.head_scatter(
        coords, names, np.zeros(len(names), bool), names, title="", x_title="", y_title="", names=("a", "b")
    )
    assert vhs.SCATTER_PAD_PX >= vhs.SCATTER_MARKER_PX / 2 + style.LABEL_HEIGHT_PX
    for axis, k, size in ((fig.layout.xaxis, 0, vhs.SCATTER_PLOT_PX[0]), (fig.layout.yaxis, 1, vhs.SCATTER_PLOT_PX[1])):
        px_per_unit = size / (axis.range[1] - axis.range[0])
        assert (axis.range[1] - coords[:, k].max()) * px_per_unit == pytest.approx(vhs.SCATTER_PAD_PX)
    named = dict(zip(names, fig.data[0].text))
    edges = {names[i] for i in (*coords.argmax(0), *coords.argmin(0))}
    assert edges == {"L6 H1", "L5 H1", "L0 H1"} and all(named[n] == n for n in edges)


def test_token_labels_are_escaped_once():
    """Gemma 3's attribution bars read "0: &lt;bos&gt;": the labels were escaped here and again by charts.bars.
    The logit lens's hover, which no builder escapes, named a top token "<bos>" that Plotly took for a tag."""
    from tx_explorer.viz import head_science as vhs

    bars = vhs.attribution_bars({"m": np.ones(2)}, ["<bos>", "a"], title="", x_title="", y_title="")
    assert list(bars.layout.xaxis.ticktext) == ["0: &lt;bos&gt;", "1: a"]
    lens = vhs.position_map(
        np.zeros((1, 2)),
        ["L0"],
        ["<bos>", "a"],
        title="",
        x_title="",
        y_title="",
        hover=np.array([["<bos> 0.90", "a 0.10"]]),
    )
    assert list(lens.layout.xaxis.ticktext) == ["0: &lt;bos&gt;", "1: a"]
    assert list(lens.data[0].customdata[0]) == ["<br>&lt;bos&gt; 0.90", "<br>a 0.10"]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_maps_axes_name_their_heaviest_scores_and_the_table_its_places(llama, lang, monkeypatch):
    """The map's axes said "first/second principal axis" and not which scores load on them; the table showed 7.2
    beside 9.922 and 0 beside 0.032; the sink note "+1.9497 nats (from 1.907)"."""
    r = hs.taxonomy(llama, hs.encode(llama, TEXT))
    stacked = np.stack([r.scores[k].ravel() for k in hs.SCORES], axis=1)
    z = (stacked - stacked.mean(0)) / np.where(stacked.std(0) > 0, stacked.std(0), 1.0)
    assert np.allclose(z @ r.loadings.T, r.coords, atol=1e-5)  # the weights the map's places come from
    assert np.allclose(r.explained, r.coords.var(0) / z.var(0).sum())
    monkeypatch.setattr(
        hs,
        "taxonomy",
        lambda *a, **k: dataclasses.replace(r, sinks=r.sinks | True, sink_effect=1.9497, base_loss=1.907),
    )
    result = view.taxonomy(llama, TEXT, lang=lang)
    T = texts("head_science", lang)
    for axis, title in enumerate(
        (result.panels[1].figure.layout.xaxis.title.text, result.panels[1].figure.layout.yaxis.title.text)
    ):
        heaviest = int(np.argmax(np.abs(r.loadings[axis])))
        weight = f"{r.loadings[axis, heaviest]:+.2f}".replace("-", "−")
        assert f"{r.explained[axis]:.0%}" in title and f"{weight} × {T(f'score_{hs.SCORES[heaviest]}')}" in title
    assert result.decimals == {T(f"score_{k}"): 3 for k in hs.SCORES} and set(result.decimals) < set(result.table)
    assert any("+1.950" in n and "1.907" in n for n in result.notes)  # the change and the loss to 3 places


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_pattern_opens_at_the_largest_effect_either_way_and_says_its_number(lang, monkeypatch):
    """Gemma 3 on "猫": "it opens at the head with the largest effect" opened L6 H1 (Δ loss +1.6) while L11 H3's
    −2.5 was the darkest cell of the map. The focus is the largest |Δ loss|, named with its number, and where its
    removal lowers the loss the head whose removal raises it most is named too."""
    T, run_on = texts("head_science", lang), "" if lang == "zh" else " "
    delta = np.array([[0.1, 0.0], [1.6, -0.2], [0.3, -2.5]])
    lowers = T("focus_lowers", layer=2, head=1, delta="−2.500")
    assert view.focus_note(delta, lang=lang) == lowers + run_on + T("raise_most", layer=1, head=0, delta="+1.600")
    assert view.focus_note(-np.abs(delta), lang=lang).endswith(T("raise_none"))
    assert view.focus_note(np.abs(delta), lang=lang) == T("focus_raises", layer=2, head=1, delta="+2.500")
    # The view on a real ablation: L1 H1 made to lower the loss by more than any head raises it opens the pattern
    llama = _text_model("llama")
    real = hs.head_importance(llama, hs.encode(llama, TEXT))
    changed = real.delta_loss.copy()
    changed[1, 1] = -2 * np.abs(changed).max()
    monkeypatch.setattr(hs, "head_importance", lambda *a, **k: dataclasses.replace(real, delta_loss=changed))
    result = view.importance(llama, TEXT, lang=lang)
    assert result.focus == (1, 1) and result.notes[-1] == view.focus_note(changed, lang=lang)
    assert result.notes[-1].startswith(
        T("focus_lowers", layer=1, head=1, delta=f"{changed[1, 1]:+.3f}".replace("-", "−"))
    )


def test_the_layer_head_maps_end_at_their_cells():
    """The clickable markers made autorange pad Gemma 3's Δ loss map with grey bands above L0 and below L17."""
    from tx_explorer.viz import head_science as vhs

    for clickable in (True, False):
        fig = vhs.layer_head_map(np.zeros((18, 4)), title="", x_title="", y_title="", clickable=clickable)
        if clickable:
            assert tuple(fig.layout.yaxis.range) == (17.5, -0.5) and tuple(fig.layout.xaxis.range) == (-0.5, 3.5)
        assert fig.layout.yaxis.autorange in ("reversed", False)  # L0 at the top either way
