"""The bundle's names and its Kaggle CLI metadata: fill the templates in ``kaggle/templates`` and
validate them against the rules the Kaggle CLI documents (kaggle-api ``docs/datasets_metadata.md``
and ``docs/kernels_metadata.md``) and what ``kaggle kernels push`` enforces at run time (e.g. a
kernel title must slugify to its id's slug, else Kaggle silently pushes to another kernel).

Not part of an installed package: the scripts of ``kaggle/`` import it from their own folder.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TEMPLATES = REPO / "kaggle" / "templates"
DEFAULT_BUILD = REPO / "kaggle" / "build"
OWNER_PLACEHOLDER = "{owner}"
DEFAULT_OWNER = "your-kaggle-username"  # ids built without --owner / KAGGLE_USERNAME: never pushed
COMPETITION = "predict-ai-model-runtime"
CODE, WHEELS, WEIGHTS = "tpurank-code", "tpurank-wheels", "tpurank-weights"
TRAIN, INFERENCE = "tpurank-train", "tpurank-inference"
BUNDLE_FILE = "BUNDLE.json"

LICENSES = frozenset({
    "CC0-1.0", "CC-BY-SA-3.0", "CC-BY-SA-4.0", "CC-BY-NC-SA-4.0", "GPL-2.0", "ODbL-1.0",
    "DbCL-1.0", "copyright-authors", "other", "unknown", "CC-BY-4.0", "CC-BY-NC-4.0", "PDDL",
    "CC-BY-3.0", "CC-BY-3.0-IGO", "US-Government-Works", "CC-BY-NC-SA-3.0-IGO",
    "CDLA-Permissive-1.0", "CDLA-Sharing-1.0", "CC-BY-ND-4.0", "CC-BY-NC-ND-4.0", "ODC-BY-1.0",
    "LGPL-3.0", "AGPL-3.0", "FDL-1.3", "EU-ODP-Legal-Notice", "apache-2.0", "GPL-3.0",
})
KERNEL_CHOICES = {"language": ("python", "r", "rmarkdown"), "kernel_type": ("script", "notebook")}
KERNEL_BOOLS = ("is_private", "enable_gpu", "enable_tpu", "enable_internet")
KERNEL_SOURCES = ("dataset_sources", "competition_sources", "kernel_sources", "model_sources")
DATASET_FILE = "dataset-metadata.json"
KERNEL_FILE = "kernel-metadata.json"
_OWNER_SLUG = re.compile(r"^[A-Za-z0-9_-]+/[A-Za-z0-9_.-]+$")


def slugify(title: str) -> str:
    """Kaggle's clean-URL slug of a title: lower case, runs of other characters -> ``-``."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def metadata_file(folder: Path) -> Path | None:
    """``folder``'s dataset or kernel metadata file (None: it has neither)."""
    return next((p for p in (folder / DATASET_FILE, folder / KERNEL_FILE) if p.is_file()), None)


def load_template(name: str, owner: str) -> dict[str, Any]:
    """``templates/<name>/{dataset,kernel}-metadata.json`` with the owner filled in."""
    path = metadata_file(TEMPLATES / name)
    if path is None:
        raise FileNotFoundError(f"{TEMPLATES / name}: no {DATASET_FILE} or {KERNEL_FILE} template")
    return json.loads(path.read_text().replace(OWNER_PLACEHOLDER, json.dumps(owner)[1:-1]))


def _check_owner_slug(value: Any, field: str, problems: list[str],
                      slug_len: tuple[int, int] | None = None) -> None:
    slug = value.split("/", 1)[1] if isinstance(value, str) and _OWNER_SLUG.match(value) else None
    if slug is None:
        problems.append(f"{field}: expected 'owner/slug', got {value!r}")
    elif slug_len and not slug_len[0] <= len(slug) <= slug_len[1]:
        problems.append(f"{field}: slug {slug!r} must be {slug_len[0]}-{slug_len[1]} characters")


def validate_dataset_metadata(meta: dict[str, Any], folder: str | Path | None = None) -> list[str]:
    """Problems that would make ``kaggle datasets create|version`` reject ``meta`` (empty = valid)."""
    problems: list[str] = []
    title = meta.get("title")
    if not isinstance(title, str) or not 6 <= len(title) <= 50:
        problems.append(f"title: required, 6-50 characters (got {title!r})")
    if "id_no" not in meta or "id" in meta:
        _check_owner_slug(meta.get("id"), "id", problems, slug_len=(3, 50))
    subtitle = meta.get("subtitle")
    if subtitle is not None and (not isinstance(subtitle, str) or not 20 <= len(subtitle) <= 80):
        problems.append(f"subtitle: 20-80 characters when given (got {len(str(subtitle))})")
    licenses = meta.get("licenses")
    if not isinstance(licenses, list) or len(licenses) != 1 or not isinstance(licenses[0], dict):
        problems.append("licenses: exactly one entry like {'name': 'CC0-1.0'} is required")
    elif licenses[0].get("name") not in LICENSES:
        problems.append(f"licenses: unknown licence name {licenses[0].get('name')!r}")
    keywords = meta.get("keywords", [])
    if not isinstance(keywords, list) or not all(isinstance(k, str) for k in keywords):
        problems.append("keywords: a list of strings")
    for res in meta.get("resources", []) or []:
        path = res.get("path") if isinstance(res, dict) else None
        if not isinstance(path, str):
            problems.append(f"resources: every entry needs a 'path' (got {res!r})")
        elif folder is not None and not (Path(folder) / path).exists():
            problems.append(f"resources: {path!r} does not exist in {folder}")
    return problems


def validate_kernel_metadata(meta: dict[str, Any], folder: str | Path | None = None) -> list[str]:
    """Problems that would make ``kaggle kernels push`` fail or misbehave (empty = valid)."""
    problems: list[str] = []
    _check_owner_slug(meta.get("id"), "id", problems)
    title = meta.get("title")
    if not isinstance(title, str) or len(title) < 5:
        problems.append(f"title: required for a new kernel, at least 5 characters (got {title!r})")
    elif isinstance(meta.get("id"), str) and "/" in meta["id"] \
            and slugify(title) != meta["id"].split("/", 1)[1]:
        problems.append(f"title: {title!r} slugifies to {slugify(title)!r}, not the id's slug "
                        f"{meta['id'].split('/', 1)[1]!r} (Kaggle would push to another kernel)")
    code_file = meta.get("code_file")
    if not isinstance(code_file, str) or not code_file:
        problems.append("code_file: required")
    elif folder is not None and not (Path(folder) / code_file).is_file():
        problems.append(f"code_file: {code_file!r} not found in {folder}")
    for key, choices in KERNEL_CHOICES.items():
        if meta.get(key) not in choices:
            problems.append(f"{key}: one of {choices} (got {meta.get(key)!r})")
    if meta.get("kernel_type") == "notebook" and meta.get("language") == "rmarkdown":
        problems.append("kernel_type 'notebook' cannot have language 'rmarkdown'")
    for key in KERNEL_BOOLS:
        if key in meta and meta[key] not in (True, False, "true", "false"):
            problems.append(f"{key}: 'true' or 'false' (got {meta[key]!r})")
    for key in KERNEL_SOURCES:
        sources = meta.get(key, [])
        if not isinstance(sources, list):
            problems.append(f"{key}: a list")
            continue
        for src in sources:
            if key == "competition_sources":
                if not isinstance(src, str) or not re.match(r"^[a-z0-9-]+$", src):
                    problems.append(f"{key}: competition slug expected, got {src!r}")
            elif key != "model_sources":
                _check_owner_slug(src, key, problems)
    return problems


def validate_folder(folder: str | Path) -> list[str]:
    """Validate the metadata file found in ``folder`` (dataset or kernel), prefixed by its path."""
    path = metadata_file(Path(folder))
    if path is None:
        return [f"{folder}: no {DATASET_FILE} or {KERNEL_FILE}"]
    try:
        meta = json.loads(path.read_text())
    except json.JSONDecodeError as err:
        return [f"{path}: not valid JSON ({err})"]
    check = validate_kernel_metadata if path.name == KERNEL_FILE else validate_dataset_metadata
    return [f"{path}: {p}" for p in check(meta, folder)]
