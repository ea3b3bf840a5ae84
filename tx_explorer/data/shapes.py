"""A procedural image set: one shape per image (random hue, size, rotation and position; filled, outlined or both,
with a wobbly hand-drawn contour) standing out from a dark or a light textured or noisy background, with thin lines and
dots as distractors.

Every image has a known object mask, so attention maps can be scored against ground truth ("how much of the
[CLS] attention falls on the object?"). Image ``i`` of a set depends only on ``(seed, i)``, never on the set's
size, so any sample can be regenerated exactly. Only numpy and PIL are used.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

import numpy as np
from PIL import Image, ImageDraw

CLASSES: tuple[str, ...] = ("circle", "square", "triangle", "star", "cross", "ring")
SUPERSAMPLE = 4  # shapes are drawn at 4× and box-filtered down: smooth edges without a blurry mask
DARKEST_OBJECT = 0.75 * 255 * 0.8  # about the dimmest a bright object's top channel gets (value 0.75, shading)


@dataclass(frozen=True)
class ShapeSample:
    image: np.ndarray  # [S, S, 3] uint8
    mask: np.ndarray  # [S, S] bool: pixels covered by the object (at least half)
    label: int  # index into CLASSES

    @property
    def name(self) -> str:
        return CLASSES[self.label]


def _polygon(label: str, r: float, theta: float) -> np.ndarray:
    """Vertices ``[K, 2]`` of a shape of circumradius ``r`` centred on 0, rotated by ``theta``."""
    if label == "square":
        ang = np.pi / 4 + np.arange(4) * np.pi / 2
        pts = np.stack([np.cos(ang), np.sin(ang)], 1) * r
    elif label == "triangle":
        ang = -np.pi / 2 + np.arange(3) * 2 * np.pi / 3
        pts = np.stack([np.cos(ang), np.sin(ang)], 1) * r
    elif label == "star":
        ang = -np.pi / 2 + np.arange(10) * np.pi / 5
        pts = np.stack([np.cos(ang), np.sin(ang)], 1) * np.where(np.arange(10) % 2, 0.42 * r, r)[:, None]
    elif label == "cross":
        w = 0.32 * r
        quarter = np.array([[w, r], [w, w], [r, w]])  # one corner of the plus sign
        pts = np.concatenate(
            [quarter @ np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]).T for a in -np.arange(4) * np.pi / 2]
        )
    else:
        raise ValueError(f"{label!r} is not a polygon")
    rot = np.array([[np.cos(theta), -np.sin(theta)], [np.sin(theta), np.cos(theta)]])
    return pts @ rot.T


def _outline(label: str, r: float, theta: float) -> list[np.ndarray]:
    """Closed contours ``[K, 2]`` of a shape of circumradius ``r`` centred on 0 (a ring has two: outer, hole)."""
    if label in ("circle", "ring"):
        ang = np.arange(64) * 2 * np.pi / 64
        unit = np.stack([np.cos(ang), np.sin(ang)], 1)
        return [0.9 * r * unit] + ([0.5 * r * unit] if label == "ring" else [])
    return [_polygon(label, r, theta)]


def _wobble(pts: np.ndarray, amount: np.ndarray, phase: np.ndarray, *, per_edge: int = 8) -> np.ndarray:
    """A hand-drawn version of the closed contour ``pts [K, 2]``: edges split into ``per_edge`` pieces, each point
    pushed along its radius by ``1 + Σ_k amount[k]·sin((k+2)·φ + phase[k])`` (a smooth, low-frequency wave).
    """
    if not amount.any():
        return pts
    t = np.arange(per_edge)[None, :, None] / per_edge  # (1, M, 1)
    dense = (pts[:, None] + (np.roll(pts, -1, 0) - pts)[:, None] * t).reshape(-1, 2)  # (K·M, 2)
    phi = np.arctan2(dense[:, 1], dense[:, 0])
    k = np.arange(len(amount))[:, None] + 2
    return dense * (1 + (amount[:, None] * np.sin(k * phi + phase[:, None])).sum(0))[:, None]


def _coverage(
    label: str,
    size: int,
    cx: float,
    cy: float,
    r: float,
    theta: float,
    *,
    stroke: float = 0.0,
    wobble: np.ndarray | None = None,
    phase: np.ndarray | None = None,
) -> np.ndarray:
    """Fraction of each pixel the shape covers, ``[S, S]`` float32 in [0, 1] (anti-aliased).

    ``stroke > 0`` draws only the outline, that many pixels wide; ``wobble``/``phase`` (``[K]``) bend the contour.
    """
    k = SUPERSAMPLE
    canvas = Image.new("L", (size * k, size * k), 0)
    draw = ImageDraw.Draw(canvas)
    amount = np.zeros(1) if wobble is None else wobble
    phase = np.zeros_like(amount) if phase is None else phase
    for i, contour in enumerate(_outline(label, r * k, theta)):
        pts = [tuple(p) for p in _wobble(contour, amount, phase) + np.array([cx, cy]) * k]
        if stroke > 0:
            draw.line(pts + pts[:2], fill=255, width=max(1, round(stroke * k)), joint="curve")
        else:
            draw.polygon(pts, fill=0 if i else 255)  # a ring's second contour is its hole
    return np.asarray(canvas.resize((size, size), Image.Resampling.BOX), dtype=np.float32) / 255.0


def _smooth_noise(rng: np.random.Generator, size: int, cells: int) -> np.ndarray:
    """Low-frequency value noise in [0, 1], ``[S, S]``: a random ``cells × cells`` grid, bilinearly upsampled."""
    grid = Image.fromarray((rng.random((cells, cells)) * 255).astype(np.uint8))
    return np.asarray(grid.resize((size, size), Image.Resampling.BILINEAR), dtype=np.float32) / 255.0


def _background(rng: np.random.Generator, size: int, difficulty: float) -> np.ndarray:
    """A dark background ``[S, S, 3]`` float32 in [0, 255]: blotches, stripes or a gradient, plus grain.

    ``difficulty`` in [0, 1] blends its colours from black towards random dark ones and scales the
    texture's contrast and the grain (0 = flat black).
    """
    c1, c2 = (difficulty * rng.uniform(0, DARKEST_OBJECT / 2, 3) for _ in range(2))  # at most half as bright
    kind = rng.integers(3)
    if kind == 0:
        t = _smooth_noise(rng, size, int(rng.integers(3, 9)))
    else:
        yy, xx = np.mgrid[0:size, 0:size].astype(np.float32) / size
        a = rng.uniform(0, np.pi)
        ramp = np.cos(a) * xx + np.sin(a) * yy
        t = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(2, 6) * ramp) if kind == 1 else ramp - ramp.min()
        t = t / max(float(t.max()), 1e-6)
    bg = c1 + (c2 - c1) * t[..., None] * rng.uniform(0.4, 1.0) * difficulty
    return bg + rng.normal(0, rng.uniform(0, 12) * difficulty, (size, size, 3))


def _hsv(h: float, s: float, v: float) -> np.ndarray:
    """HSV in [0, 1] → RGB in [0, 255] (without colorsys)."""
    k = (np.array([5.0, 3.0, 1.0]) + h * 6) % 6
    return 255 * v * (1 - s * np.clip(np.minimum(k, 4 - k), 0, 1))


def _object_colour(rng: np.random.Generator, *, light: bool) -> np.ndarray:
    """A colour that stands out, as RGB in [0, 255]: on dark paper bright (any hue, saturation 0.2–1, value ≥ 0.75);
    on light paper an ink (saturation 0.5–1 or black/grey, luminance ≤ 150 of 255: a red or blue marker, not yellow).
    """
    h, s, v = rng.uniform(0, 1), rng.uniform(0.2, 1.0), rng.uniform(0.75, 1.0)
    if not light:
        return _hsv(h, s, v)
    ink = _hsv(h, 0.5 + 0.5 * s if rng.random() < 0.8 else 0.0, v - 0.6 * rng.random())
    return ink * min(1.0, 150.0 / max(float(ink @ np.array([0.299, 0.587, 0.114])), 1e-6))


def _distractors(rng: np.random.Generator, img: np.ndarray, difficulty: float) -> None:
    """Draw up to 4 thin lines and small dots in place (nothing as large as an object); fewer when easier.

    All of their random numbers are drawn whatever the difficulty, so it changes no later draw.
    """
    size = img.shape[0]
    count = int(rng.integers(0, 5))
    for k in range(count):
        x, y = rng.uniform(0, size, 2)
        line, ang, length, d = (
            rng.random() < 0.5,
            rng.uniform(0, np.pi),
            rng.uniform(0.15, 0.35) * size,
            rng.uniform(1, 2.5),
        )
        colour = rng.uniform(0, 255, 3)
        if k >= round(count * difficulty):
            continue
        layer = Image.new("L", (size, size), 0)
        draw = ImageDraw.Draw(layer)
        if line:
            draw.line([x, y, x + length * np.cos(ang), y + length * np.sin(ang)], fill=255, width=1)
        else:
            draw.ellipse([x - d, y - d, x + d, y + d], fill=255)
        a = np.asarray(layer, dtype=np.float32)[..., None] / 255.0
        img[:] = img * (1 - a) + colour * a


def render(
    rng: np.random.Generator, *, size: int = 64, label: int | None = None, difficulty: float = 1.0
) -> ShapeSample:
    """One random image ``size × size``: class, style, colour, size, rotation and position are drawn from ``rng``.

    Half the images are dark paper with a bright object, half light paper with an ink-coloured one (the dark
    background inverted). The object is only outlined (45 %), filled (35 %) or both (20 %: a translucent fill,
    25–70 % opaque, inside the pen line); the pen is 3–16 % of its radius (at least 0.6 px, a faint pencil line)
    wide, its contour wobbles like a hand-drawn one (up to ±12 % of the radius), its
    circumradius is 20–42 % of the image and it lies anywhere the whole of it fits. ``difficulty`` in [0, 1]
    blends the colours from a white-on-black or black-on-white silhouette (0) to random ones (1) and scales
    background texture, grain and the number of distractors. 1 is the full task; training starts easy (a
    curriculum). It changes no random draw, so the same seed gives the same shape at every difficulty.
    """
    if size < 16:
        raise ValueError(f"images need at least 16 pixels a side, got {size}")
    if not 0.0 <= difficulty <= 1.0:
        raise ValueError(f"difficulty must be in [0, 1], got {difficulty}")
    label = int(rng.integers(len(CLASSES))) if label is None else int(label)
    if not 0 <= label < len(CLASSES):
        raise ValueError(f"label must be in [0, {len(CLASSES)}), got {label}")
    img = _background(rng, size, difficulty)
    _distractors(rng, img, difficulty)
    light, style = rng.random() < 0.5, rng.choice(3, p=[0.45, 0.35, 0.2])  # style: outlined, filled, both
    r = rng.uniform(0.2, 0.42) * size
    cx, cy = rng.uniform(r + 1, size - r - 1, 2)
    theta = rng.uniform(0, 2 * np.pi)
    stroke = max(0.6, rng.uniform(0.03, 0.16) * r)
    # a few random waves, or none; the slow ones larger (an oval circle, not a square one)
    wobble = rng.uniform(0, 0.06, 4) / np.arange(1, 5) * (rng.random(4) < 0.5)
    draw = partial(_coverage, CLASSES[label], size, cx, cy, r, theta, wobble=wobble, phase=rng.uniform(0, 7, 4))
    line = draw(stroke=stroke) if style != 1 else np.zeros((size, size), np.float32)
    fill = draw() * (1.0 if style == 1 else rng.uniform(0.25, 0.7) if style == 2 else 0.0)  # opacity of the fill
    plain = 0.0 if light else 255.0  # easy images: a black or white silhouette
    colour = difficulty * _object_colour(rng, light=light) + (1 - difficulty) * plain
    shade = 1 + 0.25 * (_smooth_noise(rng, size, 4)[..., None] - 0.5)  # gentle texture on the object itself
    img = 255.0 - img if light else img  # light paper: the dark background and its distractors inverted
    ink = np.clip(colour * shade, 0, 255)
    for cover in (fill, line):  # a translucent fill first, then the pen line over it
        img = img * (1 - cover[..., None]) + ink * cover[..., None]
    return ShapeSample(image=np.clip(img, 0, 255).astype(np.uint8), mask=(fill > 0.1) | (line > 0.5), label=label)


def sample(
    seed: int, index: int = 0, *, size: int = 64, label: int | None = None, difficulty: float = 1.0
) -> ShapeSample:
    """Image ``index`` of the set with ``seed`` (optionally forcing its class)."""
    return render(np.random.default_rng([seed, index]), size=size, label=label, difficulty=difficulty)


def make_dataset(
    n: int, *, seed: int, size: int = 64, start: int = 0, difficulty: float | np.ndarray = 1.0
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Images ``start … start+n−1`` of the set with ``seed``, classes balanced by cycling.

    ``difficulty`` is one value for all images or one per image (``[n]``).
    Returns images ``[n, S, S, 3]`` uint8, masks ``[n, S, S]`` bool and labels ``[n]`` int64.
    """
    levels = np.broadcast_to(np.asarray(difficulty, dtype=np.float64), (n,))
    items = [
        sample(seed, i, size=size, label=i % len(CLASSES), difficulty=float(d))
        for i, d in zip(range(start, start + n), levels, strict=True)
    ]
    return (
        np.stack([s.image for s in items]),
        np.stack([s.mask for s in items]),
        np.array([s.label for s in items], dtype=np.int64),
    )
