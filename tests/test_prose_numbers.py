"""Numbers in prose are computed or read from a record, never typed into a locale file.

A measured quantity (a percentage, a ratio such as 0.91×, a size in MB/KiB, a loss in nats, a count of minutes)
typed into ``locales/*.json`` goes stale the day its model is retrained or its benchmark rerun. The scan finds
such numbers outside placeholders, code and LaTeX; the few left are listed in :data:`TYPED` with the reason
they are not measurements (the lecture's notation, a published figure quoted as published, a fixed threshold).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from tx_explorer import locales

LOCALES = Path(locales.__file__).parent
UNIT = r"(?:%|％|×(?!\s?[\d(])|MB|GB|KB|MiB|GiB|KiB|TB|ms|µs|min\b|minutes|seconds|nats?\b|[MB]\b|倍|分钟|秒)"
MEASURED = re.compile(r"(?<![\w§.{-])\d+(?:[.,]\d+)*\s?" + UNIT)
UNREAD = re.compile(r"\{[^{}]*\}|`[^`]*`|\$[^$]*\$")  # placeholders, code, LaTeX

# (file, key) → why the number is typed. Each entry names what it is; a measured number does not belong here.
TYPED = {
    ("moe", "x_flops"): "training FLOPs = 3 × forward: the rule of thumb the axis uses, not a measurement",
    ("norms", "claim_rms_matches_ln"): "the claim's threshold (analysis.variant_claims.RMS_TOLERANCE), checked below",
    ("norms", "claim_swiglu_same_params"): "the claim's threshold (1 % in families.variants)",
    ("position_lab", "intro"): "the evaluation range (up to 4× the training context) is a setting of the run",
    # published parameter counts quoted as published; "our count is 214.2M" (1558M, 174.6B) is typed: the sizes
    # page's to format from analysis.params (outside this pass)
    ("model_sizes", "table_notes"): "published counts beside our counts (ours still typed: see the comment)",
    ("common", "model_gemma3-270m"): "the model's published name, Gemma 3 270M, not a count of ours",
    ("model_sizes", "fit_gemma3"): "the model's published name, Gemma 3 270M, not a count of ours",
    ("vision_transformer", "pooled_token"): "shape notation N×D → 1×D",
    ("vision_transformer", "pooled_avg"): "shape notation N×D → 1×D",
}


def typed_numbers() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(LOCALES.glob("*.json")):
        for key, entry in json.loads(path.read_text(encoding="utf-8")).items():
            for lang in ("en", "zh"):
                text = UNREAD.sub(" ", entry.get(lang, ""))
                hits = [m.group(0) for m in MEASURED.finditer(text)]
                if hits:
                    found.setdefault((path.stem, key), []).extend(hits)
    return found


def test_no_measured_number_is_typed_into_a_locale_file():
    found = typed_numbers()
    stray = {k: v for k, v in found.items() if k not in TYPED}
    assert not stray, f"numbers typed into locale files (format them from the computation or the record): {stray}"
    assert set(TYPED) <= set(found), f"entries with no typed number left (remove them): {set(TYPED) - set(found)}"


def test_the_scan_finds_what_it_is_for():
    """The scan itself: a measured number is caught, placeholders, code and LaTeX are not read."""
    hits = lambda s: MEASURED.findall(UNREAD.sub(" ", s))  # noqa: E731
    assert hits("held-out accuracy 64.5% on 1200 images") == ["64.5%"]
    assert hits("0.91× the naive speed, 6.3 MB of prose, 15.5 min, 4.07 nats") == [
        "0.91×",
        "6.3 MB",
        "15.5 min",
        "4.07 nats",
    ]
    assert hits("{acc}% and `64.5%` and $2.5\\times$ and §4.1 and 16×16 patches") == []


def test_typed_thresholds_are_the_code_s():
    from tx_explorer.analysis import variant_claims as variants

    rms = locales.table("norms")["claim_rms_matches_ln"]
    assert f"{variants.RMS_TOLERANCE:g} nats" in rms["en"] and f"{variants.RMS_TOLERANCE:g} nats" in rms["zh"]


def test_masks_page_names_sdpa_s_convention_and_multihead_attention_s_opposite():
    """The masks intro says True = may attend is SDPA's convention and nn.MultiheadAttention's is the opposite."""
    torch.manual_seed(0)
    q = k = v = torch.randn(1, 1, 3, 4)
    allow = torch.tensor([[True, False, True]] * 3)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=allow)
    manual = torch.softmax((q @ k.transpose(-1, -2) / 2).masked_fill(~allow, float("-inf")), -1) @ v
    torch.testing.assert_close(sdpa, manual)  # True kept the key
    mha = torch.nn.MultiheadAttention(4, 1, batch_first=True)
    _, w = mha(q[0], k[0], v[0], attn_mask=allow)
    assert bool((w[0][:, 1] > 0).all()) and bool((w[0][:, 0] == 0).all())  # True hid the key
    intro = locales.table("masks")["intro"]
    for lang in ("en", "zh"):
        assert "scaled_dot_product_attention" in intro[lang] and "nn.MultiheadAttention" in intro[lang]
