"""The norms page beyond its defaults: an ε that is not small, the residual RMS read per block, the depth axis's
ticks, and the live mini-run with nothing picked and when it ends (by its steps, its time budget, a stop or a
diverged loss), in both languages."""

from __future__ import annotations

import copy
import dataclasses
import math
import re
import statistics

import pytest

from tx_explorer.views import norms as view

pytestmark = pytest.mark.usefixtures("one_thread")  # small tensors: see conftest.one_thread


@pytest.fixture(scope="module")
def res():
    return view.load_results()


@pytest.mark.parametrize(
    ("lang", "variance", "below"), [("en", "variance 2.5e−07", "is not small"), ("zh", "方差为 2.5e−07", "并不小")]
)
def test_the_norm_note_measures_the_variance_and_says_why_a_large_eps_shrinks_it(lang, variance, below):
    """x = 0.001, 0.002 with ε = 1 gave x̂ ≈ ±0.0005, under a note that LayerNorm's variance is always ≈ 1."""
    note = view.normalise("1e-3, 2e-3", eps=1.0, lang=lang).note
    assert variance in note and below in note and "≈ 1" not in note, note
    usual = view.normalise("4, 6, 5, 9, 3, 7", lang=lang).note  # ε = 1e-5 beside σ² = 4: nothing to explain
    assert below not in usual and ("variance 1;" in usual or "方差为 1；" in usual), usual


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_residual_rms_heatmap_counts_its_rows_from_the_embeddings(res, lang):
    """The per-block heatmap of the residual RMS has one row more than blocks, row 0 after the embeddings; its
    axis said "block" as for the gradient norm."""
    T = view.texts("norms", lang)
    rms = view.layer_steps(res, "deep-post-ln", "residual_rms", lang=lang)
    assert rms.data.shape[0] == 17 and rms.figure.layout.yaxis.title.text == T("x_residual_rms")
    grad = view.layer_steps(res, "deep-post-ln", "grad_norm", lang=lang)
    assert grad.data.shape[0] == 16 and grad.figure.layout.yaxis.title.text == T("x_grad_norm")


def test_the_depth_axis_ticks_powers_of_ten_not_micro(res):
    """The log axis read "100μ", "10μ", "1μ" (Plotly's SI prefix) on the page where μ is LayerNorm's mean."""
    panel, words = view.depth(res, ["deep-post-ln", "deep-pre-ln"], lang="zh")
    axes = [panel.figure.layout[k] for k in panel.figure.layout if k.startswith("yaxis")]
    assert axes and all(a.exponentformat == "power" for a in axes)
    assert "深层 Post-LN（16 × 32）：" in words and "）: " not in words  # a full-width colon after Chinese


@pytest.mark.parametrize(("lang", "words"), [("en", "Pick one to three variants"), ("zh", "请选择一到三个变体")])
def test_no_live_variant_picked_says_what_to_pick(lang, words):
    """Train with the picker cleared: "choose at least one variant to train" in English on a 中文 page, empty axes
    −1…6 and "steps trained: ." under them."""
    assert view.live_pick([], lang=lang).startswith(words)
    assert view.live_pick(["pre-ln"], lang=lang) is None


def _log(ended, steps=400, n=40, last=6.0):
    losses = {name: [(s, 7.0 if s < n else last) for s in range(1, n + 1)] for name in ("post-ln", "pre-ln")}
    return view.LiveLog(losses, steps=steps, budget=5, seconds=5.0, ended=ended)


@pytest.mark.parametrize(
    ("ended", "en", "zh"),
    [
        ("budget", "Stopped by the time budget of 5 s, short of the 400 steps", "因 5 秒的时间预算而停止"),
        ("steps", "All 400 steps done in 5.0 s", "400 步全部完成"),
        (None, "Stopped before its end", "在结束前被停止"),
    ],
)
def test_the_live_run_says_why_it_ended_and_its_final_losses(res, ended, en, zh):
    """A 5 s budget cut 400 steps to 40 and the caption only counted the steps, as if the run were complete."""
    for lang, phrase in (("en", en), ("zh", zh)):
        _, caption = view.live_curves(res, _log(ended), lang=lang)
        assert phrase in caption, caption
        assert "6.900" in caption  # the mean of the last 10 steps: nine at 7, then 6
        assert "no verdict" in caption or "不下结论" in caption, caption
    zh = view.live_curves(res, _log(ended), lang="zh")[1]
    assert "。 " not in zh and not re.search(r"[\u4e00-\u9fff）]: ", zh), zh  # Chinese punctuation throughout


def test_a_diverged_live_run_names_the_variant_and_its_step(res):
    log = _log(None, last=math.nan)
    log.ended = view.ending(log)
    assert log.ended == "diverged"
    _, caption = view.live_curves(res, log, lang="zh")
    assert "训练发散" in caption and "Post-LN：第 40 步" in caption, caption
    assert view.ending(_log(None, steps=40)) == "steps" and view.ending(_log(None)) == "budget"


def test_a_live_run_records_how_it_ended(res):
    run = view.LiveRun(res, ["pre-ln"], steps=2, budget=60)
    assert run.records.ended is None  # what the page keeps before the run: a stop leaves it so
    log = run(lambda fraction, text: None)
    assert log is run.records and log.ended == "steps" and len(log.losses["pre-ln"]) == 2 and log.seconds > 0


def _number(pattern: str, text: str) -> float:
    found = re.search(pattern, text)
    assert found, (pattern, text)
    return float(found.group(1).replace(",", ""))


def test_the_depth_note_measures_initialisation_the_patterns_first_step_and_the_residual_rms(res):
    """The note typed "all Post-LN blocks above the first receive the same gradient", "it appears within the first
    10–20 steps" and "Post-Norm re-normalises to ≈ 1": each is now a number recomputed here from the shipped data."""
    note, post, pre = view.depth_note(res), res.label("deep-post-ln"), res.label("deep-pre-ln")
    at_init = note.split(f"{post} at initialisation")[1].split(pre)[0]
    g = res.profiles["deep-post-ln"]["init"]["grad_norm"]
    assert _number(r"span ([\d.,]+)× \(max/min\)", at_init) == pytest.approx(max(g[1:]) / min(g[1:]), rel=0.01)
    assert _number(r"block 1's is ([\d.,]+)×", at_init) == pytest.approx(g[0] / statistics.median(g[1:]), rel=0.05)
    h = res.history["deep-post-ln"]
    onset = next(s for s, r in zip(h["step"], h["layer_grad_norm"]) if r[-1] >= view.PATTERN_FACTOR * r[0])
    assert _number(r"first appears at logged step (\d+)", at_init) == onset
    never = note.split(f"{pre} at initialisation")[1]
    assert f"appears at none of the {len(res.history['deep-pre-ln']['step'])} logged steps" in never, never
    residuals = note.split("after the last: ")[1]
    for name in ("deep-post-ln", "deep-pre-ln"):
        rms = res.profiles[name]["final"]["residual_rms"]
        first, last = (
            _number(rf"{re.escape(res.label(name))} {p}", residuals) for p in (r"([\d.]+) →", r"[\d.]+ → ([\d.]+)")
        )
        assert (first, last) == (pytest.approx(rms[1], rel=0.005), pytest.approx(rms[-1], rel=0.005))


def _doctored(res, *, init=None, rows=None):
    """``res`` with Deep Post-LN's gradient norms at initialisation, or its logged per-block ones, replaced."""
    profiles, history = copy.deepcopy(res.profiles), copy.deepcopy(res.history)
    if init is not None:
        profiles["deep-post-ln"]["init"]["grad_norm"] = init
    if rows is not None:
        history["deep-post-ln"]["layer_grad_norm"] = rows
    return dataclasses.replace(res, profiles=profiles, history=history)


@pytest.mark.parametrize(
    ("case", "en", "zh"),
    [
        ("at_init", "is already there (2,800×)", "已经存在（2,800×）"),
        ("never", "appears at none of the 160 logged steps", "在全部 160 个记录步中都未出现"),
        ("late", "first appears at logged step {step}", "首次出现在记录的第 {step} 步"),
    ],
)
def test_the_depth_notes_words_follow_the_data_when_the_pattern_is_there_at_once_never_or_later(res, case, en, zh):
    """Deep Post-LN with its trained profile as the one at initialisation, with every logged step as flat as
    initialisation, or with the first 40 logged steps flat: the words say so, in both languages."""
    flat = res.profiles["deep-post-ln"]["init"]["grad_norm"]
    rows = res.history["deep-post-ln"]["layer_grad_norm"]
    doctored = {
        "at_init": lambda: _doctored(res, init=res.profiles["deep-post-ln"]["final"]["grad_norm"]),
        "never": lambda: _doctored(res, rows=[flat] * len(rows)),
        "late": lambda: _doctored(res, rows=[flat] * 40 + rows[40:]),
    }[case]()
    steps = res.history["deep-post-ln"]["step"][40:]
    step = next(s for s, r in zip(steps, rows[40:]) if r[-1] >= view.PATTERN_FACTOR * r[0])
    for lang, words in (("en", en), ("zh", zh)):
        note = view.depth_note(doctored, lang=lang)
        sentence = note.split(res.label("deep-pre-ln", lang))[0]  # Deep Post-LN's sentence comes first
        assert words.format(step=step) in sentence, sentence
        assert ("first appears" in sentence or "首次出现" in sentence) == (case == "late"), sentence
