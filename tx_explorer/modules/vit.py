"""Vision Transformer (Dosovitskiy et al. 2020; lecture §7): an image becomes a sequence of patch tokens.

A 224×224×3 image cut into 16×16 patches gives 14·14 = 196 tokens of 16·16·3 = 768 values each; a linear map
projects each to D. That map is a ``Conv2d(3, D, kernel_size=16, stride=16)``. Positions are added, attention
is unmasked, and either the [CLS] token's output or the mean of the patch outputs is classified.

Parameter names follow timm's ``VisionTransformer`` (``patch_embed.proj``, ``cls_token``, ``pos_embed``,
``blocks.i.{norm1,attn.qkv,attn.proj,norm2,mlp.fc1,mlp.fc2}``, ``norm``, ``head``), so
:func:`tx_explorer.interop.timm_vit.vit_from_timm` is a near-identity copy.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from tx_explorer.config import ViTConfig
from tx_explorer.modules.block import TransformerBlock, make_norm
from tx_explorer.modules.positional import sinusoidal_table
from tx_explorer.trace import Trace, scoped


def patchify(images: Tensor, patch_size: int) -> Tensor:
    """Cut ``[B, C, H, W]`` into non-overlapping patches, each flattened in (channel, row, column) order.

    Returns ``[B, N, C·P·P]`` with patches in row-major order (N = H/P · W/P) — the order of
    ``Conv2d.weight.reshape(D, -1)``, so a Linear layer with that weight is the patch embedding.
    """
    b, c, h, w = images.shape
    if h % patch_size or w % patch_size:
        raise ValueError(f"image of {h}×{w} pixels cannot be cut into {patch_size}×{patch_size} patches")
    gh, gw = h // patch_size, w // patch_size
    x = images.reshape(b, c, gh, patch_size, gw, patch_size)  # (B, C, gh, P, gw, P)
    x = x.permute(0, 2, 4, 1, 3, 5)  # (B, gh, gw, C, P, P)
    return x.reshape(b, gh * gw, c * patch_size * patch_size)  # (B, N, C·P·P)


def unpatchify(patches: Tensor, patch_size: int, grid: tuple[int, int]) -> Tensor:
    """Inverse of :func:`patchify`: ``[B, N, C·P·P]`` → ``[B, C, H, W]``."""
    b, _, cpp = patches.shape
    gh, gw = grid
    c = cpp // (patch_size * patch_size)
    x = patches.reshape(b, gh, gw, c, patch_size, patch_size)  # (B, gh, gw, C, P, P)
    return x.permute(0, 3, 1, 4, 2, 5).reshape(b, c, gh * patch_size, gw * patch_size)


def shuffle_patches(images: Tensor, patch_size: int, perm: Tensor) -> Tensor:
    """Move patch ``perm[i]`` to grid position ``i`` (a jigsaw of the image). ``[B, C, H, W]`` → same shape."""
    h, w = images.shape[-2:]
    return unpatchify(patchify(images, patch_size)[:, perm], patch_size, (h // patch_size, w // patch_size))


def sincos_2d_table(grid: int, dim: int) -> Tensor:
    """Fixed 2-D positions (MAE; Beyer et al. 2022): half the channels encode the row, half the column.

    Each half is the 1-D table of Vaswani et al. §3.5 at dimension D/2. Returns ``[grid·grid, dim]``.
    """
    if dim % 4:
        raise ValueError(f"2-D sin-cos positions need dim divisible by 4, got {dim}")
    one_d = sinusoidal_table(grid, dim // 2)  # (grid, D/2)
    rows = one_d[:, None, :].expand(grid, grid, dim // 2)
    cols = one_d[None, :, :].expand(grid, grid, dim // 2)
    return torch.cat([rows, cols], dim=-1).reshape(grid * grid, dim)  # (N, D)


class PatchEmbed(nn.Module):
    """Patches → tokens: ``Conv2d(C, D, kernel_size=P, stride=P)`` = a Linear layer on each flattened patch."""

    def __init__(self, *, image_size: int, patch_size: int, in_chans: int, dim: int) -> None:
        super().__init__()
        self.image_size, self.patch_size = image_size, patch_size
        self.proj = nn.Conv2d(in_chans, dim, kernel_size=patch_size, stride=patch_size)

    def forward(self, images: Tensor) -> Tensor:
        """``[B, C, H, W]`` → ``[B, N, D]`` (patches in row-major order)."""
        if images.dim() != 4 or images.shape[-2:] != (self.image_size, self.image_size):
            raise ValueError(
                f"expected images [B, C, {self.image_size}, {self.image_size}], got shape {tuple(images.shape)}"
            )
        return self.proj(images).flatten(2).transpose(1, 2)  # (B, D, gh, gw) → (B, N, D)

    def as_linear(self) -> nn.Linear:
        """The same map as a ``Linear(C·P·P, D)`` acting on :func:`patchify` output."""
        d = self.proj.out_channels
        # A plain Linear: its init costs 6 ms at the lecture's 768 × 768; nn.utils.skip_init would save that but
        # imports torch.fx's symbolic shapes on first use (0.7 s of a visitor's first open).
        linear = nn.Linear(self.proj.weight[0].numel(), d)
        with torch.no_grad():
            linear.weight.copy_(self.proj.weight.reshape(d, -1))  # (D, C·P·P)
            linear.bias.copy_(self.proj.bias)
        return linear


class VisionTransformer(nn.Module):
    """Patch embedding → [CLS] + positions → pre-norm blocks → norm → pool → linear head."""

    def __init__(self, cfg: ViTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        blocks = cfg.blocks()
        self.patch_embed = PatchEmbed(
            image_size=cfg.image_size, patch_size=cfg.patch_size, in_chans=cfg.in_chans, dim=cfg.dim
        )
        self.cls_token = nn.Parameter(torch.randn(1, 1, cfg.dim) * 0.02) if cfg.class_token else None
        if cfg.positions == "learned":
            self.pos_embed = nn.Parameter(torch.randn(1, cfg.num_tokens, cfg.dim) * 0.02)  # row 0 is [CLS]'s
        elif cfg.positions == "sincos2d":
            table = sincos_2d_table(cfg.grid, cfg.dim)
            if cfg.class_token:  # [CLS] has no place in the grid: a zero row, as in MAE
                table = torch.cat([torch.zeros(1, cfg.dim), table])
            self.register_buffer("pos_embed", table[None], persistent=False)
        else:
            self.pos_embed = None
        self.drop = nn.Dropout(cfg.dropout)
        self.blocks = nn.ModuleList(TransformerBlock(blocks) for _ in range(cfg.num_layers))
        self.norm = make_norm(blocks)  # before [CLS] pooling, after mean pooling (timm's norm / fc_norm)
        self.head = nn.Linear(cfg.dim, cfg.num_classes)
        self.apply(_init_weights)

    @property
    def num_prefix(self) -> int:
        return int(self.cls_token is not None)

    def embed(self, images: Tensor, *, use_positions: bool = True) -> Tensor:
        """``[B, C, H, W]`` → input tokens ``[B, T, D]`` (T = [CLS] + N patches)."""
        x = self.patch_embed(images)  # (B, N, D)
        if self.cls_token is not None:
            x = torch.cat([self.cls_token.expand(x.shape[0], -1, -1), x], dim=1)  # (B, 1+N, D)
        if use_positions and self.pos_embed is not None:
            x = x + self.pos_embed
        return self.drop(x)

    def features(
        self, images: Tensor, trace: Trace | None = None, *, use_positions: bool = True, mask: Tensor | None = None
    ) -> Tensor:
        """Block outputs ``[B, T, D]`` (before the final norm); ``mask [T, T]`` (True = may attend) is imposed on
        every layer: a ViT has none, and the page imposes a causal one to show what it costs (§7.2)."""
        x = self.embed(images, use_positions=use_positions)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, trace=scoped(trace, f"blocks.{i}", layer=i))
        return x

    def pool(self, x: Tensor) -> Tensor:
        """``[B, T, D]`` → ``[B, D]``: the normed [CLS] output, or the normed mean of the patch outputs."""
        if self.cfg.pool == "token":
            return self.norm(x[:, 0])
        return self.norm(x[:, self.num_prefix :].mean(dim=1))

    def forward(
        self, images: Tensor, trace: Trace | None = None, *, use_positions: bool = True, mask: Tensor | None = None
    ) -> Tensor:
        """``images [B, C, H, W]`` → logits ``[B, num_classes]``; ``trace`` gets ``[B, H, T, T]`` per layer.

        ``use_positions=False`` skips the position embeddings: the encoder then cannot tell where a patch was.
        ``mask``: see :meth:`features`.
        """
        return self.head(self.pool(self.features(images, trace, use_positions=use_positions, mask=mask)))

    def token_labels(self) -> list[str]:
        """``["CLS", "r0c0", "r0c1", …]`` — one label per token, row-major patches."""
        g = self.cfg.grid
        return ["CLS"] * self.num_prefix + [f"r{i // g}c{i % g}" for i in range(g * g)]


def _init_weights(module: nn.Module) -> None:
    """timm-like: truncated N(0, 0.02) for Linear and Conv weights, zero biases."""
    if isinstance(module, (nn.Linear, nn.Conv2d)):
        nn.init.trunc_normal_(module.weight, std=0.02)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
