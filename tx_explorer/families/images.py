"""Image classifiers: a :class:`~tx_explorer.modules.vit.VisionTransformer` with its class names and input
normalisation, which takes a picture (PIL or pixels) and returns probabilities and the attention trace.

``load(folder)`` is the registry loader of the bundled ``vit-shapes``; ``tx_explorer.interop.timm_vit`` wraps a
pretrained timm ViT in the same :class:`ImageClassifier`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch import Tensor
from torch.nn import functional as F

from tx_explorer.bundle import read_bundle
from tx_explorer.config import ViTConfig
from tx_explorer.data.images import center_square, to_array
from tx_explorer.modules.vit import VisionTransformer
from tx_explorer.trace import Trace

RETRAIN = "python -m tx_explorer.train vit"
FRAME_FILL = 0.8  # a framed object's longer side, as a share of the picture's


def _paper(pixels: np.ndarray) -> np.ndarray:
    """The median colour ``[3]`` of the 2-pixel border of ``pixels [S, S, 3]``: the paper the object is drawn on."""
    rims = (pixels[:2], pixels[-2:], pixels[2:-2, :2], pixels[2:-2, -2:])
    return np.median(np.concatenate([r.reshape(-1, 3) for r in rims]), axis=0)


def _max_filter(x: Tensor, k: int) -> Tensor:
    """``k × k`` maximum filter of ``x [B, C, S, S] ≥ 0`` (zero padding): ``max_pool2d(x, k, 1, k // 2)``, done as
    row then column maxima of shifted views, which is about 20 times faster on a CPU."""
    s, r = x.shape[-1], k // 2
    padded = F.pad(x, (r, r, r, r))  # (B, C, S+2r, S+2r); 0 is no larger than any value of x
    rows = torch.stack([padded[..., i : i + s, :] for i in range(k)]).amax(0)  # (B, C, S, S+2r)
    return torch.stack([rows[..., j : j + s] for j in range(k)]).amax(0)  # (B, C, S, S)


def frame_object(
    pixels: np.ndarray, mask: np.ndarray | None = None, *, fill: float = FRAME_FILL
) -> tuple[np.ndarray, np.ndarray | None]:
    """Centre the object of ``pixels [S, S, 3]`` uint8 and scale it so its longer side is ``fill`` of the picture,
    as MNIST's digits are size-normalised and centred; ``mask [S, S]`` (optional) is moved alike.

    The object is where the contrast with the paper reaches half the picture's strongest; its box runs from the
    1st to the 99th percentile of those pixels' rows and columns (a stray speck does not stretch it). Outside the
    picture its border is repeated. A picture already framed, or blank, comes back unchanged.
    """
    size = pixels.shape[0]
    contrast = np.abs(pixels.astype(np.float32) - _paper(pixels)).max(axis=-1)  # (S, S)
    rows, cols = np.nonzero(contrast >= 0.5 * contrast.max())
    if contrast.max() < 25:  # nothing stands out from the paper (25 of 255): leave it be
        return pixels, mask
    (r0, r1), (c0, c1) = np.percentile(rows, [1, 99]), np.percentile(cols, [1, 99])
    side = max(r1 - r0 + 1, c1 - c0 + 1, size / 8) / fill  # a speck is enlarged at most 8·fill times
    cy, cx = (r0 + r1 + 1) / 2, (c0 + c1 + 1) / 2  # the box's centre, in pixel-edge coordinates
    if abs(side - size) < 0.15 * size and max(abs(cy - size / 2), abs(cx - size / 2)) < 0.08 * size:  # framed
        return pixels, mask
    box = (cx - side / 2 + size, cy - side / 2 + size, cx + side / 2 + size, cy + side / 2 + size)  # in the padded
    pad = ((size, size), (size, size))

    def resample(a: np.ndarray, mode: str) -> np.ndarray:
        padded = Image.fromarray(np.pad(a, pad + ((0, 0),) * (a.ndim - 2), mode=mode))  # (3S, 3S[, 3])
        return np.asarray(padded.resize((size, size), Image.Resampling.BILINEAR, box=box))

    framed_mask = None if mask is None else resample(mask.astype(np.uint8) * 255, "constant") >= 128
    return resample(pixels, "edge"), framed_mask


def frame_objects(pixels: np.ndarray, masks: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """:func:`frame_object` of each picture of ``pixels [B, S, S, 3]`` (and ``masks [B, S, S]``)."""
    out = [frame_object(p, None if masks is None else masks[i]) for i, p in enumerate(pixels)]
    images = np.stack([o[0] for o in out])
    return images, None if masks is None else np.stack([o[1] for o in out])


@dataclass(frozen=True)
class Classification:
    labels: tuple[str, ...]  # class names, in the model's order
    probs: np.ndarray  # [C] softmax probabilities
    trace: Trace  # one [1, H, T, T] record per layer, labelled "CLS", "r0c0", …
    pixels: np.ndarray  # [S, S, 3] uint8: the image exactly as the model saw it (for overlays)


@dataclass
class ImageClassifier:
    """A trained :class:`VisionTransformer` with its class names and input normalisation."""

    model: VisionTransformer
    labels: tuple[str, ...]
    mean: tuple[float, float, float] = (0.5, 0.5, 0.5)
    std: tuple[float, float, float] = (0.5, 0.5, 0.5)
    contrast: bool = False  # first map each picture to its contrast with the paper (see to_tensor)
    thicken: int = 1  # with contrast: a k × k maximum filter, so a faint 1-pixel pen line reads as a k-pixel one
    frame: bool = False  # centre and scale each picture's object first (frame_object)

    def to_tensor(self, pixels: np.ndarray, *, framed: bool = False) -> Tensor:
        """``[S, S, 3]`` or ``[B, S, S, 3]`` uint8 → normalised ``[B, 3, S, S]`` float on the model's device.

        With ``frame`` (and unless ``framed`` says it is done) each object is first centred and scaled
        (:func:`frame_object`).

        With ``contrast`` each picture becomes ``|x − paper| / max`` first: ``paper`` is the median colour of its
        2-pixel border, so the background is 0 whatever its colour, a dark shape on white and a bright one on black
        give the same input, and the strongest contrast in the picture is 1 (a faint pencil line reads like ink).
        """
        pixels = np.asarray(pixels)
        pixels = pixels if pixels.ndim == 4 else pixels[None]  # (B, S, S, 3)
        if self.frame and not framed:
            pixels = frame_objects(pixels)[0]
        x = torch.tensor(pixels, dtype=torch.float32)
        x = x.permute(0, 3, 1, 2) / 255.0  # (B, 3, S, S)
        if self.contrast:
            rims = (x[..., :2, :], x[..., -2:, :], x[..., 2:-2, :2], x[..., 2:-2, -2:])
            border = torch.cat([r.flatten(2) for r in rims], dim=-1)  # (B, 3, 8S − 16): every border pixel once
            x = (x - border.median(dim=-1).values[..., None, None]).abs()  # (B, 3, S, S)
            x = x / x.amax(dim=(1, 2, 3), keepdim=True).clamp_min(0.1)  # a blank picture's grain is not stretched
            if self.thicken > 1:
                x = _max_filter(x, self.thicken)
        mean, std = torch.tensor(self.mean)[:, None, None], torch.tensor(self.std)[:, None, None]
        return ((x - mean) / std).to(next(self.model.parameters()).device)

    def seen(self, pixels: np.ndarray) -> np.ndarray:
        """``[S, S, 3]`` uint8 as the model sees it before the contrast: its object framed, when ``frame``."""
        return frame_object(pixels)[0] if self.frame else pixels

    @torch.no_grad()
    def classify(self, image: Image.Image | np.ndarray, *, use_positions: bool = True) -> Classification:
        """Centre-crop and resize ``image`` to the model's input size, then classify it."""
        pil = image if isinstance(image, Image.Image) else Image.fromarray(np.asarray(image, dtype=np.uint8))
        pixels = to_array(center_square(pil, self.model.cfg.image_size))
        pixels = self.seen(pixels)  # overlays are drawn on what the model saw
        trace = Trace()
        logits = self.model(self.to_tensor(pixels, framed=True), trace, use_positions=use_positions)
        trace.label(self.model.token_labels())
        probs = torch.softmax(logits[0].float(), dim=-1).cpu().numpy()
        return Classification(labels=self.labels, probs=probs, trace=trace, pixels=pixels)


def load(folder: Path) -> ImageClassifier:
    """The registry loader: a bundle written by ``python -m tx_explorer.train vit``."""
    state, config = read_bundle(folder, RETRAIN)
    meta = json.loads((Path(folder) / "labels.json").read_text())
    model = VisionTransformer(ViTConfig.from_dict(config))
    model.load_state_dict(state)
    stats = tuple(meta["mean"]), tuple(meta["std"])
    steps = meta.get("contrast", False), meta.get("thicken", 1), meta.get("frame", False)  # older bundles: none
    return ImageClassifier(model.eval(), tuple(meta["labels"]), *stats, *steps)
