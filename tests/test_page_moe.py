"""AppTest of the Mixture-of-Experts page: first load, cost sliders, typed text, capacity slider, missing model."""

from __future__ import annotations

import base64
import json

import numpy as np
import pytest

from tests.conftest import assert_clean, open_page, plotly_specs
from tx_explorer import locales, models
from tx_explorer.analysis import spread
from tx_explorer.bundle import WEIGHTS_DIR

HAVE_MODEL = "tiny-moe" in models.available_models()
needs_model = pytest.mark.skipif(not HAVE_MODEL, reason="tiny-moe is not bundled yet (python -m tx_explorer.train moe)")


def _metric(at, label: str) -> str:
    return next(m.value for m in at.metric if m.label == label)


def _trace_names(at) -> list[str]:
    return [t.get("name", "") for spec in plotly_specs(at) for t in spec["data"]]


def _array(value) -> np.ndarray:
    """A Plotly JSON array: a list, or a typed array ``{"dtype", "bdata", "shape"}``."""
    if isinstance(value, dict):
        shape = tuple(int(n) for n in str(value.get("shape", "-1")).split(","))
        return np.frombuffer(base64.b64decode(value["bdata"]), dtype=value["dtype"]).reshape(shape)
    return np.asarray(value)


def _figure(at, title_start: str) -> dict:
    return next(s for s in plotly_specs(at) if s["layout"].get("title", {}).get("text", "").startswith(title_start))


def _seed_verdict() -> str:
    """The loss verdict's numbers as the bundle's record gives them: each seed's final losses, judged by the rule
    of the norms and position pages (the gap of the means beyond the sum of the standard deviations)."""
    record = json.loads((WEIGHTS_DIR / "tiny-moe" / "training.json").read_text())
    runs = record["seeds"]
    assert [r["seed"] for r in runs] == [0, 1, 2]
    assert runs[0]["final_val_loss"] == record["final_val_loss"]  # seed 0 is the shipped model
    c = spread.less([r["final_val_loss"]["moe"] for r in runs], [r["final_val_loss"]["dense"] for r in runs])
    words = {"holds": "Yes, at this scale", "noise": "Not established", "not_holds": "No: at this scale"}[c.state]
    return (
        f"**Is MoE ahead?** {words}. The pair was trained at 3 seeds (0, 1, 2), each with the recipe above. "
        f"Final validation loss, mean ± standard deviation over the seeds: MoE **{c.left.plus_minus()}**, "
        f"dense **{c.right.plus_minus()}** nats per token. The gap (dense − MoE) of {c.gap:.3f} nats"
    ).replace("No: at this scale.", "No: at this scale the dense model is.")


def test_first_load_shows_charts_and_the_capacity_slider_recomputes_drops():
    at = open_page("moe")
    assert_clean(at)
    specs = plotly_specs(at)
    assert specs, "the page must show a chart on first load"
    assert "total parameters" in _trace_names(at)
    if not HAVE_MODEL:
        return
    assert len(specs) == 4 and not at.table  # cost, loss curves, tokens, gates; held-out statistics closed
    text = " ".join(m.value for m in at.markdown)
    assert "$W_1$ of shape [8, 128, 256] = $[E, D, H]$" in text and "(the same number)" in text  # tiny-moe, stacked
    assert _seed_verdict() in text  # MoE vs dense over the three recorded seeds
    at.session_state["moe_open_heldout"] = True  # what opening the expander writes; its section computes only now
    at.run()
    assert_clean(at)
    assert len(plotly_specs(at)) >= 8  # + load, drops, entropy, co-occurrence
    # tables, no grid: the statistics' every column shows (a grid hid the last three, which the caption's baselines
    # are for) and the specialisation's long token lists wrap
    assert not at.dataframe and len(at.table) == 2
    stats, spec = at.table[0].value, at.table[1].value
    assert stats.shape == (4, 9) and "k-sets of neighbours overlap" in stats.columns, stats  # 4 layers, 9 columns
    assert list(stats.index) == [f"layer\u00a0{i}" for i in range(4)]  # no space to wrap "layer 0" at
    assert len(spec) == 8 and any("(100%," in row for row in spec.iloc[:, -1]), spec
    cooc = _figure(at, "First × second choice")["layout"]
    assert cooc["yaxis"]["title"]["standoff"] > 0 and cooc["margin"]["l"] >= 90  # the title clear of the ticks
    # The capacity-factor slider recomputes the drop rate of every layer.
    col = "drop rate at this factor"
    before = at.table[0].value[col].tolist()
    at.slider[2].set_value(0.5).run()
    assert_clean(at)
    after = at.table[0].value[col].tolist()
    assert all(a > b for a, b in zip(after, before))
    at.slider[2].set_value(3.0).run()
    assert max(at.table[0].value[col]) < min(after)


def test_cost_sliders_scale_total_with_e_and_active_with_k():
    at = open_page("moe")
    total, active = _metric(at, "Total parameters"), _metric(at, "Active parameters per token")
    at.slider[0].set_value(32).run()  # E: 8 → 32
    assert_clean(at)
    assert float(_metric(at, "Total parameters").split()[0]) > 2 * float(total.split()[0])
    new_active = float(_metric(at, "Active parameters per token").split()[0])
    assert new_active == pytest.approx(float(active.split()[0]), rel=0.02)  # only the router grows with E
    at.slider[1].set_value(4).run()  # k: 2 → 4
    assert float(_metric(at, "Active parameters per token").split()[0]) > float(active.split()[0])
    at.slider[0].set_value(2).run()  # k = 4 > E = 2: refused with a message, the page keeps serving
    assert not at.exception
    assert any("must be between 1 and" in e.value for e in at.error)


def test_missing_model_gives_a_clear_message_and_the_cost_chart(monkeypatch):
    monkeypatch.setattr(models, "available_models", lambda family=None, *, kind=None: [])
    at = open_page("moe")
    assert_clean(at)
    assert any("python -m tx_explorer.train moe" in i.value for i in at.info)
    assert plotly_specs(at)
    at.session_state["lang"] = "zh"  # what the sidebar switch writes (AppTest drops sidebar widgets after switch_page)
    at.run()  # every string of the page exists in Chinese too
    assert_clean(at)
    assert any("训练" in i.value for i in at.info)
    assert "总参数量" in _trace_names(at)


@needs_model
def test_typed_text_is_routed_and_html_is_shown_literally():
    at = open_page("moe")
    at.text_input[0].set_value("<b>bold</b> and plain").run()
    assert_clean(at)
    cells = [c for row in _figure(at, "Tokens coloured")["data"][0]["text"] for c in row]
    assert any("&lt;" in c for c in cells) and not any("<" in c for c in cells)  # Plotly shows "<", starts no tag
    gates = _figure(at, "Token × expert gates")
    assert len(gates["data"]) == 4  # one panel per layer
    z = _array(gates["data"][0]["z"])  # (tokens, experts) of layer 0
    np.testing.assert_allclose(z.sum(axis=1), 1.0, atol=1e-5)  # gates sum to 1
    assert ((z > 0).sum(axis=1) == 2).all()  # exactly k = 2 experts per token
    at.text_input[0].set_value("   ").run()  # whitespace only: a message, not a traceback
    assert not at.exception
    assert any("empty" in e.value for e in at.error)
    assert plotly_specs(at)  # the rest of the page still renders
    at.text_input[0].set_value("plain text").run()
    at.session_state["lang"] = "zh"
    at.run()  # the whole page in Chinese
    assert_clean(at)
    assert any(name.endswith("· 训练") for name in _trace_names(at))  # loss curves: "… · 训练"
    about = next(m.value for m in at.markdown if "tiny-gpt" in m.value)  # the training text, named in Chinese
    assert "Python 标准库的文档字符串" in about and "docstrings" not in about


def test_a_typed_chinese_sentence_says_what_its_byte_tokens_are():
    """A student's review: 我爱你 typed on the Chinese page drew \\xe6 \\x88 \\x91 … with no word on what they are."""
    from tx_explorer import locales
    from tx_explorer.views import moe as view

    for lang in ("en", "zh"):
        caption = view.typed(sentence="我爱你 the cat", lang=lang).caption
        assert caption.startswith(locales.text("moe", "gates_caption", lang))
        assert locales.text("common", "split_bytes", lang) in caption
    assert view.typed(sentence="the cat sat").caption == locales.text("moe", "gates_caption")


@needs_model
def test_the_checkpoint_section_offers_tiny_moe_first_and_routes_it():
    """A student's review: the picker "model with routed experts" offered only dense models (smollm2, gemma3,
    tiny-gpt); the bundled tiny-moe (E = 8, k = 2) was missing."""
    at = open_page("moe", moe_open_ckpt=True)
    assert_clean(at)
    picker = at.selectbox(key="moe_ckpt_model")
    assert "tiny-moe" in picker.options and picker.value == "tiny-moe"
    assert locales.text("moe", "ckpt_dense") not in [i.value for i in at.info]
    about = next(m.value for m in at.markdown if "experts per block" in m.value)
    cfg = models.load_model("tiny-moe").config
    assert f"$E = {cfg.num_experts}$ experts per block, $k = {cfg.top_k}$ per token" in about
    assert f"trained with capacity factor {cfg.capacity_factor:g}" in about
    titles = [s["layout"].get("title", {}).get("text", "") for s in plotly_specs(at)]
    assert locales.text("moe", "cooc_title") in titles and locales.text("moe", "load_title") in titles


@needs_model
def test_chinese_brackets_and_commas_are_full_width():
    """ "ln E = 2.08 (均匀)" and "(第一, 第二) 专家对的计数" mixed ASCII punctuation into Chinese."""
    from tx_explorer.views import moe as view

    shown = view.checkpoint(models.load_model("tiny-moe"), "The cat sat on the mat.", lang="zh")
    line = next(a.text for a in shown.statistics.entropy.figure.layout.annotations if a.text.startswith("ln E"))
    assert line == f"ln E = {np.log(models.load_model('tiny-moe').config.num_experts):.2f}（均匀）"
    assert locales.text("moe", "cooc_caption", "zh").startswith("（第一，第二）专家对")
    english = view.checkpoint(models.load_model("tiny-moe"), "The cat sat on the mat.").statistics.entropy.figure
    assert any(a.text.endswith(" (uniform)") for a in english.layout.annotations)
