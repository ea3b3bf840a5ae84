"""A deterministic English → Italian toy language with gold word alignments (lecture §1, §2.5).

Every sentence is built as a small tree and *rendered* into both languages at once, so each Italian word
knows which English words produced it. The grammar is rich enough that a word-by-word copy fails:

- articles agree with the noun's gender and number (il/lo/la/i/gli/le, un/uno/una) and merge with
  prepositions ("in the house" → "nella casa", "near the river" → "vicino al fiume");
- adjectives follow the noun and agree with it; two adjectives mirror ("the new red car" → "la macchina
  rossa nuova");
- subject pronouns are dropped and the verb is conjugated ("we see the sky" → "vediamo il cielo");
- negation and adverbs move ("we do not see" → "non vediamo", "he often sleeps" → "dorme spesso");
- relative clauses and conjunctions chain clauses to 40 words and beyond.

Public: :func:`generate_pairs`, :func:`generate_examples` (with alignments), :func:`parse` (gold analysis
of a typed sentence), :class:`Vocab`, :func:`check_source`.
"""

from __future__ import annotations

import difflib
import random
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

# ---------------------------------------------------------------- lexicon


@dataclass(frozen=True)
class Noun:
    en: str
    en_pl: str
    it: str
    it_pl: str
    gender: Literal["m", "f"]
    lo: bool = False  # masculine nouns starting with s+consonant or z take lo/gli/uno
    animate: bool = False  # may be a subject


@dataclass(frozen=True)
class Adjective:
    en: str
    forms: tuple[str, str, str, str]  # masculine singular, feminine singular, masculine plural, feminine plural

    def agree(self, noun: Noun, plural: bool) -> str:
        return self.forms[2 * plural + (noun.gender == "f")]


@dataclass(frozen=True)
class Verb:
    en: str
    en_3sg: str
    it: tuple[str, str, str, str, str, str]  # io, tu, lui/lei, noi, voi, loro
    transitive: bool


def _nouns() -> tuple[Noun, ...]:
    rows = """
    sky skies cielo cieli m . .|cat cats gatto gatti m . a|dog dogs cane cani m . a|book books libro libri m . .
    boy boys ragazzo ragazzi m . a|girl girls ragazza ragazze f . a|car cars macchina macchine f . .
    house houses casa case f . .|apple apples mela mele f . .|letter letters lettera lettere f . .
    student students studente studenti m lo a|mirror mirrors specchio specchi m lo .
    backpack backpacks zaino zaini m lo .|uncle uncles zio zii m lo a|table tables tavolo tavoli m . .
    door doors porta porte f . .|window windows finestra finestre f . .|flower flowers fiore fiori m . .
    garden gardens giardino giardini m . .|friend friends compagno compagni m . a
    teacher teachers maestra maestre f . a|song songs canzone canzoni f . .|river rivers fiume fiumi m . .
    mountain mountains montagna montagne f . .|key keys chiave chiavi f . .|sea seas mare mari m . .
    star stars stella stelle f . .|horse horses cavallo cavalli m . a|chair chairs sedia sedie f . .
    pen pens penna penne f . .|cake cakes torta torte f . .|train trains treno treni m . .
    boat boats barca barche f . .|shoe shoes scarpa scarpe f . .|hat hats cappello cappelli m . .
    scarf scarves sciarpa sciarpe f . ."""
    out = []
    for row in rows.replace("\n", "|").split("|"):
        if row.strip():
            en, en_pl, it, it_pl, g, lo, anim = row.split()
            out.append(Noun(en, en_pl, it, it_pl, g, lo == "lo", anim == "a"))  # type: ignore[arg-type]
    return tuple(out)


def _adjectives() -> tuple[Adjective, ...]:
    rows = """red rosso rossa rossi rosse|black nero nera neri nere|white bianco bianca bianchi bianche
    small piccolo piccola piccoli piccole|new nuovo nuova nuovi nuove|old vecchio vecchia vecchi vecchie
    long lungo lunga lunghi lunghe|yellow giallo gialla gialli gialle|cold freddo fredda freddi fredde
    big grande grande grandi grandi|green verde verde verdi verdi|happy felice felice felici felici
    sad triste triste tristi tristi|blue blu blu blu blu|fast veloce veloce veloci veloci
    quiet tranquillo tranquilla tranquilli tranquille"""
    return tuple(Adjective(r.split()[0], tuple(r.split()[1:])) for r in rows.replace("\n", "|").split("|"))  # type: ignore[arg-type]


def _verbs() -> tuple[Verb, ...]:
    rows = """see sees vedo vedi vede vediamo vedete vedono t|eat eats mangio mangi mangia mangiamo mangiate mangiano t
    buy buys compro compri compra compriamo comprate comprano t|find finds trovo trovi trova troviamo trovate trovano t
    read reads leggo leggi legge leggiamo leggete leggono t
    write writes scrivo scrivi scrive scriviamo scrivete scrivono t
    love loves amo ami ama amiamo amate amano t|take takes prendo prendi prende prendiamo prendete prendono t
    want wants voglio vuoi vuole vogliamo volete vogliono t|have has ho hai ha abbiamo avete hanno t
    open opens apro apri apre apriamo aprite aprono t|close closes chiudo chiudi chiude chiudiamo chiudete chiudono t
    watch watches guardo guardi guarda guardiamo guardate guardano t
    call calls chiamo chiami chiama chiamiamo chiamate chiamano t
    paint paints dipingo dipingi dipinge dipingiamo dipingete dipingono t
    sleep sleeps dormo dormi dorme dormiamo dormite dormono i|run runs corro corri corre corriamo correte corrono i
    sing sings canto canti canta cantiamo cantate cantano i
    work works lavoro lavori lavora lavoriamo lavorate lavorano i
    swim swims nuoto nuoti nuota nuotiamo nuotate nuotano i|laugh laughs rido ridi ride ridiamo ridete ridono i
    wait waits aspetto aspetti aspetta aspettiamo aspettate aspettano i
    dance dances ballo balli balla balliamo ballate ballano i"""
    out = []
    for row in rows.replace("\n", "|").split("|"):
        w = row.split()
        out.append(Verb(w[0], w[1], tuple(w[2:8]), w[8] == "t"))  # type: ignore[arg-type]
    return tuple(out)


NOUNS, ADJECTIVES, VERBS = _nouns(), _adjectives(), _verbs()
PRONOUNS = {"i": 0, "you": 1, "he": 2, "she": 2, "we": 3, "they": 5}  # → person index into Verb.it ("you" = tu)
ADVERBS = {"often": "spesso", "always": "sempre", "rarely": "raramente"}
CONJUNCTIONS = {"and": "e", "but": "ma", "because": "perché", "while": "mentre", "when": "quando"}
PREPOSITIONS = ("in", "on", "with", "near", "for")
INTERJECTIONS = {"hello": "ciao", "thanks": "grazie", "yes": "sì", "no": "no", "goodbye": "arrivederci"}
# Definite article by (gender, plural, lo-type); articulated forms by preposition.
_THE = {
    ("m", 0, 0): "il",
    ("m", 0, 1): "lo",
    ("f", 0, 0): "la",
    ("f", 0, 1): "la",
    ("m", 1, 0): "i",
    ("m", 1, 1): "gli",
    ("f", 1, 0): "le",
    ("f", 1, 1): "le",
}
_MERGED = {"in": "ne", "on": "su", "near": "a"}  # in+il = nel, su+la = sulla, a+gli = agli
_PREP_IT = {"in": "in", "on": "su", "with": "con", "near": "vicino", "for": "per"}

# English content word → ("noun", (Noun, plural)) | ("adj", Adjective) | ("verb", (Verb, third person -s)).
_BY_WORD: dict[str, tuple[str, object]] = {
    **{w: ("noun", (n, pl)) for n in NOUNS for w, pl in ((n.en, False), (n.en_pl, True))},
    **{a.en: ("adj", a) for a in ADJECTIVES},
    **{w: ("verb", (v, third)) for v in VERBS for w, third in ((v.en, False), (v.en_3sg, True))},
}


def _definite(noun: Noun, plural: bool, prep: str | None = None) -> str:
    art = _THE[(noun.gender, int(plural), int(noun.lo))]
    if prep not in _MERGED:
        return art
    # Articulated prepositions: ne+il → nel, a+lo → allo, su+i → sui, ne+gli → negli.
    stem = _MERGED[prep]
    return {"il": stem + "l", "i": stem + "i"}.get(art, stem + "l" + art)


def _indefinite(noun: Noun) -> str:
    return "una" if noun.gender == "f" else ("uno" if noun.lo else "un")


# ---------------------------------------------------------------- syntax trees


@dataclass(frozen=True)
class NP:
    det: Literal["the", "a"]
    adjs: tuple[Adjective, ...]
    noun: Noun
    plural: bool
    rel: Rel | None = None

    @property
    def person(self) -> int:
        return 5 if self.plural else 2


@dataclass(frozen=True)
class PP:
    prep: str
    np: NP


@dataclass(frozen=True)
class Pred:
    verb: Verb
    obj: NP | None  # None for intransitive verbs and for the gap of an object relative
    modifier: str | None = None  # "not" or an adverb
    pp: PP | None = None


@dataclass(frozen=True)
class Rel:
    """A relative clause: subject relative ("that eats the fish") or object relative ("that we read")."""

    pred: Pred
    subj: str | NP | None = None  # set for object relatives


@dataclass(frozen=True)
class Clause:
    subj: str | NP  # a pronoun or a noun phrase
    pred: Pred


@dataclass(frozen=True)
class Sentence:
    clauses: tuple[Clause, ...]
    conjs: tuple[str, ...]  # len(clauses) - 1


Utterance = Sentence | NP | str  # str: an interjection


# ---------------------------------------------------------------- rendering with alignments


class _Out:
    """Two token streams; every Italian token carries the English positions it translates."""

    def __init__(self) -> None:
        self.en: list[str] = []
        self.it: list[str] = []
        self.links: list[frozenset[int]] = []
        self.agree: list[tuple[int, int]] = []  # (English verb, the English word its subject agreement reads)

    def src(self, word: str) -> int:
        self.en.append(word)
        return len(self.en) - 1

    def tgt(self, word: str, *sources: int) -> None:
        self.it.append(word)
        self.links.append(frozenset(sources))


def _render_np(o: _Out, np_: NP, prep: str | None = None) -> int:
    """Render a noun phrase; returns the English position of its head noun."""
    p = o.src(prep) if prep else None
    first = np_.adjs[0].en if np_.adjs else np_.noun.en
    d = o.src("an" if np_.det == "a" and first[0] in "aeiou" else np_.det)  # an apple, an old car
    adjs = [o.src(a.en) for a in np_.adjs]
    n = o.src(np_.noun.en_pl if np_.plural else np_.noun.en)
    if prep is not None and (np_.det == "a" or prep not in _MERGED):
        o.tgt(_PREP_IT[prep], p)
        if prep == "near":
            o.tgt("a", p)  # vicino a un fiume
    elif prep == "near":
        o.tgt("vicino", p)
    if np_.det == "a":
        o.tgt(_indefinite(np_.noun), d)
    else:
        o.tgt(_definite(np_.noun, np_.plural, prep), d, *([p] if prep in _MERGED else []))
    o.tgt(np_.noun.it_pl if np_.plural else np_.noun.it, n)
    for a, i in reversed(list(zip(np_.adjs, adjs))):  # mirror order after the noun
        o.tgt(a.agree(np_.noun, np_.plural), i)
    if np_.rel is not None:
        _render_rel(o, np_.rel, np_.person, n)
    return n


def _render_rel(o: _Out, rel: Rel, head_person: int, head: int) -> None:
    o.tgt("che", o.src("that"))
    if rel.subj is None:  # subject relative: the head noun is the verb's subject
        _render_pred(o, rel.pred, head_person, (), subject=head)
    else:
        _render_clause(o, Clause(rel.subj, rel.pred))


def _render_pred(o: _Out, pred: Pred, person: int, subject_links: tuple[int, ...], *, subject: int) -> None:
    """``subject``: the English position of the pronoun or head noun whose person the verb ending carries."""
    v = pred.verb
    if pred.modifier == "not":
        aux, neg = o.src("does" if person == 2 else "do"), o.src("not")
        o.tgt("non", aux, neg)
        verb = o.src(v.en)
    elif pred.modifier is not None:
        adv = o.src(pred.modifier)
        verb = o.src(v.en_3sg if person == 2 else v.en)
    else:
        verb = o.src(v.en_3sg if person == 2 else v.en)
    o.tgt(v.it[person], verb, *subject_links)
    o.agree.append((verb, subject))
    if pred.modifier not in (None, "not"):
        o.tgt(ADVERBS[pred.modifier], adv)
    if pred.obj is not None:
        _render_np(o, pred.obj)
    if pred.pp is not None:
        _render_np(o, pred.pp.np, pred.pp.prep)


def _render_clause(o: _Out, clause: Clause) -> None:
    if isinstance(clause.subj, str):  # pronoun: dropped in Italian, its meaning moves into the verb ending
        pronoun = o.src(clause.subj)
        _render_pred(o, clause.pred, PRONOUNS[clause.subj], (pronoun,), subject=pronoun)
    else:
        head = _render_np(o, clause.subj)
        _render_pred(o, clause.pred, clause.subj.person, (), subject=head)


@dataclass(frozen=True)
class Example:
    """One sentence pair; ``alignment`` holds gold links ``(source index, target index)``, ``agreement`` the
    grammar's subject–verb pairs ``(verb, subject)`` as English positions (the subject's head noun or pronoun)."""

    source: tuple[str, ...]
    target: tuple[str, ...]
    alignment: tuple[tuple[int, int], ...]
    agreement: tuple[tuple[int, int], ...] = ()

    @property
    def english(self) -> str:
        return " ".join(self.source)

    @property
    def italian(self) -> str:
        return " ".join(self.target)


def render(u: Utterance) -> Example:
    """Both languages of one tree, with the gold alignment."""
    o = _Out()
    if isinstance(u, str):
        o.tgt(INTERJECTIONS[u], o.src(u))
    elif isinstance(u, NP):
        _render_np(o, u)
    else:
        _render_clause(o, u.clauses[0])
        for conj, clause in zip(u.conjs, u.clauses[1:]):
            o.tgt(CONJUNCTIONS[conj], o.src(conj))
            _render_clause(o, clause)
    links = tuple(sorted((i, j) for j, srcs in enumerate(o.links) for i in srcs))
    return Example(tuple(o.en), tuple(o.it), links, tuple(o.agree))


def _np_len(np_: NP) -> int:
    return 2 + len(np_.adjs) + (_rel_len(np_.rel) if np_.rel else 0)


def _rel_len(rel: Rel) -> int:
    return 1 + (_subj_len(rel.subj) if rel.subj is not None else 0) + _pred_len(rel.pred)


def _subj_len(subj: str | NP) -> int:
    return 1 if isinstance(subj, str) else _np_len(subj)


def _pred_len(pred: Pred) -> int:
    mod = 0 if pred.modifier is None else (2 if pred.modifier == "not" else 1)
    return mod + 1 + (_np_len(pred.obj) if pred.obj else 0) + (1 + _np_len(pred.pp.np) if pred.pp else 0)


# ---------------------------------------------------------------- random generation


class _Grammar:
    """Samples trees; ``rng`` alone decides every choice, so a seed fixes the corpus."""

    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.animate = [n for n in NOUNS if n.animate]
        self.transitive = [v for v in VERBS if v.transitive]
        self.intransitive = [v for v in VERBS if not v.transitive]

    def np(self, *, animate: bool = False, rel: bool = False) -> NP:
        r = self.r
        noun = r.choice(self.animate if animate else NOUNS)
        plural = r.random() < 0.35
        det = "the" if plural or r.random() < 0.7 else "a"
        u = r.random()
        k = 0 if u < 0.45 else 1 if u < 0.85 else 2
        relative = self.rel(noun) if rel and r.random() < 0.25 else None
        return NP(det, tuple(r.sample(ADJECTIVES, k)), noun, plural, relative)  # type: ignore[arg-type]

    def rel(self, head: Noun) -> Rel:
        if head.animate and self.r.random() < 0.6:  # subject relative: the head is the subject of the clause
            return Rel(self.pred(gap=False))
        return Rel(self.pred(gap=True), self.subject(rel=False))  # object relative: the head is the object

    def subject(self, rel: bool) -> str | NP:
        return self.r.choice(list(PRONOUNS)) if self.r.random() < 0.5 else self.np(animate=True, rel=rel)

    def pred(self, *, gap: bool = False, rel: bool = False) -> Pred:
        r = self.r
        transitive = gap or r.random() < 0.7
        verb = r.choice(self.transitive if transitive else self.intransitive)
        obj = self.np(rel=rel) if transitive and not gap else None
        u = r.random()
        modifier = "not" if u < 0.15 else (r.choice(list(ADVERBS)) if u < 0.3 else None)
        pp = PP(r.choice(PREPOSITIONS), self.np()) if r.random() < 0.3 else None
        return Pred(verb, obj, modifier, pp)

    def clause(self) -> Clause:
        return Clause(self.subject(rel=True), self.pred(rel=True))

    def utterance(self, length: int, tries: int = 200) -> Utterance | None:
        """A tree whose English side has exactly ``length`` words (None if none was found)."""
        r = self.r
        if length == 1:
            return r.choice(list(INTERJECTIONS))
        if length <= 4 and r.random() < 0.3:
            for _ in range(tries):
                frag = self.np(rel=False)
                if _np_len(frag) == length:
                    return frag
        clauses: list[Clause] = []
        conjs: list[str] = []
        used = -1  # words so far, counting the conjunction before the next clause
        for _ in range(tries):
            room = length - used - 1
            c = self.clause()
            n = _subj_len(c.subj) + _pred_len(c.pred)
            if n == room or (n <= room - 3 and room > 12):
                clauses.append(c)
                used += n + 1
                if n == room:
                    return Sentence(tuple(clauses), tuple(conjs))
                conjs.append(r.choice(list(CONJUNCTIONS)))
        return None


def is_held_out(english: str) -> bool:
    """Deterministic 10% test split by a hash of the English sentence (training never sees these).

    Sentences under three words ("hello", "the sky") are too few to split: holding one out would hide a
    word, not test generalisation, so they always belong to training.
    """
    return english.count(" ") >= 2 and zlib.crc32(english.encode()) % 10 == 0


def generate_examples(
    n: int,
    seed: int,
    *,
    min_words: int = 1,
    max_words: int = 40,
    split: Literal["all", "train", "test"] = "all",
) -> list[Example]:
    """``n`` sentence pairs with gold alignments; English lengths uniform in ``[min_words, max_words]``.

    ``split="train"``/``"test"`` keeps only pairs outside/inside the held-out hash split (:func:`is_held_out`).
    """
    if n < 0 or min_words < 1 or max_words < min_words:
        raise ValueError(f"need n ≥ 0 and 1 ≤ min_words ≤ max_words, got {n}, {min_words}, {max_words}")
    g = _Grammar(random.Random(seed))
    out: list[Example] = []
    while len(out) < n:
        u = g.utterance(g.r.randint(min_words, max_words))
        if u is None:
            continue
        ex = render(u)
        if split == "all" or (split == "test") == is_held_out(ex.english):
            out.append(ex)
    return out


def generate_pairs(n: int, seed: int, min_words: int = 1, max_words: int = 40) -> list[tuple[str, str]]:
    """``n`` deterministic (english, italian) sentence pairs, English lengths in ``[min_words, max_words]``."""
    return [(ex.english, ex.italian) for ex in generate_examples(n, seed, min_words=min_words, max_words=max_words)]


LECTURE_EXAMPLE = ("we see the sky", "vediamo il cielo")
DEMO_SENTENCES = (  # for the page's picker; every one parses (tested)
    "we see the sky",
    "the red car",
    "she does not eat the big green apples",
    "the girls often read a long letter in the garden",
    "i love the new red car that we buy near the river",
    "the cat that sees the black dogs sleeps on the chair but we do not see the cat because we rarely watch the "
    "old house and the students that the teacher calls sing in the garden",
)


# ---------------------------------------------------------------- parsing typed English


class ParseError(ValueError):
    """The sentence is not in the toy grammar (so it has no gold translation)."""


class _Parser:
    def __init__(self, tokens: Sequence[str]) -> None:
        self.t, self.i = list(tokens), 0

    def peek(self, k: int = 0) -> str | None:
        return self.t[self.i + k] if self.i + k < len(self.t) else None

    def take(self) -> str:
        if self.i >= len(self.t):
            raise ParseError("the sentence ends too early")
        self.i += 1
        return self.t[self.i - 1]

    def np(self, rel: bool) -> NP:
        det = self.take()
        if det not in ("the", "a", "an"):
            raise ParseError(f"expected 'the', 'a' or 'an', got {det!r}")
        det = "the" if det == "the" else "a"  # render() restores a/an, and parse() checks the round trip
        adjs = []
        while _BY_WORD.get(self.peek() or "", ("", None))[0] == "adj":
            adjs.append(_BY_WORD[self.take()][1])
        kind, val = _BY_WORD.get(self.take(), ("", None))
        if kind != "noun":
            raise ParseError("expected a noun")
        noun, plural = val  # type: ignore[misc]
        if plural and det == "a":
            raise ParseError("'a' with a plural noun")
        relative = self.rel(plural) if rel and self.peek() == "that" else None
        return NP(det, tuple(adjs), noun, plural, relative)  # type: ignore[arg-type]

    def rel(self, head_plural: bool) -> Rel:
        self.take()  # "that"
        if self.peek() in PRONOUNS or self.peek() in ("the", "a", "an"):
            subj = self.subject(rel=False)
            return Rel(self.pred(_person(subj), gap=True, rel=False), subj)
        return Rel(self.pred(5 if head_plural else 2, gap=False, rel=False))

    def subject(self, rel: bool) -> str | NP:
        return self.take() if self.peek() in PRONOUNS else self.np(rel)

    def pred(self, person: int, *, gap: bool, rel: bool) -> Pred:
        modifier = None
        if self.peek() in ("do", "does"):
            if self.take() != ("does" if person == 2 else "do") or self.take() != "not":
                raise ParseError("do/does not does not agree with the subject")
            modifier = "not"
        elif self.peek() in ADVERBS:
            modifier = self.take()
        kind, val = _BY_WORD.get(self.take(), ("", None))
        if kind != "verb":
            raise ParseError("expected a verb")
        verb, third = val  # type: ignore[misc]
        if third != (person == 2 and modifier != "not"):
            raise ParseError("the verb does not agree with its subject")
        obj = self.np(rel) if verb.transitive and not gap else None
        if gap and not verb.transitive:
            raise ParseError("an object relative needs a transitive verb")
        pp = None
        if self.peek() in PREPOSITIONS:
            prep = self.take()
            pp = PP(prep, self.np(rel=False))
        return Pred(verb, obj, modifier, pp)

    def sentence(self) -> Sentence:
        clauses, conjs = [self.clause()], []
        while self.peek() in CONJUNCTIONS:
            conjs.append(self.take())
            clauses.append(self.clause())
        return Sentence(tuple(clauses), tuple(conjs))

    def clause(self) -> Clause:
        subj = self.subject(rel=True)
        return Clause(subj, self.pred(_person(subj), gap=False, rel=True))


def _person(subj: str | NP) -> int:
    return PRONOUNS[subj] if isinstance(subj, str) else subj.person


def parse(tokens: Sequence[str]) -> Example:
    """The gold translation and alignment of an English sentence of the toy grammar.

    Raises:
        ParseError: the tokens are not a sentence of the grammar (wrong agreement, unknown structure).
    """
    tokens = list(tokens)
    if len(tokens) == 1 and tokens[0] in INTERJECTIONS:
        return render(tokens[0])
    for build in (lambda p: p.sentence(), lambda p: p.np(rel=True)):
        p = _Parser(tokens)
        try:
            tree = build(p)
        except ParseError:
            continue
        if p.i == len(tokens):
            ex = render(tree)
            if list(ex.source) == tokens:
                return ex
    raise ParseError("this sentence is outside the toy grammar, so there is no gold translation for it")


# ---------------------------------------------------------------- vocabularies and input checks

PAD, BOS, EOS, UNK = "<pad>", "<bos>", "<eos>", "<unk>"
SPECIALS = (PAD, BOS, EOS, UNK)


def source_words() -> list[str]:
    """Every English word the grammar can produce."""
    words = set(_BY_WORD) | set(PRONOUNS) | set(ADVERBS) | set(CONJUNCTIONS) | set(PREPOSITIONS)
    return sorted(words | set(INTERJECTIONS) | {"the", "a", "an", "that", "do", "does", "not"})


def target_words() -> list[str]:
    """Every Italian word the grammar can produce."""
    words = {w for n in NOUNS for w in (n.it, n.it_pl)} | {f for a in ADJECTIVES for f in a.forms}
    words |= {f for v in VERBS for f in v.it} | set(ADVERBS.values()) | set(CONJUNCTIONS.values())
    words |= set(INTERJECTIONS.values()) | set(_PREP_IT.values()) | {"a", "che", "non", "un", "uno", "una"}
    for n in NOUNS:
        for pl in (False, True):
            words |= {_definite(n, pl, p) for p in (None, *_MERGED)}
    return sorted(words)


class Vocab:
    """Word ↔ id; ids 0–3 are ``<pad> <bos> <eos> <unk>``."""

    def __init__(self, words: Iterable[str]) -> None:
        self.itos = list(SPECIALS) + [w for w in words if w not in SPECIALS]
        self.stoi = {w: i for i, w in enumerate(self.itos)}

    pad, bos, eos, unk = 0, 1, 2, 3

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, word: str) -> bool:
        return word in self.stoi and word not in SPECIALS

    def encode(self, tokens: Iterable[str]) -> list[int]:
        return [self.stoi.get(t, self.unk) for t in tokens]

    def decode(self, ids: Iterable[int]) -> list[str]:
        return [self.itos[i] for i in ids]

    @property
    def words(self) -> list[str]:
        return self.itos[len(SPECIALS) :]


def tokenize(text: str) -> list[str]:
    """Lower-case words; punctuation is dropped ("We see the sky." → we see the sky)."""
    return re.sub(r"[^\w\s']", " ", text.lower()).split()


@dataclass(frozen=True)
class SourceCheck:
    """What is wrong with a typed sentence, if anything (pages phrase the message in their language)."""

    tokens: tuple[str, ...]
    problem: Literal["ok", "empty", "no_words", "too_long", "unknown"]  # no_words: typed, but punctuation only
    unknown: dict[str, list[str]]  # unknown word → up to 3 close vocabulary words

    @property
    def ok(self) -> bool:
        return self.problem == "ok"


def check_source(text: str, vocabulary: Sequence[str], max_words: int) -> SourceCheck:
    """Tokenise ``text`` and report emptiness (nothing typed, or no word among what was), excess length or words
    outside ``vocabulary``."""
    tokens = tuple(tokenize(text))
    if not tokens:
        return SourceCheck(tokens, "no_words" if text.strip() else "empty", {})
    if len(tokens) > max_words:
        return SourceCheck(tokens, "too_long", {})
    known = set(vocabulary)
    unknown = {t: difflib.get_close_matches(t, vocabulary, n=3, cutoff=0.6) for t in tokens if t not in known}
    return SourceCheck(tokens, "unknown" if unknown else "ok", unknown)
