"""Person-style drawings of the shape classes, for testing only: a marker on white or light paper.

This is deliberately *not* :mod:`tx_explorer.data.shapes` (the training generator): the shapes are built here from
their own geometry (ellipses, rectangles and triangles of uneven sides, a five-pointed star of random depth, a
plus sign of random arm width, a ring as two circles or one thick band), strokes are PIL polylines of a round pen
whose points shake and whose ends overshoot, the picture is drawn at 256 px and shrunk like an upload. No model
is trained on these images; they measure how a classifier trained on the generator does on what a person draws.
Drawing ``i`` depends only on ``(seed, i)``.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw

from tx_explorer.data.images import center_square, to_array
from tx_explorer.data.shapes import CLASSES

CANVAS = 256  # drawn at this size, then resized to the model's input like an uploaded picture
INKS = ((20, 20, 20), (30, 60, 200), (200, 30, 30), (20, 140, 50), (120, 40, 160), (230, 110, 0), (90, 60, 30))


def _closed(pts: np.ndarray, n: int) -> np.ndarray:
    """``n`` points evenly spaced (by arc length) along the closed polygon ``pts [K, 2]``."""
    loop = np.vstack([pts, pts[:1]])
    arc = np.concatenate([[0.0], np.cumsum(np.linalg.norm(np.diff(loop, axis=0), axis=1))])
    t = np.linspace(0, arc[-1], n, endpoint=False)
    return np.stack([np.interp(t, arc, loop[:, 0]), np.interp(t, arc, loop[:, 1])], 1)


def _geometry(name: str, rng: np.random.Generator) -> list[np.ndarray]:
    """Closed contours of one shape in a unit box around 0 (radius about 1), before the hand shakes."""
    if name in ("circle", "ring"):
        t = np.linspace(0, 2 * np.pi, 90, endpoint=False)
        ellipse = np.stack([np.cos(t) * rng.uniform(0.85, 1.0), np.sin(t) * rng.uniform(0.85, 1.0)], 1)
        return [ellipse] + ([ellipse * rng.uniform(0.45, 0.6)] if name == "ring" else [])
    if name == "square":
        w, h = rng.uniform(0.7, 0.85, 2)
        return [np.array([[-w, -h], [w, -h], [w, h], [-w, h]])]
    if name == "triangle":
        ang = -np.pi / 2 + np.arange(3) * 2 * np.pi / 3 + rng.normal(0, 0.12, 3)
        return [np.stack([np.cos(ang), np.sin(ang)], 1)]
    if name == "star":
        ang = -np.pi / 2 + np.arange(10) * np.pi / 5
        rad = np.where(np.arange(10) % 2, rng.uniform(0.35, 0.5), 1.0)
        return [np.stack([np.cos(ang), np.sin(ang)], 1) * rad[:, None]]
    arm, w = 0.95, rng.uniform(0.25, 0.4)  # cross: a plus sign traced around its twelve corners
    return [np.array([[w, arm], [w, w], [arm, w], [arm, -w], [w, -w], [w, -arm], [-w, -arm], [-w, -w], [-arm, -w],
                      [-arm, w], [-w, w], [-w, arm]])]  # fmt: skip


def _hand(contour: np.ndarray, rng: np.random.Generator, shake: float) -> np.ndarray:
    """The contour as a person traces it: a smooth random drift plus small tremor, ending a little past the start."""
    pts = _closed(contour, 120)
    drift = np.cumsum(rng.normal(0, shake, pts.shape), axis=0)
    drift -= np.linspace(0, 1, len(pts))[:, None] * drift[-1]  # a random walk pinned at both ends: no big gap
    overshoot = pts[: int(rng.integers(2, 10))]
    return np.vstack([pts + drift + rng.normal(0, shake / 2, pts.shape), overshoot])


def drawing(seed: int, index: int, *, size: int = 64, label: int | None = None) -> tuple[np.ndarray, int]:
    """Drawing ``index`` of the set with ``seed``: pixels ``[size, size, 3]`` uint8 and its class index."""
    rng = np.random.default_rng([seed, index, 7])
    label = int(rng.integers(len(CLASSES))) if label is None else int(label)
    paper = tuple(int(c) for c in rng.integers(225, 256, 3)) if rng.random() < 0.5 else (255, 255, 255)
    img = Image.new("RGB", (CANVAS, CANVAS), paper)
    draw = ImageDraw.Draw(img)
    if rng.random() < 0.25:  # ruled notebook paper
        for y in range(int(rng.integers(8, 30)), CANVAS, int(rng.integers(24, 40))):
            draw.line([(0, y), (CANVAS, y)], fill=(170, 190, 230), width=1)
    ink = np.array(INKS[int(rng.integers(len(INKS)))])
    radius = rng.uniform(0.2, 0.42) * CANVAS
    centre = rng.uniform(radius + 4, CANVAS - radius - 4, 2)
    turn = rng.uniform(-0.35, 0.35) if rng.random() < 0.7 else rng.uniform(0, 2 * np.pi)  # mostly upright
    rot = np.array([[np.cos(turn), -np.sin(turn)], [np.sin(turn), np.cos(turn)]])
    contours = [c @ rot.T * radius + centre for c in _geometry(CLASSES[label], rng)]
    width = int(rng.integers(2, 9))  # pen width at 256 px
    thick_ring = CLASSES[label] == "ring" and rng.random() < 0.4
    fill = rng.random() < 0.35 or thick_ring
    shade = tuple(int(c) for c in ink + (255 - ink) * rng.uniform(0.0, 0.5)) if fill else None
    if fill:  # coloured in (a ring's inside left as paper)
        draw.polygon([tuple(p) for p in contours[0]], fill=shade)
        if len(contours) > 1:
            draw.polygon([tuple(p) for p in contours[1]], fill=paper)
    for contour in contours:
        pts = _hand(contour, rng, shake=rng.uniform(0.1, 0.6))
        draw.line([tuple(p) for p in pts], fill=tuple(int(c) for c in ink), width=width, joint="curve")
    return to_array(center_square(img, size)), label


def make_drawings(n: int, *, seed: int = 0, size: int = 64) -> tuple[np.ndarray, np.ndarray]:
    """Drawings ``0 … n−1`` of the set with ``seed``, classes balanced by cycling: ``[n, S, S, 3]`` uint8, ``[n]``."""
    items = [drawing(seed, i, size=size, label=i % len(CLASSES)) for i in range(n)]
    return np.stack([x for x, _ in items]), np.array([y for _, y in items], dtype=np.int64)
