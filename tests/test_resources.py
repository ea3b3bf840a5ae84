"""Shared resources stay safe for many sessions: cached models are read-only, long work is bounded.

Every session of the server shares ``ui.cached_model``'s objects, so none may train or switch them to training
mode; and every long computation a page starts (measurements, the mini-training, the evaluation re-run) has a
size and time bound that the page passes, shows progress, and stops between steps when the user interacts.
"""

from __future__ import annotations

import pytest
import torch
from conftest import assert_clean, open_page

from tx_explorer import models, ui
from tx_explorer.analysis import cost
from tx_explorer.analysis import seq2seq_eval as ev
from tx_explorer.families.circuit import CircuitBundle
from tx_explorer.families.images import ImageClassifier
from tx_explorer.families.moe import MoEBundle
from tx_explorer.families.positions import Results as PositionResults
from tx_explorer.families.text import TextModel
from tx_explorer.families.translation import Translator
from tx_explorer.families.variants import Results, load_results
from tx_explorer.train import variants


def modules_of(obj) -> list[torch.nn.Module]:
    """Where each loader's result keeps its network (spelled out here, independent of ui's own search)."""
    if isinstance(obj, MoEBundle):
        return [obj.text.model]
    if isinstance(obj, (TextModel, Translator, ImageClassifier)):
        return [obj.model]
    if isinstance(obj, Results):  # weights load per variant, each into its own read-only TextModel
        return [obj.text_model(name).model for name in obj.names]
    if isinstance(obj, CircuitBundle):  # the final model and the checkpoints it loads on demand (first and last)
        return [obj.text.model] + [obj.checkpoint(step).model for step in (obj.steps[0], obj.steps[-1])]
    if isinstance(obj, PositionResults):  # one model per position scheme, built when asked for
        return [obj.model(scheme) for scheme in obj.schemes]
    raise AssertionError(f"{type(obj).__name__}: unknown model type, say here where its modules are")


def assert_read_only(module: torch.nn.Module) -> None:
    training = [n for n, m in module.named_modules() if m.training]
    trainable = [n for n, p in module.named_parameters() if p.requires_grad]
    assert not training, f"in training mode: {training[:5]}"
    assert not trainable, f"parameters with requires_grad: {trainable[:5]}"
    assert any(True for _ in module.parameters())  # a check over no parameters would prove nothing


@pytest.mark.parametrize("name", models.available_models())
def test_cached_models_are_in_eval_mode_without_gradients(name):
    for module in modules_of(ui.cached_model(name)):
        assert_read_only(module)


def test_norm_variant_models_shared_by_the_norms_page_are_read_only():
    res = load_results()
    for name in res.names:
        assert_read_only(res.text_model(name).model)


def test_prediction_of_a_measurement_grows_as_n_squared():
    previous = cost.Measurement(method="flash", n=128, seconds=0.5, peak_bytes=0, runs=3)
    assert cost.predicted_seconds(None, 4096) == 0.0  # the first run of a method always starts
    assert cost.predicted_seconds(previous, 256) == pytest.approx(0.5 * 4 * 4)  # warm-up + 3 runs, N² × 4


def test_measuring_starts_no_run_predicted_past_the_time_budget(monkeypatch):
    """A fake measurement reporting 10 s per pass: each method's N = 128 runs, N = 256 would take 80 s > 60 s."""
    calls = []

    def slow(method, n, **kw):
        if kw["heads"] == 3:  # the Measure button's runs (the IO section measures one head on every visit)
            calls.append((method, n))
        return cost.Measurement(method=method, n=n, seconds=10.0, peak_bytes=1000 * n, runs=kw["repeats"])

    monkeypatch.setattr(cost, "measure", slow)
    at = open_page("cost_of_attention")
    at.selectbox(key="cost_max_n").set_value(1024)
    at.number_input(key="cost_heads").set_value(3)  # unusual sizes: no result cached by other tests
    at.number_input(key="cost_head_dim").set_value(5)
    at.number_input(key="cost_repeats").set_value(1)
    at.button(key="cost_measure").click().run()
    assert_clean(at)
    assert cost.MEASURE_BUDGET_S <= 120
    assert sorted(calls) == sorted((m, 128) for m in cost.METHODS)
    assert any("Stopped before $N$ = 256" in i.value for i in at.info)
    results = next(d.value for d in at.dataframe if "method" in d.value.columns)  # the measured runs' table
    assert len(results) == len(cost.METHODS)


def test_live_training_gets_the_pages_time_budget_and_a_stop_button(monkeypatch):
    seen = {}
    real = variants.live_run

    def spy(names, tokens, settings, **kw):
        seen.update(kw, steps=settings.steps, variants=list(names))
        return real(names, tokens, settings, **kw)

    monkeypatch.setattr(variants, "live_run", spy)
    at = open_page("norms")
    at.session_state["norms_open_live"] = True  # the live run opens on demand
    at.run()
    sliders = {s.label: s for s in at.slider}
    assert sliders["Time budget (s)"].max <= 30 and sliders["Steps"].max <= 400
    sliders["Time budget (s)"].set_value(5)
    sliders["Steps"].set_value(10)
    assert any(b.label == "Stop" for b in at.button)
    next(b for b in at.button if b.label == "Train").click().run()
    assert_clean(at)
    assert seen["time_budget"] == 5 and seen["steps"] == 10 and 1 <= len(seen["variants"]) <= 3
    assert any("steps trained" in c.value for c in at.caption)


def test_evaluation_rerun_is_capped_in_size_and_reports_progress(monkeypatch):
    seen = {}
    real_set, real_eval = ev.eval_set, ev.evaluate

    def small_set(per_bucket=50, seed=ev.EVAL_SEED):
        seen["per_bucket"] = per_bucket
        return [b[:1] for b in real_set(1, seed)]

    def watched(translator, buckets, progress=None, **kw):
        seen.setdefault("progress", []).append(progress)
        return real_eval(translator, buckets, progress=progress, **kw)

    monkeypatch.setattr(ev, "eval_set", small_set)
    monkeypatch.setattr(ev, "evaluate", watched)
    at = open_page("seq2seq")
    at.session_state["s2s_open_bottleneck"] = True  # opens on demand
    at.run()
    size = next(s for s in at.slider if s.label == "Sentences per length bucket for the re-run")
    assert size.max <= 50
    size.set_value(size.max)
    next(b for b in at.button if "Re-run" in b.label).click().run()
    assert_clean(at)
    assert seen["per_bucket"] == size.max
    assert len(seen["progress"]) == 3 and all(callable(p) for p in seen["progress"])
