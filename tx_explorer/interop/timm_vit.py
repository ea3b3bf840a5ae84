"""Copy a timm ``VisionTransformer`` into our :class:`~tx_explorer.modules.vit.VisionTransformer`.

Our parameter names were chosen to be timm's, so the copy is a renaming of one key (timm keeps the final norm
as ``fc_norm`` when it pools by averaging) plus checks that refuse the variants our model does not implement
(register tokens, layer scale, QK-norm, ``no_embed_class``, pre-norm, other pools, other norms or activations).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from torch import nn

from tx_explorer.bundle import BundleError
from tx_explorer.config import ViTConfig
from tx_explorer.families.images import ImageClassifier
from tx_explorer.interop.hf_cache import CachedCheckpoint
from tx_explorer.modules.vit import VisionTransformer


def _one(value: Any) -> int:
    """timm stores sizes as ints or (h, w) pairs; we support square ones."""
    if isinstance(value, (tuple, list)):
        if len(set(value)) != 1:
            raise ValueError(f"only square images and patches are supported, got {tuple(value)}")
        return int(value[0])
    return int(value)


def config_from_timm(timm_model: nn.Module) -> ViTConfig:
    """Read a :class:`ViTConfig` off a timm ``VisionTransformer`` (raises ``ValueError`` for unsupported variants)."""
    m = timm_model
    unsupported = {
        "register tokens": getattr(m, "num_reg_tokens", 0) > 0,
        "no_embed_class": getattr(m, "no_embed_class", False),
        "pre-norm before the blocks": not isinstance(m.norm_pre, nn.Identity),
        "dynamic image size": getattr(m, "dynamic_img_size", False),
        "attention pooling": getattr(m, "attn_pool", None) is not None,
        "pooling other than 'token' or 'avg'": m.global_pool not in ("token", "avg"),
        "pooling that includes the class token": getattr(m, "pool_include_prefix", False),
        "no final norm": isinstance(m.norm, nn.Identity) and isinstance(m.fc_norm, nn.Identity),
        "a norm before the patch projection": not isinstance(
            getattr(m.patch_embed, "norm", nn.Identity()), nn.Identity
        ),
        "a classifier-less model (num_classes=0)": isinstance(m.head, nn.Identity),
    }
    block = m.blocks[0]
    unsupported |= {
        "layer scale (init_values)": not isinstance(block.ls1, nn.Identity),
        "QK-norm": not isinstance(block.attn.q_norm, nn.Identity),
        "attention output norm": not isinstance(getattr(block.attn, "norm", nn.Identity()), nn.Identity),
        "MLP hidden norm": not isinstance(getattr(block.mlp, "norm", nn.Identity()), nn.Identity),
        "a norm other than LayerNorm": not isinstance(block.norm1, nn.LayerNorm),
        "an activation other than exact GELU": not (
            isinstance(block.mlp.act, nn.GELU) and block.mlp.act.approximate == "none"
        ),
        "an attention output or MLP without bias": any(
            layer.bias is None for layer in (block.attn.proj, block.mlp.fc1, block.mlp.fc2)
        ),
    }
    found = [name for name, present in unsupported.items() if present]
    if found:
        raise ValueError(f"this timm model uses {', '.join(found)}, which our VisionTransformer does not implement")
    if m.pos_embed is None:
        positions = "none"
    elif m.pos_embed.shape[1] == m.patch_embed.num_patches + m.num_prefix_tokens:
        positions = "learned"
    else:
        raise ValueError(f"unexpected pos_embed shape {tuple(m.pos_embed.shape)}")
    return ViTConfig(
        image_size=_one(m.patch_embed.img_size),
        patch_size=_one(m.patch_embed.patch_size),
        in_chans=m.patch_embed.proj.in_channels,
        num_classes=m.head.out_features,
        dim=m.embed_dim,
        num_layers=len(m.blocks),
        num_heads=block.attn.num_heads,
        mlp_ratio=block.mlp.fc1.out_features / m.embed_dim,
        class_token=m.cls_token is not None,
        pool=m.global_pool,
        positions=positions,
        norm_eps=block.norm1.eps,
        qkv_bias=block.attn.qkv.bias is not None,  # timm's qkv_bias=False (the output projection keeps one)
    )


def vit_from_timm(timm_model: nn.Module) -> VisionTransformer:
    """Build our ViT with the same configuration and weights as ``timm_model`` (in eval mode).

    Example: ``vit_from_timm(timm.models.vision_transformer.VisionTransformer(img_size=32, patch_size=4, ...))``
    gives logits equal to timm's within float rounding.
    """
    cfg = config_from_timm(timm_model)
    ours = VisionTransformer(cfg)
    # Only one of timm's norm / fc_norm holds weights (the other is Identity); ours is always "norm".
    state = {
        ("norm" + k[len("fc_norm") :] if k.startswith("fc_norm.") else k): v for k, v in timm_model.state_dict().items()
    }
    missing, unexpected = ours.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"timm weights do not fit: missing {missing}, unexpected {unexpected}")
    return ours.eval()


# ----------------------------------------------------------------------------------------------------------
# A pretrained timm ViT, offered only when it is already in the local Hugging Face cache (never downloaded).

TIMM_VIT = CachedCheckpoint(
    "A pretrained timm ViT",
    repo_ids=(  # plain ViTs our model implements (class token, learned positions, LayerNorm, GELU)
        "timm/vit_tiny_patch16_224.augreg_in21k_ft_in1k",
        "timm/vit_small_patch16_224.augreg_in21k_ft_in1k",
        "timm/vit_base_patch16_224.augreg2_in21k_ft_in1k",
        "timm/vit_base_patch16_224.augreg_in21k_ft_in1k",
    ),
    files=("config.json", "model.safetensors"),
)
DOWNLOAD = TIMM_VIT.download


def cached_checkpoint(cache_dir: str | Path | None = None) -> Path | None:
    """The snapshot folder of the first cached one of :data:`TIMM_VIT`'s repositories, or None (reads only)."""
    return TIMM_VIT.folder(cache_dir)


def timm_status() -> str:
    """One sentence for the app: which timm checkpoint was found, or why none is offered."""
    return TIMM_VIT.status(cached_checkpoint())


def locate() -> Path:
    """Like :func:`cached_checkpoint`, but raises ``BundleError`` saying how to get a checkpoint."""
    folder = cached_checkpoint()
    if folder is None:
        raise BundleError(timm_status())
    return folder


def load(folder: Path) -> ImageClassifier:
    """Registry loader: build the timm architecture named in ``config.json``, load the cached safetensors, convert."""
    import timm
    from safetensors.torch import load_file
    from timm.data import ImageNetInfo

    meta = json.loads((Path(folder) / "config.json").read_text())
    timm_model = timm.create_model(  # timm's own hub loader passes "model_args" the same way
        meta["architecture"], pretrained=False, num_classes=meta.get("num_classes", 1000), **meta.get("model_args", {})
    )
    timm_model.load_state_dict(load_file(str(Path(folder) / "model.safetensors")))
    ours = vit_from_timm(timm_model)
    pretrained = meta.get("pretrained_cfg", {})
    names = meta.get("label_names")
    if names is None and ours.cfg.num_classes == 1000:
        info = ImageNetInfo()
        names = [info.index_to_description(i) for i in range(1000)]
    labels = tuple(names or (f"class {i}" for i in range(ours.cfg.num_classes)))
    return ImageClassifier(
        ours, labels, tuple(pretrained.get("mean", (0.5, 0.5, 0.5))), tuple(pretrained.get("std", (0.5, 0.5, 0.5)))
    )
