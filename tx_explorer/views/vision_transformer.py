"""Vision Transformer page (lecture §7): an image cut into patches and projected, per-head attention, rollout,
learned positions against 2-D sin-cos, and what shuffling the patches does."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from PIL import Image

from tx_explorer import locales
from tx_explorer.analysis import vit_lab
from tx_explorer.data import images, shapes
from tx_explorer.families.images import FRAME_FILL, Classification, ImageClassifier, frame_object
from tx_explorer.modules.vit import sincos_2d_table
from tx_explorer.views import Panel, listed, rounding, sentences, signed, texts
from tx_explorer.viz import vit as vitviz

PAGE = "vision_transformer"
UPLOAD_TYPES = ["png", "jpg", "jpeg", "webp", "bmp", "gif"]
UPLOAD_LIMITS = {"mb": images.MAX_BYTES // 2**20, "megapixels": images.MAX_PIXELS // 10**6}  # the upload help says them
CLASSES = shapes.CLASSES
LATEX = {
    "patch": r"x_p\in\mathbb{R}^{P\cdot P\cdot 3},\qquad z_p = W\,x_p + b = \mathrm{Conv2d}_{k=s=P}(x)_p,"
    r"\qquad W\in\mathbb{R}^{D\times P^2\cdot 3}",
    "pool": r"h_{[\mathrm{CLS}]} = H_{0},\qquad \bar h = \frac{1}{N}\sum_{i=1}^{N} H_i,\qquad "
    r"z = W\,\mathrm{LN}(h) + b\in\mathbb{R}^{C}",
    "rollout": r"\tilde A = A_L\cdots A_1,\qquad "
    r"A_l = \mathrm{rownorm}\!\left(\tfrac12\,\overline{W}_l + \tfrac12\,I\right)",
}
load_image = images.load_image  # bytes of an upload -> LoadedImage (clear errors for broken or huge files)


# PIL's mode codes ("L", "P", "I;16", …) → the words the page names them with (its locale's mode_<word>)
MODES = {
    "1": "bilevel",
    "L": "grey",
    "LA": "grey_alpha",
    "La": "grey_alpha",
    "I;16": "grey16",
    "I;16L": "grey16",
    "I;16B": "grey16",
    "I;16N": "grey16",
    "I": "grey32",
    "F": "float",
    "P": "palette",
    "PA": "palette_alpha",
    "RGB": "rgb",
    "RGBA": "rgba",
    "RGBa": "rgba",
    "CMYK": "cmyk",
}


def _mode(code: str, T) -> str:
    """A PIL mode in words ("L": greyscale); a code without words, as PIL names it."""
    return T(f"mode_{MODES[code]}") if code in MODES else T("mode_other", mode=code)


def loaded_caption(loaded: images.LoadedImage, *, lang: str = "en") -> str:
    """What was read: the format, the size as stored and the colour mode in words."""
    T, (w, h) = texts(PAGE, lang), loaded.original_size
    return T("loaded", format=loaded.format, w=w, h=h, mode=_mode(loaded.original_mode, T))


def image_notes(loaded: images.LoadedImage, *, lang: str = "en") -> list[str]:
    """What the loader did to an upload (palette expanded, transparency over white, …), in the page's language."""
    T = texts(PAGE, lang)
    return [T(key, **{k: _mode(v, T) if k == "mode" else v for k, v in fields.items()}) for key, fields in loaded.notes]


def _words(lang: str) -> dict[str, str]:
    return locales.words(PAGE, vitviz.WORDS, lang)


def _classes(labels: list[str], lang: str) -> list[str]:
    """Class names in ``lang`` where the page translates them (``class_<name>``: the generated shapes)."""
    table = locales.table(PAGE)
    return [locales.text(PAGE, f"class_{c}", lang) if f"class_{c}" in table else c for c in labels]


def facts(clf: ImageClassifier, *, lang: str = "en") -> str:
    """The model in one line: image and patch size, patches, width, depth, heads, pooling, positions."""
    T, cfg = texts(PAGE, lang), clf.model.cfg
    return T(
        "model_facts",
        size=cfg.image_size,
        patch=cfg.patch_size,
        n=cfg.num_patches,
        dim=cfg.dim,
        layers=cfg.num_layers,
        heads=cfg.num_heads,
        pool=T(f"pool_{cfg.pool}"),
        positions=T(f"positions_{cfg.positions}"),
    )


def knows(clf: ImageClassifier, *, lang: str = "en") -> str | None:
    """What a shapes model knows, said before it classifies anything (None for a model of other classes)."""
    if tuple(clf.labels) != CLASSES:
        return None
    return texts(PAGE, lang)("knows", classes=_join(_classes(list(CLASSES), lang), lang))


def _join(words: list[str], lang: str) -> str:
    return ("、" if lang == "zh" else ", ").join(words)


def reference(clf: ImageClassifier) -> vit_lab.Reference | None:
    """Held-out shapes as the model sees them, to compare an upload with (seconds: the page caches it); None for a
    model of other classes."""
    return vit_lab.reference(clf) if tuple(clf.labels) == CLASSES else None


@dataclass(frozen=True)
class Familiar:
    warn: bool  # nothing to see, or beyond the held-out shapes' usual range on a measure: the page warns
    text: str  # the three measures against the held-out shapes', their bounds, and what to make of the answer


def familiar(
    clf: ImageClassifier, ref: vit_lab.Reference | None, pixels: np.ndarray, *, lang: str = "en"
) -> Familiar | None:
    """How unlike the held-out shapes a picture is, by its half-tones, top probability and entropy, each against
    the held-out shapes' distribution (:func:`reference`'s; None without one): blank (no contrast), far (beyond
    :data:`~tx_explorer.analysis.vit_lab.FAR` on a measure), unusual (beyond ``USUAL``) or within their range."""
    if ref is None:
        return None
    T, f = texts(PAGE, lang), vit_lab.familiarity(clf, ref, pixels)
    pct = lambda x: f"{x:.0%}"  # noqa: E731
    at = lambda values, q: float(np.quantile(values, q))  # noqa: E731
    # the share of held-out shapes at or below the picture on each measure; none: "more than in 0 %" said nothing
    rank = lambda m: T("familiar_rank", pct=pct(f.below[m])) if f.below[m] > 0 else T("familiar_rank_none")  # noqa: E731
    classes = len(clf.labels)
    measures = T(
        "familiar_measures",
        n=ref.images,
        half=pct(f.half_tones),
        rank_half=rank("half_tones"),
        top=pct(f.top),
        rank_top=rank("top"),
        entropy=f"{f.entropy:.2f}",
        rank_ent=rank("entropy"),
        classes=classes,
        max_ent=f"{np.log(classes):.2f}",
    )
    usual, far = vit_lab.USUAL, vit_lab.FAR
    bounds = T(  # each measure's bound alone: the top probability's is a lower one
        "familiar_bounds",
        usual=pct(usual),
        far=pct(far),
        half_usual=pct(at(ref.half_tones, usual)),
        top_usual=pct(at(ref.top, 1 - usual)),
        ent_usual=f"{at(ref.entropy, usual):.2f}",
        half_far=pct(at(ref.half_tones, far)),
        top_far=pct(at(ref.top, 1 - far)),
        ent_far=f"{at(ref.entropy, far):.2f}",
    )
    parts = [measures, bounds]
    if f.blank:  # every pixel is paper: whatever it answers, it answers about nothing
        blank = T("familiar_blank", contrast=f"{f.contrast:.2f}", paper=f"{vit_lab.HALF_TONE[0]:g}")
        return Familiar(True, sentences([blank, *parts], lang))
    beyond_far, beyond_usual = f.beyond(far), f.beyond(usual)
    if not beyond_usual:
        return Familiar(False, T("familiar_near", measures=sentences(parts, lang)))
    if beyond_usual == ["half_tones"]:  # its confidence is that of a shape: flagged by its pixels alone
        # "a confident answer" only where it is one: above the median held-out shape's top probability
        parts.append(T("familiar_quiet" if f.below["top"] >= 0.5 else "familiar_quiet_unsure"))
    key, q = ("familiar_far", far) if beyond_far else ("familiar_unusual", usual)
    which = listed([T(f"measure_{m}") for m in (beyond_far or beyond_usual)], lang, "and")
    return Familiar(True, T(key, measures=sentences(parts, lang), which=which, q=pct(q)))


def sample(clf: ImageClassifier, label: int = 0, seed: int = 7) -> tuple[Image.Image, np.ndarray]:
    """A generated shape at the model's size and its object mask."""
    s = shapes.sample(int(seed), size=clf.model.cfg.image_size, label=label)
    return images.to_image(s.image), frame_object(s.image, s.mask)[1] if clf.frame else s.mask  # as the model sees it


def model_input(clf: ImageClassifier, picture: Image.Image | np.ndarray | str) -> tuple[Image.Image, np.ndarray]:
    """(picture, the model's ``[S, S, 3]`` uint8 input: its centre square resized); a path or an array works too."""
    if isinstance(picture, str):
        picture = Image.open(picture).convert("RGB")
    elif isinstance(picture, np.ndarray):
        picture = images.to_image(picture)
    return picture, clf.seen(images.to_array(images.center_square(picture, clf.model.cfg.image_size)))


PREVIEW_PX = 220  # the picture's square on the page, beside what the model receives


def preview(clf: ImageClassifier, picture: Image.Image, *, lang: str = "en") -> tuple[Image.Image, str]:
    """The picture as the page shows it, fitted into a :data:`PREVIEW_PX` square, and its caption: its size, and
    where its centre square is smaller than the model's input, that the model sees it enlarged (a 1 × 1000 strip
    leaves one pixel: one colour)."""
    T = texts(PAGE, lang)
    (w, h), size = picture.size, clf.model.cfg.image_size
    caption = T("original", w=w, h=h)
    if min(w, h) < size:
        side = min(w, h)
        caption = sentences([caption, T("original_enlarged", side=side, size=size, factor=f"{size / side:.3g}")], lang)
    return images.letterbox(picture, PREVIEW_PX), caption


def received(clf: ImageClassifier, pixels: np.ndarray, *, lang: str = "en") -> tuple[np.ndarray, str]:
    """What the model receives from ``pixels`` (:func:`model_input`'s), as an ``[S, S, 3]`` image in [0, 1], and its
    caption with the scale: x̃ = (x − μ)/σ drawn black at x = 0 and full at x = 1, x being the contrast with the
    paper for a contrast model (so the paper is black), else the pixel / 255 (so it looks like the picture)."""
    T = texts(PAGE, lang)
    x = clf.to_tensor(pixels, framed=True)[0].cpu().numpy().transpose(1, 2, 0)  # (S, S, 3): x̃ itself
    mean, std = np.array(clf.mean), np.array(clf.std)
    lo, hi = _channels((0 - mean) / std), _channels((1 - mean) / std)  # x̃ at x = 0 and at x = 1 (0 − μ: no "-0")
    key = "model_input_contrast" if clf.contrast else "model_input"
    return np.clip(x * std + mean, 0, 1), T(key, size=x.shape[0], lo=lo, hi=hi)  # clip: float rounding only


def _channels(values: np.ndarray) -> str:
    """One number when every channel shares it, else R, G, B in brackets."""
    shown = [f"{v:.3g}" for v in values]
    return shown[0] if len(set(shown)) == 1 else f"[{', '.join(shown)}]"


def normalisation(clf: ImageClassifier) -> str:
    """LaTeX: x̃ = (x − μ)/σ with this model's μ and σ; x is the pixel / 255, or the contrast (already in [0, 1])."""
    x = "x" if clf.contrast else "x/255"
    return rf"\tilde{{x}} = \frac{{{x} - \mu}}{{\sigma}},\quad \mu={list(clf.mean)},\ \sigma={list(clf.std)}"


def preprocessing(clf: ImageClassifier, *, lang: str = "en") -> str:
    """How a picture becomes the model's input (the normalisation formula follows it on the page)."""
    T = texts(PAGE, lang)
    extra = T("preprocess_shapes", fill=f"{FRAME_FILL:.0%}", k=clf.thicken) + "\n\n" if clf.contrast else ""
    return extra + T("preprocess")


@dataclass(frozen=True)
class PatchSide:
    title: str
    numbers: str  # image size, patch size, grid, tokens, patch width, embedding width
    grid: Panel  # the image with its patch grid, one patch highlighted
    values: Panel  # that patch's P·P·3 numbers
    projection: Panel  # its embedding z_p
    conv_linear: str  # Conv2d and the flattened Linear agree to this


def patches(
    clf: ImageClassifier, picture: Image.Image, row: int, col: int, name: str = "", *, lang: str = "en"
) -> list[PatchSide]:
    """One patch (``row``, ``col`` of the model's grid) at the lecture's 224 px / 16 px and in the model."""
    T, cfg, words = texts(PAGE, lang), clf.model.cfg, _words(lang)
    g, lg = cfg.grid, vit_lab.LECTURE_SIZE // vit_lab.LECTURE_PATCH  # 14
    index = row * g + col
    lecture_index = (row * lg // g) * lg + col * lg // g  # the same place in the 14×14 grid
    big = images.to_array(images.center_square(picture, vit_lab.LECTURE_SIZE))
    pixels = clf.seen(images.to_array(images.center_square(picture, cfg.image_size)))
    # The model's grid is drawn from what it receives, so the patch looks like its values (the paper near 0).
    drawn = (received(clf, pixels)[0] * 255).round().astype(np.uint8)
    sides = []
    for key, image, shown, embed, patch, pick, title, weights, norm in (
        (
            "lecture",
            big,
            big,
            vit_lab.lecture_embed(),
            vit_lab.LECTURE_PATCH,
            lecture_index,
            T("lecture_title"),
            T("random_weights"),
            None,
        ),
        (
            "model",
            pixels,
            drawn,
            clf.model.patch_embed,
            cfg.patch_size,
            index,
            T("own_title", name=name),
            T("trained_weights"),
            clf,
        ),
    ):
        view = vit_lab.patch_view(image, embed, pick, normalise=norm)
        n_tok, width = view.patches.shape
        numbers = T(
            "patch_numbers",
            size=image.shape[0],
            patch=patch,
            grid=image.shape[0] // patch,
            n=n_tok,
            width=width,
            dim=view.conv.size,
        )
        proj_title = T("projection_title", dim=view.conv.size, weights=weights)
        sides.append(
            PatchSide(
                title,
                numbers,
                Panel(f"vit_grid_{key}", vitviz.image_with_grid(shown, patch, highlight=pick, height=340, words=words)),
                Panel(
                    f"vit_values_{key}",
                    vitviz.patch_values(view.values, title=T("values_title", n=width), words=words),
                    view.values,
                ),
                Panel(f"vit_proj_{key}", vitviz.vector_bars(view.conv, title=proj_title, words=words), view.conv),
                T("conv_linear", diff=rounding(view.max_difference)),  # an exact 0 (a blank patch) reads "0"
            )
        )
    return sides


def queries(clf: ImageClassifier) -> list[str]:
    """Whose attention can be shown: the [CLS] token (when the model has one), the mean of the patches, a patch."""
    return (["cls"] if clf.model.num_prefix else []) + ["mean", "patch"]


@dataclass(frozen=True)
class Attention:
    overlays: Panel  # every head of one layer (and their mean) over the image
    mosaic: Panel  # every layer × head
    prediction: Panel
    rollout: Panel  # the last layer's mean beside the rollout
    shares: dict[str, str] | None  # attention on the object vs its area ([CLS] query on a generated shape)


def attention(
    clf: ImageClassifier,
    result: Classification,
    pixels: np.ndarray,
    query: str = "cls",
    patch: int = 0,
    layer: int | None = None,
    mask: np.ndarray | None = None,
    *,
    lang: str = "en",
) -> Attention:
    """Attention of one query (``"cls"``, ``"mean"`` or ``"patch"`` number ``patch``) in layer ``layer`` (from 0,
    default the last) of ``result`` (the model's classification of ``pixels``)."""
    T, cfg, words = texts(PAGE, lang), clf.model.cfg, _words(lang)
    layer = cfg.num_layers - 1 if layer is None else layer
    prefix, g = clf.model.num_prefix, cfg.grid
    q = {"cls": 0, "mean": "mean", "patch": prefix + patch}[query]
    maps = vit_lab.query_maps(result.trace, q, num_prefix=prefix, grid=g)  # (L, H, g, g)
    shown = np.concatenate([maps[layer], maps[layer].mean(axis=0, keepdims=True)])
    heads = [T("head", h=h) for h in range(cfg.num_heads)]  # layers and heads counted from 0 on every page
    hl = patch if query == "patch" else None
    overlays = vitviz.attention_overlays(
        pixels, shown, [*heads, T("head_mean")], title=T("overlay_title", layer=layer), highlight=hl, words=words
    )
    layers = [T("layer_n", l=i) for i in range(cfg.num_layers)]
    mosaic = vitviz.layer_head_maps(maps, layers, heads, title=T("mosaic_title"))
    labels = _classes(result.labels, lang)
    prediction = vitviz.prediction_bars(labels, result.probs, title=T("prediction_title"), words=words)
    pair = np.stack([maps[-1].mean(axis=0), vit_lab.rollout_map(result.trace, q, num_prefix=prefix, grid=g)])
    rollout = vitviz.attention_overlays(
        pixels, pair, [T("last_layer_mean"), T("rollout")], title=T("rollout_title"), highlight=hl, words=words
    )
    shares = None
    if mask is not None and query == "cls":
        area, s = vit_lab.object_shares(pair, mask, cfg.patch_size)
        shares = {T("area_share"): f"{area:.1%}", T("cls_share"): f"{s[0]:.1%}", T("rollout_share"): f"{s[1]:.1%}"}
    return Attention(
        Panel("vit_overlays", overlays, shown),
        Panel("vit_mosaic", mosaic, maps),
        Panel("vit_prediction", prediction, result.probs),
        Panel("vit_rollout", rollout, pair),
        shares,
    )


@dataclass(frozen=True)
class Pooled:
    formula: str  # LaTeX: the token outputs → one vector → class scores, with this model's sizes
    reading: str  # what was pooled and the check that these steps are the whole classifier


def pooling(clf: ImageClassifier, pixels: np.ndarray, *, lang: str = "en") -> Pooled:
    """Lecture §7.3 live: N×D → 1×D → C for the chosen model ([CLS] row or mean over the patches)."""
    T, pool = texts(PAGE, lang), vit_lab.pooling(clf, pixels)
    (t, d), (n, _), c = pool.tokens, pool.pooled_rows, len(pool.logits)
    step = r"H_{0}" if clf.model.cfg.pool == "token" else rf"\frac{{1}}{{{n}}}\sum_{{i=1}}^{{{n}}} H_i"
    formula = (
        rf"H\in\mathbb{{R}}^{{{t}\times {d}}}\;\xrightarrow{{{step}}}\;"
        rf"h\in\mathbb{{R}}^{{1\times {d}}}\;\xrightarrow{{\mathrm{{LN}},\;W}}\;z\in\mathbb{{R}}^{{1\times {c}}}"
    )
    top = _classes(list(clf.labels), lang)[int(np.argmax(pool.logits))]
    cfg, diff = clf.model.cfg, rounding(pool.max_difference)  # an exact 0 as "0", not "0.0e+00"
    reading = T(f"pooled_{cfg.pool}", t=t, patches=cfg.num_patches, n=n, d=d, c=c, top=top, diff=diff)
    return Pooled(formula, reading)


def measured(name: str, *, lang: str = "en") -> str | None:
    """The bundle's held-out numbers in words (None for a model without them)."""
    report = vit_lab.bundle_results(name)
    if report is None:
        return None
    T = texts(PAGE, lang)
    parts = [T("measured_accuracy", **report)] + [
        T(f"measured_{k}", **report) for k in ("drawings", "cls") if k in report
    ]
    return sentences(parts, lang)


def positions(clf: ImageClassifier, *, lang: str = "en") -> tuple[Panel | None, Panel]:
    """Cosine similarity of each patch's position to every other: the model's (None without a table) and 2-D
    sin-cos at the same grid."""
    T, cfg, words = texts(PAGE, lang), clf.model.cfg, _words(lang)
    g, pos = cfg.grid, vit_lab.patch_positions(clf)
    own = None
    if pos is not None:
        sim = vit_lab.position_similarity(pos, g)
        title = T("pos_own", kind=T(f"positions_{cfg.positions}"))
        own = Panel("vit_pos_own", vitviz.similarity_maps(sim, title=title, words=words), sim.reshape(g * g, -1))
    ref = vit_lab.position_similarity(sincos_2d_table(g, 4 * max(1, cfg.dim // 4)), g)
    sincos = vitviz.similarity_maps(ref, title=T("pos_sincos"), words=words)
    return own, Panel("vit_pos_sincos", sincos, ref.reshape(g * g, -1))


ALIKE = 0.1  # a cosine similarity this much above the other patches' is said "alike": the verdict's stated margin


def position_reading(clf: ImageClassifier, *, lang: str = "en") -> str:
    """What the model's own position table learned of the grid, measured: its mean cosine similarity to the direct
    neighbours, to the rest of the same row or column, to all other patches, and the verdict (Fig. 7's structures
    said only where they are there)."""
    T, g, pos = texts(PAGE, lang), clf.model.cfg.grid, vit_lab.patch_positions(clf)
    if pos is None:
        return T("pos_none")
    means = vit_lab.position_structure(pos, g)
    gaps = {k: means[k] - means["other"] for k in ("near", "line")}
    key = {(True, True): "both", (True, False): "near", (False, True): "line", (False, False): "none"}[
        (gaps["near"] > ALIKE, gaps["line"] > ALIKE)
    ]
    numbers = {k: signed(f"{v:.2f}") for k, v in means.items()}
    verdict = T(f"pos_alike_{key}", margin=f"{ALIKE:g}", **{f"{k}_gap": signed(f"{v:+.2f}") for k, v in gaps.items()})
    return sentences([T("pos_reading", **numbers), verdict], lang)


# A shuffle's largest logit change without positions, at most this, is float32 rounding (a set in another order:
# the bundled models measure ~1e-6); above it the bars are not said to be equal.
SET_ROUNDING = 1e-4


@dataclass(frozen=True)
class Shuffled:
    image: np.ndarray  # the shuffled input
    chart: Panel  # top classes' probabilities in each condition
    changes: dict[str, str]  # logit change with and without positions
    reading: str  # the original's top class kept or lost, then the held-out shapes' verdict with its spread


def shuffle(
    clf: ImageClassifier,
    pixels: np.ndarray,
    result: Classification,
    seed: int = 0,
    held: vit_lab.ShuffleHeldOut | None = None,
    *,
    lang: str = "en",
) -> Shuffled:
    """The same patches in another order, with and without the position embedding; ``held`` (:func:`held_out`'s)
    adds what shuffling does across held-out shapes, the verdict on whether positions matter."""
    T = texts(PAGE, lang)
    shuf = vit_lab.shuffle_experiment(clf, pixels, int(seed))
    top = np.argsort(-result.probs)[:8]
    series = {T(f"cond_{i}"): p[top] for i, p in enumerate(shuf.probs.values())}
    fig = vitviz.condition_bars(
        [_classes(result.labels, lang)[i] for i in top], series, title=T("shuffle_title"), y_title=T("probability")
    )
    changes = {
        T("change_with"): f"{shuf.logit_change['with']:.3g}",
        T("change_without"): rounding(shuf.logit_change["without"]),
    }
    # The reading follows the chart's own bars: the original's top class with positions, before and after; the
    # bars without positions are said equal only where the measured logit change is float rounding.
    names = _classes(result.labels, lang)
    before, after = (shuf.probs[f"{which}, with positions"] for which in ("original", "shuffled"))
    first, now = int(np.argmax(before)), int(np.argmax(after))
    verdict = "shuffle_kept" if now == first else "shuffle_lost"
    ratio = f"{after[first] / max(before[first], 1e-12):.0%}"
    p0, p1 = f"{before[first]:.2f}", f"{after[first]:.2f}"
    direction = "stays" if p0 == p1 else "rises" if after[first] > before[first] else "falls"  # as the digits read
    moved = T(f"shuffle_{direction}", p0=p0, p1=p1)
    without = shuf.logit_change["without"]
    same = "shuffle_reading" if without <= SET_ROUNDING else "shuffle_reading_unequal"
    if shuf.moved == 0:  # a blank picture: its input unchanged, so its bars cannot say whether positions matter
        change = rounding(max(shuf.logit_change.values()))
        parts = [T("shuffle_nothing_moved", n=clf.model.cfg.num_patches, diff=change)]
    else:
        parts = [
            T(same, diff=rounding(without)),
            T(verdict, cls=names[first], moved=moved, new=names[now], ratio=ratio),
        ]
    if held is not None:
        parts += _held_out_shuffle(held, clf, T)
    reading = sentences(parts, lang)
    chart = Panel("vit_shuffle", fig, np.stack(list(shuf.probs.values())))
    return Shuffled(shuf.shuffled, chart, changes, reading)


def _held_out_shuffle(held: vit_lab.ShuffleHeldOut, clf: ImageClassifier, T) -> list[str]:
    """The held-out shapes' numbers, then the verdict: positions matter when shuffling costs more accuracy than
    twice the paired difference's standard error."""
    pct = lambda x: f"{x:.1%}"  # noqa: E731
    (acc0, acc1), (q1, median, q3) = held.accuracy, held.ratio
    drop = 100 * (acc0 - acc1)
    z = (acc0 - acc1) / held.accuracy_se if held.accuracy_se > 0 else float("inf")
    numbers = T(
        "shuffle_held_out",
        n=held.images,
        acc0=pct(acc0),
        se0=pct(vit_lab.accuracy_se(acc0, held.images)),
        acc1=pct(acc1),
        chance=pct(1 / clf.model.cfg.num_classes),
        se=pct(held.accuracy_se),
        median=f"{median:.0%}",
        q1=f"{q1:.0%}",
        q3=f"{q3:.0%}",
    )
    return [numbers, T("shuffle_matters" if z > 2 else "shuffle_small", drop=f"{drop:.1f}", z=f"{z:.1f}")]


@dataclass(frozen=True)
class HeldOut:
    """What the page measures on held-out shapes once per model: the causal mask (§7.2) and the shuffle (§7.1)."""

    causal: vit_lab.CausalMask
    shuffle: vit_lab.ShuffleHeldOut


def held_out(clf: ImageClassifier) -> HeldOut:
    """§7.2's causal mask and §7.1's shuffled patches on generated images (seconds: the page caches it)."""
    return HeldOut(vit_lab.causal_mask(clf), vit_lab.shuffle_held_out(clf))


def causal_text(result: vit_lab.CausalMask, clf: ImageClassifier, *, lang: str = "en") -> str:
    """The causal-mask experiment in words; for a [CLS] model, why its accuracy falls to chance."""
    T = texts(PAGE, lang)
    pct = lambda x: f"{x:.1%}"  # noqa: E731
    acc, acc0 = result.accuracy
    se = pct(vit_lab.accuracy_se(acc, result.images))
    order = T("causal_order_cls" if clf.model.num_prefix else "causal_order_patches")  # the mask follows it
    parts = [
        T(
            "causal_result",
            n=result.images,
            order=order,
            acc=pct(acc),
            acc0=pct(acc0),
            chance=pct(result.chance),
            se=se,
        ),
        T("causal_agree", agree=pct(result.agree)),
    ]
    return sentences(parts + ([T("causal_cls")] if clf.model.num_prefix else []), lang)
