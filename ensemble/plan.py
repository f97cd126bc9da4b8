"""The plan of a run with a time budget (:mod:`ensemble.run`; docs/cli.md, "A run planned to a
time budget"): :class:`Plan` (``WORK/plan/plan.json``), the feature store's workload counts, the
probe's prediction speed and the stages' estimates. Nothing here starts a process."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, NamedTuple

import numpy as np

from tpurank.atomic import write_json
from tpurank.collections import Collection

#: under WORK
PLAN_FILE = Path("plan") / "plan.json"
PROBE_DIR = Path("plan") / "probe"
#: valid graphs per collection the probe scores (spread over graph sizes), and configs of each
PROBE_GRAPHS = 6
PROBE_CONFIGS = 256
#: the short stages: seconds = start-up (measured) + a + b x millions of configs of the run (the
#: blend's b x model runs / 2); a and b measured on the 2-core machine (BENCHMARKS.md "A run
#: planned to a time budget" shows estimate vs actual per stage)
FIXED_COSTS: dict[str, tuple[float, float]] = {
    "blend": (3.0, 60.0),
    "check": (1.0, 3.0),
    "score": (1.0, 3.0),
    "real": (8.0, 0.0),
    "report": (8.0, 10.0),
}
#: share of the budget kept back for what the estimates miss
MARGIN = 0.03
#: the capped models' share of the training time at most (they train first)
FIRST_SHARE = 0.3
#: a further seed's predict stage is planned at the first seed's (or its estimate) times this
SEED_PREDICT_MARGIN = 1.05
#: a seed is planned with at least this share of the preset's training time of one seed, and a
#: further one runs (after early stopping) with at least this share of the first seed's
MIN_SEED_SHARE = 0.75


def utc(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(epoch))


def clock(epoch: float) -> str:
    """A local clock time (what the ETA is printed as)."""
    return time.strftime("%H:%M:%S", time.localtime(epoch))


@dataclass
class StageRecord:
    """One stage of a planned run."""

    name: str  # the pipeline stage (ensemble.pipeline.STAGES), '@seed<k>' for another seed's
    planned: float  # seconds in the plan printed at the start (after the measured stages)
    basis: str  # how the planned seconds were found
    given: float | None = None  # seconds when it started (the plan moves with every measured stage)
    options: dict[str, Any] = field(default_factory=dict)  # options the plan set (e.g. time_budget)
    start: float | None = None  # seconds after the run's start when it began
    actual: float | None = None  # wall seconds it took

    @property
    def done(self) -> bool:
        return self.actual is not None


@dataclass
class Plan:
    """The stages of a run with a time budget: planned, given and actual seconds."""

    budget: float  # seconds for the whole run
    started_at: float  # epoch seconds of the run's start
    stages: list[StageRecord] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    elapsed: float | None = None  # the whole run's wall seconds, once it ended
    gnn_seeds: int = 1  # seeds the last model's training time was split into

    def get(self, name: str) -> StageRecord | None:
        return next((s for s in self.stages if s.name == name), None)

    def add(self, record: StageRecord, before: str | None = None) -> StageRecord:
        """Add ``record`` (replacing a stage of that name) at the end, or before stage ``before``."""
        self.stages = [s for s in self.stages if s.name != record.name]
        at = next((i for i, s in enumerate(self.stages) if s.name == before), len(self.stages))
        self.stages.insert(at, record)
        return record

    def pending(self) -> list[StageRecord]:
        return [s for s in self.stages if not s.done]

    def pending_seconds(self, exclude: Iterable[str] = ()) -> float:
        skip = set(exclude)
        return sum(s.given if s.given is not None else s.planned for s in self.pending()
                   if s.name not in skip)

    def eta(self, elapsed: float) -> float:
        """Epoch seconds at which the run ends if every pending stage takes its plan."""
        return self.started_at + elapsed + self.pending_seconds()

    @property
    def deadline(self) -> float:
        return self.started_at + self.budget

    HEADER = ["stage", "planned s", "given s", "actual s", "actual − planned", "how planned"]

    def rows(self) -> list[list[str]]:
        """A row of :attr:`HEADER` per stage."""
        def num(v: float | None) -> str:
            return "—" if v is None else f"{v:,.0f}"

        out = []
        for s in self.stages:
            diff = "—" if s.actual is None else f"{round(s.actual - s.planned):+,d}"
            opts = ", ".join(f"{k}={v}" for k, v in s.options.items())
            out.append([s.name, num(s.planned), num(s.given), num(s.actual), diff,
                        s.basis + (f" ({opts})" if opts else "")])
        return out

    def table(self) -> str:
        """The plan as fixed-width text (printed at the start and at the end)."""
        rows = [self.HEADER] + self.rows()
        widths = [max(len(r[i]) for r in rows) for i in range(5)]
        lines = ["  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in
                           enumerate(zip(r[:5], widths))) + "  " + r[5] for r in rows]
        return "\n".join(lines)

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "started": utc(self.started_at)}

    def save(self, path: str | Path) -> None:
        write_json(path, self.to_json())

    @classmethod
    def load(cls, path: str | Path) -> "Plan":
        data = json.loads(Path(path).read_text())
        del data["started"]
        return cls(**{**data, "stages": [StageRecord(**s) for s in data["stages"]]})


# ---- workload: what the predict stages score --------------------------------------------------
def _graph_dirs(features_dir: str | Path, coll: Collection, split: str) -> list[Path]:
    base = Path(features_dir) / coll.slug / "graphs" / split
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if p.is_dir() and not p.name.startswith("."))


def _rows(path: Path) -> int:
    """Rows of an npy file, from its header (the file is mapped, never read)."""
    return int(np.load(path, mmap_mode="r").shape[0])


def graph_configs(features_dir: str | Path, coll: Collection, split: str,
                  array: str = "config_index") -> dict[str, int]:
    """``{stem: processed configs}`` of one split (``array="node_opcode"``: kept nodes)."""
    return {d.name: _rows(d / f"{array}.npy") for d in _graph_dirs(features_dir, coll, split)}


def tabular_train_cap(features_dir: str | Path, coll: Collection) -> int:
    """``tabular_max_train_rows`` of the feature build (0 = no cap, or unknown)."""
    path = Path(features_dir) / coll.slug / "build.json"
    if not path.is_file():
        return 0
    return int(json.loads(path.read_text()).get("config", {}).get("tabular_max_train_rows", 0) or 0)


def predict_configs(features_dir: str | Path, coll: Collection, folds: int,
                    oof_max_configs: int) -> dict[str, int]:
    """The configs one predict stage scores for ``coll`` per split, their ``total`` and
    ``config_nodes`` (configs x their graph's kept nodes): with K >= 2 folds each test graph K
    times, each valid graph once and each train graph on its out-of-fold configs (its tabular
    rows, at most ``oof_max_configs``); without folds the valid and test graphs once."""
    out = {"test": 0, "valid": 0, "oof": 0, "total": 0, "config_nodes": 0}
    splits = [("test", folds if folds >= 2 else 1), ("valid", 1)] + ([("train", 1)] if folds >= 2 else [])
    caps = [c for c in (tabular_train_cap(features_dir, coll), oof_max_configs) if c > 0]
    for split, times in splits:
        nodes = graph_configs(features_dir, coll, split, "node_opcode")
        for stem, n in graph_configs(features_dir, coll, split).items():
            configs = min([n, *caps]) if split == "train" else n
            out["oof" if split == "train" else split] += configs * times
            out["total"] += configs * times
            out["config_nodes"] += configs * nodes[stem] * times
    return out


def run_configs(features_dir: str | Path, collections: Iterable[Collection]) -> int:
    """Processed configs of every split of ``collections`` (the short stages' size)."""
    return sum(sum(graph_configs(features_dir, c, s).values())
               for c in collections for s in ("train", "valid", "test"))


def fixed_estimate(stage: str, configs: int, startup: float = 0.0, runs: int = 2,
                   cost: tuple[float, float] | None = None) -> tuple[float, str]:
    """(seconds, basis) of one short stage from :data:`FIXED_COSTS` (or ``cost``)."""
    a, b = cost or FIXED_COSTS[stage]
    scale = runs / 2 if stage == "blend" else 1.0
    seconds = startup + a + b * scale * configs / 1e6
    return seconds, (f"{startup:.0f} s start + {a:g} s + {b * scale:g} s per million configs "
                     f"({configs:,})")


# ---- the probe ------------------------------------------------------------------------------
class ProbeGraph(NamedTuple):
    """A graph the probe scores."""

    configs: int
    nodes: int


def spread(stems_by_size: Mapping[str, int], count: int) -> list[str]:
    """``count`` stems spread evenly over the size order (smallest and largest included)."""
    order = sorted(stems_by_size, key=lambda s: (stems_by_size[s], s))
    if len(order) <= count:
        return order
    picks = np.unique(np.round(np.linspace(0, len(order) - 1, count)).astype(int))
    return [order[i] for i in picks]


def _trainable(graph: Path) -> bool:
    target = graph / "target.npy"
    if not target.is_file():
        return False
    t = np.load(target, mmap_mode="r")
    return t.shape[0] >= 2 and float(np.ptp(np.asarray(t))) > 0


def _link(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.symlink_to(src.resolve(), target_is_directory=src.is_dir())


def probe_features(features_dir: str | Path, out: str | Path, collections: Iterable[Collection],
                   graphs: int = PROBE_GRAPHS) -> dict[str, dict[str, ProbeGraph]]:
    """Write ``out``: a feature folder of links holding, per collection, its top-level files, one
    trainable train graph and up to ``graphs`` valid graphs spread over sizes; returns
    ``{collection: {valid stem: ProbeGraph}}`` (a collection without both is left out)."""
    src_root, out = Path(features_dir), Path(out)
    linked: dict[str, dict[str, ProbeGraph]] = {}
    for coll in collections:
        src = src_root / coll.slug
        train = next((d for d in _graph_dirs(src_root, coll, "train") if _trainable(d)), None)
        valid = {d.name: d for d in _graph_dirs(src_root, coll, "valid") if _trainable(d)}
        if train is None or not valid:
            continue
        nodes = {s: _rows(d / "node_opcode.npy") for s, d in valid.items()}
        chosen = spread(nodes, graphs)
        for f in src.iterdir():
            if f.is_file():
                _link(f, out / coll.slug / f.name)
        _link(train, out / coll.slug / "graphs" / "train" / train.name)
        for stem in chosen:
            _link(valid[stem], out / coll.slug / "graphs" / "valid" / stem)
        linked[coll.name] = {s: ProbeGraph(_rows(valid[s] / "config_index.npy"), nodes[s])
                             for s in chosen}
    return linked


@dataclass
class ProbeResult:
    """Prediction seconds per config-node of every probed collection (per config would
    under-estimate the larger test graphs: scoring a config is a pass over its graph), and the
    probe's own cost."""

    seconds_per_config_node: dict[str, float]  # collection -> seconds per config-node
    overhead: float  # the probe's wall seconds besides its evaluations (start, imports, loading)


def read_probe(reports: Mapping[str, dict], linked: Mapping[str, Mapping[str, ProbeGraph]],
               max_configs: int, wall: float) -> ProbeResult:
    """Seconds per config-node from the probe's ``report.json`` per collection
    (``final_eval_seconds`` over the config-nodes of the graphs in ``per_graph``)."""
    rate, evals = {}, 0.0
    for name, report in reports.items():
        graphs = [linked[name][s] for s in report.get("per_graph", {}) if s in linked.get(name, {})]
        config_nodes = sum(min(g.configs, max_configs) * max(g.nodes, 1) for g in graphs)
        seconds = float(report.get("final_eval_seconds") or 0.0)
        if config_nodes > 0 and seconds > 0:
            rate[name] = seconds / config_nodes
            evals += seconds
    return ProbeResult(rate, max(0.0, wall - evals))


def config_node_seconds(probe: ProbeResult, coll: Collection) -> float:
    """The probe's seconds per config-node for ``coll``; a collection it could not score takes
    the slowest one of its kind (tile or layout), else the slowest of all."""
    rates = probe.seconds_per_config_node
    if coll.name in rates:
        return rates[coll.name]
    kind = [v for k, v in rates.items() if k.startswith("tile") == coll.is_tile]
    values = kind or list(rates.values())
    if not values:
        raise ValueError(f"the probe scored no collection; cannot estimate {coll.name}'s "
                         "prediction time")
    return max(values)


def probed_predict_estimate(features_dir: str | Path, collections: Iterable[Collection], folds: int,
                            oof_max_configs: int, probe: ProbeResult, start: float) -> tuple[float, str]:
    """(seconds, basis) of the probed model's predict stage: its config-nodes at the probe's speed,
    plus ``start`` (a predict process's start-up)."""
    seconds, configs = 0.0, 0
    for coll in collections:
        work = predict_configs(features_dir, coll, folds, oof_max_configs)
        seconds += work["config_nodes"] * config_node_seconds(probe, coll)
        configs += work["total"]
    rate = configs / max(seconds, 1e-9)
    return start + seconds, (f"{configs:,} configs at the probe's speed per config-node "
                             f"({rate:,.0f} configs/s here) + {start:.0f} s start")


# ---- sharing the training time ----------------------------------------------------------------
def training_shares(seconds: float, models: Iterable[str], capped: Iterable[str],
                    share: float) -> dict[str, float]:
    """The training seconds of each trained model: the ``capped`` ones together ``share`` of
    them, the others the rest; models that are all capped or all not share them equally."""
    trained, first = list(models), set(capped)
    n_capped = sum(m in first for m in trained)
    if n_capped in (0, len(trained)):
        return {m: seconds / len(trained) for m in trained}
    return {m: seconds * share / n_capped if m in first
            else seconds * (1.0 - share) / (len(trained) - n_capped) for m in trained}
