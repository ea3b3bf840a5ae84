"""Learned attention sinks on the Masks page (issue 41 item 3): a model that learned a sink logit per head (a gpt-oss
folder; none is bundled, so a random tiny one saved with ``save_pretrained``) shows a sink column in each map, and its
rows' sums are measured and said (mean and lowest, the sink's share 1 − Σ); a model without sinks shows neither."""

from __future__ import annotations

import pytest
import torch
from conftest import assert_clean, open_page

from tests.checkpoints import write_checkpoint
from tests.test_architectures import TINY, saved
from tx_explorer import paths, ui
from tx_explorer.analysis import atlas
from tx_explorer.analysis import mask_gallery as mg
from tx_explorer.interop.checkpoint import load_checkpoint
from tx_explorer.trace import Trace
from tx_explorer.ui import pickers
from tx_explorer.views import masks as view

pytestmark = pytest.mark.usefixtures("one_thread")
N = 24  # past the tiny gpt-oss's window of 5 on layer 0


@pytest.fixture(scope="module")
def folders(tmp_path_factory, one_thread):
    roots = tmp_path_factory.mktemp("sinks")
    gpt_oss, _ = saved(roots / "gpt-oss-tiny", "gpt_oss")
    llama = roots / "llama-tiny"
    write_checkpoint(llama, "llama")
    return {"roots": roots, "gpt_oss": gpt_oss, "llama": llama}


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


def test_the_masks_page_opens_a_gpt_oss_folder_with_its_sinks(folders, monkeypatch):
    monkeypatch.setenv(paths.ENV_ROOTS, str(folders["roots"]))
    monkeypatch.setenv(paths.ENV_CONFIG, str(folders["roots"] / "absent.toml"))
    monkeypatch.setenv("HF_HUB_CACHE", str(folders["roots"] / "hf"))
    pickers._cached_checkpoints.clear()  # the picker's directory scan is cached for 30 s
    at = open_page("masks", masks_model=ui.FOLDER, masks_model_folder=str(folders["gpt_oss"]))
    assert_clean(at)
    assert any("learned attention sinks" in i.value for i in at.info)
    assert any("exactly 0" in s.value for s in at.success)
    assert len(at.table[-1].value) == TINY["num_hidden_layers"]
