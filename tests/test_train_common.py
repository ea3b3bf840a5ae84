"""The trainers' shared recipe (tx_explorer.train.common): schedule, AdamW groups, the clipped step, the loop."""

from __future__ import annotations

import ast
import itertools
import math
from functools import partial
from pathlib import Path

import pytest
import torch

from tx_explorer.bundle import WEIGHTS_DIR
from tx_explorer.config import TransformerConfig
from tx_explorer.modules.transformer import CausalLM
from tx_explorer.train import lm, moe
from tx_explorer.train.common import (
    DECAY_FLOOR,
    clear_outputs,
    lr_at,
    make_optimizer,
    optimizer_step,
    sample_batch,
    train_loop,
)

TINY = TransformerConfig(vocab_size=16, max_len=8, dim=16, num_layers=1, num_heads=2)
PATTERN = torch.arange(600) % 7  # a cycle a one-block model learns in a few dozen steps


def _model(seed: int = 0) -> CausalLM:
    torch.manual_seed(seed)
    return CausalLM(TINY)


def _loss_fn(model: CausalLM, gen: torch.Generator):
    def loss(step: int) -> torch.Tensor:
        x, y = sample_batch(PATTERN, 8, 4, gen)
        return model.loss(model(x), y)

    return loss


# --- schedule ------------------------------------------------------------------------------------------------


def test_schedule_warms_up_linearly_then_decays_by_cosine_to_the_floor() -> None:
    lr = partial(lr_at, steps=100, peak=1.0, warmup=10)
    assert [lr(s) for s in range(10)] == pytest.approx([(s + 1) / 10 for s in range(10)])
    assert lr(10) == 1.0  # the peak right after the warm-up
    after = [lr(s) for s in range(10, 100)]
    assert all(a >= b for a, b in itertools.pairwise(after))
    assert lr(100) == pytest.approx(DECAY_FLOOR)  # the end of the cosine
    assert lr(55) == pytest.approx(DECAY_FLOOR + (1 - DECAY_FLOOR) / 2)  # half-way down
    assert DECAY_FLOOR == 0.1


def test_no_warm_up_starts_at_the_peak_and_the_floor_is_a_parameter() -> None:
    assert lr_at(0, steps=50, peak=3e-3, warmup=0) == 3e-3
    assert lr_at(50, steps=50, peak=1.0, warmup=0, floor=0.01) == pytest.approx(0.01)
    # The image classifier's bundled schedule, written out: cosine from the peak to 1 %.
    t = (30 - 20) / (200 - 20)
    assert lr_at(30, steps=200, peak=2.0, warmup=20, floor=0.01) == 2.0 * (
        0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * t))
    )


# --- optimiser -----------------------------------------------------------------------------------------------


def test_weight_decay_reaches_matrices_only_and_tied_weights_once() -> None:
    model = _model()
    opt = make_optimizer(model, lr=1e-3, weight_decay=0.1)
    decayed, other = opt.param_groups
    assert decayed["weight_decay"] == 0.1 and other["weight_decay"] == 0.0
    assert all(p.dim() >= 2 for p in decayed["params"]) and all(p.dim() < 2 for p in other["params"])
    assert len(decayed["params"]) + len(other["params"]) == len(list(model.parameters()))
    assert model.head.weight is model.embed.tok_embed.weight  # tied: one tensor, one entry
    assert opt.defaults["betas"] == (0.9, 0.95)


def test_decay_vectors_puts_everything_in_one_group() -> None:
    model = _model()
    opt = make_optimizer(model, lr=1e-3, weight_decay=0.01, betas=(0.9, 0.98), decay_vectors=True)
    assert len(opt.param_groups) == 1 and opt.param_groups[0]["weight_decay"] == 0.01
    assert len(opt.param_groups[0]["params"]) == len(list(model.parameters()))


def test_the_step_reports_the_norm_before_clipping_and_clips() -> None:
    model = _model()
    opt = make_optimizer(model, lr=0.0, weight_decay=0.0)  # lr 0: the weights stay, the gradients remain
    x, y = sample_batch(PATTERN, 8, 4, torch.Generator().manual_seed(0))
    seen = {}

    def before_clipping(m: CausalLM) -> dict[str, float]:
        seen["norm"] = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in m.parameters()])).item()
        return {"raw": seen["norm"]}

    norm, measured = optimizer_step(model, opt, model.loss(model(x), y), clip=1e-3, on_gradients=before_clipping)
    assert norm == pytest.approx(seen["norm"], rel=1e-6) and measured == {"raw": seen["norm"]}
    after = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in model.parameters()])).item()
    assert after == pytest.approx(1e-3, rel=1e-3) and norm > 1e-3


def test_sample_batch_targets_are_the_next_tokens() -> None:
    x, y = sample_batch(PATTERN, 8, 4, torch.Generator().manual_seed(1))
    assert x.shape == y.shape == (4, 8)
    assert torch.equal((x + 1) % 7, y)
    with pytest.raises(ValueError, match="more than 9 tokens"):
        sample_batch(PATTERN[:9], 8, 4, torch.Generator())


# --- loop ----------------------------------------------------------------------------------------------------


def test_the_loop_learns_and_reports_every_step(capsys: pytest.CaptureFixture[str]) -> None:
    model = _model()
    opt = make_optimizer(model, lr=1e-2, weight_decay=0.1)
    schedule = partial(lr_at, steps=40, peak=1e-2, warmup=5)
    loss = _loss_fn(model, torch.Generator().manual_seed(0))
    steps = list(train_loop(model, opt, loss, steps=40, schedule=schedule, desc="unit"))
    assert [s.step for s in steps] == list(range(1, 41))
    assert [s.lr for s in steps] == [schedule(i) for i in range(40)]
    assert opt.param_groups[0]["lr"] == schedule(39)
    assert sum(s.loss for s in steps[-5:]) / 5 < 0.5 * steps[0].loss  # the cycle is being learned
    assert all(s.grad_norm > 0 for s in steps)
    out = capsys.readouterr()
    assert "unit" in out.err and "40/40" in out.err and out.out == ""  # the bar goes to stderr


def test_the_loop_is_deterministic_resumable_and_can_stop_early(capsys: pytest.CaptureFixture[str]) -> None:
    def run(start_state: dict | None = None, start: int = 0, stop: int | None = None):
        model = _model()
        opt = make_optimizer(model, lr=1e-2, weight_decay=0.1)
        gen = torch.Generator().manual_seed(3)
        if start_state is not None:
            model.load_state_dict(start_state["model"])
            opt.load_state_dict(start_state["opt"])
            gen.set_state(start_state["gen"])
        schedule = partial(lr_at, steps=12, peak=1e-2, warmup=2)
        for s in train_loop(model, opt, _loss_fn(model, gen), steps=12, schedule=schedule, start=start):
            if s.step == stop:
                break
        return model, {"model": model.state_dict(), "opt": opt.state_dict(), "gen": gen.get_state()}

    straight, _ = run()
    _, halfway = run(stop=5)
    resumed, _ = run(halfway, start=5)
    for a, b in zip(straight.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)
    assert capsys.readouterr().err == ""  # no desc: no bar (the app's live runs)


def test_loss_functions_may_return_numbers_to_log() -> None:
    model = _model()
    opt = make_optimizer(model, lr=1e-3, weight_decay=0.0)
    gen = torch.Generator().manual_seed(0)

    def loss(step: int) -> tuple[torch.Tensor, dict]:
        x, y = sample_batch(PATTERN, 8, 2, gen)
        value = model.loss(model(x), y)
        return value, {"ce": value.item(), "step_seen": step}

    steps = list(train_loop(model, opt, loss, steps=3, schedule=lambda s: 1e-3, on_gradients=lambda m: {"probe": 1.0}))
    assert [s.info["step_seen"] for s in steps] == [0, 1, 2]
    assert all(s.info["ce"] == s.loss and s.info["probe"] == 1.0 for s in steps)


@pytest.mark.parametrize("trainer", [lm, moe], ids=["lm", "moe"])
def test_a_trainer_deletes_only_its_own_files_in_out(trainer, tmp_path: Path) -> None:
    """An earlier run's bundle goes; a file the trainer never writes (the user's notes) survives."""
    for name in trainer.BUNDLE_FILES:
        (tmp_path / name).write_text("old")
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "sub").mkdir()
    assert clear_outputs(tmp_path, trainer.BUNDLE_FILES) == tmp_path
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt", "sub"]
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert clear_outputs(tmp_path / "new", trainer.BUNDLE_FILES).is_dir()  # a missing folder is made


def test_the_lists_name_every_file_of_the_shipped_bundles() -> None:
    """A file a trainer writes but does not list would survive its next run as a stale part of the bundle."""
    for trainer, folder in ((lm, "tiny-gpt"), (lm, "tiny-llama"), (moe, "tiny-moe")):
        assert {p.name for p in (WEIGHTS_DIR / folder).iterdir()} == set(trainer.BUNDLE_FILES), folder


def test_only_the_shared_helper_deletes_in_a_trainers_out() -> None:
    """No trainer deletes files by itself (train/moe.py once emptied its whole --out): they call clear_outputs."""
    deleting = {"unlink", "rmtree", "remove", "rmdir"}
    offenders = []
    for path in sorted(Path(lm.__file__).parent.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        tree.body = [n for n in tree.body if getattr(n, "name", "") != "clear_outputs"]
        offenders += [
            f"{path.name}:{node.lineno}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in deleting
        ]
    assert offenders == []
