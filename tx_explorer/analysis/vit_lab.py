"""What the Vision Transformer page shows, computed: patches, projections, per-query maps, positions, shuffles.

Pure functions over an :class:`~tx_explorer.families.images.ImageClassifier` and arrays; the page only draws them.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from tx_explorer import masks
from tx_explorer.analysis.rollout import rollout
from tx_explorer.analysis.vit_metrics import object_share, patch_coverage
from tx_explorer.bundle import WEIGHTS_DIR
from tx_explorer.data import shapes
from tx_explorer.errors import InputError
from tx_explorer.families.images import ImageClassifier
from tx_explorer.modules.vit import PatchEmbed, patchify, shuffle_patches
from tx_explorer.trace import Trace

LECTURE_SIZE, LECTURE_PATCH, LECTURE_DIM = 224, 16, 768  # ViT-B/16 (lecture §7.1): 196 tokens of 768 values


@dataclass(frozen=True)
class PatchView:
    """One patch on its way into the model."""

    patches: np.ndarray  # [N, C·P·P] every flattened patch (values in [0, 1])
    values: np.ndarray  # [C·P·P] the chosen patch, (channel, row, column) order
    conv: np.ndarray  # [D] the Conv2d(k=s=P) output at that patch
    linear: np.ndarray  # [D] a Linear layer with the conv's weights applied to ``values``
    max_difference: float  # max |conv − linear|: the two are the same map


def patch_view(
    pixels: np.ndarray, embed: PatchEmbed, index: int, *, normalise: ImageClassifier | None = None
) -> PatchView:
    """Patchify ``pixels [S, S, 3]`` uint8 and project patch ``index`` both ways (convolution and Linear).

    With ``normalise`` the pixels are first normalised as that classifier does; otherwise scaled to [0, 1].
    """
    if normalise is not None:
        x = normalise.to_tensor(pixels).cpu()
    else:
        x = torch.tensor(np.asarray(pixels), dtype=torch.float32).permute(2, 0, 1)[None] / 255.0  # (1, 3, S, S)
    embed = embed.cpu()
    patches = patchify(x, embed.patch_size)[0]  # (N, C·P·P)
    if not 0 <= index < patches.shape[0]:
        raise InputError("patch_outside", index=index, last=patches.shape[0] - 1)
    with torch.no_grad():
        conv = embed(x)[0, index]  # (D,)
        linear = embed.as_linear()(patches[index])
    return PatchView(
        patches=patches.numpy(),
        values=patches[index].numpy(),
        conv=conv.numpy(),
        linear=linear.numpy(),
        max_difference=float((conv - linear).abs().max()),
    )


@functools.cache  # the page shows it on every open: its Conv2d's own initialisation alone takes a fraction of a second
def lecture_embed(seed: int = 0) -> PatchEmbed:
    """ViT-B/16's patch embedding shape, ``Conv2d(3, 768, 16, stride=16)``, with seeded random weights (one shared
    module per seed: read it, never train it)."""
    gen = torch.Generator().manual_seed(seed)
    embed = PatchEmbed(image_size=LECTURE_SIZE, patch_size=LECTURE_PATCH, in_chans=3, dim=LECTURE_DIM)
    with torch.no_grad():
        embed.proj.weight.copy_(torch.randn(embed.proj.weight.shape, generator=gen) * 0.02)
        embed.proj.bias.zero_()
    return embed


def query_maps(trace: Trace, query: int | str, *, num_prefix: int, grid: int) -> np.ndarray:
    """Each layer's and head's weights from one query over the patches: ``[L, H, grid, grid]``.

    ``query`` is a token index (0 = [CLS] when there is one) or ``"mean"``: the mean over the patch queries,
    the counterpart of mean pooling. Weights on the [CLS] key are left out and the rest re-normalised.
    """
    maps = trace.stack()[:, 0]  # (L, H, T, T) for the first image
    rows = maps[..., num_prefix:, :].mean(dim=-2) if query == "mean" else maps[..., int(query), :]  # (L, H, T)
    patches = rows[..., num_prefix:]
    patches = patches / patches.sum(dim=-1, keepdim=True).clamp_min(1e-12)
    return patches.reshape(*patches.shape[:2], grid, grid).numpy()


def rollout_map(trace: Trace, query: int | str, *, num_prefix: int, grid: int, residual: float = 0.5) -> np.ndarray:
    """Attention rollout from one query (or the mean patch query) to the patches: ``[grid, grid]``."""
    rolled = rollout(trace.stack()[:, :1], residual=residual)[0]  # (T, T)
    row = rolled[num_prefix:].mean(dim=0) if query == "mean" else rolled[int(query)]
    patches = row[num_prefix:] / row[num_prefix:].sum().clamp_min(1e-12)
    return patches.reshape(grid, grid).numpy()


def position_similarity(pos: Tensor, grid: int) -> np.ndarray:
    """Cosine similarity of each patch's position embedding to every other: ``[N, D]`` → ``[grid, grid, grid, grid]``.

    Entry ``[r, c]`` is the map for the patch at row r, column c — the small multiples of Dosovitskiy et al. Fig. 7.
    """
    p = torch.nn.functional.normalize(pos.detach().float().cpu(), dim=-1)
    sim = p @ p.T  # (N, N)
    return sim.reshape(grid, grid, grid, grid).numpy()


def position_structure(pos: Tensor, grid: int) -> dict[str, float]:
    """How a position table's similarities follow the grid: the mean cosine similarity of each patch's embedding to
    its direct neighbours ("near"), to the rest of its row and column ("line") and to the patches off both
    ("other", its diagonal neighbours included); on a 2 × 2 grid, where no row holds a patch further on, "line" is
    "near"."""
    sim = position_similarity(pos, grid).reshape(grid * grid, grid * grid)
    row, col = np.divmod(np.arange(grid * grid), grid)
    dr, dc = np.abs(row[:, None] - row[None]), np.abs(col[:, None] - col[None])
    near = dr + dc == 1
    line = ((dr == 0) | (dc == 0)) & (dr + dc > 1)
    other = (dr > 0) & (dc > 0)
    if not line.any():
        line = near
    return {k: float(sim[m].mean()) for k, m in (("near", near), ("line", line), ("other", other))}


def patch_positions(classifier: ImageClassifier) -> Tensor | None:
    """The model's position embeddings of the patches (the [CLS] row left out), ``[N, D]``; None without any."""
    model = classifier.model
    if model.pos_embed is None:
        return None
    return model.pos_embed[0, model.num_prefix :]


@dataclass(frozen=True)
class ShuffleResult:
    shuffled: np.ndarray  # [S, S, 3] uint8: the jigsaw the model sees
    perm: np.ndarray  # [N]: grid position i shows original patch perm[i]
    probs: dict[str, np.ndarray]  # condition → [C] probabilities
    logit_change: dict[str, float]  # "with" / "without" positions → max |logits(shuffled) − logits(original)|
    # grid positions whose patch, as the model receives it, differs after the shuffle: 0 on a blank picture, whose
    # identical patches a shuffle only swaps for copies of themselves (its input, and so every score, unchanged)
    moved: int


@torch.no_grad()
def shuffle_experiment(classifier: ImageClassifier, pixels: np.ndarray, seed: int = 0) -> ShuffleResult:
    """Classify the image and a patch-shuffled copy, each with and without position embeddings.

    Without positions the encoder is permutation-equivariant and both poolings are symmetric, so the
    shuffled image gets the same logits (up to float rounding); with positions it generally does not.
    """
    model, p = classifier.model, classifier.model.cfg.patch_size
    pixels = classifier.seen(pixels)  # the shuffled picture shown is the one the model gets
    x = classifier.to_tensor(pixels, framed=True)
    perm = torch.randperm(model.cfg.num_patches, generator=torch.Generator().manual_seed(seed))
    x_shuffled = shuffle_patches(x, p, perm.to(x.device))
    raw = torch.tensor(np.asarray(pixels)).permute(2, 0, 1)[None]  # (1, 3, S, S) uint8
    shuffled = shuffle_patches(raw, p, perm)[0].permute(1, 2, 0).numpy()
    logits = {}
    for positions in (True, False):
        for name, inp in (("original", x), ("shuffled", x_shuffled)):
            logits[(name, positions)] = model(inp, use_positions=positions)[0].float().cpu()
    probs = {
        f"{name}, {'with' if pos else 'without'} positions": torch.softmax(v, -1).numpy()
        for (name, pos), v in logits.items()
    }
    change = {
        ("with" if pos else "without"): float((logits[("shuffled", pos)] - logits[("original", pos)]).abs().max())
        for pos in (True, False)
    }
    moved = int((patchify(x, p) != patchify(x_shuffled, p)).any(-1).sum())
    return ShuffleResult(shuffled=shuffled, perm=perm.numpy(), probs=probs, logit_change=change, moved=moved)


HELD_OUT_SEED = 7_300_001  # shapes of their own for the page's comparisons: not the training or causal-mask seeds


@functools.lru_cache(maxsize=2)  # one image size per bundled model; read-only
def held_out_shapes(n: int, size: int, seed: int = HELD_OUT_SEED) -> tuple[np.ndarray, np.ndarray]:
    """``n`` generated shapes at full difficulty, ``([n, S, S, 3]`` uint8, ``[n]`` labels)."""
    images, _, labels = shapes.make_dataset(n, seed=seed, size=size)
    images.setflags(write=False)
    return images, np.asarray(labels)


@dataclass(frozen=True)
class ShuffleHeldOut:
    """Held-out shapes classified as they are and with their patches shuffled, positions on (§7.1)."""

    images: int
    accuracy: tuple[float, float]  # original, shuffled
    accuracy_se: float  # standard error of the paired difference (original − shuffled correct)
    ratio: tuple[float, float, float]  # the true class's probability shuffled ÷ original: quartiles 25, 50, 75 %


@torch.no_grad()
def shuffle_held_out(classifier: ImageClassifier, n: int = 300, batch: int = 100) -> ShuffleHeldOut:
    """Whether patch order matters to this model across held-out shapes, not one picture: each batch shuffled by a
    permutation of its own (seeded by its index), the accuracy and the true class's probability before and after."""
    model = classifier.model
    images, labels = held_out_shapes(n, model.cfg.image_size)
    hits, ratios = [], []
    for i in range(0, n, batch):
        x = classifier.to_tensor(images[i : i + batch])
        perm = torch.randperm(model.cfg.num_patches, generator=torch.Generator().manual_seed(i))
        y = torch.as_tensor(labels[i : i + batch], device=x.device)
        p0 = torch.softmax(model(x).float(), -1)
        p1 = torch.softmax(model(shuffle_patches(x, model.cfg.patch_size, perm.to(x.device))).float(), -1)
        hits.append(torch.stack([p0.argmax(-1) == y, p1.argmax(-1) == y]).float().cpu())
        true = torch.stack([p0.gather(1, y[:, None])[:, 0], p1.gather(1, y[:, None])[:, 0]])
        ratios.append((true[1] / true[0].clamp_min(1e-12)).cpu())
    h = torch.cat(hits, dim=1)  # (2, n)
    diff = h[0] - h[1]
    q = torch.quantile(torch.cat(ratios), torch.tensor([0.25, 0.5, 0.75]))
    return ShuffleHeldOut(
        n,
        (float(h[0].mean()), float(h[1].mean())),
        float(diff.std() / np.sqrt(n)),
        (float(q[0]), float(q[1]), float(q[2])),
    )


HALF_TONE = (0.2, 0.8)  # contrast with the paper: below is paper, above is ink, between is neither
# A picture beyond these quantiles of the held-out shapes on any measure (the top probability: below 1 − them) is
# unusual, resp. far: 5 % of real shapes are unusual on each measure by construction, 1 % far.
USUAL = 0.95
FAR = 0.99


@dataclass(frozen=True)
class Reference:
    """What a shapes model's held-out pictures look like to it: per picture, its top probability, the entropy of
    its prediction (nats) and the share of its pixels in half-tones (between paper and ink after the contrast)."""

    images: int
    top: np.ndarray  # [n]
    entropy: np.ndarray  # [n]
    half_tones: np.ndarray  # [n]


def _scores(classifier: ImageClassifier, x: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(top probability, entropy, half-tone share, strongest contrast) of each normalised picture in
    ``x [B, 3, S, S]``."""
    p = torch.softmax(classifier.model(x).float(), -1)
    entropy = -(p * p.clamp_min(1e-12).log()).sum(-1)
    mean = torch.tensor(classifier.mean, device=x.device)[:, None, None]
    std = torch.tensor(classifier.std, device=x.device)[:, None, None]
    v = (x * std + mean).amax(dim=1)  # (B, S, S): the strongest channel's contrast, 0 paper … 1 ink
    half = ((v > HALF_TONE[0]) & (v < HALF_TONE[1])).float().mean(dim=(1, 2))
    return p.amax(-1).cpu(), entropy.cpu(), half.cpu(), v.amax(dim=(1, 2)).cpu()


@torch.no_grad()
def reference(classifier: ImageClassifier, n: int = 300, batch: int = 100) -> Reference:
    """:class:`Reference` over ``n`` held-out shapes (seconds: the page computes it once per server)."""
    images, _ = held_out_shapes(n, classifier.model.cfg.image_size)
    parts = [_scores(classifier, classifier.to_tensor(images[i : i + batch])) for i in range(0, n, batch)]
    top, entropy, half, _ = (torch.cat(t).numpy() for t in zip(*parts))
    return Reference(n, top, entropy, half)


@dataclass(frozen=True)
class Familiarity:
    """One picture against a :class:`Reference`: its values and the share of held-out pictures at or below each."""

    top: float
    entropy: float
    half_tones: float
    contrast: float  # the strongest contrast with the paper in the model's input, 0 … 1
    below: dict[str, float]  # "top", "entropy", "half_tones" → share of the reference ≤ the picture's value

    @property
    def blank(self) -> bool:
        """No pixel stands out from the paper even as a half-tone: the model receives nothing to see."""
        return self.contrast <= HALF_TONE[0]

    def beyond(self, quantile: float) -> list[str]:
        """The measures on which the picture lies beyond the held-out pictures' ``quantile`` (top probability:
        below their ``1 − quantile``), in the order "half_tones", "top", "entropy"."""
        out = {
            "half_tones": self.below["half_tones"] > quantile,
            "top": self.below["top"] < 1 - quantile,
            "entropy": self.below["entropy"] > quantile,
        }
        return [m for m, flagged in out.items() if flagged]


@torch.no_grad()
def familiarity(classifier: ImageClassifier, ref: Reference, pixels: np.ndarray) -> Familiarity:
    """How unlike the held-out shapes a picture (``[S, S, 3]`` uint8 at the model's size) is, measured three ways."""
    top, entropy, half, contrast = (float(t[0]) for t in _scores(classifier, classifier.to_tensor(pixels)))
    below = {
        "top": float(np.mean(ref.top <= top)),
        "entropy": float(np.mean(ref.entropy <= entropy)),
        "half_tones": float(np.mean(ref.half_tones <= half)),
    }
    return Familiarity(top, entropy, half, contrast, below)


@dataclass(frozen=True)
class Pooling:
    """The classifier's last steps for one image: token outputs → one pooled vector → class scores (§7.3)."""

    tokens: tuple[int, int]  # (T, D): every token's output of the last block
    pooled_rows: tuple[int, int]  # (1, D) for [CLS] pooling, (N, D) for mean pooling: the rows that are pooled
    pooled: tuple[int, int]  # (1, D): their mean, layer-normed
    logits: np.ndarray  # [C] the head's scores from the pooled vector
    max_difference: float  # max |these logits − the model's forward|: the steps are the whole classifier


@torch.no_grad()
def pooling(classifier: ImageClassifier, pixels: np.ndarray) -> Pooling:
    """Redo the model's pooling by hand: the [CLS] row (``pool="token"``) or the patch rows' mean (``"avg"``)."""
    model = classifier.model
    x = classifier.to_tensor(pixels)
    h = model.features(x)  # (1, T, D)
    rows = h[:, :1] if model.cfg.pool == "token" else h[:, model.num_prefix :]  # (1, 1, D) or (1, N, D)
    pooled = model.norm(rows.mean(dim=1))  # (1, D)
    logits = model.head(pooled)  # (1, C)
    return Pooling(
        tokens=tuple(h.shape[1:]),
        pooled_rows=tuple(rows.shape[1:]),
        pooled=tuple(pooled.shape),
        logits=logits[0].float().cpu().numpy(),
        max_difference=float((logits - model(x)).abs().max()),
    )


def object_shares(maps: np.ndarray, mask: np.ndarray, patch_size: int) -> tuple[float, np.ndarray]:
    """The object's area share and each patch map's attention share on it: ``maps [K, g, g]`` → ``(area, [K])``."""
    cov = patch_coverage(np.asarray(mask)[None], patch_size)  # (1, N)
    att = torch.as_tensor(np.asarray(maps, dtype=np.float32)).flatten(1)  # (K, N)
    if att.shape[1] != cov.shape[1]:
        raise ValueError(f"maps have {att.shape[1]} patches but the mask gives {cov.shape[1]}")
    return float(cov.mean()), object_share(att, cov.expand_as(att)).numpy()


def accuracy_se(accuracy: float, n: int) -> float:
    """Standard error of an accuracy counted on ``n`` images, √(p(1 − p)/n): how far another sample of images of
    the same kind may land. The page's generated sets are such samples, so their accuracies differ by about this."""
    return math.sqrt(accuracy * (1 - accuracy) / n)


def bundle_results(name: str) -> dict[str, Any] | None:
    """Held-out numbers recorded by the training CLI (``results.json``), formatted for the page; None if absent."""
    path = WEIGHTS_DIR / name / "results.json"
    if not path.is_file():
        return None
    r = json.loads(path.read_text())
    report = {
        "accuracy": f"{r['held_out_accuracy']:.1%}",
        "se": f"{accuracy_se(r['held_out_accuracy'], r['held_out_images']):.1%}",
        "images": f"{r['held_out_images']:,}",
        "minutes": f"{r['train_minutes']:.1f}",
    }
    if "drawings_accuracy" in r:  # bundles trained before the person-style drawings existed lack it
        drawn, count = r["drawings_accuracy"], r["drawings_images"]
        report |= {
            "drawings": f"{drawn:.1%}",
            "drawings_se": f"{accuracy_se(drawn, count):.1%}",
            "drawing_images": count,
        }
    m = r.get("object_attention")
    if not m:  # mean pooling: no [CLS] attention to score
        return report
    return report | {
        "area": f"{m['area_share']:.1%}",
        "cls": f"{m['cls_last_layer_share']:.1%}",
        "cls_lift": f"{m['cls_last_layer_lift']:.2f}",
        # the pooled ratio (mean share ÷ mean area) beside the lift, which is a mean of per-image ratios
        "cls_pooled": f"{m['cls_last_layer_share'] / m['area_share']:.2f}",
        "rollout_pooled": f"{m['rollout_share'] / m['area_share']:.2f}",
        "head": m["cls_last_layer_best_head"] + 1,
        "head_share": f"{m['cls_last_layer_best_head_share']:.1%}",
        "rollout": f"{m['rollout_share']:.1%}",
        "rollout_lift": f"{m['rollout_lift']:.2f}",
        "beats": f"{m['images_where_cls_beats_area']:.0%}",
    }


CAUSAL_SEED = 7_200_001  # images of their own (lecture §7.2), neither the training seed's nor the held-out set's


@dataclass(frozen=True)
class CausalMask:
    """Accuracy on generated images as trained (every token sees every token) and with a causal mask imposed."""

    images: int
    chance: float  # 1 / classes
    accuracy: tuple[float, float]  # no mask, causal mask
    agree: float  # share of images whose predicted class is the same under both


@torch.no_grad()
def causal_mask(classifier: ImageClassifier, n: int = 300, seed: int = CAUSAL_SEED, batch: int = 100) -> CausalMask:
    """§7.2 "a ViT needs no causal mask": the trained model evaluated with a lower-triangular mask over its tokens
    ([CLS] first where the model has one, then the patches row by row), which it never saw in training."""
    model = classifier.model
    images, _, labels = shapes.make_dataset(n, seed=seed, size=model.cfg.image_size)
    causal = masks.causal(model.num_prefix + model.cfg.num_patches)  # (T, T)
    free, hidden = [], []
    for i in range(0, n, batch):
        x = classifier.to_tensor(images[i : i + batch])
        free.append(model(x).argmax(-1).cpu())
        hidden.append(model(x, mask=causal.to(x.device)).argmax(-1).cpu())
    a, b, y = torch.cat(free), torch.cat(hidden), torch.as_tensor(labels)
    return CausalMask(
        n,
        1 / model.cfg.num_classes,
        (float((a == y).float().mean()), float((b == y).float().mean())),
        float((a == b).float().mean()),
    )
