"""``make gpu-check`` (benchmarks/gpu_check.py) where there is no GPU: it skips and says so, or refuses a GPU that
torch cannot use; its steps, their time limits and its section, exercised with stand-in commands."""

from __future__ import annotations

import sys
import textwrap

import pytest
import torch

from benchmarks import gpu_check
from benchmarks.gpu_check import Step


def test_the_cuda_tests_are_those_that_skip_without_cuda(tmp_path):
    (tmp_path / "test_a.py").write_text(
        textwrap.dedent(
            """
            import pytest, torch

            @pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
            def test_on_gpu(): ...

            @pytest.mark.skipif(True, reason="something else")
            def test_elsewhere(): ...

            class TestKernels:
                @pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
                def test_in_class(self): ...
            """
        )
    )
    assert gpu_check.cuda_tests(tmp_path) == [
        "tests/test_a.py::test_on_gpu",
        "tests/test_a.py::TestKernels::test_in_class",
    ]
    found = gpu_check.cuda_tests()  # the repository's own
    assert "tests/test_flash.py::test_cuda_matches_cpu" in found
    assert "tests/test_checkpoint.py::test_half_precision_weights_stay_half_on_a_gpu" in found


def test_without_a_gpu_it_skips_says_so_and_writes_nothing(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gpu_check, "nvidia_smi", lambda *query: [])
    monkeypatch.setenv("BENCHMARKS_FILE", str(tmp_path / "b.md"))
    gpu_check.main([])  # returns: make gpu-check exits 0
    assert "gpu-check skipped: no CUDA device" in capsys.readouterr().out
    assert not (tmp_path / "b.md").exists()


def test_a_gpu_that_torch_cannot_use_fails_the_check(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(gpu_check, "nvidia_smi", lambda *query: [["NVIDIA H200"]])
    with pytest.raises(SystemExit, match="nvidia-smi sees NVIDIA H200 but torch"):
        gpu_check.main([])


@pytest.fixture
def stand_in_gpu(monkeypatch):
    """The GPU path with stand-ins for the device; the test sets the steps (gpu_check.steps)."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpu_check, "device_line", lambda: "Test GPU · driver 1.0")
    monkeypatch.setattr(gpu_check, "machine", lambda device: "a test machine")
    monkeypatch.setattr(gpu_check, "gpu_used_mib", lambda: None)
    monkeypatch.setattr(gpu_check, "WRITE_S", 0.0)


def test_with_a_gpu_each_step_is_reported_and_a_failed_one_fails_the_check(stand_in_gpu, monkeypatch, capsys):
    """A benchmark's section nested in this one, a test run's summary, a failure with its output."""
    py = sys.executable
    steps = [
        Step("bench", [py, "-c", "print('## Old section\\n\\n| N | ms |\\n## Section\\n\\n| N | ms |')"], 60),
        Step("tests", [py, "-c", "print('2 passed in 1.0s')"], 60, section=False),
        Step("broken", [py, "-c", "import sys; print('half a table'); sys.exit(3)"], 60),
    ]
    monkeypatch.setattr(gpu_check, "steps", lambda: steps)
    with pytest.raises(SystemExit, match=r"^gpu-check: broken: failed \(exit status 3"):
        gpu_check.main(["--no-write"])
    out = capsys.readouterr().out
    assert out.startswith("## GPU check") and "Device: Test GPU · driver 1.0." in out
    assert "### bench (" in out and "### Section\n\n| N | ms |" in out and "Old section" not in out
    assert "### tests (passed, " in out and "2 passed in 1.0s" in out
    assert "### broken (failed (exit status 3" in out and "half a table" in out


def test_a_step_past_the_budget_is_stopped_and_the_next_is_not_run(stand_in_gpu, monkeypatch, capsys):
    py = sys.executable
    steps = [Step("slow", [py, "-c", "import time; time.sleep(60)"], 60), Step("late", [py, "-c", "pass"], 60)]
    monkeypatch.setattr(gpu_check, "steps", lambda: steps)
    with pytest.raises(SystemExit, match=r"slow: stopped at its limit of \d s; late: not run: the budget was spent"):
        gpu_check.main(["--no-write", "--budget", "2"])
    assert "### late (not run: the budget was spent)" in capsys.readouterr().out


def test_a_cuda_test_skipped_on_a_gpu_fails_its_step():
    step = gpu_check.run(Step("tests", [sys.executable, "-c", "print('1 passed, 1 skipped in 2s')"], 30, False), 30)
    assert (step.rc, step.note) == (1, "a test skipped on a GPU")
