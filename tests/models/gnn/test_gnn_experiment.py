"""The variant grammar and table of ``python -m models.gnn compare``."""

from __future__ import annotations

import pytest

from models.gnn.experiment import parse_variants, to_markdown


def test_parse_variants():
    v = parse_variants("xattn:cross_attn=true,loss=hinge; plain:cross_attn=false")
    assert v == {"xattn": {"cross_attn": "true", "loss": "hinge"}, "plain": {"cross_attn": "false"}}
    assert parse_variants("base:") == {"base": {}}
    with pytest.raises(ValueError, match="no variants"):
        parse_variants(" ; ")


def test_markdown_table_has_mean_and_sd():
    results = {"tile:xla": {"reference": {"baseline": 0.87, "random": 0.8},
                            "variants": {"a": {"scores": [0.9, 1.0], "mean": 0.95, "sd": 0.0707}}}}
    table = to_markdown(results, {"a": {}})
    assert "| tile:xla | 0.870 | 0.800 | 0.950 ± 0.071 |" in table
