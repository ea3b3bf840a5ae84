"""Does a ViT look at the object? Attention mass on the object's patches versus the object's area share.

The shape images have a known mask, so each patch has a coverage c_p ∈ [0, 1] (fraction of its pixels on the
object). For an attention distribution a over the N patches (the [CLS] query's row with the [CLS] key left
out and the rest re-normalised), the *object share* is Σ_p a_p·c_p. Uniform attention would give the *area
share* (1/N)·Σ_p c_p; the ratio of the two is the lift (1 = no preference for the object).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import Tensor
from torch.nn import functional as F

from tx_explorer.analysis.rollout import rollout
from tx_explorer.trace import Trace


def patch_coverage(masks: np.ndarray | Tensor, patch_size: int) -> Tensor:
    """Fraction of each patch on the object: ``[B, S, S]`` bool → ``[B, N]`` (row-major patches)."""
    m = torch.as_tensor(np.asarray(masks), dtype=torch.float32)[:, None]  # (B, 1, S, S)
    return F.avg_pool2d(m, patch_size).flatten(1)  # (B, N)


def cls_to_patches(weights: Tensor, num_prefix: int = 1) -> Tensor:
    """The [CLS] query's weights over the patch keys, re-normalised: ``[..., T, T]`` → ``[..., N]``."""
    row = weights[..., 0, num_prefix:]
    return row / row.sum(dim=-1, keepdim=True).clamp_min(1e-12)


def object_share(attention: Tensor, coverage: Tensor) -> Tensor:
    """Σ_p a_p·c_p for attention ``[B, N]`` (or ``[B, H, N]``) and coverage ``[B, N]`` → ``[B]`` (or ``[B, H]``)."""
    cov = coverage if attention.dim() == coverage.dim() else coverage[:, None]
    return (attention * cov).sum(dim=-1)


@torch.no_grad()
def object_attention(classifier: Any, images: np.ndarray, masks: np.ndarray, *, batch: int = 200) -> dict[str, float]:
    """Mean object share of the last layer's [CLS] attention (head mean, and the best head) and of rollout.

    Args:
        classifier: an :class:`~tx_explorer.families.images.ImageClassifier` whose model has a class token.
        images: ``[B, S, S, 3]`` uint8 at the model's input size; masks ``[B, S, S]`` bool.
    """
    model = classifier.model
    if model.num_prefix != 1:
        raise ValueError("object attention is measured from the [CLS] token; this model has none")
    last, heads, roll, area, correct = [], [], [], [], []
    for i in range(0, len(images), batch):
        trace = Trace()
        logits = model(classifier.to_tensor(images[i : i + batch]), trace)
        maps = trace.stack()  # (L, B, H, T, T)
        cov = patch_coverage(masks[i : i + batch], model.cfg.patch_size)
        last.append(object_share(cls_to_patches(maps[-1].mean(dim=1)), cov))
        heads.append(object_share(cls_to_patches(maps[-1]), cov))
        roll.append(object_share(cls_to_patches(rollout(maps)), cov))
        area.append(cov.mean(dim=-1))
        correct.append(logits.argmax(-1).cpu())
    last_t, heads_t, roll_t, area_t = (torch.cat(t) for t in (last, heads, roll, area))
    best = int(heads_t.mean(0).argmax())
    seen = area_t > 0  # a lift needs an object: one framed out of every patch (an empty mask) has no share to beat
    return {
        "images": len(images),
        "area_share": float(area_t.mean()),
        "cls_last_layer_share": float(last_t.mean()),
        "cls_last_layer_lift": float((last_t[seen] / area_t[seen]).mean()),
        "cls_last_layer_best_head": best,
        "cls_last_layer_best_head_share": float(heads_t[:, best].mean()),
        "rollout_share": float(roll_t.mean()),
        "rollout_lift": float((roll_t[seen] / area_t[seen]).mean()),
        "images_where_cls_beats_area": float((last_t > area_t).float().mean()),
    }
