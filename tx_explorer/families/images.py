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

from tx_explorer.bundle import read_bundle
from tx_explorer.config import ViTConfig
from tx_explorer.data.images import center_square, to_array
from tx_explorer.modules.vit import VisionTransformer
from tx_explorer.trace import Trace

RETRAIN = "python -m tx_explorer.train vit"


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

    def to_tensor(self, pixels: np.ndarray) -> Tensor:
        """``[S, S, 3]`` or ``[B, S, S, 3]`` uint8 → normalised ``[B, 3, S, S]`` float on the model's device."""
        x = torch.tensor(np.asarray(pixels), dtype=torch.float32)
        x = (x if x.dim() == 4 else x[None]).permute(0, 3, 1, 2) / 255.0  # (B, 3, S, S)
        mean, std = torch.tensor(self.mean)[:, None, None], torch.tensor(self.std)[:, None, None]
        return ((x - mean) / std).to(next(self.model.parameters()).device)

    @torch.no_grad()
    def classify(self, image: Image.Image | np.ndarray, *, use_positions: bool = True) -> Classification:
        """Centre-crop and resize ``image`` to the model's input size, then classify it."""
        pil = image if isinstance(image, Image.Image) else Image.fromarray(np.asarray(image, dtype=np.uint8))
        pixels = to_array(center_square(pil, self.model.cfg.image_size))
        trace = Trace()
        logits = self.model(self.to_tensor(pixels), trace, use_positions=use_positions)
        trace.label(self.model.token_labels())
        probs = torch.softmax(logits[0].float(), dim=-1).cpu().numpy()
        return Classification(labels=self.labels, probs=probs, trace=trace, pixels=pixels)


def load(folder: Path) -> ImageClassifier:
    """The registry loader: a bundle written by ``python -m tx_explorer.train vit``."""
    state, config = read_bundle(folder, RETRAIN)
    meta = json.loads((Path(folder) / "labels.json").read_text())
    model = VisionTransformer(ViTConfig.from_dict(config))
    model.load_state_dict(state)
    return ImageClassifier(model.eval(), tuple(meta["labels"]), tuple(meta["mean"]), tuple(meta["std"]))
