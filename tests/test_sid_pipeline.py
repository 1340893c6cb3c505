"""End to end on a slice of real Office data: data -> embed -> tokenize through the CLI, with caching."""

from __future__ import annotations

import json

import pytest

from crabrec.cli import main


def cli(args, capsys):
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    return exc.value.code or 0, out.out, out.err


def test_tokenize_then_sid_stats(office_slice, tmp_path, capsys):
    common = [
        "--data",
        str(office_slice),
        "--set",
        f"runs_dir={tmp_path}",
        "--set",
        "data.kcore=2",
        "--set",
        "embed.encoder=hashing-bow",
        "--name",
        "slice",
    ]
    code, out, err = cli(["tokenize", *common, "--codebook-size", "16"], capsys)
    assert code == 0, err
    assert "[embed] done" in err and "[tokenize] done" in err
    run = tmp_path / "slice"
    codebook = json.loads((run / "sid" / "codebook.json").read_text())
    assert codebook["meta"]["collisions"] == 0
    index = json.loads((run / "sid" / "index.json").read_text())
    assert all(len(v) == len(codebook["sizes"]) for v in index.values())
    code, out, err = cli(["sid", "stats", *common], capsys)
    assert code == 0 and "0 colliding items" in out and "gini" in out
    # a second run is cached; the same config gives byte-identical codebooks
    before = (run / "sid" / "codebook.json").read_bytes()
    code, out, err = cli(["tokenize", *common, "--codebook-size", "16", "--force"], capsys)
    assert code == 0 and "[embed] cached" in err and "[tokenize] done" in err
    assert (run / "sid" / "codebook.json").read_bytes() == before


def test_run_until_stops_after_the_named_stage(office_slice, tmp_path, capsys):
    code, out, err = cli(
        [
            "run",
            "--data",
            str(office_slice),
            "--set",
            f"runs_dir={tmp_path}",
            "--set",
            "embed.encoder=hashing-bow",
            "--set",
            "tokenize.codebook_size=16",
            "--set",
            "data.kcore=2",
            "--until",
            "tokenize",
        ],
        capsys,
    )
    assert code == 0, err
    assert "[tokenize] done" in err and "[train]" not in err
    assert not (tmp_path / "office-quick" / "models").exists()
