"""push.py: the commands it prints (dry run), and, against a stand-in Kaggle CLI, that each step
runs only once what it needs is ready, or refuses naming the command that goes on from there."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import kaggle_scripts  # tests/kaggle is on pytest's pythonpath
import pytest

push = kaggle_scripts.load("push")
kmeta = kaggle_scripts.load("kaggle_metadata")
KERNELS = (push.TRAIN, push.INFERENCE)


def make_build(root: Path, owner: str = "alice", weights: bool = False) -> Path:
    """A build folder with filled-in metadata and BUNDLE.json (contents do not matter to push.py)."""
    datasets = [kmeta.CODE, kmeta.WHEELS] + ([kmeta.WEIGHTS] if weights else [])
    for name in datasets + list(KERNELS):
        folder = root / name
        folder.mkdir(parents=True)
        meta = kmeta.load_template(name, owner)
        if name in KERNELS:
            (folder / meta["code_file"]).write_text("{}")
        (folder / (kmeta.KERNEL_FILE if name in KERNELS else kmeta.DATASET_FILE)).write_text(json.dumps(meta))
    (root / "BUNDLE.json").write_text(json.dumps({"route": "local" if weights else "kaggle",
                                                  "datasets": datasets, "owner": owner}))
    return root


@pytest.fixture()
def build(tmp_path: Path) -> Path:
    return make_build(tmp_path / "build")


def commands(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("kaggle ")]


def test_dry_run_prints_every_step_with_what_it_waits_for(build: Path, capsys) -> None:
    assert push.main(["--build", str(build), "--message", "v2"]) == 0
    out = capsys.readouterr().out
    cmds = commands(out)
    assert cmds[:2] == [f"kaggle datasets version -p {build / d} -r zip -m v2" for d in (kmeta.CODE, kmeta.WHEELS)]
    assert cmds[2] == f"kaggle kernels push -p {build / push.TRAIN}"
    assert cmds[3] == f"kaggle kernels push -p {build / push.INFERENCE}"
    assert "kaggle kernels output alice/tpurank-inference" in cmds[4]
    assert cmds[5].startswith("kaggle competitions submit predict-ai-model-runtime -f ")
    assert "# train: wait until `kaggle datasets status alice/tpurank-code` says ready" in out
    assert "# inference: wait until `kaggle kernels status alice/tpurank-train` says complete" in out
    assert "# submit: wait until `kaggle kernels status alice/tpurank-inference` says complete" in out
    assert "warning" not in out


def test_the_weights_route_pushes_no_train_kernel(tmp_path: Path, capsys) -> None:
    build = make_build(tmp_path / "build", weights=True)
    assert push.main(["--build", str(build), "--create", "--steps", "datasets,train,inference"]) == 0
    out = capsys.readouterr().out
    assert commands(out) == [f"kaggle datasets create -p {build / d} -r zip"
                             for d in (kmeta.CODE, kmeta.WHEELS, kmeta.WEIGHTS)] + [
        f"kaggle kernels push -p {build / push.INFERENCE}"]
    assert "# inference: wait until `kaggle datasets status alice/tpurank-weights` says ready" in out


def test_accelerator_is_passed_to_the_train_kernel_push(build: Path, capsys) -> None:
    push.main(["--build", str(build), "--steps", "train", "--accelerator", "NvidiaTeslaT4"])
    assert commands(capsys.readouterr().out) == [
        f"kaggle kernels push -p {build / push.TRAIN} --accelerator NvidiaTeslaT4"]


def test_execute_refuses_placeholder_owner(tmp_path: Path, capsys) -> None:
    build = make_build(tmp_path / "build", owner=kmeta.DEFAULT_OWNER)
    assert push.main(["--build", str(build), "--execute"]) == 1
    assert "placeholder" in capsys.readouterr().err


def test_missing_build_is_reported(tmp_path: Path, capsys) -> None:
    assert push.main(["--build", str(tmp_path / "nothing")]) == 1
    assert "make kaggle-bundle" in capsys.readouterr().err


def test_unknown_step_is_an_error(build: Path) -> None:
    with pytest.raises(SystemExit):
        push.main(["--build", str(build), "--steps", "datasets,deploy"])


# ---- executed against a stand-in `kaggle` on PATH ------------------------------------------
FAKE_KAGGLE = """#!/usr/bin/env python3
import json, sys
from pathlib import Path
state = Path(__file__).with_name("state.json")
s = json.loads(state.read_text())
s["calls"].append(sys.argv[1:])
if sys.argv[2] == "status":  # a queue of answers per id; the last one repeats
    answers = s["status"][sys.argv[3]]
    print(f"{sys.argv[3]} has status \\"{answers.pop(0) if len(answers) > 1 else answers[0]}\\"")
state.write_text(json.dumps(s))
"""


@pytest.fixture()
def fake_kaggle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A `kaggle` executable that records its calls and answers status queries from a queue."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    exe = bin_dir / "kaggle"
    exe.write_text(FAKE_KAGGLE)
    exe.chmod(exe.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(push, "FRESH_PUSH_GRACE", 0.0)

    def setup(status: dict[str, list[str]]) -> Path:
        (bin_dir / "state.json").write_text(json.dumps({"calls": [], "status": status}))
        return bin_dir / "state.json"
    return setup


def calls(state: Path) -> list[list[str]]:
    return json.loads(state.read_text())["calls"]


def test_each_step_waits_for_what_it_needs(build: Path, fake_kaggle) -> None:
    state = fake_kaggle({"alice/tpurank-code": ["pending", "ready"], "alice/tpurank-wheels": ["ready"],
                         "alice/tpurank-train": ["running", "complete"],
                         "alice/tpurank-inference": ["queued", "running", "complete"]})
    assert push.main(["--build", str(build), "--execute", "--poll", "0", "--wait", "5"]) == 0
    verbs = [c[:2] if c[1] == "status" else c[:2] + [Path(c[3]).name if c[1] == "push" else c[2]]
             for c in calls(state)]
    pushes = [i for i, c in enumerate(calls(state)) if c[:2] == ["kernels", "push"]]
    statuses = [c[2] for c in calls(state) if c[1] == "status"]
    assert statuses.count("alice/tpurank-code") == 2  # pending, then ready: only then the train push
    first_train_ready = max(i for i, c in enumerate(calls(state)) if c[1:3] == ["status", "alice/tpurank-code"])
    assert first_train_ready < pushes[0]
    last_train_status = max(i for i, c in enumerate(calls(state)) if c[1:3] == ["status", "alice/tpurank-train"])
    assert pushes[0] < last_train_status < pushes[1]  # inference pushed once the train kernel completed
    submit = next(i for i, c in enumerate(calls(state)) if c[0] == "competitions")
    assert max(i for i, c in enumerate(calls(state)) if c[1:3] == ["status", "alice/tpurank-inference"]) < submit
    assert verbs[-2][:2] == ["kernels", "output"]


def test_a_kernel_still_running_is_refused_with_the_next_command(build: Path, fake_kaggle, capsys) -> None:
    state = fake_kaggle({"alice/tpurank-train": ["running"]})
    rc = push.main(["--build", str(build), "--execute", "--steps", "inference,submit",
                    "--poll", "0", "--wait", "0"])
    assert rc == 3
    err = capsys.readouterr().err
    assert "kernel alice/tpurank-train is not ready yet (running)" in err
    assert 'make kaggle-push PUSH=1 PUSH_ARGS="--steps inference,submit"' in err
    assert not [c for c in calls(state) if c[1] == "push"]


def test_a_failed_kernel_is_refused_at_once_with_its_log_command(build: Path, fake_kaggle, capsys) -> None:
    fake_kaggle({"alice/tpurank-inference": ["error"]})
    assert push.main(["--build", str(build), "--execute", "--steps", "submit", "--wait", "600"]) == 3
    err = capsys.readouterr().err
    assert "failed" in err and "kaggle kernels output alice/tpurank-inference" in err


def test_a_fresh_push_is_not_taken_as_complete_before_it_ran(build: Path, fake_kaggle,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Right after a push the status may still be the previous version's "complete"."""
    monkeypatch.setattr(push, "FRESH_PUSH_GRACE", 3600.0)
    state = fake_kaggle({"alice/tpurank-code": ["ready"], "alice/tpurank-wheels": ["ready"],
                         "alice/tpurank-train": ["complete", "running", "complete"],
                         "alice/tpurank-inference": ["complete"]})
    rc = push.main(["--build", str(build), "--execute", "--steps", "train,inference", "--poll", "0",
                    "--wait", "5"])
    assert rc == 0
    train_statuses = [c for c in calls(state) if c[1:3] == ["status", "alice/tpurank-train"]]
    assert len(train_statuses) == 3  # the stale "complete", then running, then complete
