"""The English → Italian generator, the Seq2Seq models, decoding, metrics and the bundled translators."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tx_explorer import locales, models
from tx_explorer.analysis import seq2seq_eval as ev
from tx_explorer.config import TransformerConfig
from tx_explorer.data import translation as tr
from tx_explorer.families.translation import MAX_WORDS, Translation, Translator, source_message
from tx_explorer.modules import seq2seq as s2s
from tx_explorer.trace import Trace

NAMES = ("seq2seq-fixed", "seq2seq-attention", "seq2seq-transformer")


# ---------------------------------------------------------------- generator


def test_generator_is_deterministic_and_respects_lengths():
    assert tr.generate_pairs(40, seed=3) == tr.generate_pairs(40, seed=3)
    assert tr.generate_pairs(40, seed=3) != tr.generate_pairs(40, seed=4)
    for english, italian in tr.generate_pairs(60, seed=1, min_words=5, max_words=12):
        assert 5 <= len(english.split()) <= 12 and italian
    long = tr.generate_examples(5, seed=2, min_words=41, max_words=60)
    assert all(41 <= len(ex.source) <= 60 for ex in long)


def test_lecture_example_is_in_the_language():
    english, italian = tr.LECTURE_EXAMPLE
    assert tr.parse(english.split()).italian == italian == "vediamo il cielo"
    assert not tr.is_held_out(english), "the training pool includes it (tx_explorer.train.seq2seq)"


@pytest.mark.parametrize(
    "english, italian",
    [
        ("i see the sky", "vedo il cielo"),
        ("you see the sky", "vedi il cielo"),
        ("she sees the sky", "vede il cielo"),
        ("we see the sky", "vediamo il cielo"),
        ("they see the sky", "vedono il cielo"),
        ("the red car", "la macchina rossa"),
        ("the red cars", "le macchine rosse"),
        ("a red car", "una macchina rossa"),
        ("the students", "gli studenti"),
        ("a student", "uno studente"),
        ("the old dogs", "i cani vecchi"),
        ("an old horse", "un cavallo vecchio"),
        ("the new red car", "la macchina rossa nuova"),
        ("we do not see the sky", "non vediamo il cielo"),
        ("he often sleeps near the river", "dorme spesso vicino al fiume"),
        ("they work in the houses", "lavorano nelle case"),
        ("i sing on the mirror", "canto sullo specchio"),
        ("we wait near a river", "aspettiamo vicino a un fiume"),
        ("the girl that the boys see sings", "la ragazza che i ragazzi vedono canta"),
        ("the cat that eats the cake sleeps and we laugh", "il gatto che mangia la torta dorme e ridiamo"),
        ("the dogs do not want the green apples", "i cani non vogliono le mele verdi"),
    ],
)
def test_agreement_reordering_and_pronoun_drop(english, italian):
    assert tr.parse(english.split()).italian == italian


@pytest.mark.parametrize(
    "english", ["we sees the sky", "a cats sleep", "we see sky", "see the sky", "the the", "we do not sees the sky"]
)
def test_sentences_outside_the_grammar_have_no_gold(english):
    with pytest.raises(tr.ParseError):
        tr.parse(english.split())


def _check_example(ex: tr.Example) -> None:
    n_src, n_tgt = len(ex.source), len(ex.target)
    assert all(0 <= i < n_src and 0 <= j < n_tgt for i, j in ex.alignment)
    assert {j for _, j in ex.alignment} == set(range(n_tgt)), "every Italian word has a source"
    assert {i for i, _ in ex.alignment} == set(range(n_src)), "every English word is translated"
    assert not {"io", "tu", "lui", "lei", "noi", "loro"} & set(ex.target), "subject pronouns are dropped"
    links = {}
    for i, j in ex.alignment:
        links.setdefault(i, []).append(j)
    for i, word in enumerate(ex.source):
        if word == "we":
            assert all(ex.target[j].endswith("mo") for j in links[i]), ex  # vediamo, abbiamo, …
        if (
            i + 1 < n_src
            and word in {a.en for a in tr.ADJECTIVES}
            and ex.source[i + 1] in {n.en for n in tr.NOUNS} | {n.en_pl for n in tr.NOUNS}
        ):
            assert min(links[i]) > max(links[i + 1]), f"adjective after its noun: {ex}"
    assert tr.parse(ex.source) == ex, "the parser recovers the tree, hence the same gold alignment"


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000), lo=st.integers(1, 40))
def test_alignments_are_valid_and_parse_back(seed, lo):
    for ex in tr.generate_examples(3, seed, min_words=lo, max_words=min(40, lo + 5)):
        _check_example(ex)


def test_articles_agree_with_their_nouns():
    # Independent rules: masculine s+consonant/z nouns take lo/gli/uno; other masculine il/i/un; feminine la/le/una.
    def expected(noun: str, plural: bool) -> set[str]:
        entry = next(n for n in tr.NOUNS if noun in (n.it, n.it_pl))
        impure = entry.gender == "m" and (
            entry.it.startswith("z") or (entry.it[0] == "s" and entry.it[1] not in "aeiou")
        )
        if entry.gender == "f":
            return {"le"} if plural else {"la", "una"}
        return ({"gli"} if plural else {"lo", "uno"}) if impure else ({"i"} if plural else {"il", "un"})

    nouns = {n.it: False for n in tr.NOUNS} | {n.it_pl: True for n in tr.NOUNS}
    seen = 0
    for ex in tr.generate_examples(200, seed=5, max_words=15):
        for j, word in enumerate(ex.target[1:], start=1):
            if word in nouns and ex.target[j - 1] in {"il", "lo", "la", "i", "gli", "le", "un", "uno", "una"}:
                assert ex.target[j - 1] in expected(word, nouns[word]), ex.italian
                seen += 1
    assert seen > 100


def test_vocabularies_cover_the_generator():
    src, tgt = set(tr.source_words()), set(tr.target_words())
    for ex in tr.generate_examples(300, seed=9):
        assert set(ex.source) <= src and set(ex.target) <= tgt
    vocab = tr.Vocab(tr.source_words())
    assert vocab.decode(vocab.encode(["we", "see"])) == ["we", "see"] and vocab.encode(["zzz"]) == [vocab.unk]


def test_held_out_split_is_disjoint():
    test = {ex.english for ex in tr.generate_examples(30, seed=1, min_words=8, split="test")}
    train = {ex.english for ex in tr.generate_examples(300, seed=1, min_words=8, split="train")}
    assert all(tr.is_held_out(e) for e in test) and not test & train
    assert not tr.is_held_out("hello") and not tr.is_held_out("the sky"), "too short to hold out"


# ---------------------------------------------------------------- input checks


def test_source_checks_name_the_problem():
    words = tr.source_words()
    assert tr.check_source("   ", words, 40).problem == "empty"
    assert tr.check_source("we see the sky " * 11, words, 40).problem == "too_long"
    check = tr.check_source("We see the skyy!", words, 40)
    assert check.problem == "unknown" and check.unknown == {"skyy": ["sky"]}
    assert "skyy" in source_message(check) and "sky" in source_message(check)
    assert tr.check_source("We see the sky.", words, 40).tokens == ("we", "see", "the", "sky")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_punctuation_alone_is_told_as_no_words_not_as_an_empty_box(lang):
    """A student typed "?!...": the page asked for a sentence as if the box were empty."""
    from tx_explorer.views import seq2seq as view

    check = tr.check_source("?!...", ["we", "see"], 40)
    assert check.problem == "no_words" and "no words" in source_message(check)
    said = view.input_problem(check, lang=lang)
    assert said == locales.text("seq2seq", "no_words", lang) != locales.text("seq2seq", "empty", lang)
    assert tr.check_source(" \t", ["we"], 40).problem == "empty"


# ---------------------------------------------------------------- model maths


def _rnn(context: str, **kw) -> s2s.RNNSeq2Seq:
    torch.manual_seed(0)
    model = s2s.RNNSeq2Seq(s2s.RNNConfig(src_vocab=30, tgt_vocab=40, context=context, **kw)).eval()
    if context == "additive":
        torch.nn.init.normal_(model.decoder.score.v.weight)  # v starts at 0 (uniform); make the test non-trivial
    return model


def _batch() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    src = torch.randint(4, 30, (3, 7), generator=g)
    src[1, 4:] = 0
    src[2, 6:] = 0
    return src, (src != 0).sum(1), torch.randint(4, 40, (3, 5), generator=g)


def test_bahdanau_scores_match_a_direct_float64_recomputation():
    model = _rnn("additive")
    src, lengths, _ = _batch()
    memory = model.encode(src, lengths)
    s = torch.randn(3, model.cfg.dec_hidden)
    a, c = model.decoder.attend(s, memory)
    sc = model.decoder.score
    W, U, b, v = (t.double() for t in (sc.W.weight, sc.U.weight, sc.U.bias, sc.v.weight[0]))
    h = memory.states.double()
    for batch in range(3):
        n = int(lengths[batch])
        e = torch.stack([v @ torch.tanh(W @ s[batch].double() + U @ h[batch, i] + b) for i in range(n)])
        expect = torch.exp(e - e.max()) / torch.exp(e - e.max()).sum()
        torch.testing.assert_close(a[batch, :n].double(), expect, rtol=1e-5, atol=1e-6)
        assert torch.all(a[batch, n:] == 0), "padding gets no weight"
        torch.testing.assert_close(c[batch].double(), (expect[:, None] * h[batch, :n]).sum(0), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("context", ["dot", "general"])
def test_luong_scores_match_their_formulas(context):
    model = _rnn(context, hidden=8, dec_hidden=16)
    src, lengths, _ = _batch()
    memory = model.encode(src, lengths)
    s = torch.randn(3, 16)
    a, _ = model.decoder.attend(s, memory)
    h = memory.states[0, : int(lengths[0])]
    keys = h if context == "dot" else h @ model.decoder.score.W.weight.T
    torch.testing.assert_close(a[0, : int(lengths[0])], torch.softmax(keys @ s[0], dim=0))


def test_dot_score_needs_matching_widths():
    with pytest.raises(ValueError, match="dec_hidden"):
        s2s.RNNSeq2Seq(s2s.RNNConfig(src_vocab=10, tgt_vocab=10, context="dot", hidden=8, dec_hidden=10))


def test_encoder_annotations_do_not_depend_on_padding():
    model = _rnn("additive")
    src, lengths, _ = _batch()
    batched = model.encode(src, lengths).states[1, :4]
    alone = model.encode(src[1:2, :4], lengths[1:2]).states[0]
    torch.testing.assert_close(batched, alone)


@settings(max_examples=8, deadline=None)
@given(context=st.sampled_from(["additive", "general"]), n_out=st.integers(1, 5))
def test_alignments_are_traced_and_rows_sum_to_one(context, n_out):
    model = _rnn(context)
    src, lengths, tgt = _batch()  # tgt: (3, 5)
    trace = Trace()
    logits = model(src, lengths, tgt[:, :n_out], trace=trace)
    assert logits.shape == (3, n_out, 40)
    (rec,) = trace.records
    assert rec.weights.shape == (3, 1, n_out, 7) and rec.kind == ("additive" if context == "additive" else "cross")
    torch.testing.assert_close(rec.weights.sum(-1), torch.ones(3, 1, n_out))


def test_fixed_model_has_no_alignment_and_steps_match_forward():
    model = _rnn("fixed")
    src, lengths, tgt = _batch()
    trace = Trace()
    logits = model(src, lengths, tgt, trace=trace)
    assert len(trace) == 0
    memory = model.encode(src, lengths)
    state = model.start(memory)
    for t in range(tgt.shape[1]):
        step, state, weights = model.step(memory, state, tgt[:, t])
        assert weights is None
        torch.testing.assert_close(step, logits[:, t], rtol=1e-4, atol=1e-5)


def _transformer() -> s2s.TransformerSeq2Seq:
    torch.manual_seed(0)
    cfg = TransformerConfig(vocab_size=1, max_len=16, dim=32, num_layers=2, num_heads=4, mlp_ratio=2.0)
    return s2s.TransformerSeq2Seq(cfg, 30, 40).eval()


def test_transformer_records_cross_attention_per_layer_and_head():
    model = _transformer()
    src, lengths, tgt = _batch()
    trace = Trace()
    model(src, lengths, tgt, trace=trace)
    cross = trace.select("cross")
    assert [r.name for r in cross] == ["decoder.blocks.0.cross.attn", "decoder.blocks.1.cross.attn"]
    assert [r.layer for r in cross] == [0, 1] and cross[0].weights.shape == (3, 4, 5, 7)
    torch.testing.assert_close(cross[0].weights.sum(-1), torch.ones(3, 4, 5))
    assert torch.all(cross[0].weights[1, :, :, 4:] == 0), "source padding is hidden"


@pytest.mark.parametrize("make", [lambda: _rnn("additive"), lambda: _rnn("fixed"), _transformer])
def test_beam_of_one_is_greedy(make):
    model = make()
    src, lengths, _ = _batch()
    batched = s2s.greedy_decode(model, src, lengths, bos=1, eos=2, max_len=8)
    for b in range(3):
        n = int(lengths[b])
        greedy = s2s.greedy_decode(model, src[b : b + 1, :n], lengths[b : b + 1], bos=1, eos=2, max_len=8)[0]
        beam = s2s.beam_search(model, src[b : b + 1, :n], lengths[b : b + 1], bos=1, eos=2, max_len=8, beam_size=1)
        assert beam == greedy
        assert len(batched[b]) <= 8 and 2 not in batched[b]
        wide = s2s.beam_search(model, src[b : b + 1, :n], lengths[b : b + 1], bos=1, eos=2, max_len=8, beam_size=3)
        assert 0 < len(wide) <= 8 and 2 not in wide


# ---------------------------------------------------------------- metrics


def test_bleu_matches_a_hand_computation():
    hyp, ref = "the cat sat on the mat".split(), "the cat sat on a mat".split()
    # p1 = 5/6, p2 = 3/5, p3 = 2/4, p4 = 1/3, equal lengths (BP = 1)
    assert ev.bleu([hyp], [ref]) == pytest.approx(100 * (5 / 6 * 3 / 5 * 2 / 4 * 1 / 3) ** (1 / 4))
    hyp = "the cat sat in the mat".split()  # p1 = 4/6 (one "the" clipped), p2 = 2/5, p3 = 1/4, p4 = 0/3
    assert ev.bleu([hyp], [ref]) == 0.0
    assert ev.bleu([hyp], [ref], max_n=3) == pytest.approx(100 * (4 / 6 * 2 / 5 * 1 / 4) ** (1 / 3))
    assert ev.bleu([ref], [ref]) == pytest.approx(100.0)
    short = ["the", "cat"]  # brevity penalty exp(1 − 6/2), only orders 1–2 exist
    assert ev.bleu([short], [ref]) == pytest.approx(100 * math.exp(1 - 3))


def test_aer_and_hard_alignment():
    gold = {(0, 0), (1, 0), (2, 1), (3, 2)}
    weights = np.array([[0.6, 0.3, 0.1, 0.0], [0.1, 0.1, 0.7, 0.1], [0.0, 0.0, 0.1, 0.9]])
    pred = ev.hard_alignment(weights)
    assert pred == {(0, 0), (2, 1), (3, 2)}
    assert ev.aer(pred, gold) == pytest.approx(1 - 6 / 7)
    assert ev.aer(gold, gold) == 0.0 and ev.aer({(1, 1)}, gold, possible={(1, 1)}) == pytest.approx(1 - 1 / 5)


def test_token_accuracy_counts_a_dropped_word_once():
    ref = "la macchina rossa nuova".split()
    assert ev.token_matches(ref, ref) == (4, 4)
    assert ev.token_matches("la macchina nuova".split(), ref) == (3, 4)  # position-wise it would be 2
    assert ev.edit_distance("a b c".split(), "x b c d".split()) == 2


def test_context_terms_sum_to_the_context():
    a, h = np.array([0.2, 0.8]), np.array([[1.0, 2.0], [3.0, -1.0]])
    terms, c = ev.context_terms(a, h)
    np.testing.assert_allclose(c, [2.6, -0.4])
    np.testing.assert_allclose(terms[1], [2.4, -0.8])


class _Oracle:
    """Answers every sentence with its reference and attends exactly to its gold links."""

    name, has_alignment = "oracle", True

    def __init__(self, examples):
        self.gold = {ex.source: ex for bucket in examples for ex in bucket}

    def decode(self, sources):
        return [list(self.gold[tuple(s)].target) for s in sources]

    def force(self, sources, targets):
        out = []
        for s in sources:
            ex = self.gold[tuple(s)]
            a = np.zeros((len(ex.target), len(ex.source)))
            for i, j in ex.alignment:
                a[j, i] = 1.0
            out.append(Translation(ex.source, ex.target, a, None, None, None, Trace()))
        return out, Trace()


def test_bucketed_evaluation_scores_an_oracle_perfectly():
    buckets = ev.eval_set(per_bucket=2)
    assert len(buckets) == len(ev.BUCKETS) == 8
    for (lo, hi), bucket in zip(ev.BUCKETS, buckets):
        assert len(bucket) == 2 and all(lo <= len(ex.source) <= hi and tr.is_held_out(ex.english) for ex in bucket)
    fractions = []
    res = ev.evaluate(_Oracle(buckets), buckets, progress=fractions.append)
    assert res["token_accuracy"] == [1.0] * 8 and res["exact_match"] == [1.0] * 8
    assert res["bleu"][1:] == pytest.approx([100.0] * 7)
    # Hard alignment keeps one link per target word, so many-to-one gold links (we + see → vediamo) are missed.
    assert all(0 <= x < 0.35 for x in res["aer"]) and fractions[-1] == 1.0


# ---------------------------------------------------------------- the bundled models


@pytest.fixture(scope="module")
def translators() -> dict[str, Translator]:
    return {name: models.load_model(name) for name in NAMES}


def test_bundles_are_registered_small_and_carry_results(translators):
    total = sum(p.stat().st_size for name in NAMES for p in (models.WEIGHTS_DIR / name).iterdir())
    assert total <= 10 * 2**20, f"bundles take {total / 2**20:.1f} MB"
    for name, t in translators.items():
        assert set(t.results) >= {"buckets", "token_accuracy", "exact_match", "bleu", "aer"}, name
        assert len(t.results["token_accuracy"]) == len(ev.BUCKETS)


def test_attention_model_translates_the_lecture_example(translators):
    out = translators["seq2seq-attention"].translate("We see the sky.")
    assert out.text == "vediamo il cielo"
    assert out.alignment.shape == (3, 4)
    np.testing.assert_allclose(out.alignment.sum(1), 1.0, rtol=1e-5)
    # vediamo ← we/see; il ← the or sky (the noun decides il/la/lo, so articles often look ahead); cielo ← sky
    assert (
        out.alignment[0].argmax() in (0, 1) and out.alignment[1].argmax() in (2, 3) and out.alignment[2].argmax() == 3
    )
    np.testing.assert_allclose(out.contexts, out.alignment @ out.annotations, rtol=1e-4, atol=1e-5)
    (rec,) = out.trace.select("additive")
    assert rec.weights.shape == (1, 1, 4, 4) and rec.col_labels == ("we", "see", "the", "sky")


def test_every_bundle_translates_and_reports_its_attention(translators):
    fixed, tfm = (
        translators["seq2seq-fixed"].translate("we see the sky"),
        translators["seq2seq-transformer"].translate("we see the sky"),
    )
    assert fixed.alignment is None and fixed.contexts.shape[0] == len(fixed.tokens)
    assert tfm.cross.shape[:2] == (2, 4) and tfm.cross.shape[2:] == (len(tfm.tokens), 4)
    np.testing.assert_allclose(tfm.cross.sum(-1), 1.0, rtol=1e-5)


def test_translate_rejects_bad_input_with_a_message(translators):
    t = translators["seq2seq-attention"]
    with pytest.raises(ValueError, match="type an English sentence"):
        t.translate("  ")
    with pytest.raises(ValueError, match=f"the {MAX_WORDS}"):
        t.translate("we see the sky " * 11)
    with pytest.raises(ValueError, match="did you mean sky"):
        t.translate("we see the skyy")


def test_bucketed_evaluation_of_the_attention_model(translators):
    buckets = [b[:2] for b in ev.eval_set(per_bucket=2)][::3]  # 3 buckets × 2 sentences: quick
    res = ev.evaluate(translators["seq2seq-attention"], buckets)
    assert res["n"] == [2, 2, 2]
    assert all(0 <= x <= 1 for x in res["token_accuracy"] + res["exact_match"] + res["aer"])
    assert res["token_accuracy"][0] >= 0.8, "short held-out sentences are translated almost perfectly"


# ---------------------------------------------------------------- figures


def test_alignment_figure_overlays_gold_links():
    from tx_explorer.viz import seq2seq as vs

    ex = tr.parse("we see the sky".split())
    weights = np.full((3, 4), 0.25)
    fig = vs.alignment_figure(weights, ex.source, ex.target, gold=ex.alignment)
    heat, gold = fig.data
    assert heat.z.shape == (3, 4) and list(fig.layout.xaxis.ticktext) == list(ex.source)
    assert sorted(zip(gold.x, gold.y)) == sorted(ex.alignment)
    with pytest.raises(ValueError, match="do not match"):
        vs.alignment_figure(weights.T, ex.source, ex.target)


def test_bucket_curves_and_context_figure():
    from tx_explorer.viz import seq2seq as vs

    results = {
        "fixed": {"buckets": ["1–5", "6–10"], "n": [2, 2], "token_accuracy": [0.9, 0.5], "aer": None},
        "attention": {"buckets": ["1–5", "6–10"], "n": [2, 2], "token_accuracy": [1.0, 0.98], "aer": [0.1, 0.2]},
    }
    fig = vs.bucket_curves(results, "token_accuracy", labels={"fixed": "Fixed"})
    assert [t.name for t in fig.data] == ["Fixed", "attention"] and list(fig.data[0].y) == [90.0, 50.0]
    assert [t.name for t in vs.bucket_curves(results, "aer").data] == ["attention"]
    terms, c = ev.context_terms(np.array([0.5, 0.5]), np.eye(2))
    fig = vs.context_figure(np.array([0.5, 0.5]), terms, c, ["a", "b"])
    assert fig.data[1].z.shape == (3, 2) and list(fig.data[1].z[-1]) == [0.5, 0.5]


def test_the_eos_step_is_kept_beside_the_word_rows(translators):
    """The step that writes <eos> has its own row of weights (a distribution), kept apart from the rows that line
    up with the output words; the view puts it back, labelled from <bos> to <eos>."""
    from tx_explorer.views import seq2seq as view

    for t in translators.values():
        o = t.translate("we see the sky")
        if not t.has_alignment:
            assert o.eos_alignment is None
            continue
        assert o.eos_alignment.shape == (len(o.source),) and abs(o.eos_alignment.sum() - 1) < 1e-5
        assert view.with_eos(o.alignment, o.eos_alignment).shape == (len(o.tokens) + 1, len(o.source))
        if o.cross is not None:
            assert o.eos_cross.shape == (*o.cross.shape[:2], len(o.source))
    assert view.step_labels(["vediamo", "il"]) == ["<bos> → vediamo", "vediamo → il", "il → <eos>"]


def test_unknown_words_are_listed_in_the_pages_language():
    """A student's review: the Chinese message quoted its suggestions with ASCII brackets, commas and semicolons."""
    from tx_explorer.views import seq2seq as view

    check = tr.SourceCheck(("cta", "xyzzy"), "unknown", {"cta": ["cat", "car"], "xyzzy": []})
    en, zh = (view.input_problem(check, lang=lang) for lang in ("en", "zh"))
    assert "`cta` (`cat` or `car`); `xyzzy` (no close word)" in en
    assert "`cta`（`cat` 或 `car`）；`xyzzy`（没有相近的词）" in zh
