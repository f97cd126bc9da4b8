"""torchrun-style multi-process training (DDP, gloo on CPU): 2 processes on tiny data."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import numpy as np
import pytest
import torch.multiprocessing as mp

from tpurank.collections import get_collection
from features.processed import iter_processed

COLLECTION = "layout:xla:random"
ARGS = ["--collection", COLLECTION, "--hidden", "16", "--layers", "1",
        "--configs-per-step", "16", "--steps", "40", "--eval-every", "20", "--warmup-steps", "2",
        "--patience", "0", "--val-max-configs", "0", "--predict-batch", "16", "--threads", "1",
        "--cross-attn", "false", "--lr", "2e-2", "--seed", "0"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _worker(rank: int, world: int, port: int, argv: list[str], out: str) -> None:
    """What ``torchrun`` would start: the env contract, then the CLI entry point."""
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port), "RANK": str(rank),
                       "LOCAL_RANK": str(rank), "WORLD_SIZE": str(world), "OMP_NUM_THREADS": "1"})
    from models.gnn.__main__ import main
    from models.gnn.infer import load_trained_dir, predict_costs
    from models.gnn.config import GnnConfig
    from tpurank.config import parse_config

    assert main(["train", *argv, "--step-budget", "20"]) == 0  # stops at the step-20 evaluation
    assert main(["train", *argv]) == 0  # resumes from last.pt (new process group, same ranks)
    cfg = parse_config(GnnConfig, ["--preset", "quick", *argv])
    model, _ = load_trained_dir(cfg.model_dir(get_collection(COLLECTION)))
    g = next(iter(iter_processed(cfg.features_dir(), get_collection(COLLECTION), "valid")))
    np.save(Path(out) / f"rank{rank}.npy", predict_costs(model, g, 16))


@pytest.mark.parametrize("arch", ["factorized", pytest.param("copy", marks=pytest.mark.slow)])
def test_two_process_gloo_training_writes_one_loadable_checkpoint(tmp_path, learnable_features, arch):
    """Trains (interrupted after 20 steps, then resumed), loss decreases, one checkpoint in the
    single-process format, and predictions of every rank's load equal a plain process's."""
    from models.gnn.infer import load_trained_dir, predict_costs
    from models.training import load_checkpoint

    work = tmp_path / "work"
    argv = ["--work", str(work), "--features", str(learnable_features), *ARGS, "--arch", arch]
    mp.spawn(_worker, args=(2, _free_port(), argv, str(tmp_path)), nprocs=2, join=True)
    out = work / "models" / "gnn" / "layout-xla-random" / "seed0"
    assert sorted(p.name for p in out.iterdir()) == ["best.pt", "config.json", "curves.png",
                                                     "last.pt", "report.json", "valid_scores.png"]
    assert json.loads((out / "config.json").read_text())["world_size"] == 2
    report = json.loads((out / "report.json").read_text())
    assert report["world_size"] == 2 and report["n_train_graphs"] == 6
    assert report["last_step"] == 40 and load_checkpoint(out / "last.pt")["step"] == 40
    losses = [h["loss"] for h in report["history"]]
    assert len(losses) == 2 and losses[-1] < 0.9 * losses[0], losses
    model, _ = load_trained_dir(out)  # single process, no process group
    g = next(iter(iter_processed(learnable_features, get_collection(COLLECTION), "valid")))
    single = predict_costs(model, g, 16)
    for rank in (0, 1):
        np.testing.assert_array_equal(np.load(tmp_path / f"rank{rank}.npy"), single)


def test_torchrun_env_without_rank_is_a_clear_error(monkeypatch):
    from models.training import torchrun_env

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.delenv("RANK", raising=False)
    with pytest.raises(RuntimeError, match="torchrun"):
        torchrun_env()
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert not torchrun_env().active
