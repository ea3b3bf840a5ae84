"""§7.2 "a ViT needs no causal mask", measured: the bundled ViTs evaluated with one imposed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tx_explorer import locales, masks, models
from tx_explorer.analysis import vit_lab
from tx_explorer.data import shapes
from tx_explorer.views import vision_transformer as view

pytestmark = pytest.mark.usefixtures("one_thread")
N = 24  # a multiple of the six classes: make_dataset cycles them


@pytest.fixture(scope="module", params=["vit-shapes", "vit-shapes-avg"])
def clf(request):
    return models.load_model(request.param)


def test_an_all_true_mask_changes_nothing_and_a_causal_one_hides_later_patches(clf):
    model = clf.model
    images, _, _ = shapes.make_dataset(4, seed=3, size=model.cfg.image_size)
    x = clf.to_tensor(images)
    t = model.num_prefix + model.cfg.num_patches
    with torch.no_grad():
        torch.testing.assert_close(model(x, mask=torch.ones(t, t, dtype=torch.bool)), model(x))
        causal = masks.causal(t)
        before = model.features(x, mask=causal)
        changed = x.clone()
        changed[..., -model.cfg.patch_size :, -model.cfg.patch_size :] += 1.0  # the last patch only
        after = model.features(changed, mask=causal)
    torch.testing.assert_close(after[:, :-1], before[:, :-1])  # no earlier token reads the last patch
    assert (after[:, -1] - before[:, -1]).abs().max() > 1e-4


def test_accuracy_with_and_without_the_mask_is_counted(clf):
    r = vit_lab.causal_mask(clf, n=N, batch=10)  # batches that do not divide N
    images, _, labels = shapes.make_dataset(N, seed=vit_lab.CAUSAL_SEED, size=clf.model.cfg.image_size)
    t = clf.model.num_prefix + clf.model.cfg.num_patches
    with torch.no_grad():
        free = [int(clf.model(clf.to_tensor(images[i : i + 1])).argmax()) for i in range(N)]
        hidden = [int(clf.model(clf.to_tensor(images[i : i + 1]), mask=masks.causal(t)).argmax()) for i in range(N)]
    assert r.images == N and r.chance == pytest.approx(1 / 6)
    assert r.accuracy[0] == pytest.approx(np.mean(np.array(free) == labels))
    assert r.accuracy[1] == pytest.approx(np.mean(np.array(hidden) == labels))
    assert r.agree == pytest.approx(np.mean(np.array(free) == np.array(hidden)))
    if clf.model.num_prefix:  # [CLS] sees only itself: one class for every image, so exactly chance
        assert len(set(hidden)) == 1 and r.accuracy[1] == pytest.approx(r.chance)
    text = view.causal_text(r, clf, lang="zh")
    assert f"{r.accuracy[0]:.1%}" in text and f"{r.accuracy[1]:.1%}" in text
    assert "。 " not in text  # Chinese sentences run on without a space
    why = locales.text("vision_transformer", "causal_cls")
    assert (why in view.causal_text(r, clf)) == bool(clf.model.num_prefix)
