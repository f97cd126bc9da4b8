"""The 140 node features of one HLO instruction (docs/competition.md §4) — the one featurizer of tpurank.

``features.hlo.convert`` (from an ``HloInstructionProto``) and the sample generator both fill an
:class:`InstructionFacts` (plain sequences, no protobuf), so the encoding itself exists once.

Encoding (the official fixed-length one): a per-dimension field keeps its ``lead`` leading values
(0-padded) and, for most fields, the sum and the product of *all* its values (product 1 when the
field is empty); window reversal keeps the leading flags, the count of true and of false flags.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np

NODE_FEAT_DIM = 140  # equals features.io.NODE_FEAT_DIM (kept here: features.io is not needed)
#: window fields in feature order: size, stride, padding low/high, window and base dilation
WINDOW_FIELDS = ("size", "stride", "pad_lo", "pad_hi", "wdil", "bdil")
NO_CONV = (0, 0, (), 0, 0, (), 0, 0)


@dataclass(slots=True)
class InstructionFacts:
    """What the 140 features encode about one instruction, as plain values."""

    is_root: bool = False
    element_slot: int | None = None  # one-hot slot 0..18 of the element type (None: no slot)
    dims: Sequence[int] = ()  # output shape
    tuple_size: int = 0
    parameter_number: int = 0
    dimensions: Sequence[int] = ()  # the instruction's ``dimensions`` attribute
    window: dict[str, Sequence[int]] | None = None  # WINDOW_FIELDS -> one value per window dim
    reversal: Sequence[bool] = ()  # window reversal flags (one per window dim)
    #: (input batch, input feature, input spatial, kernel in, kernel out, kernel spatial,
    #: output batch, output feature) dimension numbers of a convolution
    conv: tuple = NO_CONV
    feature_group_count: int = 0
    batch_group_count: int = 0
    slice_start: Sequence[int] = ()
    slice_stride: Sequence[int] = ()
    slice_limit: Sequence[int] = ()
    dynamic_slice_sizes: Sequence[int] = ()
    pad_low: Sequence[int] = ()
    pad_high: Sequence[int] = ()
    is_stable: bool = False
    minor_to_major: Sequence[int] = ()


def encode_dims(values: Iterable[int], lead: int, aggregate: bool,
                zero_product_on_empty: bool = False) -> list[float]:
    """``lead`` leading values (0-padded) [+ sum, product] — the official fixed-length encoding.

    The product of an empty field is 1, except with ``zero_product_on_empty`` (tile configs).
    """
    vals = [int(v) for v in values]
    out = [float(v) for v in vals[:lead]] + [0.0] * max(0, lead - len(vals))
    if aggregate:
        out += [float(sum(vals)), 0.0 if (not vals and zero_product_on_empty) else float(math.prod(vals))]
    return out


#: feature offsets of the per-dimension fields (docs/competition.md §4)
DIMS, DIMENSIONS, WINDOW, REVERSAL, CONV, SLICE, DYNAMIC_SLICE, PAD_LOW, PAD_HIGH, LAYOUT = (
    21, 31, 37, 85, 93, 109, 121, 125, 129, 134)


def _empty_row() -> list[float]:
    """The features of an instruction with every field empty: zeros, and product 1 where aggregated."""
    row = [0.0] * NODE_FEAT_DIM
    for product in ([DIMS + 7] + [WINDOW + 8 * k + 7 for k in range(6)]
                    + [SLICE + 4 * k + 3 for k in range(3)] + [DYNAMIC_SLICE + 3, PAD_LOW + 3,
                                                               PAD_HIGH + 3]):
        row[product] = 1.0
    return row


EMPTY_ROW = _empty_row()


def _put(f: list[float], start: int, values: Sequence[int], lead: int, aggregate: bool) -> None:
    """Write ``encode_dims(values, lead, aggregate)`` at ``start`` (an empty field is already there)."""
    if len(values):
        f[start:start + lead + (2 if aggregate else 0)] = encode_dims(values, lead, aggregate)


def node_features(facts: InstructionFacts) -> list[float]:
    """The 140 features of one instruction in docs/competition.md §4 order.

    Fields are written into a copy of :data:`EMPTY_ROW`, skipping empty ones: the sample
    generator featurizes every node of every graph it writes, so this is on its hot path.
    """
    f = EMPTY_ROW.copy()
    f[0] = 1.0 if facts.is_root else 0.0
    if facts.element_slot is not None:
        f[2 + facts.element_slot] = 1.0
    _put(f, DIMS, facts.dims, 6, True)
    f[29], f[30] = float(facts.tuple_size), float(facts.parameter_number)
    _put(f, DIMENSIONS, facts.dimensions, 6, False)
    if facts.window:
        for k, name in enumerate(WINDOW_FIELDS):
            _put(f, WINDOW + 8 * k, facts.window.get(name, ()), 6, True)
    if len(facts.reversal):
        flags = [bool(v) for v in facts.reversal]
        f[REVERSAL:REVERSAL + min(6, len(flags))] = [1.0 if v else 0.0 for v in flags[:6]]
        f[REVERSAL + 6], f[REVERSAL + 7] = float(sum(flags)), float(len(flags) - sum(flags))
    if facts.conv is not NO_CONV:
        ib, if_, isp, ki, ko, ksp, ob, of = facts.conv
        f[CONV], f[CONV + 1] = float(ib), float(if_)
        _put(f, CONV + 2, isp, 4, False)
        f[CONV + 6], f[CONV + 7] = float(ki), float(ko)
        _put(f, CONV + 8, ksp, 4, False)
        f[CONV + 12], f[CONV + 13] = float(ob), float(of)
    f[107], f[108] = float(facts.feature_group_count), float(facts.batch_group_count)
    for k, values in enumerate((facts.slice_start, facts.slice_stride, facts.slice_limit)):
        _put(f, SLICE + 4 * k, values, 2, True)
    _put(f, DYNAMIC_SLICE, facts.dynamic_slice_sizes, 2, True)
    _put(f, PAD_LOW, facts.pad_low, 2, True)
    _put(f, PAD_HIGH, facts.pad_high, 2, True)
    f[133] = 1.0 if facts.is_stable else 0.0
    _put(f, LAYOUT, facts.minor_to_major, 6, False)
    return f


def features_matrix(facts: Iterable[InstructionFacts]) -> np.ndarray:
    """``(n, 140)`` float32 rows of :func:`node_features`."""
    rows = [node_features(x) for x in facts]
    return np.asarray(rows, dtype=np.float32).reshape(len(rows), NODE_FEAT_DIM)
