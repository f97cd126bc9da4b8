"""push.py: the Kaggle CLI commands it prints (dry run) and its refusal to push a bad build."""

from __future__ import annotations

import json
from pathlib import Path

import kaggle_scripts  # tests/kaggle is on pytest's pythonpath
import pytest

push = kaggle_scripts.load("push")
kmeta = kaggle_scripts.load("kaggle_metadata")


@pytest.fixture()
def build(tmp_path: Path) -> Path:
    """A build folder with filled-in metadata (contents do not matter to push.py)."""
    for name in push.DATASETS + (push.KERNEL,):
        folder = tmp_path / name
        folder.mkdir()
        meta = kmeta.load_template(name, "alice")
        file_name = kmeta.KERNEL_FILE if name == push.KERNEL else kmeta.DATASET_FILE
        (folder / file_name).write_text(json.dumps(meta))
    (tmp_path / push.KERNEL / "inference.ipynb").write_text("{}")
    return tmp_path


def test_dry_run_prints_versions_kernel_push_and_submit(build: Path, capsys) -> None:
    assert push.main(["--build", str(build), "--message", "v2"]) == 0
    out = capsys.readouterr().out.splitlines()
    cmds = [line for line in out if line.startswith("kaggle ")]
    assert cmds[:3] == [f"kaggle datasets version -p {build / d} -r zip -m v2" for d in push.DATASETS]
    assert cmds[3] == f"kaggle kernels push -p {build / push.KERNEL}"
    assert "kaggle kernels output alice/tpurank-inference" in cmds[5]
    assert cmds[6].startswith("kaggle competitions submit predict-ai-model-runtime -f ")
    assert not any("warning" in line for line in out)


def test_first_upload_uses_create(build: Path, capsys) -> None:
    push.main(["--build", str(build), "--create", "--steps", "datasets"])
    cmds = [x for x in capsys.readouterr().out.splitlines() if x.startswith("kaggle ")]
    assert cmds == [f"kaggle datasets create -p {build / d} -r zip" for d in push.DATASETS]


def test_execute_refuses_placeholder_owner(tmp_path: Path, capsys) -> None:
    for name in push.DATASETS + (push.KERNEL,):
        (tmp_path / name).mkdir()
        meta = kmeta.load_template(name, push.PLACEHOLDER_OWNER)
        file_name = kmeta.KERNEL_FILE if name == push.KERNEL else kmeta.DATASET_FILE
        (tmp_path / name / file_name).write_text(json.dumps(meta))
    (tmp_path / push.KERNEL / "inference.ipynb").write_text("{}")
    assert push.main(["--build", str(tmp_path), "--execute"]) == 1
    assert "placeholder" in capsys.readouterr().err


def test_missing_build_is_reported(tmp_path: Path, capsys) -> None:
    assert push.main(["--build", str(tmp_path / "nothing"), "--execute"]) == 1
    assert "make kaggle-bundle" in capsys.readouterr().err


def test_unknown_step_is_an_error(build: Path) -> None:
    with pytest.raises(SystemExit):
        push.main(["--build", str(build), "--steps", "datasets,deploy"])
