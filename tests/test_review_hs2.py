"""Second review of *What a head does*: negative numbers written with a true minus ("corrupted −9.238",
"−2.500 nats", "−8.49e−02"), as the project's prose writes them (``views.signed``), in the sentences, the table and
the map's hover; one head's pattern kept per model, text and head, so that a language switch or a click on another
view's widget does not rerun the model (0.5 s on SmolLM2 at 128 tokens)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch
from conftest import assert_clean, open_page, plotly_specs

from tx_explorer import models
from tx_explorer.analysis import head_science as hs
from tx_explorer.families.text import TextModel
from tx_explorer.views import head_science as view
from tx_explorer.viz import head_science as vhs

TEXT = "The function returns a list of the keys in the dictionary, and the list is sorted."


@pytest.fixture(scope="module")
def tm() -> TextModel:
    torch.set_num_threads(1)
    return hs.text_model(models.load_model("tiny-gpt"))


def _no_hyphen_minus(said: str) -> None:
    """No number written with a hyphen: "-9.238", "e-02" (a hyphen between words, "top-5", stays)."""
    for i, c in enumerate(said):
        if c == "-":
            assert not said[i + 1 : i + 2].isdigit(), f"a hyphen for a minus at {i}: {said[max(0, i - 30) : i + 10]}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_patching_writes_a_negative_metric_with_a_true_minus(tm, lang) -> None:
    """SmolLM2's IOI pair read "clean 2.144, corrupted -9.238"."""
    m = view.patching_numbers(tm, "The name of the", "The name is the")
    p = dataclasses.replace(m.p, clean_metric=2.144, corrupt_metric=-9.238)
    note = view.patching_words(tm, dataclasses.replace(m, p=p), lang=lang).notes[-1]
    assert "−9.238" in note and "2.144" in note, note
    _no_hyphen_minus(note)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_importance_sentences_and_hover_write_a_true_minus(tm, lang) -> None:
    m = view.importance_numbers(tm, TEXT)
    delta = m.r.delta_loss.copy()
    delta[1, 2] = -2.5
    r = dataclasses.replace(m.r, delta_loss=delta, base_logit=-3.25)
    result = view.importance_words(tm, dataclasses.replace(m, r=r), lang=lang)
    said = " ".join(result.notes)
    assert "−2.500" in said and "−3.25" in said, said  # the focus head and a negative base logit
    _no_hyphen_minus(said)
    hover = result.panels[0].figure.data[1].text  # the clickable markers carry the hover
    assert "L1, H2<br>−2.500" in hover, hover
    assert not any("-" in h for h in hover)


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_taxonomy_and_attribution_write_a_true_minus(tm, lang) -> None:
    scored = view.taxonomy_numbers(tm, TEXT)
    sinks = np.zeros_like(scored.r.sinks)
    sinks.ravel()[:2] = True
    r = dataclasses.replace(scored.r, sinks=sinks, sink_effect=-0.25, base_loss=2.0)
    said = " ".join(view.taxonomy_words(tm, dataclasses.replace(scored, r=r), lang=lang).notes)
    assert "−0.250" in said, said
    _no_hyphen_minus(said)
    m = view.attribution_numbers(tm, TEXT)
    r = dataclasses.replace(
        m.r,
        faithfulness={k: -0.0123 for k in m.r.faithfulness},
        random_auc=-0.5,
        f_baseline=-0.0849,
        piece_errors=np.array([0.0439, -0.05, 0.04, -0.0279]),
        converged=False,
    )
    result = view.attribution_words(tm, dataclasses.replace(m, r=r), lang=lang)
    auc = list(result.table.values())[1]
    assert auc == ["−0.0123"] * 4 + ["−0.5000"], auc  # each to 4 places, a true minus
    said = " ".join(result.notes)
    assert "−0.0849" in said and "e−02" in said, said
    _no_hyphen_minus(said)


def test_the_layer_head_maps_hover_writes_a_true_minus() -> None:
    fig = vhs.layer_head_map(np.array([[-0.0849, 1.5]]), title="", x_title="", y_title="", clickable=True)
    assert list(fig.data[1].text) == ["L0, H0<br>−0.085", "L0, H1<br>1.500"]


def test_the_pattern_is_kept_per_model_text_and_head(monkeypatch) -> None:
    """The pattern under the importance map ran the model on every rerun: a language switch redrew it from a new
    forward pass. Now only a head not seen before runs it."""
    torch.set_num_threads(1)
    passes = []
    maps = TextModel.maps
    monkeypatch.setattr(TextModel, "maps", lambda self, *a, **k: passes.append(1) or maps(self, *a, **k))
    text = "A text of its own, so that no other test has kept its pattern: the keys, the values."
    at = open_page("head_science", hs_model="tiny-gpt", hs_text=text)
    assert_clean(at)
    first = len(passes)
    assert first >= 1
    titles = [s["layout"]["title"]["text"] for s in plotly_specs(at)]
    at.session_state["lang"] = "zh"
    at.run()  # a language switch: the same head, worded anew
    assert_clean(at)
    assert len(passes) == first, "the language switch reran the model for the pattern"
    assert any(t.startswith("第 ") for t in (s["layout"]["title"]["text"] for s in plotly_specs(at))), titles
    at.session_state["lang"] = "zh"
    at.number_input(key="hs_head_tiny-gpt").set_value((at.number_input(key="hs_head_tiny-gpt").value + 1) % 4)
    at.run()  # another head: one pass
    assert len(passes) == first + 1
    at.session_state["lang"] = "en"
    at.run()
    assert_clean(at)
    assert len(passes) == first + 1


def test_the_layer_head_maps_hover_label_is_not_the_markers_red() -> None:
    """Gemma 3's L11 H3, a blue cell (−0.141), was hovered in a red box: the invisible markers' default colour."""
    fig = vhs.layer_head_map(np.array([[-0.141, 0.2]]), title="", x_title="", y_title="", clickable=True)
    assert fig.data[1].hoverlabel.bgcolor == "white"


def test_a_plain_layer_head_maps_hover_names_the_cell_once() -> None:
    """Patching's head map (not clickable) hovered "layer L17: L17<br>head H1: H1<br>0.1044"."""
    fig = vhs.layer_head_map(np.array([[0.1044, -0.02]]), title="", x_title="layer", y_title="head")
    assert list(fig.data[0].customdata[0]) == ["L0, H0<br>0.104", "L0, H1<br>−0.020"]
    assert fig.data[0].hovertemplate == "%{customdata}<extra></extra>"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_lens_and_patching_hovers_write_a_true_minus_and_their_languages_comma(tm, lang) -> None:
    """The lens hovered "第 10 层注意力之后, 5: ▁list": a 中文 row, then a half-width comma."""
    m = view.patching_numbers(tm, "The name of the", "The name is the")
    p = dataclasses.replace(m.p, residual=-np.abs(m.p.residual) - 0.5)
    hover = view.patching_words(tm, dataclasses.replace(m, p=p), lang=lang).panels[0].figure.data[0].text
    sep = "，" if lang == "zh" else ", "
    assert hover[0][0].startswith(f"L0{sep}0: ") and hover[0][0].endswith("<br>−" + f"{-p.residual[0, 0]:.3f}")
    lens = view.lens_words(tm, view.lens_numbers(tm, TEXT), lang=lang).panels[0].figure.data[0].text
    assert lens[0][0].startswith("第 0 层注意力之后，0: " if lang == "zh" else "L0 after attention, 0: ")


def test_a_hyphen_in_a_token_is_not_turned_into_a_minus() -> None:
    fig = vhs.position_map(np.array([[-1.0, 2.0]]), ["L0"], ["top-5", "-"], title="", x_title="", y_title="")
    assert list(fig.data[0].text[0]) == ["L0, 0: top-5<br>−1.000", "L0, 1: -<br>2.000"]


def test_the_heldout_source_is_spaced_in_chinese(tm) -> None:
    """Gemma 3's held-out ablation read "在8 个留出窗口 × 64 个 token上测量"."""
    m = view.importance_numbers(tm, TEXT)
    held = dataclasses.replace(m, heldout=True, shape=(8, 64))
    said = view.importance_words(tm, held, lang="zh").notes[0]
    assert said.startswith("在 8 个留出窗口 × 64 个 token 上测量；"), said
    assert view.importance_words(tm, m, lang="zh").notes[0].startswith("在你的文本（19 个 token）上测量；")
    assert view.importance_words(tm, held, lang="en").notes[0].startswith("Measured on 8 held-out windows × 64 tokens;")


def test_held_out_windows_are_framed_as_the_tokenizer_frames_a_text() -> None:
    """Gemma 3's held-out windows were cut without its <bos> (its loss 5.62 nats without, 3.72 with): the ablation
    map and mean ablation's reference were measured on inputs the model never reads."""
    from types import SimpleNamespace

    from tx_explorer.analysis import head_science as hs

    class Framing:  # a tokenizer that frames every text as [CLS] … [SEP], as MiniLM's does (Gemma 3: <bos> …)
        def encode(self, text, add_special_tokens=True):
            body = [10 + (ord(c) % 50) for c in text]
            return SimpleNamespace(ids=[1, *body, 2] if add_special_tokens else body)

    tm = SimpleNamespace(tokenizer=Framing(), max_len=512)
    assert hs.framing(tm) == ([1], [2])
    windows, source = hs.heldout_windows(tm, length=16, count=3)
    assert windows.shape == (3, 16) and source == "3 held-out windows × 16 tokens"
    assert (windows[:, 0] == 1).all() and (windows[:, -1] == 2).all() and not (windows[:, 1:-1] <= 2).any()
