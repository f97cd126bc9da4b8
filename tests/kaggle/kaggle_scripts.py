"""Load the scripts of ``kaggle/`` (a folder of scripts, not a package) by path."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

KAGGLE_DIR = Path(__file__).resolve().parents[2] / "kaggle"


def load(name: str) -> ModuleType:
    """``kaggle/<name>.py`` as a module (its folder on sys.path, as when run as a script)."""
    if str(KAGGLE_DIR) not in sys.path:
        sys.path.insert(0, str(KAGGLE_DIR))
    spec = importlib.util.spec_from_file_location(f"kaggle_{name}", KAGGLE_DIR / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module
