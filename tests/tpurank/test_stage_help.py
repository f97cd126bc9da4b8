"""Every option of every stage has a one-line help text, and ``--help`` prints it."""

from __future__ import annotations

import dataclasses
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from tpurank.config import build_parser, field_help

ROOT = Path(__file__).resolve().parents[2]

#: every config class a stage's command line is built from (module, class)
STAGE_CONFIGS = [
    ("features.build", "BuildConfig"),
    ("models.gnn.config", "GnnConfig"),
    ("models.lgbm.config", "LgbmConfig"),
    ("models.baseline", "BaselineConfig"),
    ("ensemble.weights", "BlendConfig"),
    ("ensemble.report", "ReportConfig"),
]


@pytest.mark.parametrize("module,name", STAGE_CONFIGS)
def test_every_option_has_a_help_text(module: str, name: str) -> None:
    cls = getattr(importlib.import_module(module), name)
    missing = [f for f, text in field_help(cls).items() if not text]
    assert not missing, (f"{module}.{name}: fields without a help text (add a trailing "
                         f"'# comment' to each): {', '.join(missing)}")
    build_parser(cls, name).format_help()  # builds: a '%' or a bad type would raise here


def test_gnn_train_help_lists_every_option() -> None:
    from models.gnn.config import GnnConfig

    out = subprocess.run([sys.executable, "-m", "models.gnn", "train", "--help"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    text = " ".join(out.stdout.split())
    for f in dataclasses.fields(GnnConfig):
        flag = "--" + f.name.replace("_", "-")
        assert flag in text, flag
        assert " ".join(field_help(GnnConfig)[f.name].split()) in text, f.name
    quick_steps = GnnConfig.PRESETS["quick"]["steps"]
    assert f"quick: {quick_steps}" in text  # what --preset quick sets is shown


@pytest.mark.parametrize("module,name", STAGE_CONFIGS)
def test_every_stage_defaults_to_the_same_preset_and_work(module: str, name: str) -> None:
    """Stages run by hand without --preset/--work find each other's outputs (docs/cli.md)."""
    from tpurank.config import StageConfig, option_help, parse_config

    cls = getattr(importlib.import_module(module), name)
    cfg, base = parse_config(cls, []), StageConfig()
    assert (cfg.preset, cfg.work, cfg.data) == (base.preset, base.work, base.data) == \
        ("quick", "work/sample-small-quick", "data/sample-small")
    for option in ("preset", "work", "data"):  # what --help prints for them
        assert option_help(cls, option) == option_help(StageConfig, option)
    assert "[default: quick]" in option_help(cls, "preset")
