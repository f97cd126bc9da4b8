"""Generated TpuGraphs-like sample data: ``python -m features.sample --out DIR --scale tiny|small``.

The generator writes a dataset in the exact Kaggle layout (docs/competition.md §2–§5) so that every stage of the
pipeline can run, be tested and be scored without the 6 GB download:

    DIR/npz_all/npz/tile/xla/{train,valid,test}/<stem>.npz
    DIR/npz_all/npz/layout/{xla,nlp}/{default,random}/{train,valid,test}/<stem>.npz
    DIR/sample_submission.csv            one row per test graph (ID,TopConfigs)
    DIR/hidden/test_runtimes.npz         true targets of the test files, by submission ID
    DIR/.complete                        written last (the whole tree appears by one rename)

Test files carry ``config_runtime`` all zeros (tile normalizers kept), as on Kaggle; the true
targets (tile: runtime/normalizer, layout: runtime) are kept apart in ``hidden/``.

Graphs
------
Graphs are built op by op with a small HLO builder (:class:`HloBuilder`) from real model motifs,
with consistent shapes, and featurised exactly like the official featurizer (checked against the
reference arrays of ``data/real-tpu/reference``): per-dim entries beyond rank are 0, window /
slice / pad products default to 1, ``minor_to_major`` in 134–139, conv dimension numbers
``b01f_01io->b01f``, one small reducer computation per ``reduce`` placed before its caller, edges
``[consumer, producer]`` over unique operands plus caller -> root of each called computation,
nodes in topological order.

* ``nlp`` layout graphs: BERT-like encoder stacks — embeddings + layer norms (reduce / divide /
  rsqrt), Q/K/V dots on ``[B*S, H]``, reshapes to heads, transposes, batched attention dots,
  softmax parts (reduce-max, subtract, exp, reduce-sum, divide), GELU (or ReLU) feed-forward.
  Variants: pre-/post-LN, separate or fused QKV projection (sliced, K contracted on its last
  dim), with or without attention mask, ALBERT cross-layer weight sharing (one parameter feeds
  every layer), and training steps with the dense layers' backward dots (``x^T dY``, ``dY W^T``).
* ``xla`` layout graphs: mixed conv nets — ResNet-like (conv/BN/ReLU/residual, max-pool),
  UNet-like 2-D and 3-D (strided / transposed convolutions, concatenated skips) — plus a few
  transformer graphs. Batch norm is either the folded inference form or the training form.
  Training steps add the backward pass as JAX lowers it: ReLU masks (``select``),
  weight-gradient convolutions (``f01b_i01o->01bf``: batch contracted, so they want another
  layout than the forward conv reading the same activation), input-gradient convolutions with a
  ``reverse``d kernel (``b01f_01oi->b01f``) and SGD updates.
* ``tile`` kernels: single fused kernels (conv + epilogue, dot + bias + activation,
  elementwise chains, row reductions, transposing copies) as a fused body computation followed by
  the calling ``fusion`` node, like the real op-level records.

Configurable nodes are convolutions, dots and reshapes (``configurable_ops`` can add others, e.g.
transpose). Layout configs follow the real encoding: for convolutions only the two most-minor
dims are given (``[3, 0, -1, -1, -1, -1]``), for dots and reshapes full permutations, ``-1`` =
compiler default.

Cost model (what the runtimes mean)
-----------------------------------
A TPU-like analytical model, in nanoseconds, every term physically motivated:

* **Tiling/padding.** An array is stored in (8, 128) tiles over its two most-minor dims (16 for
  2-byte, 32 for 1-byte types): the minor dim is padded to 128 lanes, the second-minor to 8
  sublanes. Every memory-bound op costs ``padded bytes / HBM bandwidth``, so a layout whose minor
  dim is small (3 channels, batch 2, head dim 64) wastes bandwidth, and the same layout is cheap
  or expensive depending on the tensor's shape. Major dims out of row-major order add up to 6 %
  (strided DMA), a small effect that the *default* search mostly explores.
* **Layout propagation and copies.** Elementwise ops inherit the layout of their first operand,
  so one configured layout spreads through its elementwise neighbourhood (that whole chain pays
  its padding). Where a producer's actual layout disagrees with what a consumer asks for (a
  configured input layout, a second elementwise operand, the program output) a transposing copy
  is inserted (read + write of both layouts, 1.3x slower than streaming, plus a launch overhead).
  ``-1`` on an input slot means "take the operand as it is" (no copy).
* **Reshapes** are free bitcasts only when both sides are row-major and the minor dim (and the
  8-aligned second-minor) is unchanged; otherwise they are physical copies.
* **MXU efficiency (conv, dot).** FLOPs are padded to the 128x128 MXU on the contracting and
  output-feature dims (feature counts that are not multiples of 128 waste work). The contracting
  dim should be the minor dim of the input (second-minor costs 1.35x, else 1.8x), the output
  feature dim the minor dim of the output (else 1.5x), the kernel should have its two feature
  dims minor (out-feature minor best). Time = max(compute, memory) + 15 % of the smaller
  (imperfect overlap) + launch overhead. Reductions over the lane (minor) dim cost extra
  cross-lane work.
* **Tile kernels.** Tile extents come from ``output_bounds``/``kernel_bounds`` in tile units
  (128 lanes for the minor dim, 8 sublanes for the second-minor, elements otherwise, following the
  root's ``minor_to_major``). Cost = steps x per-step pipeline overhead + max(padded MXU work /
  peak x fill efficiency, bytes moved / DMA-efficiency-scaled bandwidth); tiles that do not divide
  the shape waste work; a double-buffered working set above the 16 MiB VMEM budget spills
  (steep penalty); tiny tiles lose DMA efficiency and MXU fill; the software pipeline exposes
  the first load / last store and overlaps poorly with few steps; two TensorCores (megacore)
  split the output tiles, so a single tile (or an odd count) leaves a core idle. So neither
  "biggest tile" nor "smallest tile" is a good rule.
* **Measurement noise.** Layout runtimes get 0.15 % log-normal noise (the duplicate runs in the
  real 3-D UNet record differ by 0.02–0.34 %); tile runtimes 0.5 %, each row measured on one of
  three machines whose speed (±4 %) also scales that row's normalizer (normalizers differ per row;
  runtime/normalizer stays consistent). The normalizer is the compiler-default tile's runtime.
  Config rows are shuffled (no positional leak: the default is not row 0).
* **Searches.** *random*: every configurable node gets random layouts (10 % left at -1), wide
  runtime spread. *default*: the compiler default (all -1) plus a few perturbed nodes per
  config, tightly clustered runtimes. Both contain duplicate configs (identical
  ``node_config_feat``, re-measured runtime).

Code layout
-----------
``constants`` (opcodes, element types, hardware numbers) · ``hlo`` (HLO builder and featurizer) ·
``motifs`` (ResNet / UNet / BERT / tile-kernel graphs) · ``layout_cost`` and ``tile_cost`` (the cost
models) · ``layout_search`` (default and random config searches) · ``writer`` (dataset assembly and
the command line).

Determinism: every graph draws from its own ``SeedSequence([seed, crc32(collection/split/idx)])``,
so the output is byte-identical for a seed and independent of generation order.
"""

from features.sample.constants import OPCODE_IDS, SCALES, ScaleSpec
from features.sample.hlo import FlatGraph, HloBuilder, featurize
from features.sample.layout_cost import PERM_ID, LayoutCostModel, padded_bytes_table
from features.sample.motifs import build_layout_graph, build_tile_kernel
from features.sample.tile_cost import tile_runtime
from features.sample.writer import generate_dataset, main

__all__ = ["OPCODE_IDS", "SCALES", "ScaleSpec", "FlatGraph", "HloBuilder", "featurize", "PERM_ID",
           "LayoutCostModel", "padded_bytes_table", "build_layout_graph", "build_tile_kernel",
           "tile_runtime", "generate_dataset", "main"]
