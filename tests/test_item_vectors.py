"""``tokenize.item_vectors``: semantic IDs from the item text, from the trained SASRec's item embeddings, or both."""

from __future__ import annotations

import json

import numpy as np

from crabrec.config import load_config
from crabrec.pipeline import RunContext
from crabrec.sid.codebook import Codebook
from crabrec.stages import registry
from crabrec.stages.sid import join_vectors

from .conftest import TINY, cli


def test_join_vectors_weighs_each_source_the_same():
    text = np.array([[3.0, 4.0], [0.0, 2.0]])
    cf = np.array([[10.0], [-0.5]])
    joined = join_vectors([text, cf])
    np.testing.assert_allclose(joined, [[0.6, 0.8, 1.0], [0.0, 1.0, -1.0]], rtol=1e-6)


def test_the_default_is_in_no_cache_key_and_sasrec_vectors_make_tokenize_need_sasrec():
    stages = registry()
    text = RunContext(config=load_config(), stages=stages)
    both = RunContext(config=load_config(overrides={"tokenize": {"item_vectors": "text+sasrec"}}), stages=stages)
    assert "tokenize.item_vectors" not in text.settings("tokenize")  # existing runs keep their keys
    assert both.settings("tokenize")["tokenize.item_vectors"] == "text+sasrec"
    assert text.needs("tokenize") == ("data", "embed")
    assert both.needs("tokenize") == ("data", "embed", "sasrec")
    assert text.key("tokenize") != both.key("tokenize")
    assert text.key("embed") == both.key("embed")  # switching the source does not re-embed the text


def test_text_and_sasrec_vectors_through_the_cli(office_slice, tmp_path):
    args = ["--data", str(office_slice), "--set", f"runs_dir={tmp_path}", "--name", "cf", *TINY]
    code, _ = cli(["run", *args, "--set", "tokenize.item_vectors=text+sasrec", "--until", "tokenize"])
    assert code == 0
    run = tmp_path / "cf"
    state = json.loads((run / "stages/tokenize.json").read_text())
    text_dim = json.loads((run / "stages/embed.json").read_text())["summary"]["dim"]
    assert state["summary"]["item_vectors"] == "text+sasrec"
    assert state["summary"]["dim"] == text_dim + 16  # TINY's sasrec.hidden
    assert (run / "models/sasrec/model/model.safetensors").is_file()  # trained first, for its item embeddings
    assert Codebook.load(run / "sid/codebook.json").n_items == len(
        json.loads((run / "data/items.json").read_text())["item_ids"]
    )


def test_ids_only_data_gets_sids_from_sasrec(beauty_slice, tmp_path, capsys):
    args = ["--data", str(beauty_slice), "--set", f"runs_dir={tmp_path}", "--name", "ids", *TINY]
    assert cli(["run", *args, "--set", "tokenize.item_vectors=sasrec", "--until", "tokenize"])[0] == 0
    assert json.loads((tmp_path / "ids/stages/tokenize.json").read_text())["summary"]["dim"] == 16
    capsys.readouterr()
    assert cli(["run", *args, "--name", "ids2", "--until", "tokenize"])[0] == 0  # the default on ids-only data
    assert "cluster SASRec's item embeddings" in capsys.readouterr().err
    same = [json.loads((tmp_path / run / "sid/codebook.json").read_text()) for run in ("ids", "ids2")]
    assert same[0] == same[1]
    bad = ["--set", "tokenize.quantizer=import", "--set", "tokenize.item_vectors=sasrec"]
    assert cli(["run", *args, "--name", "ids3", *bad, "--until", "tokenize"])[0] == 2
    assert "item_vectors=sasrec needs a quantizer that clusters vectors" in capsys.readouterr().err
