"""The lecture's last Seq2Seq claims (§1.1, §1.3, §2.1–2.2, §4.1), each checked against an independent reference."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tx_explorer import locales, models
from tx_explorer.analysis import seq2seq_claims as sc
from tx_explorer.analysis.seq2seq_eval import token_matches
from tx_explorer.data import translation as tr
from tx_explorer.edit import Edit
from tx_explorer.modules.seq2seq import greedy_decode
from tx_explorer.trace import Trace
from tx_explorer.views import seq2seq as view

pytestmark = pytest.mark.usefixtures("one_thread")
SENTENCE = "the girl that we love sings and they run"


@pytest.fixture(scope="module")
def translators() -> dict:
    return {k: models.load_model(f"seq2seq-{k}") for k in ("fixed", "attention", "transformer")}


@pytest.fixture(scope="module")
def examples() -> list[tr.Example]:
    return sc.claim_set(12)


def test_the_grammar_records_who_agrees_with_each_verb():
    """Each pair is (verb, subject): the Italian verb form linked to the English verb is the subject's person."""
    ex = tr.parse(SENTENCE.split())
    assert [(ex.source[v], ex.source[s]) for v, s in ex.agreement] == [
        ("love", "we"),
        ("sings", "girl"),
        ("run", "they"),
    ]
    persons = {"we": 3, "they": 5, "girl": 2}
    links = dict(ex.alignment)
    for v, s in ex.agreement:
        verb = next(vb for vb in tr.VERBS if ex.target[links[v]] in vb.it)
        assert ex.target[links[v]] == verb.it[persons[ex.source[s]]]
    for e in sc.claim_set(30):  # every generated pair: a verb and a pronoun or noun, and the parse agrees
        assert e.agreement and tr.parse(e.source) == e
        for v, s in e.agreement:
            assert tr._BY_WORD.get(e.source[v], ("",))[0] == "verb"
            assert e.source[s] in tr.PRONOUNS or tr._BY_WORD[e.source[s]][0] == "noun"


def test_encoder_recurrence_rebuilds_the_annotations(translators):
    t = translators["attention"]
    rebuilt, delta = sc.encoder_recurrence(t, SENTENCE.split())
    assert delta < 1e-5
    ann = t.translate(SENTENCE).annotations
    np.testing.assert_allclose(rebuilt, ann, atol=1e-5)
    # a wrong step (the update gate the other way round) would not rebuild them
    x = torch.randn(3)
    h = torch.randn(2)
    cell = torch.nn.GRUCell(3, 2)
    want = cell(x[None], h[None])[0]
    got = sc._gru_step(x, h, cell.weight_ih, cell.weight_hh, cell.bias_ih, cell.bias_hh)
    torch.testing.assert_close(got, want)


def test_decoder_steps_are_the_decoders_and_the_operator_agrees(translators):
    t = translators["attention"]
    o = t.translate(SENTENCE)
    steps = sc.decoder_steps(t, list(o.source), list(o.tokens))
    n = len(o.tokens) + 1  # the last step writes <eos>
    assert steps.scores.shape == (n, len(o.source)) and steps.states.shape[0] == n
    np.testing.assert_allclose(steps.weights[:-1], o.alignment, atol=1e-6)  # the teacher-forced trace
    np.testing.assert_allclose(steps.weights[-1], o.eos_alignment, atol=1e-6)
    np.testing.assert_allclose(steps.contexts[:-1], o.contexts, atol=1e-5)
    e = torch.as_tensor(steps.scores, dtype=torch.float64)  # §1.3: the scores are what the softmax reads
    np.testing.assert_allclose(torch.softmax(e, -1).numpy(), steps.weights, atol=1e-6)
    with torch.no_grad():
        memory = t.model.encode(*sc._ids(t, list(o.source)))
        np.testing.assert_allclose(steps.states[0], t.model.start(memory)[0].numpy(), atol=1e-7)  # s₀
        # the additive score by hand in float64: vᵀ tanh(W s + U h_i)
        score, s0 = t.model.decoder.score, torch.as_tensor(steps.states[0], dtype=torch.float64)
        w, u = score.W.weight.double(), score.U.weight.double()
        h = memory.states[0].double()
        e0 = torch.tanh(s0 @ w.T + h @ u.T + score.U.bias.double()) @ score.v.weight[0].double()
        np.testing.assert_allclose(steps.scores[0], e0.numpy(), atol=1e-5)
    da, dc = steps.operator_gap  # §2.1/§2.2: the generic operator gives the decoder's a_t and c_t
    assert da < 1e-6 and dc < 1e-5
    assert steps.state_gap < 1e-5  # §1.1: s_t = g_U(y_{t−1}, s_{t−1}, c_t) written out
    with torch.no_grad():  # the context matters: step 2's state rebuilt with step 1's context c_1 is off
        dec, y1 = t.model.decoder, t.tgt_vocab.encode(list(o.tokens))[0]
        cell = [getattr(dec.cell, n) for n in ("weight_ih", "weight_hh", "bias_ih", "bias_hh")]
        x = torch.cat([dec.embed(torch.tensor(y1)), torch.as_tensor(steps.contexts[0])])
        stale = sc._gru_step(x, torch.as_tensor(steps.states[1]), *cell)
        assert float((stale - torch.as_tensor(steps.states[2])).abs().max()) > 1e-3
    with pytest.raises(TypeError, match="no attention"):
        sc.decoder_steps(translators["fixed"], list(o.source), list(o.tokens))


def test_zero_start_changes_only_the_start(translators, examples):
    t = translators["attention"]
    sources = [ex.source for ex in examples]
    assert t.decode(sources, model=sc.Variant(t.model)) == t.decode(sources)  # an unchanged variant is the model
    r = sc.zero_start(t, examples)
    hyps = t.decode(sources, model=sc.Variant(t.model, zero_start=True))
    matches = [token_matches(h, ex.target) for h, ex in zip(hyps, examples)]
    assert r.token_accuracy[1] == pytest.approx(sum(m for m, _ in matches) / sum(n for _, n in matches))
    assert r.sentences == len(examples) and r.token_accuracy[0] != r.token_accuracy[1]
    with torch.no_grad():
        memory = t.model.encode(*sc._ids(t, list(sources[0])))
        assert not sc.Variant(t.model, zero_start=True).start(memory).any()


class _NoEos:
    """A decoder that can never write <eos>: every decode runs to the length limit."""

    def __init__(self, model, eos: int) -> None:
        self.model, self.eos = model, eos

    def encode(self, src, lengths):
        return self.model.encode(src, lengths)

    def start(self, memory):
        return self.model.start(memory)

    def step(self, memory, state, y_prev):
        logits, state, a = self.model.step(memory, state, y_prev)
        return logits.index_fill(-1, torch.tensor([self.eos]), float("-inf")), state, a


@pytest.mark.parametrize("kind", ["fixed", "attention", "transformer"])
def test_decodes_end_with_eos_and_t_differs_from_t_prime(translators, examples, kind):
    """Against the raw decoder output (<eos> left in, read by id) and lengths counted by a loop."""
    t = translators[kind]
    r = sc.decoding_ends(t, examples)
    sources = [ex.source for ex in examples]
    src, lengths = t._src(sources)
    raw = greedy_decode(t.model, src, lengths, bos=t.tgt_vocab.bos, eos=-1, max_len=r.limit)  # never stops early
    assert r.ended == sum(t.tgt_vocab.eos in row for row in raw) and r.sentences == len(examples)
    assert r.differ == sum(len(ex.source) != len(ex.target) for ex in examples) > 0
    assert r.source_lengths == (min(len(ex.source) for ex in examples), max(len(ex.source) for ex in examples))
    hyps = t.decode(sources)
    assert r.same_length == sum(len(h) == len(ex.target) for h, ex in zip(hyps, examples))
    cut = sc.decoding_ends(_Cut(t, _NoEos(t.model, t.tgt_vocab.eos)), examples)
    assert cut.ended == 0  # the check can fail: a decoder that never writes <eos> is cut every time


class _Cut:
    """The translator, decoding with another model (as :meth:`Translator.decode` allows)."""

    def __init__(self, translator, model) -> None:
        self.translator, self.model = translator, model

    def decode(self, sources):
        return self.translator.decode(sources, model=self.model)

    def target_limit(self, sources):
        return self.translator.target_limit(sources)


def test_subject_verb_scores_by_a_loop(translators, examples):
    t = translators["transformer"]
    got = sc.subject_verb_heads(t, examples)
    subject, baseline, pairs = np.zeros((2, 4)), np.zeros((2, 4)), 0
    for ex in examples:
        trace = Trace()
        with torch.no_grad():
            t.model.encode(*sc._ids(t, ex.source), trace=trace)
        maps = trace.stack().double().numpy()[:, 0]  # (L, H, T, T)
        for v, s in ex.agreement:
            others = [(q, q + s - v) for q in range(len(ex.source)) if q != v and 0 <= q + s - v < len(ex.source)]
            if others:
                subject += maps[:, :, v, s]
                baseline += np.mean([maps[:, :, q, k] for q, k in others], axis=0)
                pairs += 1
    assert got.pairs == pairs
    np.testing.assert_allclose(got.subject, subject / pairs, atol=1e-6)
    np.testing.assert_allclose(got.baseline, baseline / pairs, atol=1e-6)
    assert got.best == np.unravel_index(np.argmax(subject - baseline), subject.shape)


def test_agreement_errors_count_a_verb_in_the_wrong_person():
    ex = tr.parse("we see the sky".split())
    assert sc.agreement_errors([list(ex.target)], [ex]) == (0, 1)
    assert sc.agreement_errors([["vedono", "il", "cielo"]], [ex]) == (1, 1)  # third person plural
    assert sc.agreement_errors([["il", "cielo"]], [ex]) == (0, 1)  # a missing verb is not an agreement error


def test_ablating_a_head_reaches_the_encoder(translators, examples):
    t = translators["transformer"]
    src, lengths = sc._ids(t, examples[0].source)
    with torch.no_grad():
        plain = t.model.encode(src, lengths).states
        same = sc.Variant(t.model, edit=Edit()).encode(src, lengths).states
        ablated = sc.Variant(t.model, edit=Edit().ablate(0, 0)).encode(src, lengths).states
    torch.testing.assert_close(same, plain)
    assert (ablated - plain).abs().max() > 1e-3
    out = sc.ablation_errors(t, examples, [(0, 0)])
    assert set(out) == {None, (0, 0)} and all(p == sum(len(ex.agreement) for ex in examples) for _, p in out.values())


def test_the_page_states_the_computed_numbers(translators, examples):
    r = view.zero_start(translators, per_set=12)
    metrics, text = view.zero_start_text(r)
    a = r["attention"]
    assert f"{a.token_accuracy[0]:.1%}" in text and f"{a.token_accuracy[1]:.1%}" in text
    assert metrics[view.labels()["fixed"]] == f"{r['fixed'].token_accuracy[0]:.1%} → {r['fixed'].token_accuracy[1]:.1%}"
    ends = view.claim_view("ends", view.decoding_ends(translators, per_set=12))
    first = sc.decoding_ends(translators["fixed"], sc.claim_set(12))
    assert f"$T \\neq T'$ in {first.differ} of them" in ends.text and ends.metrics[view.labels()["fixed"]].startswith(
        f"{first.ended} / 12"
    )
    sv = view.subject_verb(translators["transformer"], per_set=12)
    shown = view.claim_view("sv", sv, lang="zh")
    layer, head = sv.scores.best
    assert f"{sv.scores.subject[layer, head]:.3f}" in shown.text and f"{sv.errors[None][0]}" in shown.text
    assert "。 " not in shown.text  # Chinese sentences run on without a space
    np.testing.assert_allclose(shown.panel.data["subject"], sv.scores.subject)
    errors, pairs = sv.errors[None][0], sv.errors[None][1]
    assert (
        shown.metrics[locales.text("seq2seq", "sv_m_errors", "zh")]
        == f"{errors} → {sv.errors[(layer, head)][0]} / {pairs}"
    )
