"""The one node featurizer: its fast writer equals the plain docs/competition.md §4 encoding, field by field."""

from __future__ import annotations

import numpy as np
import pytest

from features.hlo.node_features import (NO_CONV, NODE_FEAT_DIM, WINDOW_FIELDS, InstructionFacts,
                                        encode_dims, features_matrix, node_features)


def _plain(x: InstructionFacts) -> list[float]:
    """docs/competition.md §4 written out as one concatenation (the converter's original encoding)."""
    onehot = [0.0] * 19
    if x.element_slot is not None:
        onehot[x.element_slot] = 1.0
    f = [float(x.is_root), 0.0] + onehot + encode_dims(x.dims, 6, True)
    f += [float(x.tuple_size), float(x.parameter_number)] + encode_dims(x.dimensions, 6, False)
    for name in WINDOW_FIELDS:
        f += encode_dims((x.window or {}).get(name, ()), 6, True)
    flags = [bool(v) for v in x.reversal]
    f += [float(v) for v in flags[:6]] + [0.0] * (6 - len(flags[:6])) + [sum(flags), len(flags) - sum(flags)]
    ib, if_, isp, ki, ko, ksp, ob, of = x.conv
    f += [ib, if_] + encode_dims(isp, 4, False) + [ki, ko] + encode_dims(ksp, 4, False) + [ob, of]
    f += [x.feature_group_count, x.batch_group_count]
    for values in (x.slice_start, x.slice_stride, x.slice_limit, x.dynamic_slice_sizes, x.pad_low,
                   x.pad_high):
        f += encode_dims(values, 2, True)
    f += [float(x.is_stable)] + encode_dims(x.minor_to_major, 6, False)
    return [float(v) for v in f]


def _random_facts(rng: np.random.Generator) -> InstructionFacts:
    def dims(hi: int = 8) -> tuple[int, ...]:
        return tuple(int(v) for v in rng.integers(1, 300, size=rng.integers(0, hi)))

    rank = int(rng.integers(0, 8))
    window = ({k: tuple(int(v) for v in rng.integers(0, 5, size=rank)) for k in WINDOW_FIELDS}
              if rng.random() < 0.5 else None)
    conv = ((0, 3, dims(5), 2, 3, dims(5), 0, 3) if rng.random() < 0.3 else NO_CONV)
    return InstructionFacts(
        is_root=bool(rng.random() < 0.2), element_slot=int(rng.integers(0, 19)) if rng.random() < 0.9 else None,
        dims=dims(), tuple_size=int(rng.integers(0, 4)), parameter_number=int(rng.integers(0, 4)),
        dimensions=dims(7), window=window, reversal=tuple(bool(v) for v in rng.random(rank) < 0.3),
        conv=conv, feature_group_count=int(rng.integers(0, 3)), batch_group_count=int(rng.integers(0, 3)),
        slice_start=dims(), slice_stride=dims(), slice_limit=dims(), dynamic_slice_sizes=dims(),
        pad_low=dims(), pad_high=dims(), is_stable=bool(rng.random() < 0.5), minor_to_major=dims(7))


@pytest.mark.parametrize("seed", range(5))
def test_fast_writer_equals_the_plain_encoding(seed: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(200):
        facts = _random_facts(rng)
        assert node_features(facts) == _plain(facts), facts


def test_empty_instruction_and_matrix_shape() -> None:
    row = node_features(InstructionFacts())
    assert len(row) == NODE_FEAT_DIM and row == _plain(InstructionFacts())
    m = features_matrix([InstructionFacts(), InstructionFacts(is_root=True)])
    assert m.dtype == np.float32 and m.shape == (2, NODE_FEAT_DIM) and m[1, 0] == 1.0
    assert features_matrix([]).shape == (0, NODE_FEAT_DIM)
