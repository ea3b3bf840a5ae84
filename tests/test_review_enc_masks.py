"""Review (enc): a real model's own masks on the masks page show where a local layer's window stops.

Gemma 3 270M on 640 or 1 024 tokens: the check line said the local layers stop at 512 keys, but their maps did not
show it (the weights far back are nearly 0 anyway). A local layer's map now shades the keys its window hides and
names them in a legend, in both languages; a global layer's map, or a text shorter than the window, has no such mark.
The pooled maps' x axis wrote 26 crowded, turned labels (0, 25 … 625 on about 280 px): now a few round ones, upright.
"""

from __future__ import annotations

import re
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tests.conftest import open_page
from tx_explorer import locales
from tx_explorer.analysis import mask_gallery as mg
from tx_explorer.views import masks as view
from tx_explorer.viz import style
from tx_explorer.viz.heatmap import heatmap

pytestmark = pytest.mark.usefixtures("one_thread")
TM = SimpleNamespace(name="gemma3-270m", max_len=32_768)
WINDOW = 512


def _gemma_like(n: int, window: int | None = WINDOW) -> mg.ModelMasks:
    """Layer 0 local (``window``) and layer 5 global, read on ``n`` tokens, their maps pooled as the analysis pools."""
    pool = -(-n // mg.SHOWN_CELLS)
    cells = -(-n // pool)
    layers = [
        mg.LayerMask(i, window if i == 0 else None, 1e4, min(n, window or n) - 1, 0.0, 1, 1.0, 1.0) for i in range(6)
    ]
    shown = {i: np.zeros((cells, cells)) for i in (0, 5)}
    return mg.ModelMasks(n=n, heads=4, layers=layers, shown=shown, pool=pool, sinks=False)


def _triangle(fig) -> list[float]:
    """The shaded path's corners, x and y in turn."""
    (shape,) = fig.layout.shapes
    return [float(v) for xy in re.findall(r"(-?[\d.]+),(-?[\d.]+)", shape.path) for v in xy]


@pytest.mark.parametrize("lang", ["en", "zh"])
@pytest.mark.parametrize("n", [640, 1024])
def test_a_local_layers_map_shades_the_keys_its_window_hides(n, lang):
    m = view.model_masks(TM, _gemma_like(n), n, lang=lang)
    local, full = (p.figure for p in m.panels)
    pool = -(-n // mg.SHOWN_CELLS)
    c = lambda p: p / pool - 0.5  # noqa: E731 (a position on the pooled map's axes)
    # the keys j ≤ i − 512: from key 0 at query 512 down to key n − 512 at the last query
    assert _triangle(local) == pytest.approx([c(0), c(WINDOW), c(0), c(n), c(n - WINDOW), c(n)])
    (shape,) = local.layout.shapes
    assert shape.showlegend and shape.name == locales.text("masks", "model_window_hidden", lang, window="512")
    assert not full.layout.shapes  # a global layer hides no key but the future's
    style.tidy(local, 460)  # as the page shows it: the legend stays in the map's empty top right corner
    assert local.layout.legend.yref == "paper" and local.layout.legend.y > 0.9 and local.layout.showlegend


def test_no_window_mark_where_the_window_hides_nothing():
    short = view.model_masks(TM, _gemma_like(400), 400)  # 400 tokens do not pass the window of 512
    assert short.short and not any(p.figure.layout.shapes for p in short.panels)
    causal = view.model_masks(TM, _gemma_like(640, window=None), 640)  # no layer with a window (SmolLM2)
    assert not any(p.figure.layout.shapes for p in causal.panels)


@pytest.mark.parametrize(
    ("n", "labels"), [(640, ["0", "200", "400", "600"]), (1024, [str(k) for k in range(0, 1024, 200)])]
)
def test_the_pooled_maps_write_a_few_round_labels_upright(n, labels):
    for panel in view.model_masks(TM, _gemma_like(n), n).panels:
        x = panel.figure.layout.xaxis
        assert list(x.tickvals) == labels and x.tickangle == 0


def test_a_map_with_a_sink_still_names_the_sink_column():
    r = _gemma_like(640)
    r = mg.ModelMasks(r.n, r.heads, r.layers, {i: np.zeros((128, 129)) for i in r.shown}, r.pool, sinks=True)
    x = view.model_masks(TM, r, 640).panels[0].figure.layout.xaxis
    assert list(x.tickvals) == ["0", "200", "400", "600", locales.text("masks", "model_sink_key", "en")]


def test_every_other_heatmap_keeps_its_ticks():
    """The new keyword changes nothing where it is not given: the labels as many as fit, turned where they crowd."""
    fig = heatmap(np.zeros((128, 128)), [str(5 * k) for k in range(128)], [str(5 * k) for k in range(128)])
    assert fig.layout.xaxis.tickangle is None and len(fig.layout.xaxis.tickvals) == 22  # every 6th of 128


def test_the_page_draws_no_window_on_a_model_without_one():
    torch.manual_seed(0)
    at = open_page("masks", masks_model="tiny-llama", masks_tokens=40)
    assert not at.exception, [e.message for e in at.exception]
    maps = [f for f in (el.proto.spec for el in at.get("plotly_chart")) if '"Layer ' in f]
    assert maps and not any('"shapes"' in f for f in maps)
    assert all('"tickangle":0' in f.replace(" ", "") for f in maps)
