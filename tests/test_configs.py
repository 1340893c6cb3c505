"""Every config shipped in configs/ validates (a renamed or retyped setting must not break a documented command)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from crabrec.config import load_config

CONFIGS = sorted((Path(__file__).resolve().parents[1] / "configs").glob("*.yaml"))


def test_there_are_configs():
    assert len(CONFIGS) >= 5


@pytest.mark.parametrize("path", CONFIGS, ids=[p.stem for p in CONFIGS])
def test_shipped_config_validates(path: Path):
    cfg = load_config(str(path))
    assert cfg.name == path.stem.replace("_", "-")  # its run folder is named after the file


def test_a_config_with_the_former_baselines_section_still_loads_and_says_where_each_key_went(tmp_path, caplog):
    from crabrec.errors import CrabError

    old = tmp_path / "old.yaml"
    old.write_text("baselines:\n  rr_alpha: 0.2\n  rw_beta: 0.5\n  d2lr_clip: 10\n  rr_valid_samples: 300\n")
    with caplog.at_level("WARNING", logger="crabrec"):
        cfg = load_config(str(old))
    assert (cfg.rr.alpha, cfg.rw.beta, cfg.d2lr.clip, cfg.rr.valid_samples) == (0.2, 0.5, 10.0, 300)
    assert "baselines.rr_alpha is now rr.alpha" in caplog.text and "baselines.rw_beta is now rw.beta" in caplog.text
    assert load_config(overrides={"baselines": {"rr_alpha": 0.1}}).rr.alpha == 0.1  # --set baselines.rr_alpha=0.1
    with pytest.raises(CrabError, match=r"baselines.rr_beta: unknown key \(the baselines section moved: rr"):
        load_config(overrides={"baselines": {"rr_beta": 1}})
    with pytest.raises(CrabError, match="rr.alpha"):  # the moved value is validated under its new key
        load_config(overrides={"baselines": {"rr_alpha": -1}})


def test_a_config_may_merge_one_mapping_into_another_but_not_write_a_key_twice(tmp_path):
    """YAML's merge key (``<<: *anchor``) still fills a section, and an explicit key overrides the merged one; a key
    written twice in one mapping is refused (PyYAML alone keeps the last and drops the first silently)."""
    from crabrec.config import load_yaml
    from crabrec.errors import CrabError

    shared = tmp_path / "shared.yaml"
    shared.write_text("x-common: &common {lr: 0.01, epochs: 3}\ntrain:\n  <<: *common\n  epochs: 5\n")
    assert load_yaml(shared.read_text())["train"] == {"lr": 0.01, "epochs": 5}
    assert load_yaml("a: 1\nb: {a: 2}\nc: [{a: 3}, {a: 4}]\n1: x\n'1': y\n") == {
        "a": 1, "b": {"a": 2}, "c": [{"a": 3}, {"a": 4}], 1: "x", "1": "y"
    }  # fmt: skip
    twice = tmp_path / "twice.yaml"
    twice.write_text("train:\n  lr: 0.01\n  lr: 0.02\n")
    with pytest.raises(CrabError, match=r"line 3 invalid YAML \(key 'lr' written twice; the first is on line 2\)"):
        load_config(str(twice))


def test_aliases_that_expand_past_any_config_or_hold_themselves_are_refused_at_once(tmp_path):
    """Nine nested aliases of nine lists (387 million values from a 500-byte file) under ``train.epochs`` ran until
    killed: the error echoed the value, and a list the config takes would have been checked value by value. The
    document is refused when it is read, in time linear in its own size; aliases within the limit are read as
    before, shared values counted as often as they appear."""
    from crabrec.config import MAX_YAML_VALUES, load_yaml
    from crabrec.errors import CrabError

    lines = ['l0: &l0 ["x", "x", "x", "x", "x", "x", "x", "x", "x"]']
    lines += [f"l{n}: &l{n} [{', '.join([f'*l{n - 1}'] * 9)}]" for n in range(1, 9)]
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text("\n".join(lines) + "\ntrain:\n  epochs: *l8\n")
    with pytest.raises(CrabError, match=rf"bomb.yaml: line \d+ invalid YAML \(its aliases expand to more than "
                                        rf"{MAX_YAML_VALUES:,} values\)$"):  # fmt: skip
        load_config(str(bomb))
    within = load_yaml("\n".join(lines[:4]))  # 9 + 81 + 729 + 6,561 values, each list object shared
    assert len(within["l3"]) == 9 and within["l3"][0] is within["l2"] and within["l2"][8][8][8] == "x"
    with pytest.raises(yaml.YAMLError, match="an alias inside the value it names"):
        load_yaml("a: &a [1, {b: *a}]\n")
    assert load_yaml("") is None and load_yaml("# nothing\n") is None


@pytest.mark.skipif(not Path("/dev/fd").is_dir(), reason="needs /dev/fd")
def test_a_config_read_from_a_pipe_as_from_process_substitution():
    """``--config <(...)`` hands the command a pipe (``/dev/fd/N``), not a regular file: it is read all the same."""
    import os

    read, write = os.pipe()
    try:
        os.write(write, b"train:\n  epochs: 1\ndata:\n  kcore: 3\n")
        os.close(write)
        cfg = load_config(f"/dev/fd/{read}")
    finally:
        os.close(read)
    assert cfg.train.epochs == 1 and cfg.data.kcore == 3


def test_a_config_files_path_found_only_from_its_own_folder_is_named(tmp_path, monkeypatch):
    """Relative paths in a config file are read from the current folder, as the shipped configs' are: a path that is
    not there, but is there from the file's folder, is one error that says so and how to write it."""
    from crabrec.errors import CrabError

    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "ratings.csv").write_text("user,item\n1,2\n")
    (tmp_path / "exp").mkdir()
    cfg = tmp_path / "exp" / "my.yaml"
    cfg.write_text("data:\n  path: ../data/ratings.csv\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CrabError, match=r"config exp/my.yaml: data.path '../data/ratings.csv' is read from the current "
                                        r"folder \(.*\), where it is not; from the config file's folder it is: write "
                                        r"it as 'data/ratings.csv', or run crabrec from exp$"):  # fmt: skip
        load_config("exp/my.yaml")
    monkeypatch.chdir(tmp_path / "exp")
    assert load_config("my.yaml").data.path == "../data/ratings.csv"
    cfg.write_text("data:\n  path: data/ratings.csv\n")
    monkeypatch.chdir(tmp_path)
    assert load_config("exp/my.yaml").data.path == "data/ratings.csv"  # found from here: read from here
