"""Raw-proto speed: parse + convert the real records, a synthetic Kaggle-size module (40k
instructions) and a layout record with 20k runs (graph-only read vs full parse); the real records
only where ``../shared/data/real-tpu`` is present. ``--quick`` (part of ``make bench``): the synthetic
module alone."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REAL_TPU = REPO / "data" / "real-tpu"  # the real records (data/README.md)


def _timed(label: str, fn, *args):
    start = time.perf_counter()
    out = fn(*args)
    print(f"{label:58s} {time.perf_counter() - start:7.3f} s", flush=True)
    return out


def _big_module(n_inst: int):
    """A chain of ``n_inst`` elementwise/reshape/dot instructions in one computation."""
    from features.hlo.schema import message_class

    mod = message_class("HloModuleProto")(name="big")
    comp = mod.computations.add(name="main", id=1, root_id=n_inst)
    ops = ("add", "multiply", "reshape", "dot", "convert")
    for i in range(1, n_inst + 1):
        inst = comp.instructions.add(id=i, name=f"i{i}", opcode="parameter" if i <= 2 else ops[i % 5])
        inst.shape.element_type = 11
        inst.shape.dimensions.extend([128, 256])
        inst.shape.layout.minor_to_major.extend([1, 0])
        if i > 2:
            inst.operand_ids.extend([i - 1, i - 2])
        if inst.opcode == "dot":
            inst.dot_dimension_numbers.lhs_contracting_dimensions.append(1)
            inst.dot_dimension_numbers.rhs_contracting_dimensions.append(0)
    return mod


def quick() -> list[dict]:
    """``make bench``: convert a synthetic 40,000-instruction module to npz arrays."""
    from features.hlo import module_arrays

    big = _big_module(40_000)
    start = time.perf_counter()
    arrays = module_arrays(big)
    seconds = time.perf_counter() - start
    print(f"  convert synthetic module, 40,000 instructions: {seconds:.3f} s "
          f"({arrays['node_feat'].shape[0]} nodes)", flush=True)
    return [{"figure": "HLO proto -> npz arrays, synthetic module of 40,000 instructions",
             "value": seconds, "unit": "s"}]


def main(argv: list[str] | None = None) -> None:
    import argparse

    p = argparse.ArgumentParser(prog="python -m benchmarks.hlo", description=__doc__)
    p.add_argument("--quick", action="store_true", help="the synthetic module alone (make bench)")
    if p.parse_args(argv).quick:
        quick()
        return
    from features.hlo import exact_dot_dims, module_arrays, read_proto
    from features.hlo.convert import layout_record_arrays, tile_record_arrays

    if REAL_TPU.is_dir():
        real = REAL_TPU
        rec = _timed("read real layout record (3,163 nodes, 122 runs)", read_proto,
                     real / "module_tuning_data_layout.pb").message
        _timed("  convert to npz arrays", layout_record_arrays, rec)
        tile = _timed("read real tile records (15 kernels, 754 runs)", read_proto,
                      real / "op_tuning_data.pb")
        _timed("  convert all 15 kernels", lambda: [tile_record_arrays(r) for r in tile.modules()])
    big = _big_module(40_000)
    arrays = _timed("convert synthetic module, 40,000 instructions", module_arrays, big)
    print(f"  -> {arrays['node_feat'].shape[0]} nodes, {len(arrays['edge_index'])} edges")
    if REAL_TPU.is_dir():
        from features.hlo.schema import message_class

        rec = read_proto(REAL_TPU / "module_tuning_data_layout.pb").message
        many = message_class("ModuleTuningData")()
        many.CopyFrom(rec)
        for _ in range(20_000 // len(rec.runs)):
            many.runs.extend(rec.runs)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "many.pb"
            path.write_bytes(many.SerializeToString())
            mb = path.stat().st_size / 2 ** 20
            print(f"layout record with {len(many.runs)} runs: {mb:.0f} MiB")
            _timed("  exact_dot_dims (graph only, runs left unparsed)", exact_dot_dims, path)
            _timed("  full parse (runs included)", read_proto, path)


if __name__ == "__main__":
    main()
