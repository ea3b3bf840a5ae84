"""The division of labour inside a block, on the norms page: only attention mixes tokens (lecture §5.1, §5.3,
§9.5), and LayerNorm, unlike BatchNorm, needs no statistics from the rest of the batch (§5.2)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tx_explorer.analysis import block_roles
from tx_explorer.families.text import TextModel
from tx_explorer.views import Panel, model_facts, texts
from tx_explorer.viz import mixing

PAGE = "block_roles"
MAX_TOKENS = 32  # a readable row of bars


@dataclass(frozen=True)
class ProbeView:
    bars: Panel  # ‖Δh_i‖ of every token after each stage
    table: list[dict[str, str]]  # the lecture's §9.5 table with the measured verdict beside it
    verdict: str


def whole_word(tm: TextModel, text: str, start: int = 2) -> int:
    """The first token from ``start`` on that is a whole word (it begins one, ``▁``, and the next token begins the
    next word or ends the text): the probe's default, so changing it changes a word, not a piece of one ("at" of
    "cat"). ``start`` when there is none."""
    labels = tm.encode(text, MAX_TOKENS).tokens
    for i in range(start, len(labels)):
        after = labels[i + 1] if i + 1 < len(labels) else "▁"
        if labels[i].startswith("▁") and len(labels[i]) > 1 and (after.startswith("▁") or not after.isalnum()):
            return i
    return min(start, max(0, len(labels) - 1))


def refused(tm: TextModel, *, lang: str = "en") -> str | None:
    """Why the probe cannot read ``tm`` (an encoder opened from a folder: the probe runs the causal mask, so every
    earlier token would stay still by construction, not by the model), else None."""
    return None if tm.kind == "causal" else model_facts.say(PAGE, "encoder_refused", tm, lang)


def _order(tm: TextModel) -> str:
    """Where the model's blocks put their norms: "" (Pre-Norm), "_sandwich" (Gemma 2/3: in front and on each
    sub-layer's output), "_after" (OLMo 2: on the outputs only, none in front) or "_post" (after the residual sum)."""
    position = tm.model.blocks[0].norm_position
    return "" if position == "pre" else f"_{position}"


def intro(tm: TextModel, *, lang: str = "en") -> str:
    """The probe's description for ``tm``'s blocks: the sub-layers' inputs as its norms make them."""
    return model_facts.say(PAGE, f"probe_intro{_order(tm)}", tm, lang)


def probe(tm: TextModel, text: str, token: int, layer: int = 0, *, lang: str = "en") -> ProbeView:
    """Change token ``token`` of ``text`` at the input of block ``layer`` and see who moves after each stage."""
    T, facts = texts(PAGE, lang), model_facts.facts(tm, lang).fields()  # the stages are named by its norm
    enc = tm.encode(text, MAX_TOKENS)  # refuses empty text
    p = block_roles.token_probe(tm.model, list(enc.ids), token=token, layer=layer)
    stage = {s: T(f"stage_{s}", **facts) for s in p.stages}
    stage[p.stages[-1]] = T("stage_last", stage=stage[p.stages[-1]])
    fig = mixing.probe_bars(
        enc.tokens,
        {stage[s]: p.delta[s] for s in p.stages},
        token,
        title=T("probe_title", token=token, layer=layer),
        x_title=T("axis_token"),
        hover=T("hover_moved"),
    )

    def measured(part: str) -> str:
        found = p.part(part)
        if part == "residual" or not found:  # an identity per token; an attention-only block's missing MLP
            return T("measured_residual" if found else "measured_absent")
        before = max(p.others(s, before=True, alone=True) for s in found)
        after = max(p.others(s, before=False, alone=True) for s in found)
        exact = all(p.exact[s] for s in found)
        return T("measured_exact" if exact else "measured_moves", before=f"{before:.3g}", after=f"{after:.3g}")

    table = [
        {
            T("col_part"): T(f"part_{part}"),
            T("col_mixes"): T(f"mixes_{part}"),
            T("col_role"): T(f"role_{part}"),
            T("col_measured"): measured(part),
        }
        for part in ("attention", "mlp", "norm", "residual")
    ]
    # fed alone, every norm and the MLP keep the other tokens; in the block no stage moves an earlier token
    ok = all(p.exact[s] for s in p.part("norm") + p.part("mlp"))
    ok = ok and all(p.others(s, before=True) == 0.0 for s in p.stages)
    # the last token: no later token to move ("later tokens by up to 0", said as a confirmation, read as a failure)
    last = token == len(enc.ids) - 1
    ok = ok and (p.exact["attention"] if last else p.others("attention", before=False) > 0)
    earlier = last and ok  # verdict_last gives the earlier tokens' numbers, the others the later tokens'
    # a one-token text: no earlier token to pick instead, and no other token to be "still"
    worded = "verdict_single" if len(enc.ids) == 1 else "verdict_last" if last else "verdict_ok"
    verdict = T(
        worded if ok else "verdict_bad",
        token=token,
        attention=f"{p.others('attention', before=earlier):.3g}",
        block=f"{p.others(p.stages[-1], before=earlier):.3g}",
        **facts,
    )
    data = np.column_stack([p.delta[s] for s in p.stages])  # (N, stages): one column per stage, in the block's order
    return ProbeView(Panel("block_probe", fig, data), table, verdict)


def batch_norms(*, lang: str = "en") -> tuple[list[dict[str, str]], str]:
    """(a table of how far sequence 0's output moves under each change, the verdict)."""
    T = texts(PAGE, lang)
    found = block_roles.batch_dependence()
    rows = [
        {
            T("col_change"): T(f"change_{r.change}"),
            "LayerNorm": T("same" if r.layernorm_identical else "moved", value=f"{r.layernorm:.3g}"),
            T("col_batchnorm"): T("same" if r.batchnorm_identical else "moved", value=f"{r.batchnorm:.3g}"),
        }
        for r in found
    ]
    ok = all(r.layernorm_identical and not r.batchnorm_identical for r in found)
    return rows, T("bn_verdict" if ok else "bn_verdict_bad")
