"""Submission writer and the strict checker: every rejection names the line, the ID and why."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble.submission import (check_file, check_text, expected_rows, format_submission,
                                 main, read_submission, submission_rows, write_submission)
from ensemble.truth import config_count
from tpurank.collections import get_collection
from features.io import discover

TILE = get_collection("tile:xla")


def _valid_rows(root):
    rows = {}
    for gf in discover(root, splits=("test",)):
        rows.update(submission_rows(gf.collection, {gf.stem: -np.arange(config_count(gf.path), dtype=float)}))
    return rows


def test_writer_output_passes_the_checker(fake_root, tmp_path, capsys):
    rows = _valid_rows(fake_root)
    path = write_submission(tmp_path / "sub.csv", rows)
    assert check_file(path, fake_root) == []
    assert main([str(path), "--data", str(fake_root)]) == 0
    assert "OK" in capsys.readouterr().out
    assert read_submission(path) == rows
    text = path.read_text().splitlines()
    assert text[0] == "ID,TopConfigs" and text[1].startswith("tile:xla:")
    tile_id = next(i for i in rows if i.startswith("tile:"))
    n = expected_rows(fake_root)[tile_id].num_configs
    assert rows[tile_id] == list(range(n - 1, n - 6, -1))  # lowest cost first, 5 of them


def test_tile_rows_are_short_when_a_graph_has_few_configs():
    rows = submission_rows(TILE, {"g": np.array([3.0, 1.0, 2.0])})
    assert rows == {"tile:xla:g": [1, 2, 0]}


def _break(fake_root, mutate):
    rows = _valid_rows(fake_root)
    lines = format_submission(rows).splitlines()
    lines = mutate(lines)
    return check_text("\n".join(lines) + "\n", expected_rows(fake_root))


def _replace_row(prefix, new_top):
    def mutate(lines):
        i = next(k for k, line in enumerate(lines) if line.startswith(prefix))
        lines[i] = lines[i].split(",")[0] + "," + new_top
        return lines
    return mutate


@pytest.mark.parametrize("mutate, message", [
    (lambda lines: ["id,TopConfigs"] + lines[1:], "header"),
    (lambda lines: lines[:-1], "missing ID layout:nlp:random:"),
    (lambda lines: lines + [lines[1]], "duplicate ID (first on line 2)"),
    (lambda lines: lines + ["tile:xla:unknown_graph,0;1;2;3;4"], "unexpected ID: no test graph"),
    (lambda lines: lines + ["foo:bar,0"], "not a known collection prefix"),
    (lambda lines: lines[:1] + [lines[1] + ",7"] + lines[2:], "expected 2 fields"),
    (_replace_row("tile:xla", "0;1;x;3;4"), "non-integer token 'x'"),
    (_replace_row("tile:xla", "0;1;-2;3;4"), "non-integer token '-2'"),
    (_replace_row("tile:xla", "0;1;2;3;99"), "index 99 out of range"),
    (_replace_row("tile:xla", "0;1;1;2;0"), "index 0 repeated"),
    (_replace_row("tile:xla", "0;1;2"), "3 top configs, expected"),
    (_replace_row("layout:xla:default", ";".join(map(str, range(19)))),
     "19 indices (layout rows must be a full permutation), expected 20"),
    (_replace_row("layout:xla:default", ";".join(map(str, range(20))) + ";0"), "repeated"),
    (_replace_row("layout:xla:default", ""), "non-integer token ''"),
])
def test_checker_rejects(fake_root, mutate, message):
    problems = _break(fake_root, mutate)
    assert problems and any(message in p for p in problems), problems


def test_checker_names_line_and_id(fake_root, tmp_path, capsys):
    rows = _valid_rows(fake_root)
    tile_id = sorted(i for i in rows if i.startswith("tile:"))[0]
    rows[tile_id] = [0, 1, 2, 3, 999]
    path = write_submission(tmp_path / "bad.csv", rows)
    assert main([str(path), "--data", str(fake_root)]) == 1
    err = capsys.readouterr().err
    assert f"line 2 (ID {tile_id}): index 999 out of range" in err


def test_checker_accepts_a_kaggle_style_sample_submission(fake_root, tmp_path):
    """Kaggle's sample_submission.csv: tile rows 0;1;2;3;4, layout rows the identity permutation."""
    lines = ["ID,TopConfigs"]
    for sub_id, exp in expected_rows(fake_root).items():
        lines.append(f"{sub_id},{';'.join(str(i) for i in range(exp.row_length))}")
    sample = tmp_path / "sample_submission.csv"
    sample.write_text("\n".join(lines) + "\n")
    assert check_file(sample, fake_root) == []


def test_sample_submission_in_the_root_must_list_the_same_ids(fake_root, tmp_path):
    import shutil
    root = tmp_path / "root"
    shutil.copytree(fake_root, root)
    rows = _valid_rows(root)
    sub = write_submission(tmp_path / "s.csv", rows)
    write_submission(root / "sample_submission.csv", {**rows, "tile:xla:ghost": [0]})
    problems = check_file(sub, root)
    assert len(problems) == 1 and "tile:xla:ghost" in problems[0]


def test_checker_without_test_graphs(tmp_path):
    (tmp_path / "s.csv").write_text("ID,TopConfigs\n")
    assert "no test graphs found" in check_file(tmp_path / "s.csv", tmp_path)[0]
    assert "no such file" in check_file(tmp_path / "nope.csv", tmp_path)[0]


def test_config_count_reads_headers_and_names_bad_files(tmp_path):
    np.savez(tmp_path / "a.npz", config_runtime=np.zeros(7, np.int64), node_feat=np.zeros((3, 140)))
    np.savez_compressed(tmp_path / "b.npz", config_runtime=np.zeros(9, np.int64))
    assert config_count(tmp_path / "a.npz") == 7 and config_count(tmp_path / "b.npz") == 9
    np.savez(tmp_path / "c.npz", node_feat=np.zeros(3))
    (tmp_path / "d.npz").write_bytes(b"not a zip")
    for name in ("c.npz", "d.npz"):
        with pytest.raises(ValueError, match=name):
            config_count(tmp_path / name)


def test_checker_reports_an_unreadable_test_file(fake_root, tmp_path):
    import shutil
    root = tmp_path / "root"
    shutil.copytree(fake_root, root)
    sub = write_submission(tmp_path / "s.csv", _valid_rows(root))
    victim = next(iter(discover(root, splits=("test",)))).path
    victim.write_bytes(b"truncated")
    problems = check_file(sub, root)
    assert len(problems) == 1 and victim.name in problems[0]
