"""Stacks of Transformer blocks: a causal language model (GPT, §6) and a bidirectional encoder (BERT)."""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from tx_explorer import masks
from tx_explorer.config import TransformerConfig
from tx_explorer.edit import Edit
from tx_explorer.errors import InputError, positive_int
from tx_explorer.modules.attention import SoftCap
from tx_explorer.modules.block import AttentionOnlyBlock, TransformerBlock, make_norm
from tx_explorer.modules.cache import KVCache
from tx_explorer.modules.linear import Linear, linear
from tx_explorer.modules.norms import LayerNorm
from tx_explorer.modules.positional import LearnedPositions, SinusoidalPositions
from tx_explorer.trace import Kind, Trace, scoped


class Embeddings(nn.Module):
    """Token lookup (a row of the ``[V, D]`` matrix per token, §6.1) plus positions (and BERT's segments)."""

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.max_len = cfg.max_len
        self.tok_embed = nn.Embedding(cfg.vocab_size, cfg.dim)
        self.scale = math.sqrt(cfg.dim) if cfg.embed_scale else None  # token vectors × √D (Gemma)
        self.pos_embed = {
            "learned": lambda: LearnedPositions(cfg.max_len, cfg.dim),
            "sinusoidal": lambda: SinusoidalPositions(cfg.max_len, cfg.dim, cfg.sinusoidal_scale),
        }.get(cfg.positions, lambda: None)()  # rotary and ALiBi act inside attention; "none" adds nothing
        self.type_embed = nn.Embedding(cfg.type_vocab_size, cfg.dim) if cfg.type_vocab_size else None
        self.norm = LayerNorm(cfg.dim, eps=cfg.norm_eps) if cfg.embed_norm else None
        self.drop = nn.Dropout(cfg.dropout)

    def forward(
        self, idx: Tensor, token_type_ids: Tensor | None = None, offset: int = 0, *, edit: Edit | None = None
    ) -> Tensor:
        """idx ``[B, N]`` (long) at positions ``offset`` … ``offset + N − 1`` → ``[B, N, D]``.

        ``edit`` may replace the token vectors before positions are added (site "tokens": attribution)."""
        n = idx.shape[1]
        if offset + n > self.max_len and isinstance(self.pos_embed, LearnedPositions):
            # Only a learned table has an end; the other schemes run past the training length (extrapolation).
            raise InputError("context_exceeded", count=offset + n, limit=self.max_len)
        x = self.tok_embed(idx)
        if self.scale is not None:
            x = x * self.scale  # (B, N, D): Gemma's √D
        if edit is not None:
            x = edit.apply("tokens", x)  # (B, N, D)
        if self.pos_embed is not None:
            x = x + self.pos_embed(offset + n)[offset:]
        if self.type_embed is not None:
            x = x + self.type_embed(torch.zeros_like(idx) if token_type_ids is None else token_type_ids)
        if self.norm is not None:
            x = self.norm(x)
        return self.drop(x)


class Stack(nn.Module):
    """Embeddings → blocks → final norm; subclasses choose the mask."""

    kind: Kind = "self"
    block: type[TransformerBlock] = TransformerBlock  # a variant of the stack is a subclass naming its block

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.embed = Embeddings(cfg)
        self.blocks = nn.ModuleList(self.block(cfg, layer=i) for i in range(cfg.num_layers))
        self.norm = make_norm(cfg) if cfg.final_norm else nn.Identity()
        self.apply(_init_weights)

    def mask(self, n: int, device: torch.device | None = None) -> Tensor | None:
        """``[n, n]``: the mask this stack's forward applies to one unpadded sequence of ``n`` tokens (None: every
        key visible). Whoever runs the blocks by hand (:meth:`hidden`) asks here rather than building its own."""
        pos = torch.arange(n, device=device)
        return self.mask_between(pos, pos)

    def mask_between(self, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """``[Nq, Nk]`` for queries and keys at these absolute positions; each kind of stack says which it hides."""
        raise NotImplementedError

    def hidden(
        self,
        x: Tensor,
        mask: Tensor | None,
        trace: Trace | None,
        *,
        pos: Tensor | None = None,
        k_pos: Tensor | None = None,
        cache: KVCache | None = None,
        edit: Edit | None = None,
        start: int = 0,
    ) -> Tensor:
        """Run the blocks over embedded ``x [B, N, D]`` (queries at ``pos``, keys at ``k_pos``, default 0…N−1).

        ``trace`` and ``edit`` reach each block scoped to its layer. ``start``: ``x`` is the input of that block
        and the earlier ones are skipped (head science reruns a model from the layer it changes)."""
        for i, block in enumerate(self.blocks[start:], start=start):
            x = block(
                x,
                mask,
                trace=scoped(trace, f"blocks.{i}", layer=i),
                kind=self.kind,
                pos=pos,
                k_pos=k_pos,
                cache=scoped(cache, i),
                edit=scoped(edit, i),
            )
        return self.norm(x)


class CausalLM(Stack):
    """GPT-style decoder-only language model: p(x_t | x_<t) under a causal mask (§6.2)."""

    kind = "causal"

    def __init__(self, cfg: TransformerConfig) -> None:
        super().__init__(cfg)
        self.head = Linear(cfg.dim, cfg.vocab_size, bias=False)
        if cfg.tie_embeddings:
            self.head.weight = self.embed.tok_embed.weight
        self.logit_cap = None if cfg.final_softcap is None else SoftCap(cfg.final_softcap)  # Gemma 2's c·tanh(z / c)

    def mask_between(self, q_pos: Tensor, k_pos: Tensor) -> Tensor:
        """Keys not in the future (and, with a sliding window on every layer, less than a window back: Mistral; a
        window on some layers only is their attention's own, :class:`~.attention.SlidingWindowAttention`)."""
        return masks.causal_between(q_pos, k_pos, self.cfg.uniform_window)  # (Nq, Nk)

    def forward(
        self, idx: Tensor, trace: Trace | None = None, *, cache: KVCache | None = None, edit: Edit | None = None
    ) -> Tensor:
        """idx ``[B, N]`` → next-token logits ``[B, N, V]``; ``edit`` changes heads and residuals (see ``Edit``).

        With a :class:`~tx_explorer.modules.cache.KVCache` the ids are the *new* tokens: every layer appends
        their keys and values to the cache and attends over all it holds; the logits are the new positions'.
        """
        return self.logits(self.states(idx, trace, cache=cache, edit=edit))  # (B, N, V)

    def states(
        self, idx: Tensor, trace: Trace | None = None, *, cache: KVCache | None = None, edit: Edit | None = None
    ) -> Tensor:
        """:meth:`forward` before the LM head: the final norm's output ``[B, N, D]`` (analyses that never read the V
        logits per token need not pay for them)."""
        n = idx.shape[1]
        if cache is None:
            pos = torch.arange(n, device=idx.device)
            q_pos, k_pos, offset = pos, pos, 0
        else:
            offset = cache.seen
            q_pos, k_pos = cache.begin(n, self.cfg.uniform_window, idx.device)
        mask = self.mask_between(q_pos, k_pos)  # (Nq, Nk)
        x = self.embed(idx, offset=offset, edit=edit)
        x = self.hidden(x, mask, trace, pos=q_pos, k_pos=k_pos, cache=cache, edit=edit)
        if cache is not None:
            cache.commit(q_pos)
        return x  # (B, N, D)

    def logits(self, hidden: Tensor, tokens: Tensor | None = None) -> Tensor:
        """The stack's output ``[..., D]`` (after the final norm) → next-token logits ``[..., V]``: the LM head, then
        Gemma 2's final soft cap. Analyses that read logits off a hidden state call this, not ``head``, so that their
        probabilities are the model's own. ``tokens [K]``: only those logits ``[..., K]`` (the head's rows for them;
        the cap acts on each logit alone), not the other V − K."""
        if tokens is None:
            logits = self.head(hidden)
        else:
            bias = None if self.head.bias is None else self.head.bias[tokens]
            logits = linear(hidden, self.head.weight[tokens], bias)  # (..., K)
        return logits if self.logit_cap is None else self.logit_cap(logits)

    @staticmethod
    def loss(logits: Tensor, targets: Tensor) -> Tensor:
        """Mean cross-entropy of ``logits [B, N, V]`` against ``targets [B, N]``."""
        return F.cross_entropy(logits.flatten(0, 1), targets.flatten())

    @torch.no_grad()
    def generate(
        self,
        idx: Tensor,
        max_new_tokens: int,
        *,
        temperature: float = 1.0,
        top_k: int | None = None,
        greedy: bool = False,
        seed: int | None = None,
    ) -> Tensor:
        """Append ``max_new_tokens`` sampled tokens to ``idx [B, N]`` (§6.3), reproducibly with ``seed``."""
        gen = None if seed is None else torch.Generator(device=idx.device).manual_seed(seed)  # None: global RNG
        for _ in range(max_new_tokens):
            logits = self(idx[:, -self.cfg.max_len :])[:, -1, :]
            idx = torch.cat(
                [idx, next_token(logits, temperature=temperature, top_k=top_k, greedy=greedy, generator=gen)], dim=1
            )
        return idx


def next_token(
    logits: Tensor,
    *,
    temperature: float = 1.0,
    top_k: int | None = None,
    greedy: bool = False,
    generator: torch.Generator | None = None,
) -> Tensor:
    """Pick one token per row of ``logits [B, V]`` → ``[B, 1]``.

    The argmax when ``greedy``, else a sample at ``temperature`` from the ``top_k`` most likely tokens.
    """
    if greedy:
        return logits.argmax(dim=-1, keepdim=True)
    if temperature <= 0:
        raise InputError("temperature_positive", value=temperature)
    if top_k is not None:
        positive_int("top_k", top_k)
    logits = logits / temperature
    if top_k is not None:
        kth = torch.topk(logits, min(top_k, logits.shape[-1])).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    return torch.multinomial(torch.softmax(logits, dim=-1), 1, generator=generator)


class AttentionOnlyLM(CausalLM):
    """A causal LM of attention-only blocks (no MLP): the two-layer model in which induction heads were first
    studied (Elhage et al. 2021; Olsson et al. 2022)."""

    block = AttentionOnlyBlock


class Encoder(Stack):
    """BERT-style bidirectional encoder: every token attends to every (non-pad) token."""

    def mask_between(self, q_pos: Tensor, k_pos: Tensor) -> Tensor | None:
        """Nothing hidden, or with a sliding window a two-sided band |i − j| < window (Longformer)."""
        if self.cfg.sliding_window is None:
            return None
        return (q_pos[:, None] - k_pos[None, :]).abs() < self.cfg.sliding_window  # (Nq, Nk)

    def forward(
        self,
        idx: Tensor,
        attention_mask: Tensor | None = None,
        token_type_ids: Tensor | None = None,
        trace: Trace | None = None,
        *,
        edit: Edit | None = None,
    ) -> Tensor:
        """idx ``[B, N]``, attention_mask ``[B, N]`` (1 = real token) → hidden states ``[B, N, D]``."""
        mask = self.mask(idx.shape[1], idx.device)  # (N, N) or None
        if attention_mask is not None:
            padding = attention_mask.bool()[:, None, None, :]  # (B, 1, 1, N): hide padding keys
            mask = padding if mask is None else padding & mask
        return self.hidden(self.embed(idx, token_type_ids, edit=edit), mask, trace, edit=edit)


def _init_weights(module: nn.Module) -> None:
    """GPT-2 initialisation: N(0, 0.02) weights, zero biases."""
    if getattr(module, "weight", None) is not None and module.weight.is_meta:
        return  # shapes only (parameter counting): nothing to fill, and meta-device init is slow
    if isinstance(module, (nn.Linear, nn.Embedding)):
        nn.init.normal_(module.weight, mean=0.0, std=0.02)
    if isinstance(module, nn.Linear) and module.bias is not None:
        nn.init.zeros_(module.bias)
