"""``python -m features.hlo convert IN.pb OUT_DIR`` (npz files in the Kaggle layout) and
``python -m features.hlo info IN.pb`` (what a raw proto file holds)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter

from features.hlo.convert import LAYOUT_COLLECTION, TILE_COLLECTION, convert_file
from features.hlo.reader import HloProtoError, read_proto


def _convert(args: argparse.Namespace) -> int:
    written = []
    for pb in args.inputs:
        written += convert_file(pb, args.out_dir, split=args.split,
                                tile_collection=args.tile_collection,
                                layout_collection=args.layout_collection)
    for c in written:
        print(f"{c.kind:6s} {c.num_nodes:7d} nodes {c.num_configs:7d} configs  {c.path}")
    print(f"wrote {len(written)} npz file(s) under {args.out_dir}")
    return 0


def _info(args: argparse.Namespace) -> int:
    for pb in args.inputs:
        pf = read_proto(pb)
        print(f"{pb}: {pf.kind}")
        for rec in pf.modules():
            m = rec.module
            ops = Counter(i.opcode for c in m.computations for i in c.instructions)
            n = sum(ops.values())
            errors = sum(r.error for r in rec.runs)
            print(f"  module {m.name!r}: {len(m.computations)} computations, {n} instructions, "
                  f"{len(rec.runs)} runs ({errors} errors), "
                  f"{len(rec.config_index_to_node)} layout-configurable nodes")
            print("    opcodes: " + ", ".join(f"{k} {v}" for k, v in ops.most_common(12)))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m features.hlo", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    conv = sub.add_parser("convert", help="raw proto(s) -> npz files in the Kaggle layout")
    conv.add_argument("inputs", nargs="+", metavar="IN.pb",
                      help="TuningData / ModuleTuningData / HloModuleProto files")
    conv.add_argument("out_dir", metavar="OUT_DIR", help="data root the npz files are written under")
    conv.add_argument("--split", default="train", help="split folder to write into (train)")
    conv.add_argument("--tile-collection", default=TILE_COLLECTION,
                      help=f"collection folder of tile records (default: {TILE_COLLECTION})")
    conv.add_argument("--layout-collection", default=LAYOUT_COLLECTION,
                      help=f"collection folder of layout records (default: {LAYOUT_COLLECTION})")
    info = sub.add_parser("info", help="summarise raw proto file(s)")
    info.add_argument("inputs", nargs="+", metavar="IN.pb", help="raw proto files to describe")
    args = parser.parse_args(argv)
    try:
        return _convert(args) if args.command == "convert" else _info(args)
    except (HloProtoError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
