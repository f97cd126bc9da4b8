"""Dot-general dimension numbers, shared by the inference from shapes (``features.transforms``)
and the exact values read from raw HLO protos (``features.hlo``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DotDims:
    """Contracting and batch dimensions of a ``dot`` node, plus its operand shapes.

    Dimension numbers index the operand's logical shape (0 = outermost), as in XLA's
    ``DotDimensionNumbers``.
    """

    lhs_contracting: tuple[int, ...]
    rhs_contracting: tuple[int, ...]
    lhs_batch: tuple[int, ...] = ()
    rhs_batch: tuple[int, ...] = ()
    lhs_shape: tuple[int, ...] = ()
    rhs_shape: tuple[int, ...] = ()
