"""Data the project generates or finds on any machine: corpora, tokenizers, translation pairs, images."""

from __future__ import annotations

import json
from pathlib import Path

# What bfloat16 weights cost against float32 on a real model: measured by `python -m benchmarks bf16`, which writes
# this record beside its BENCHMARKS.md section, so that the model card quotes the last measurement, not typed prose.
BF16_COST = Path(__file__).with_name("bf16_cost.json")


def bf16_cost() -> dict:
    """The record :data:`BF16_COST`: model, tokens, ``logprob_top1`` (max |Δ log p| of float32's top token), ``map``
    (max |Δ attention weight|) and ``agree`` (share of positions with the same top token)."""
    return json.loads(BF16_COST.read_text(encoding="utf-8"))
