"""The "Watch a circuit form" page: drawn in English and 中文 from the shipped bundle, its circuit numbers equal to
a recomputation from the shipped weights, the checkpoint slider, and the live run through the job pool."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from tests.conftest import assert_clean, open_page, plotly_specs
from tx_explorer import locales
from tx_explorer.analysis import induction as ind
from tx_explorer.families import circuit
from tx_explorer.train import induction as trainer
from tx_explorer.views import circuit as view


@pytest.fixture(scope="module")
def at():
    n = torch.get_num_threads()
    torch.set_num_threads(1)  # the live run's tiny model only spin-waits on more threads of a shared CPU
    page = open_page("circuit")
    yield page
    torch.set_num_threads(n)


@pytest.fixture(scope="module")
def bundle() -> circuit.CircuitBundle:
    return circuit.load()


def test_first_load_draws_the_curves_maps_and_table(at):
    assert_clean(at)
    specs = plotly_specs(at)
    names = {t.get("name") for s in specs for t in s["data"]}
    assert {"loss, second copy", "induction score"} <= names
    assert len(at.table) == 1
    assert not at.warning, [w.value for w in at.warning]  # the bundle verified and loaded


def test_the_page_shows_the_numbers_of_the_shipped_weights(at, bundle):
    """Every number of the K-composition table and verdict, recomputed here from model.safetensors."""
    k = ind.k_composition(circuit.load().text.model, ind.held_out(bundle))
    table = at.table[0].value
    intact, ablated = table.columns[1], table.columns[2]
    assert table[intact].iloc[0] == f"{k.induction_before:.3f}"
    assert table[ablated].iloc[0] == f"{k.induction_after:.3f}"
    (pl, ph) = k.previous_head
    assert table[intact].iloc[2] == f"{k.clean.previous_first[pl, ph]:.3f}"  # where the keys are written
    assert table[intact].iloc[3] == f"{k.clean.loss_second:.2f}"
    assert table[ablated].iloc[3] == f"{k.ablated.loss_second:.2f}"
    verdicts = " ".join(s.value for s in at.success)
    assert f"{-100 * k.induction_drop:+.0f} %".replace("-", "−") in verdicts
    phase = ind.phase_change(*(bundle.record[c] for c in ("step", "loss_first", "loss_second")))
    assert (f"Phase change at step {phase}:" if phase is not None else "No phase change in this record") in verdicts


def test_the_slider_walks_the_checkpoints(at, bundle):
    slider = next(s for s in at.select_slider if s.label == "checkpoint (training step)")
    assert list(slider.options) == [str(s) for s in bundle.steps]
    first = bundle.steps[0]
    slider.set_value(first).run()
    assert_clean(at)
    c = ind.measure(bundle.checkpoint(first).model, ind.held_out(bundle))
    final = ind.bundle_k_composition(bundle)
    caption = next(c.value for c in at.caption if c.value.startswith(f"Step {first} "))
    assert f"induction score {c.induction[final.induction_head]:.2f}" in caption
    slider.set_value(bundle.steps[-1]).run()


def test_the_pretrained_llms_beside_it_or_a_message(at):
    """SmolLM2 and Gemma 3 270M, each installed one scored with its own caption and points; none: a message."""
    names = view.pretrained()
    assert set(names) <= set(view.pretrained(installed=False))
    assert {"smollm2-135m-instruct", "gemma3-270m"} <= set(view.pretrained(installed=False))
    assert not {"tiny-gpt", "tiny-llama", "induction-2l"} & set(view.pretrained(installed=False))  # trained here
    if names:
        for name in names:
            assert any(c.value.startswith(name) for c in at.caption), name
        scatter = next(s for s in plotly_specs(at) if any(t.get("name") == names[0] for t in s["data"]))
        assert [t["name"] for t in scatter["data"]] == [view.BUNDLE, *names]
    else:
        assert any(n in i.value for i in at.info for n in view.pretrained(installed=False))


def test_the_live_run_draws_its_curves(at, monkeypatch):
    """A short run (the same recipe, fewer steps) through the job pool: curves and where the run stands."""
    monkeypatch.setattr(trainer, "LIVE", dataclasses.replace(trainer.LIVE, steps=10, eval_every=5))
    at.session_state["circuit_open_live"] = True
    at.run()
    assert_clean(at)
    before = len(plotly_specs(at))
    next(n for n in at.number_input if n.label == "seed").set_value(3)
    next(b for b in at.button if b.label == "Train").click().run(timeout=300)
    assert_clean(at)
    assert len(plotly_specs(at)) == before + 1
    assert any(c.value.startswith("Step 10 after") or "Phase change after" in c.value for c in at.caption)


def test_the_page_in_chinese():
    page = open_page("circuit")
    page.session_state["lang"] = "zh"
    page.run()
    assert_clean(page)
    zh = locales.text("circuit", "k_header", "zh")
    assert any(zh in h.value for h in page.header), [h.value for h in page.header]


def test_a_bad_seed_is_a_message():
    with pytest.raises(ValueError, match="seed"):
        view.live_settings(-1)
    with pytest.raises(ValueError, match="seed"):
        view.live_settings(2.5)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_previous_token_score_the_same_to_the_digits_shown_is_said_to_stay(lang):
    """The verdict read "the previous-token score went from 0.18 to 0.18": a score unchanged at two decimals stays."""
    T = view.texts("circuit", lang)
    record = {"step": [0, 50, 100], "previous": [0.16, 0.181, 0.179], "induction": [0.03, 0.2, 0.6]}
    record |= {"loss_first": [8.0] * 3, "loss_second": [8.0, 6.0, 3.0]}
    steady = view._phase_words(record, 100, lang=lang)
    assert T("previous_steady", after="0.18", start="0.16") in steady
    record["previous"][2] = 0.3
    moved = view._phase_words(record, 100, lang=lang)
    assert T("previous_moved", before="0.18", after="0.30") in moved


def test_the_rise_span_brackets_the_middle_of_a_scores_rise():
    steps = [0, 100, 200, 300, 400, 500]
    assert ind.rise_span(steps, [0.0, 0.0, 0.1, 0.5, 0.9, 1.0]) == (200, 400)  # 10 % and 90 % of the rise
    assert ind.rise_span(steps, [0.0, 0.05, 0.2, 0.5, 0.8, 1.0], share=0.5) == (300, 400)
    assert ind.rise_span(steps, [0.5, 0.4, 0.4, 0.3, 0.3, 0.5]) is None  # no rise: no span said


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_phase_verdict_says_over_how_many_steps_the_induction_score_rose(lang):
    """The verdict gave only the interval ending at the phase change (0.65 → 0.68 at step 1300) while the chart
    shows the score rising from 0.03 to 0.89: it now says the whole rise and where its middle 80 % lies."""
    bundle = circuit.load()
    r = bundle.record
    words = view.formation(bundle, lang=lang).verdict
    span = ind.rise_span(r["step"], r["induction"])
    assert span == (800, 1600)  # the shipped record: 0.03 → 0.89 by step 8000; 0.13 at step 800, 0.82 at 1600
    rise = view.texts("circuit", lang)(
        "induction_rise",
        start=f"{r['induction'][0]:.2f}",
        step_start=0,
        end=f"{r['induction'][-1]:.2f}",
        step_end=r["step"][-1],
        share="80",
        rise_from=800,
        rise_to=1600,
    )
    assert rise in words, words


def _replayed(bundle: circuit.CircuitBundle, every: float = 0.5) -> view.Records:
    """The shipped record as a live run's records, one every ``every`` seconds."""
    r = bundle.record
    fields = ("step", "loss_first", "loss_second", "induction", "previous")
    return [(every * i, trainer.Record(train_loss=0.0, **{k: r[k][i] for k in fields})) for i in range(len(r["step"]))]


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_live_caption_says_the_phase_change_once_and_its_label_clears_the_curves(bundle, lang):
    """A student's review of seed 5: "相变出现在 25 秒时（第 1350 步）。 相变出现在第 1350 步：…", ending "see
    below" where nothing followed, and the chart's label "相变：第 1350 步" sat on the first copy's loss curve."""
    records = _replayed(bundle)
    panel, caption = view.live_curves(records, lang=lang)
    phase = view.live_phase(records)
    seconds = f"{next(t for t, r in records if r.step == phase):.0f}"
    said = {
        "en": f"Phase change after {seconds} s, at step {phase}: ",
        "zh": f"相变出现在训练 {seconds} 秒时（第 {phase} 步）：",
    }
    assert caption.startswith(said[lang]) and caption.count({"en": "Phase change", "zh": "相变出现在"}[lang]) == 1
    assert "see below" not in caption and "见下文" not in caption and "。 " not in caption
    assert {"en": "see section 2", "zh": "见第 2 节"}[lang] in view.formation(bundle, lang=lang).verdict
    (label,) = panel.figure.layout.annotations
    assert label.yref == "paper" and label.y == 1 and label.yanchor == "bottom"  # above the plot area
    assert panel.figure.layout.margin.t >= 30  # room for it


def test_chinese_per_cent_has_no_space_before_the_sign(bundle):
    """ "（低于 50 %）" and "0 % 的窗口": the Chinese locale writes 50%."""
    f = view.formation(bundle, lang="zh")
    shown = [f.verdict, f.settings, view.k_composition(bundle, lang="zh").verdict]
    assert all("%" in s and not re.search(r"\d %", s) for s in shown), shown
    assert re.search(r"\d %", view.k_composition(bundle).verdict)  # English keeps its space
