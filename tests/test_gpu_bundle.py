"""The GPU check's bundle (benchmarks/_gpu_bundle.py): parts that fit a call, checked on arrival, joined and installed
there; and that it carries every package the lent machines lack."""

from __future__ import annotations

import base64
import hashlib
import re
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from benchmarks import _gpu_bundle as bundle
from benchmarks import gpu_check

ROOT = Path(__file__).resolve().parents[1]


def wheel(into: Path, name: str, payload: bytes) -> None:
    """A minimal pure-Python wheel: module ``name`` holding ``payload`` (so its size is chosen), and its dist-info."""
    info = f"{name}-1.0.dist-info"
    files = {
        f"{name}.py": f"PAYLOAD = {payload!r}\n".encode(),
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    digest = {k: base64.urlsafe_b64encode(hashlib.sha256(v).digest()).rstrip(b"=").decode() for k, v in files.items()}
    record = "".join(f"{k},sha256={digest[k]},{len(v)}\n" for k, v in files.items()) + f"{info}/RECORD,,\n"
    with zipfile.ZipFile(into / f"{name}-1.0-py3-none-any.whl", "w") as z:  # stored: the size stays the payload's
        for k, v in [*files.items(), (f"{info}/RECORD", record.encode())]:
            z.writestr(k, v)


def fake_download(specs: list[str], into: Path) -> None:
    assert specs == ["tiny==1.0", "large==1.0"]
    wheel(into, "tiny", b"t")
    wheel(into, "large", bytes(range(256)) * 40)  # over 10 KB: several parts


@pytest.fixture
def packed(tmp_path):
    out = tmp_path / "bundle"
    manifest = bundle.pack(out, part_bytes=4096, download=fake_download, specs=["tiny==1.0", "large==1.0"])
    return out, manifest


def test_parts_fit_their_size_and_each_call_stages_its_own(packed, tmp_path):
    out, manifest = packed
    parts = manifest["parts"]
    assert len(parts) >= 3 and all(p["bytes"] <= 4096 for p in parts)
    assert sorted(p.name for p in out.iterdir()) == sorted(["manifest.json", *(p["name"] for p in parts)])
    assert manifest["wheels"] == ["large-1.0-py3-none-any.whl", "tiny-1.0-py3-none-any.whl"]
    staged, names = tmp_path / "staged", [p["name"] for p in parts]
    for k, name in enumerate(names):  # each call carries the manifest and one part
        call = tmp_path / f"call{k}"
        call.mkdir()
        (call / "manifest.json").write_bytes((out / "manifest.json").read_bytes())
        (call / name).write_bytes((out / name).read_bytes())
        assert bundle.stage(call, staged) == names[k + 1 :]
    site = bundle.install(staged)
    assert site.name == "site-packages"  # else Streamlit runs in its development mode, refusing --server.port
    code = "import large, tiny; print(len(large.PAYLOAD), tiny.PAYLOAD)"
    out = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(site)}, capture_output=True, text=True)
    assert out.stdout.split() == ["10240", "b't'"]


def test_a_damaged_part_is_refused_by_name(packed, tmp_path):
    out, manifest = packed
    name = manifest["parts"][1]["name"]
    damaged = bytearray((out / name).read_bytes())
    damaged[100] ^= 1
    (out / name).write_bytes(bytes(damaged))
    with pytest.raises(SystemExit, match=f"{name} arrived damaged"):
        bundle.stage(out, tmp_path / "staged")


def test_install_names_the_parts_not_staged_yet(packed, tmp_path):
    out, manifest = packed
    (out / manifest["parts"][-1]["name"]).unlink()
    staged = tmp_path / "staged"
    bundle.stage(out, staged)
    with pytest.raises(SystemExit, match=f"not staged yet: {manifest['parts'][-1]['name']}"):
        bundle.install(staged)


def test_a_part_fits_one_call_beside_this_working_tree():
    tree = bundle.tree_bytes(ROOT)
    size = bundle.part_size(tree)
    assert tree + size + 2**16 <= bundle.CALL_MIB * 2**20
    assert size >= 8 * 2**20, "the tree leaves under 8 MiB a call: the bundle would take over 14 calls"
    with pytest.raises(SystemExit, match="under 1 MiB"):
        bundle.part_size(63 * 2**20)


def requires(name: str) -> set[str]:
    """``name``'s requirements on the lent machines' Linux, extras left out, from this environment's metadata."""
    found = set()
    for line in metadata.requires(name) or []:
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate({"extra": "", "platform_system": "Linux"}):
            found.add(canonicalize_name(req.name))
    return found


def test_every_requirement_of_the_carried_packages_travels_or_is_on_the_machines():
    """A bumped pin that brings a new dependency must be carried (or found in the image's list): else the check
    would fail on the machine, after minutes of carrying."""
    there = {canonicalize_name(n) for n in (*bundle.CARRIED, *bundle.IMAGE_HAS, *bundle.NOT_CARRIED)}
    code = [name for name in bundle.CARRIED if name not in bundle.DATA_ONLY]
    missing = {f"{n} (needed by {name})" for name in code for n in requires(name) - there}
    assert not missing
    assert bundle.pins(["plotly"]) == [f"plotly=={metadata.version('plotly')}"]


def test_the_app_draws_no_map():
    """pydeck is not carried: Streamlit imports it only for st.pydeck_chart and st.map."""
    sources = [*ROOT.glob("tx_explorer/**/*.py"), *ROOT.glob("pages/*.py"), ROOT / "app.py"]
    used = [p.name for p in sources if re.search(r"pydeck|\bst\.map\(", p.read_text(encoding="utf-8"))]
    assert not used


def test_the_protocol_load_test_imports_without_a_browser():
    """The burst step runs benchmarks/load.py on machines with no Playwright (the GPU machines)."""
    code = "import sys; sys.modules['playwright'] = None; import benchmarks.load"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-2000:]


def test_the_rehearsal_runs_each_step_on_the_cpu():
    real, rehearsal = gpu_check.steps(), gpu_check.steps(sizes=gpu_check.REHEARSAL)
    assert len(real) == len(rehearsal) and all(s.argv for s in rehearsal)
    assert "--collect-only" in rehearsal[0].argv and "--collect-only" not in real[0].argv
    assert rehearsal[1].argv[rehearsal[1].argv.index("--device") + 1] == "cpu"
    assert real[1].argv[real[1].argv.index("--device") + 1] == "cuda"
