"""Build the Kaggle datasets (code, wheels, optionally weights) and the two kernel folders.

Writes OUT/tpurank-{code,wheels,train,inference} (and OUT/tpurank-weights with --weights-from),
each with its filled-in and validated Kaggle metadata, and OUT/BUNDLE.json (the route, which
push.py reads); the folders and the two routes are docs/kaggle.md's. The wheels dataset holds
what tpurank needs at run time beyond the Kaggle image's packages (``kaggle/image_packages.txt``;
never torch), pinned to the versions installed here, i.e. the ones the tests ran with.
"""

from __future__ import annotations

import argparse
import importlib.metadata as importlib_metadata
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

sys.path.insert(0, str(Path(__file__).resolve().parent))
import kaggle_metadata as kmeta  # noqa: E402  (kaggle/ is a folder of scripts, not a package)
from kaggle_metadata import (BUNDLE_FILE, CODE, DEFAULT_BUILD, DEFAULT_OWNER, INFERENCE,  # noqa: E402
                             REPO, TRAIN, WEIGHTS, WHEELS)

KERNELS = (TRAIN, INFERENCE)
IMAGE_PACKAGES = REPO / "kaggle" / "image_packages.txt"
NEVER_BUNDLED = ("torch",)  # canonical names
KAGGLE_PYTHON = "3.11"
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64",
             "linux_x86_64")
NOTEBOOKS = {TRAIN: REPO / "notebooks" / "train.py", INFERENCE: REPO / "notebooks" / "inference.py"}


def human_size(num_bytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if num_bytes < 1024 or unit == "GiB":
            return f"{num_bytes:.1f} {unit}" if unit != "B" else f"{int(num_bytes)} B"
        num_bytes /= 1024
    return f"{num_bytes:.1f} GiB"


def folder_size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def run(cmd: list[str], cwd: Path | None = None) -> str:
    """Run a command, echoing it; its output, or fail with it when it fails."""
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd)
    if proc.returncode != 0:
        raise SystemExit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n"
                         f"{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}")
    return proc.stdout


def pinned(name: str) -> str:
    """``name==<installed version>`` when installed here, else ``name`` (latest)."""
    try:
        return f"{name}=={importlib_metadata.version(name)}"
    except importlib_metadata.PackageNotFoundError:
        return name


def runtime_requirements(dist: str) -> list[Requirement]:
    """The unconditional runtime requirements of an installed distribution (markers evaluated
    here, no extras)."""
    reqs = [Requirement(line) for line in importlib_metadata.requires(dist) or []]
    return [r for r in reqs if r.marker is None or r.marker.evaluate({"extra": ""})]


def image_requirements() -> list[str]:
    """The requirement lines (``name==version``) of the Kaggle image's package list."""
    lines = [ln.split("#", 1)[0].strip() for ln in IMAGE_PACKAGES.read_text().splitlines()]
    return [ln for ln in lines if ln]


def missing_from_image() -> list[str]:
    """What tpurank needs at run time that the image lacks: its installed requirements walked
    breadth first, stopping at the image's packages (whose own dependencies are the image's)."""
    image = {canonicalize_name(Requirement(line).name) for line in image_requirements()} | set(NEVER_BUNDLED)
    missing: dict[str, str] = {}  # canonical name -> name
    todo = [r.name for r in runtime_requirements("tpurank")]
    while todo:
        name = todo.pop(0)
        if canonicalize_name(name) in image | set(missing):
            continue
        missing[canonicalize_name(name)] = name
        todo += [r.name for r in runtime_requirements(name)]
    return sorted(missing.values(), key=str.lower)


def build_code(out: Path) -> None:
    """The tpurank wheel (pure Python) and where it came from."""
    run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
         "-w", str(out), str(REPO)])
    sys.path.insert(0, str(REPO))
    from tpurank.config import git_sha

    info = {"git_sha": git_sha(REPO), "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "wheels": sorted(p.name for p in out.glob("*.whl"))}
    (out / "BUILD_INFO.json").write_text(json.dumps(info, indent=2) + "\n")


def build_wheels(out: Path, python_version: str, extras: list[str]) -> None:
    """Binary wheels for the Kaggle interpreter (a platform-independent wheel also matches) of
    what the image lacks; ``--no-deps``: the image has their dependencies (missing_from_image)."""
    missing = missing_from_image()  # torch, in the image, is never bundled, not even as an extra
    names = missing + [n for n in extras if n not in missing and canonicalize_name(n) not in NEVER_BUNDLED]
    requested = [pinned(n) for n in names]
    run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(out),
         "--python-version", python_version, "--implementation", "cp",
         *[arg for plat in PLATFORMS for arg in ("--platform", plat)],
         "--no-deps", *requested])
    listing = {"python_version": python_version, "image": image_requirements(), "requested": requested,
               "wheels": sorted(p.name for p in out.glob("*.whl"))}
    (out / "WHEELS.json").write_text(json.dumps(listing, indent=2) + "\n")


def build_weights(out: Path, work: Path) -> None:
    """Trained models plus the per-collection feature files inference needs (stats, configs)."""
    sys.path.insert(0, str(REPO))
    from ensemble.pipeline import export_weights

    try:
        export_weights(work, out)
    except FileNotFoundError as err:
        raise SystemExit(f"{err} (or point --weights-from / WORK= at a trained work dir)") from None


def build_kernel(out: Path, name: str) -> None:
    """A notebook as .ipynb, cells unexecuted (what Kaggle runs)."""
    import jupytext

    notebook = NOTEBOOKS[name]
    jupytext.write(jupytext.read(notebook), out / f"{notebook.stem}.ipynb", fmt="ipynb")


def write_metadata(out: Path, name: str, owner: str, weights: bool = False) -> list[str]:
    meta = kmeta.load_template(name, owner)
    if name == INFERENCE and weights:  # route 2: the weights dataset instead of the train kernel
        meta["dataset_sources"].append(f"{owner}/{WEIGHTS}")
        meta["kernel_sources"] = []
    file_name = kmeta.KERNEL_FILE if name in KERNELS else kmeta.DATASET_FILE
    (out / file_name).write_text(json.dumps(meta, indent=2) + "\n")
    return kmeta.validate_folder(out)


def bundle(out: Path = DEFAULT_BUILD, owner: str = DEFAULT_OWNER, python_version: str = KAGGLE_PYTHON,
           extras: list[str] | None = None, weights_from: Path | None = None) -> dict[str, int]:
    """Build the folders under ``out`` (the weights dataset only ``weights_from`` a trained WORK;
    a stale one is removed); returns their sizes in bytes."""
    builders = {
        CODE: build_code,
        WHEELS: lambda d: build_wheels(d, python_version, list(extras or [])),
        TRAIN: lambda d: build_kernel(d, TRAIN),
        INFERENCE: lambda d: build_kernel(d, INFERENCE),
    }
    if weights_from is not None:
        builders[WEIGHTS] = lambda d: build_weights(d, Path(weights_from))
    shutil.rmtree(Path(out) / WEIGHTS, ignore_errors=True)
    problems: list[str] = []
    sizes: dict[str, int] = {}
    for name, build in builders.items():
        folder = Path(out) / name
        tmp = folder.with_name(f".{name}.tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        build(tmp)
        shutil.rmtree(folder, ignore_errors=True)
        tmp.rename(folder)
        problems += write_metadata(folder, name, owner, weights_from is not None)
        sizes[name] = folder_size(folder)
    if problems:
        raise SystemExit("invalid Kaggle metadata:\n  " + "\n  ".join(problems))
    route = {"route": "local" if weights_from else "kaggle", "owner": owner,
             "datasets": [n for n in (CODE, WHEELS, WEIGHTS) if n in sizes], "kernels": list(KERNELS),
             "weights_from": str(weights_from) if weights_from else None}
    (Path(out) / BUNDLE_FILE).write_text(json.dumps(route, indent=2) + "\n")
    return sizes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--weights-from", type=Path, default=None, metavar="WORK",
                        help="route 2: also build the weights dataset from this trained work dir "
                             "(WORK of make run); default: none, the train kernel trains on Kaggle")
    parser.add_argument("--out", type=Path, default=DEFAULT_BUILD)
    parser.add_argument("--owner", default=os.environ.get("KAGGLE_USERNAME", DEFAULT_OWNER),
                        help="Kaggle user name for the dataset/kernel ids (default: $KAGGLE_USERNAME)")
    parser.add_argument("--kaggle-python", default=KAGGLE_PYTHON,
                        help="Python version of the Kaggle image, for binary wheels")
    parser.add_argument("--extra", action="append", default=[], metavar="PKG",
                        help="another package to bundle (repeatable)")
    args = parser.parse_args(argv)
    if args.owner == DEFAULT_OWNER:
        print(f"note: ids use the placeholder owner {DEFAULT_OWNER!r}; pass --owner or set "
              "KAGGLE_USERNAME before pushing", file=sys.stderr)
    sizes = bundle(args.out, args.owner, args.kaggle_python, args.extra, args.weights_from)
    print(f"\nKaggle bundle in {args.out} (metadata valid):")
    for name, size in sizes.items():
        print(f"  {name:20s} {human_size(size):>10s}  {args.out / name}")
    print(f"  {'total':20s} {human_size(sum(sizes.values())):>10s}")
    route = "train on Kaggle (the train kernel's output is the inference kernel's weights)" \
        if args.weights_from is None else f"weights from {args.weights_from}"
    print(f"route: {route}; next: make kaggle-push (a dry run: prints the commands)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
