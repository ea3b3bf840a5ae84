"""Learned attention sinks on the Masks, Multi-head and Operator pages (issue 41): a model that learned a sink logit
per head (a gpt-oss folder; none is bundled, so a random tiny one saved with ``save_pretrained``) shows a sink column
in each mask map, and its rows' sums are measured and said (mean and lowest, the sink's share 1 − Σ) per layer and
head, equal to the sink's softmax share computed from the scores; a model without sinks shows none of it."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_clean, open_page

from tests.checkpoints import write_checkpoint
from tests.test_architectures import TINY, saved
from tx_explorer import ui
from tx_explorer.analysis import atlas
from tx_explorer.analysis import mask_gallery as mg
from tx_explorer.interop.checkpoint import load_checkpoint
from tx_explorer.modules.attention import AttentionSinks
from tx_explorer.trace import Trace
from tx_explorer.views import masks as view
from tx_explorer.views import multihead, operator

pytestmark = pytest.mark.usefixtures("one_thread")
N = 24  # past the tiny gpt-oss's window of 5 on layer 0


@pytest.fixture(scope="module")
def folders(tmp_path_factory, one_thread):
    roots = tmp_path_factory.mktemp("sinks")
    gpt_oss, _ = saved(roots / "gpt-oss-tiny", "gpt_oss")
    llama = roots / "llama-tiny"
    write_checkpoint(llama, "llama")
    return {"roots": roots, "gpt_oss": gpt_oss, "llama": llama}


def sink_shares(tm, ids: list[int], monkeypatch) -> torch.Tensor:
    """Independently of the traced maps: each row's sink share e^{s_h} / (e^{s_h} + Σ_k e^{E_ik}) in float64, from
    the masked scores each layer hands its sinks' softmax, ``[L, H, N]``."""
    scores = []
    softmax = AttentionSinks.softmax

    def recorded(self, masked):
        scores.append((masked.double(), self.logits.double()))
        return softmax(self, masked)

    monkeypatch.setattr(AttentionSinks, "softmax", recorded)
    with torch.no_grad():
        tm.model(torch.tensor([ids]))
    monkeypatch.undo()
    shares = []
    for masked, logits in scores:  # (1, H, N, N), (H,)
        s = logits.view(-1, 1)  # (H, 1)
        shares.append(torch.exp(s - torch.logaddexp(s, torch.logsumexp(masked[0], dim=-1))))  # (H, N)
    return torch.stack(shares)


def assert_rows_are_one_minus_the_share(rows, shares: torch.Tensor) -> None:
    torch.testing.assert_close(torch.from_numpy(rows.mean).double(), 1 - shares.mean(-1), atol=1e-6, rtol=0)
    torch.testing.assert_close(torch.from_numpy(rows.min).double(), 1 - shares.amax(-1), atol=1e-6, rtol=0)
    assert (rows.mean < 1 - 1e-3).all()  # the sinks take a visible share of every head's rows


def key_labels(fig) -> list[str]:
    """The keys a heatmap names: in each cell's hover where the map is small, else on its x axis."""
    trace = fig.data[0]
    return list(trace.x) if trace.customdata is None else [str(c) for c in trace.customdata[0, :, 1]]


def test_rows_sum_below_one_and_the_sink_column_is_the_missing_share(folders):
    tm = load_checkpoint(folders["gpt_oss"])
    ids = atlas.corpus_ids(tm, N)
    found = mg.model_masks(tm, ids)
    assert found.sinks and len(found.layers) == TINY["num_hidden_layers"]
    trace = Trace()  # independently: one ordinary traced forward over the whole text
    with torch.no_grad():
        tm.model(torch.tensor([ids]), trace)
    maps = trace.stack(name_contains="attn")[:, 0]  # (L, H, N, N)
    sums = maps.sum(dim=-1)  # (L, H, N)
    for layer in found.layers:
        assert layer.max_hidden == 0.0
        assert layer.row_min == pytest.approx(float(sums[layer.layer].min()), abs=1e-6)
        assert layer.row_mean == pytest.approx(float(sums[layer.layer].mean()), abs=1e-6)
        assert layer.row_min < layer.row_mean < 1  # the sink took a share of every row
    assert sorted(found.shown) == [0, 1]  # layer 0 local (window 5), layer 1 global
    for i, shown in found.shown.items():  # N ≤ 128: one position per cell, then the sink's column
        assert found.pool == 1 and shown.shape == (N, N + 1)
        torch.testing.assert_close(torch.from_numpy(shown[:, :N]), maps[i].amax(dim=0))
        torch.testing.assert_close(torch.from_numpy(shown[:, N]), (1 - sums[i]).amax(dim=0))

    for lang, sink in (("en", "sink"), ("zh", "汇聚点")):
        shown = view.model_masks(tm, found, lang=lang)
        assert shown.ok and shown.sinks is not None
        mean = sum(layer.row_mean for layer in found.layers) / len(found.layers)
        low = min(layer.row_min for layer in found.layers)
        assert f"{mean:.3f}" in shown.sinks and f"{low:.3f}" in shown.sinks and f"{1 - mean:.3f}" in shown.sinks
        assert all(key_labels(p.figure)[-1] == sink for p in shown.panels)
        assert all(len(row) == 8 for row in shown.table)  # the row sums as a column


def test_a_model_without_sinks_has_rows_of_one_and_no_sink_column(folders):
    tm = load_checkpoint(folders["llama"])
    found = mg.model_masks(tm, atlas.corpus_ids(tm, N))
    assert not found.sinks
    assert all(abs(layer.row_min - 1) < 1e-5 and abs(layer.row_mean - 1) < 1e-5 for layer in found.layers)
    assert all(shown.shape[0] == shown.shape[1] for shown in found.shown.values())
    shown = view.model_masks(tm, found)
    assert shown.sinks is None and all(len(row) == 7 for row in shown.table)


def test_the_masks_page_opens_a_gpt_oss_folder_with_its_sinks(folders, roots):
    at = open_page("masks", masks_model=ui.FOLDER, masks_model_folder=str(folders["gpt_oss"]))
    assert_clean(at)
    assert any("learned attention sinks" in i.value for i in at.info)
    assert any("exactly 0" in s.value for s in at.success)
    assert len(at.table[-1].value) == TINY["num_hidden_layers"]


def test_the_multihead_view_states_each_heads_row_sums_as_one_minus_the_sinks_share(folders, monkeypatch):
    tm = load_checkpoint(folders["gpt_oss"])
    data = multihead.analyse(tm, "The sink takes a share of every row, and the rows of the map sum to less than one.")
    found = multihead.learned_sinks(tm, data, multihead.kv_groups(tm))
    assert found is not None and found.rows.mean.shape == (TINY["num_hidden_layers"], TINY["num_attention_heads"])
    assert_rows_are_one_minus_the_share(found.rows, sink_shares(tm, data.ids, monkeypatch))
    r = found.rows
    for number in (r.mean.mean(), r.min.min(), 1 - r.mean.mean(), (1 - r.mean).max()):
        assert f"{number:.3f}" in found.note
    assert "first-token sink" in found.note  # set apart from the emergent sink on token 0
    torch.testing.assert_close(torch.from_numpy(found.panel.data), torch.from_numpy(1 - r.mean))
    zh = multihead.learned_sinks(tm, data, lang="zh")
    assert "汇聚点" in zh.note and f"{r.mean.mean():.3f}" in zh.note

    plain = load_checkpoint(folders["llama"])
    assert multihead.learned_sinks(plain, multihead.analyse(plain, "Rows sum to one here.")) is None


def test_the_operator_view_states_the_rows_of_a_below_one_only_with_sinks(folders, monkeypatch):
    tm = load_checkpoint(folders["gpt_oss"])
    r = operator.sink_numbers(tm)
    ids = atlas.corpus_ids(tm, min(operator.SINK_TOKENS, tm.max_len))
    assert r.tokens == len(ids)
    assert_rows_are_one_minus_the_share(r, sink_shares(tm, ids, monkeypatch))
    words, table = operator.sinks(tm, r)
    assert "learned attention sinks" in words and f"{r.mean.mean():.3f}" in words and f"{r.min.min():.3f}" in words
    assert len(table) == TINY["num_hidden_layers"] and table[0]["Row sum, mean"] == f"{r.mean[0].mean():.3f}"

    plain = load_checkpoint(folders["llama"])
    r = operator.sink_numbers(plain)
    assert abs(r.mean.mean() - 1) < 1e-5 and abs(r.min.min() - 1) < 1e-5
    words, table = operator.sinks(plain, r)
    assert table is None and "no learned sinks" in words and "mean 1.000, lowest 1.000" in words


def test_the_multihead_and_operator_pages_open_a_gpt_oss_folder_with_its_sinks(folders, roots):
    at = open_page("multihead", mh_model=ui.FOLDER, mh_model_folder=str(folders["gpt_oss"]))
    assert_clean(at)
    assert any("Learned attention sinks" in i.value for i in at.info)
    at = open_page(
        "operator", op_open_sinks=True, op_sink_model=ui.FOLDER, op_sink_model_folder=str(folders["gpt_oss"])
    )
    assert_clean(at)
    assert any("has learned attention sinks" in m.value for m in at.markdown)
    assert len(at.table[-1].value) == TINY["num_hidden_layers"]
