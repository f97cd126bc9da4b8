"""Constants: opcodes, element types, hardware (part of the sample generator, see ``features.sample``)."""

from __future__ import annotations

from dataclasses import dataclass

from features.columns import opcode_ids

OPCODE_IDS = opcode_ids()
ELEMENT_TYPES = ("invalid", "pred", "s8", "s16", "s32", "s64", "u8", "u16", "u32", "u64", "f16",
                 "f32", "f64", "bf16", "c64", "c128", "tuple", "opaque", "token")
TYPE_BYTES = {"pred": 1, "s8": 1, "u8": 1, "s16": 2, "u16": 2, "f16": 2, "bf16": 2, "s32": 4,
              "u32": 4, "f32": 4, "s64": 8, "u64": 8, "f64": 8, "c64": 8, "c128": 16}
#: ops whose output takes the layout of their first operand (layout propagation)
PROPAGATING = frozenset({"add", "subtract", "multiply", "divide", "maximum", "minimum",
                         "exponential", "tanh", "rsqrt", "sqrt", "negate", "abs", "log",
                         "convert", "select", "compare", "power", "logistic", "clamp"})
NO_COST = frozenset({"parameter", "constant", "get-tuple-element", "tuple", "bitcast"})

PEAK_FLOP_PER_NS = 1.2e5  # ~120 TFLOP/s
HBM_BYTES_PER_NS = 1.0e3  # ~1 TB/s
OP_OVERHEAD_NS = 350.0
COPY_OVERHEAD_NS = 900.0
FUSED_ELEMENTWISE = 0.35  # elementwise ops are fused: they pay a fraction of their bytes
VMEM_BUDGET = 16 * 2 ** 20
LAYOUT_NOISE = 0.0015
TILE_NOISE = 0.005
MACHINE_SPEED = (1.0, 1.04, 0.965)


@dataclass(frozen=True)
class ScaleSpec:
    """Sizes of one scale (see the README ``sample`` section)."""

    tile_counts: tuple[int, int, int]
    tile_nodes: tuple[int, int]
    tile_configs: tuple[int, int]
    layout_counts: tuple[int, int, int]
    nlp_nodes: tuple[int, int]
    xla_nodes: tuple[int, int]
    configurable: tuple[int, int]
    layout_configs: tuple[int, int]
    test_configs: int | None  # None: same range as train


SCALES: dict[str, ScaleSpec] = {
    "tiny": ScaleSpec((12, 4, 4), (5, 40), (15, 40), (4, 2, 2), (60, 300), (60, 300), (3, 12),
                      (24, 48), None),
    "small": ScaleSpec((160, 32, 32), (3, 60), (20, 120), (20, 6, 6), (300, 1500), (400, 2500),
                       (8, 60), (200, 600), 300),
}


@dataclass(frozen=True)
class KaggleSpec:
    """The real data's shape (docs/competition.md §2–§3), for ``--scale kaggle`` (see ``features.sample.kaggle``).

    Counts are (train, valid, test) graphs per collection; node counts are drawn from a gamma
    distribution with the published mean and standard deviation, clipped to ``node_range``.
    """

    tile_counts: tuple[int, int, int] = (5709, 676, 844)
    layout_counts: tuple[tuple[str, str, tuple[int, int, int]], ...] = (
        ("xla", "default", (61, 7, 8)), ("xla", "random", (69, 7, 8)),
        ("nlp", "default", (198, 20, 17)), ("nlp", "random", (207, 20, 17)))
    node_moments: tuple[tuple[str, float, float], ...] = (("xla", 13_900.0, 9_700.0),
                                                          ("nlp", 5_700.0, 5_000.0))
    node_range: tuple[int, int] = (600, 44_000)
    configurable_mean: float = 350.0
    configurable_sd: float = 150.0
    layout_configs: tuple[int, int] = (20, 100_000)  # train/valid, before the config fraction
    max_config_share: float = 0.25  # share of layout files at the maximum count (nlp:default)
    test_configs: int = 1000
    tile_configs: tuple[int, int] = (10, 8_000)  # before the config fraction
    tile_nodes: tuple[int, int] = (3, 120)
    tiny_test_tiles: int = 16  # test kernels with only 2-4 configs
    dup_heavy_share: float = 0.04  # layout train files that are almost all duplicates
    chunk_configs: int = 4096  # configs generated (and held) at a time


KAGGLE = KaggleSpec()
KAGGLE_CONFIG_FRACTION = 1 / 32  # share of the real config counts by default: F = 1/8 is ~5x slower
KAGGLE_GRAPH_FRACTION = 0.25  # 1.0 = the real counts (7,868 files), ~20x the G = 0.05 time
