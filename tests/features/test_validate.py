"""Validator: every kind of bad file is caught with the file named; CLI exit codes and report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

from features import io as fio
from features.__main__ import main as features_main
from bigfile import layout_arrays, tile_arrays, write_mini_root
from features.io import BadGraphError
from features import repair
from features.validate import check_file, repairs_of, validate_file
from features.validate import load_bad_files

Arrays = dict[str, np.ndarray]


def _layout() -> Arrays:
    return layout_arrays(60, 9, 6, seed=3)


def _tile() -> Arrays:
    return tile_arrays(12, 7, seed=3)


def _set(arrays: Arrays, key: str, index, value) -> Arrays:
    arrays[key] = arrays[key].astype(np.result_type(arrays[key], type(value)), copy=True)
    arrays[key][index] = value
    return arrays


# (name, make arrays, mutation, words the problem must contain)
BAD_CASES: list[tuple[str, Callable[[], Arrays], Callable[[Arrays], Arrays], str]] = [
    ("missing_key", _layout, lambda a: {k: v for k, v in a.items() if k != "node_config_ids"},
     "missing required key 'node_config_ids'"),
    ("tile_missing_normalizers", _tile,
     lambda a: {k: v for k, v in a.items() if k != "config_runtime_normalizers"},
     "missing required key 'config_runtime_normalizers'"),
    ("node_feat_width", _layout, lambda a: {**a, "node_feat": a["node_feat"][:, :139]},
     "node_feat has shape"),
    ("opcode_length", _layout, lambda a: {**a, "node_opcode": a["node_opcode"][:-1]},
     "node_opcode has shape"),
    ("config_feat_rows", _layout, lambda a: {**a, "node_config_feat": a["node_config_feat"][:-1]},
     "node_config_feat has shape"),
    ("tile_config_width", _tile, lambda a: {**a, "config_feat": a["config_feat"][:, :20]},
     "config_feat has shape"),
    ("float_opcode", _layout, lambda a: {**a, "node_opcode": a["node_opcode"].astype(np.float32)},
     "node_opcode has dtype float32"),
    ("nan_node_feat", _layout, lambda a: _set(a, "node_feat", (3, 21), np.nan),
     "node_feat has 1 NaN"),
    ("inf_tile_config", _tile, lambda a: _set(a, "config_feat", (1, 2), np.inf),
     "config_feat has 0 NaN and 1 infinite"),
    ("nan_layout_config", _layout, lambda a: _set(a, "node_config_feat", (8, 5, 17), np.nan),
     "node_config_feat has 1 NaN"),
    ("nan_runtime", _layout, lambda a: _set(a, "config_runtime", 2, np.nan),
     "config_runtime has 1 NaN"),
    ("empty_configs", _layout, lambda a: {**a, "config_runtime": a["config_runtime"][:0],
                                          "node_config_feat": a["node_config_feat"][:0]},
     "empty config set"),
    ("tile_empty_configs", _tile, lambda a: {**a, "config_runtime": a["config_runtime"][:0],
                                             "config_feat": a["config_feat"][:0],
                                             "config_runtime_normalizers":
                                                 a["config_runtime_normalizers"][:0]},
     "empty config set"),
    ("no_configurable_nodes", _layout,
     lambda a: {**a, "node_config_ids": a["node_config_ids"][:0],
                "node_config_feat": a["node_config_feat"][:, :0]}, "no configurable nodes"),
    ("unknown_opcode", _layout, lambda a: _set(a, "node_opcode", 4, 999), "unknown opcode ids"),
    ("edge_out_of_range", _layout, lambda a: _set(a, "edge_index", (0, 0), 60),
     "outside [0, 60)"),
    ("negative_edge", _tile, lambda a: _set(a, "edge_index", (0, 1), -1), "outside [0, 12)"),
    ("non_topological_edge", _layout,
     lambda a: {**a, "edge_index": np.concatenate([a["edge_index"], [[5, 9]]])},
     "break topological order"),
    ("self_loop", _layout, lambda a: {**a, "edge_index": np.concatenate([a["edge_index"], [[7, 7]]])},
     "break topological order"),
    ("config_id_out_of_range", _layout, lambda a: _set(a, "node_config_ids", 5, 60),
     "node_config_ids has 1 ids outside [0, 60)"),
    ("config_id_duplicate", _layout,
     lambda a: _set(a, "node_config_ids", 1, int(a["node_config_ids"][0])), "duplicate ids"),
    ("layout_value_too_big", _layout, lambda a: _set(a, "node_config_feat", (0, 0, 0), 7.0),
     "outside -1...5"),
    ("layout_value_too_small", _layout, lambda a: _set(a, "node_config_feat", (4, 2, 9), -2.0),
     "outside -1...5"),
    ("layout_value_fraction", _layout, lambda a: _set(a, "node_config_feat", (4, 2, 9), 0.5),
     "non-integer layout values"),
    ("zero_train_runtime", _layout, lambda a: _set(a, "config_runtime", 0, 0),
     "not > 0 in train/valid"),
    ("tile_zero_normalizer", _tile, lambda a: _set(a, "config_runtime_normalizers", 0, 0),
     "config_runtime_normalizers has 1 values that are not > 0"),
    ("node_splits_out_of_range", _layout, lambda a: {**a, "node_splits": np.array([0, 61])},
     "node_splits has values outside [0, 60]"),
    ("node_splits_2d", _layout, lambda a: {**a, "node_splits": np.zeros((2, 2), np.int64)},
     "node_splits has shape (2, 2)"),
]


def _kind_dir(tmp_path: Path, kind: str, split: str = "train") -> Path:
    rel = ("tile", "xla") if kind == "tile" else ("layout", "nlp", "random")
    out = tmp_path.joinpath("npz_all", "npz", *rel, split)
    out.mkdir(parents=True, exist_ok=True)
    return out


def _save(tmp_path: Path, name: str, arrays: Arrays, split: str = "train",
          compressed: bool = False) -> Path:
    kind = "tile" if "config_feat" in arrays or "config_runtime_normalizers" in arrays else "layout"
    path = _kind_dir(tmp_path, kind, split) / f"{name}.npz"
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    return path


@pytest.mark.parametrize("name,make,mutate,words", BAD_CASES, ids=[c[0] for c in BAD_CASES])
def test_bad_file_is_reported_with_its_name(tmp_path: Path, name, make, mutate, words) -> None:
    path = _save(tmp_path, name, mutate(make()))
    problems = validate_file(path)
    assert problems, f"{name}: no problem found"
    assert any(words in p for p in problems), problems
    with pytest.raises(BadGraphError) as err:
        check_file(path)
    assert str(err.value).startswith(f"{path}: ") and words in str(err.value)


@pytest.mark.parametrize("make", [_layout, _tile], ids=["layout", "tile"])
@pytest.mark.parametrize("compressed", [False, True])
def test_valid_files_pass(tmp_path: Path, make, compressed: bool) -> None:
    path = _save(tmp_path, "good", make(), compressed=compressed)
    assert validate_file(path) == []
    check_file(path)  # no raise


def test_test_split_allows_zero_runtimes_not_negative(tmp_path: Path) -> None:
    arrays = _layout()
    arrays["config_runtime"] = np.zeros_like(arrays["config_runtime"])
    assert validate_file(_save(tmp_path, "zeros", arrays, split="test")) == []
    assert validate_file(_save(tmp_path, "zeros", arrays, split="train"))
    arrays["config_runtime"][0] = -5
    assert validate_file(_save(tmp_path, "negative", arrays, split="test"))


def test_node_splits_row_vector_and_int32_accepted(tmp_path: Path) -> None:
    arrays = _layout()
    arrays["node_splits"] = arrays["node_splits"].reshape(1, -1).astype(np.int32)
    for key in ("node_opcode", "edge_index", "node_config_ids"):
        arrays[key] = arrays[key].astype(np.int32)
    assert validate_file(_save(tmp_path, "rowvec", arrays)) == []


@pytest.mark.parametrize("cut", [0.3, 0.9])
def test_truncated_file_gives_clear_error(tmp_path: Path, cut: float) -> None:
    path = _save(tmp_path, "cut", _layout())
    data = path.read_bytes()
    path.write_bytes(data[:int(len(data) * cut)])
    problems = validate_file(path)
    assert len(problems) == 1 and "truncated or corrupt" in problems[0]
    with pytest.raises(BadGraphError, match=r"cut\.npz: not a readable npz"):
        check_file(path)


def test_corrupt_member_data_gives_clear_error(tmp_path: Path) -> None:
    path = _save(tmp_path, "flip", _layout(), compressed=True)
    data = bytearray(path.read_bytes())
    start = data.find(b"node_config_feat.npy") + 200  # inside the deflate stream of that member
    data[start:start + 8] = b"\x00" * 8
    path.write_bytes(bytes(data))
    problems = validate_file(path)
    assert problems and any("corrupt" in p or "truncated" in p for p in problems), problems


def test_not_a_zip(tmp_path: Path) -> None:
    path = _kind_dir(tmp_path, "tile") / "text.npz"
    path.write_text("hello")
    assert "not a readable npz" in validate_file(path)[0]


def test_kind_from_keys_outside_kaggle_layout(tmp_path: Path) -> None:
    np.savez(tmp_path / "loose.npz", **_tile())
    assert validate_file(tmp_path / "loose.npz") == []
    arrays = _layout()
    arrays["node_config_feat"][0, 0, 0] = 9
    np.savez(tmp_path / "loose_bad.npz", **arrays)
    assert any("outside -1...5" in p for p in validate_file(tmp_path / "loose_bad.npz"))


def test_layout_values_are_streamed_in_chunks(tmp_path: Path, monkeypatch) -> None:
    """A bad value in the last chunk is found although chunks are tiny (no whole-array load)."""
    seen: list[int] = []
    real_iter = fio.iter_npz_chunks

    def spy(path, key, chunk_bytes, zf=None):
        for chunk in real_iter(path, key, 64, zf=zf):
            seen.append(chunk.nbytes)
            yield chunk

    import features.validate as validate_mod
    monkeypatch.setattr(validate_mod, "iter_npz_chunks", spy)
    arrays = _layout()
    arrays["node_config_feat"][-1, -1, -1] = 6
    problems = validate_file(_save(tmp_path, "last", arrays))
    assert any("max 6" in p for p in problems), problems
    assert max(seen) <= 64 and len(seen) == 9 * 6 * 18 * 4 // 64 + 1


def test_real_reference_files_are_valid(shared_data: Path) -> None:
    for path in sorted((shared_data / "real-tpu" / "reference").glob("*.npz")):
        assert validate_file(path) == [], path


def test_cli_exit_codes_and_report(tmp_path: Path, capsys) -> None:
    root = write_mini_root(tmp_path / "root")
    report = tmp_path / "report.json"
    args = ["validate", "--data", str(root), "--report", str(report), "--no-progress"]
    assert features_main(args) == 0
    out = capsys.readouterr().out
    assert "layout:nlp:default" in out and "15 files, 0 bad" in out
    assert load_bad_files(report) == set()

    bad = next((root / "npz_all/npz/layout/xla/random/valid").glob("*.npz"))
    arrays = dict(np.load(bad))
    arrays["node_opcode"][0] = 500
    np.savez(bad, **arrays)
    assert features_main(args) == 1
    captured = capsys.readouterr()
    assert f"{bad.resolve()}: node_opcode has 1 unknown opcode" in captured.err
    assert "15 files, 1 bad" in captured.out

    assert features_main(args + ["--skip-bad", "--jobs", "2"]) == 0
    data = json.loads(report.read_text())
    assert data["n_bad"] == 1 and data["bad_files"][0]["split"] == "valid"
    assert data["bad_files"][0]["collection"] == "layout:xla:random"
    assert load_bad_files(report) == {str(bad.resolve())}
    rows = {(r["collection"], r["split"]): r for r in data["summary"]}
    assert rows[("layout:xla:random", "valid")]["bad"] == 1
    assert rows[("tile:xla", "train")]["configs"] == 7


def test_cli_empty_root_fails(tmp_path: Path) -> None:
    assert features_main(["validate", "--data", str(tmp_path), "--report",
                          str(tmp_path / "r.json"), "--no-progress"]) == 1


def test_load_bad_files_missing_report_is_empty(tmp_path: Path) -> None:
    assert load_bad_files(tmp_path / "absent.json") == set()


def test_sample_dataset_is_valid(tiny_root: Path, tmp_path: Path) -> None:
    """The generated tiny sample passes."""
    root = tiny_root
    assert features_main(["validate", "--data", str(root), "--report",
                          str(tmp_path / "r.json"), "--no-progress"]) == 0


def test_repairable_problems_of_test_files_are_listed_with_their_repairs(tmp_path: Path, capsys) -> None:
    """A test file with only repairable problems (features.repair) is ranked, not skipped; the
    same problems in a valid file make it bad; an unrepairable one keeps a test file bad."""
    import bad_graphs

    root = write_mini_root(tmp_path / "root")
    layout = "npz_all/npz/layout/xla/random"
    test_file = next((root / layout / "test").glob("*.npz"))
    valid_file = next((root / layout / "valid").glob("*.npz"))
    bad_graphs.rewrite(test_file, bad_graphs.with_infinite_feature)
    bad_graphs.rewrite(test_file, bad_graphs.with_unknown_opcode)
    bad_graphs.rewrite(valid_file, bad_graphs.with_infinite_feature)
    nlp_test = next((root / "npz_all/npz/layout/nlp/random/test").glob("*.npz"))
    bad_graphs.rewrite(nlp_test, bad_graphs.without_configurable_nodes)
    report = tmp_path / "report.json"
    args = ["validate", "--data", str(root), "--report", str(report), "--no-progress"]
    assert features_main(args) == 1  # the valid file is bad
    err = capsys.readouterr().err
    assert f"REPAIRED {test_file.resolve()}" in err and "shared unknown bucket 0" in err
    data = json.loads(report.read_text())
    assert load_bad_files(report) == {str(valid_file.resolve())}
    repaired = {Path(r["path"]).name: r["repairs"] for r in data["repaired_files"]}
    assert repaired == {test_file.name: sorted([repair.NON_FINITE, repair.UNKNOWN_OPCODE]),
                        nlp_test.name: [repair.NO_CONFIGURABLE_NODE]}
    rows = {(r["collection"], r["split"]): r for r in data["summary"]}
    assert rows[("layout:xla:random", "test")]["repaired"] == 1 and rows[("layout:xla:random", "valid")]["bad"] == 1
    arrays = dict(np.load(test_file))
    arrays["edge_index"] = arrays["edge_index"][:, ::-1].copy()  # broken order: no repair for that
    np.savez(test_file, **arrays)
    assert repairs_of(validate_file(test_file)) is None
    assert repairs_of([]) is None
