"""Stage configs: command-line overrides, presets, and what is saved beside outputs."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

import pytest

from tpurank.config import (StageConfig, load_run_config, parse_config, save_run_config,
                             with_preset)


@dataclass
class ToyConfig(StageConfig):
    lr: float = 0.1
    layers: tuple[int, ...] = (8, 8)
    amp: bool = False
    PRESETS: ClassVar[dict] = {"quick": {"lr": 0.5}, "full": {"lr": 0.01, "layers": (64, 64, 64)}}


def test_overrides_are_converted_to_field_types() -> None:
    cfg = parse_config(ToyConfig, ["--lr", "3e-4", "--layers", "16,32", "--amp", "true",
                                   "--seed", "7", "--preset", "full"])
    assert cfg.lr == pytest.approx(3e-4) and cfg.layers == (16, 32) and cfg.amp is True
    assert cfg.seed == 7 and cfg.preset == "full"


def test_preset_applies_before_overrides_and_default_preset_applies_too() -> None:
    assert parse_config(ToyConfig, ["--preset", "full"]).layers == (64, 64, 64)
    assert parse_config(ToyConfig, []).lr == 0.5  # default preset "quick" is really applied
    assert with_preset(ToyConfig, "full", lr="0.2").lr == 0.2


def test_unknown_option_or_preset_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="no option 'nope'"):
        with_preset(ToyConfig, None, nope=1)
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        with_preset(ToyConfig, "huge")
    with pytest.raises(SystemExit):
        parse_config(ToyConfig, ["--bogus", "1"])


def test_saved_config_carries_sha_and_seed_and_round_trips(tmp_path) -> None:
    cfg = with_preset(ToyConfig, "full", seed=3)
    path = save_run_config(cfg, tmp_path)
    saved = json.loads(path.read_text())
    assert saved["seed"] == 3 and saved["git_sha"] and saved["config_class"] == "ToyConfig"
    assert load_run_config(ToyConfig, path) == cfg


@dataclass
class HelpConfig(StageConfig):
    """Toy stage."""

    steps: int = 10  # optimiser steps
    #: width of every layer
    hidden: int = 8
    PRESETS: ClassVar[dict] = {"quick": {"steps": 1600}, "full": {"steps": 20000, "hidden": 64}}


def test_help_shows_comment_type_default_and_preset_values(capsys) -> None:
    from tpurank.config import build_parser, field_help, option_help

    assert field_help(HelpConfig)["steps"] == "optimiser steps"
    assert field_help(HelpConfig)["hidden"] == "width of every layer"
    assert option_help(HelpConfig, "steps") == "optimiser steps [default: 10; quick: 1600, full: 20000]"
    with pytest.raises(SystemExit):
        build_parser(HelpConfig, "toy").parse_args(["--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--steps INT" in out and "quick: 1600, full: 20000" in out and "--preset {quick,full}" in out


def test_work_defaults_to_data_name_and_preset() -> None:
    assert parse_config(ToyConfig, ["--data", "/x/real-data/", "--preset", "full"]).work == "work/real-data-full"
    assert parse_config(ToyConfig, ["--data", "d", "--work", "w"]).work == "w"
    assert with_preset(ToyConfig, None, data="d").work == "work/d"


def test_bad_value_and_unknown_option_name_the_option(capsys) -> None:
    with pytest.raises(SystemExit):
        parse_config(ToyConfig, ["--amp", "maybe"])
    assert "--amp" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        parse_config(ToyConfig, ["--lrr", "1"])
    err = capsys.readouterr().err
    assert "unknown option --lrr" in err and "--lr" in err
    with pytest.raises(SystemExit):
        parse_config(ToyConfig, ["--preset", "huge"])
    assert "quick" in capsys.readouterr().err
    with pytest.raises(ValueError, match="--layers: expected an integer"):
        with_preset(ToyConfig, None, layers="a,b")
