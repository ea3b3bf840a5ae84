"""Inside a block (§5.1–5.3, §9.5): the token-mixing probe and LayerNorm vs BatchNorm; library, view and page."""

from __future__ import annotations

import pytest
from conftest import assert_clean, open_page, plotly_specs

from tx_explorer import models
from tx_explorer.analysis import block_roles
from tx_explorer.views import block_roles as view


@pytest.fixture(scope="module")
def tiny():
    return models.load_model("tiny-gpt")


@pytest.mark.parametrize("layer", [0, 3])
def test_only_attention_moves_other_tokens_and_only_later_ones(tiny, layer):
    ids = tiny.encode("The cat sat on the mat because it was warm.").ids
    p = block_roles.token_probe(tiny.model, ids, token=3, layer=layer)
    assert p.exact["norm"] and p.exact["mlp"]  # every other token bit-identical
    assert p.delta["norm"][3] > 0 and p.delta["mlp"][3] > 0  # the changed token itself does move
    assert not p.exact["attention"] and p.others("attention", before=False) > 1e-3
    assert p.others("attention", before=True) == 0.0  # causal: earlier tokens cannot see it
    assert p.others(p.stages[-1], before=False) > 0 and p.others(p.stages[-1], before=True) == 0.0  # the block's output


def test_layernorm_ignores_the_batch_and_batchnorm_does_not():
    found = {r.change: r for r in block_roles.batch_dependence()}
    assert set(found) == set(block_roles.CHANGES)
    for r in found.values():
        assert r.layernorm_identical and r.layernorm == 0.0
        assert not r.batchnorm_identical and r.batchnorm > 1e-3
    with pytest.raises(ValueError, match="second sequence"):
        block_roles.batch_dependence(batch=1)


def test_bad_probe_inputs_are_refused_in_both_languages(tiny):
    with pytest.raises(ValueError, match="between 0 and 2"):
        block_roles.token_probe(tiny.model, [1, 2, 3], token=3)
    with pytest.raises(ValueError, match="the text is empty"):
        view.probe(tiny, "", 0)
    with pytest.raises(ValueError) as refused:
        block_roles.token_probe(tiny.model, [1, 2, 3], token=0, layer=7)
    assert "0 到 3" in refused.value.message("zh")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_views_give_the_lecture_table_and_a_verdict(tiny, lang):
    pv = view.probe(tiny, "The cat sat on the mat.", 1, lang=lang)
    assert len(pv.table) == 4 and ("torch.equal" in pv.verdict)
    # the question "mixes tokens?" is answered yes or no on every row (the residual's row once gave its role)
    answers = [next(v for k, v in row.items() if "§9.5" in k) for row in pv.table]
    assert [a.split("：")[0].split(":")[0] for a in answers] == {
        "en": ["yes", "no", "no", "no"],
        "zh": ["是", "否", "否", "否"],
    }[lang]
    assert len(pv.bars.figure.data) == pv.bars.data.shape[1] == 6  # Pre-Norm: norm, attention, +, norm, MLP, +
    rows, verdict = view.batch_norms(lang=lang)
    assert len(rows) == 2 and "torch.equal" in verdict


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_page_renders_both_sections(lang):
    at = open_page("block_roles")
    at.session_state["lang"] = lang
    at.run()
    assert_clean(at)
    assert len(at.success) == 2 and len(at.table) == 2
    assert len(plotly_specs(at)) == 1
    assert at.number_input(key="probe_layer").label == {"en": "block", "zh": "层（block）"}[lang]
    at.number_input(key="probe_token").set_value(0).run()
    assert_clean(at)


def test_the_default_token_to_change_is_a_whole_word(tiny):
    """Token 2 of the default sentence is "at", a piece of "cat", for tiny-gpt's tokenizer: the page starts on the
    first whole word from there, "on" (its own token, and the next one starts a new word)."""
    text = "The cat sat on the mat because it was warm."
    tokens = tiny.encode(text).tokens
    assert tokens[2] == "at"
    assert tokens[view.whole_word(tiny, text)] == "▁on"
    assert view.whole_word(tiny, "The module", start=1) == 1  # "▁module" ends the text: a whole word


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_the_changed_token_and_the_block_are_counted_from_zero_in_words(tiny, lang):
    """A student's review: "改动第 3 个 token" and "第 5 个 block" read as the third and the fifth, but the indices
    count from 0 (token 3 of "<bos> 今天 天气 很好" is the fourth)."""
    pv = view.probe(tiny, "The cat sat on the mat.", 3, 1, lang=lang)
    title = pv.bars.figure.layout.title.text
    said = {
        "en": ("the token at position 3", "block 1", "counted from 0"),
        "zh": ("位置 3 的 token", "block 1", "从 0 数起"),
    }[lang]
    assert all(s in title for s in said), title
    assert said[0 if lang == "en" else 2] in pv.verdict and "第 3 个" not in pv.verdict and "第 1 个" not in title
