"""Decoding-time popularity adjustment: hand-computed oracle, HF-generate equivalence, τ = 0 is the plain search."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from crabrec.config import TrainConfig
from crabrec.decode.beam import beam_search, constrained_search
from crabrec.decode.processors import PopularityPrior, log_prefix_prior, prefix_counts
from crabrec.decode.reference import allowed_prefixes, hf_constrained_beams
from crabrec.decode.trie import SidTrie
from crabrec.models.decoder import N_SPECIAL, build_decoder, encode_rows, item_tokens
from crabrec.sid.codebook import Codebook

# Three items on a two-level codebook: A = (0, 0), B = (0, 1), C = (1, 0), trained on 6, 2 and 1 times.
HAND = Codebook(codes=np.array([[0, 0], [0, 1], [1, 0]]), sizes=[2, 2], item_ids=["A", "B", "C"])
FREQ = np.array([6, 2, 1])
LOG = math.log


def hand_search(tau: float, beam: int):
    """A fixed "model": P(first token) = (0.7, 0.3); after 0: P(A) 0.6, P(B) 0.4; after 1: P(C) 1 (vocab = 4 ids)."""
    trie = SidTrie.build(HAND)
    first = torch.tensor([[LOG(0.7), LOG(0.3), -math.inf, -math.inf]])
    after = {0: [-math.inf, -math.inf, LOG(0.6), LOG(0.4)], 1: [-math.inf, -math.inf, 0.0, -math.inf]}

    def step(origin, token):
        return torch.tensor([after[int(t)] for t in token.reshape(-1)])

    prior = PopularityPrior(trie, FREQ, tau, smoothing=1.0)
    sid, score = constrained_search(first, step, trie, beam, base=0, processors=[prior])
    items = [HAND.item_ids[trie.representative()[s]] for s in sid[0].tolist()]
    return items, score[0].tolist()


def test_prefix_counts_and_smoothed_prior_by_hand():
    trie = SidTrie.build(HAND)
    counts = prefix_counts(trie, FREQ)
    assert counts[0].tolist() == [[8, 1]]
    assert counts[1].tolist() == [[6, 2], [1, 0]]
    prior = log_prefix_prior(trie, FREQ, smoothing=1.0)
    # level 0: (8+1)/(9+2), (1+1)/(9+2); under token 0: 7/10, 3/10; under token 1 only C: 2/2 (no other child)
    np.testing.assert_allclose(np.exp(prior[0]), [[9 / 11, 2 / 11]])
    np.testing.assert_allclose(np.exp(prior[1][0]), [7 / 10, 3 / 10])
    assert prior[1][1].tolist() == [0.0, 0.0]  # C's prior is 1; the missing child stays 0 (masked by the trie)


@pytest.mark.parametrize(
    "tau,order,scores",
    [
        (0.0, ["A", "C", "B"], [LOG(0.42), LOG(0.3), LOG(0.28)]),
        # log p(item) - log P̂(item): A 0.42 / (63/110), B 0.28 / (27/110), C 0.3 / (2/11): the ranking reverses
        (1.0, ["C", "B", "A"], [LOG(0.3 * 11 / 2), LOG(0.28 * 110 / 27), LOG(0.42 * 110 / 63)]),
        (
            0.5,
            ["C", "B", "A"],
            [LOG(0.3 / (2 / 11) ** 0.5), LOG(0.28 / (27 / 110) ** 0.5), LOG(0.42 / (63 / 110) ** 0.5)],
        ),  # noqa: E501
    ],
)
def test_adjusted_ranking_is_the_hand_computed_one(tau, order, scores):
    items, got = hand_search(tau, beam=3)
    assert items == order
    np.testing.assert_allclose(got, scores, rtol=1e-6)


def test_the_adjustment_keeps_a_tail_prefix_alive_inside_the_search():
    """Beam 1: the plain search commits to the popular first token (A); adjusted, the first step already prefers
    token 1 (0.3 / (2/11) > 0.7 / (9/11)), so C survives, which no reranking of the plain beam could return."""
    assert hand_search(0.0, beam=1)[0] == ["A"]
    assert hand_search(1.0, beam=1)[0] == ["C"]


def reference_bonus(cb: Codebook, freq: np.ndarray, tau: float, smoothing: float) -> dict[tuple, dict[int, float]]:
    """``-tau·log P̂(token | prefix)`` keyed by the prefix of model vocabulary ids, counted with plain dicts."""
    tokens = item_tokens(cb.token_ids())
    count: dict[tuple, float] = {}
    for row, f in zip(tokens, freq, strict=True):
        for t in range(1, tokens.shape[1] + 1):
            count[tuple(row[:t].tolist())] = count.get(tuple(row[:t].tolist()), 0.0) + f
    bonus: dict[tuple, dict[int, float]] = {}
    for prefix, children in allowed_prefixes(tokens).items():
        total = sum(count[(*prefix, c)] + smoothing for c in children)
        bonus[prefix] = {c: -tau * math.log((count[(*prefix, c)] + smoothing) / total) for c in children}
    return bonus


@pytest.mark.parametrize("seed,beam,tau", [(0, 10, 0.5), (1, 20, 1.0), (2, 5, 0.25)])
def test_adjusted_search_matches_hf_generate_with_a_logits_processor(seed, beam, tau):
    rng = np.random.default_rng(seed)
    codes = np.unique(rng.integers(0, 8, (60, 3)), axis=0)
    cb = Codebook(codes=codes, sizes=[8] * 3, item_ids=[str(i) for i in range(len(codes))])
    model = build_decoder(N_SPECIAL + cb.vocab_size, TrainConfig(hidden=32, layers=2, heads=2, ff=64), seed=seed)
    model.eval()
    freq = rng.zipf(1.5, cb.n_items).clip(max=500)
    trie = SidTrie.build(cb)
    tokens = item_tokens(cb.token_ids())
    ids, mask, _ = encode_rows(rng.integers(0, cb.n_items, (6, 5)), rng.integers(1, 6, 6), None, tokens)
    prior = PopularityPrior(trie, freq, tau, smoothing=0.5)
    sid, score = beam_search(model, trie, ids, mask, beam, processors=[prior])
    theirs, their_score = hf_constrained_beams(
        model, ids, mask, beam, allowed_prefixes(tokens), cb.n_levels, bonus=reference_bonus(cb, freq, tau, 0.5)
    )
    assert torch.equal(theirs, torch.from_numpy(tokens[trie.representative()])[sid])
    torch.testing.assert_close(their_score, score, rtol=1e-5, atol=1e-5)


def test_tau_zero_is_exactly_the_plain_search():
    rng = np.random.default_rng(3)
    codes = np.unique(rng.integers(0, 8, (80, 3)), axis=0)
    cb = Codebook(codes=codes, sizes=[8] * 3, item_ids=[str(i) for i in range(len(codes))])
    model = build_decoder(N_SPECIAL + cb.vocab_size, TrainConfig(hidden=32, layers=2, heads=2, ff=64), seed=3).eval()
    trie = SidTrie.build(cb)
    tokens = item_tokens(cb.token_ids())
    ids, mask, _ = encode_rows(rng.integers(0, cb.n_items, (5, 6)), rng.integers(1, 7, 5), None, tokens)
    plain = beam_search(model, trie, ids, mask, 12)
    zero = beam_search(model, trie, ids, mask, 12, processors=[PopularityPrior(trie, np.arange(cb.n_items), 0.0)])
    assert all(torch.equal(a, b) for a, b in zip(plain, zero))


def test_smoothing_must_be_positive():
    with pytest.raises(ValueError, match="smoothing"):
        PopularityPrior(SidTrie.build(HAND), FREQ, 1.0, smoothing=0.0)


def test_decoding_methods_in_a_frontier_with_head_to_head_intervals(tiny_run, tmp_path, capsys):
    """PPD at τ = 0 is MOR (validation and test); PPD+RR at τ = 0 is RR; every picked point is compared with RR's
    pick by a paired bootstrap; coverage and tail HR@10 are reported."""
    import json
    import shutil

    from tests.conftest import cli

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    grid = ["--grid", "ppd=0,1", "--grid", "rr=0,0.5", "--grid", "ppd-rr=0"]
    code, _ = cli(["frontier", str(run), "--only", "ppd,rr,ppd-rr", *grid])
    out = capsys.readouterr()
    assert code == 0, out.err
    result = json.loads((run / "frontier" / "frontier.json").read_text())
    points = {(p["method"], p["setting"]): p for p in result["points"]}
    mor, zero = points[("mor", "base")], points[("ppd", "tau=0")]
    for k in ("HR@10", "NDCG@10", "MGU@10", "DGU@10", "coverage@10", "tail_HR@10"):
        if not k.startswith(("cov", "tail")):
            assert zero[f"valid {k}"] == pytest.approx(mor[f"valid {k}"], abs=1e-12), k
        assert zero[f"test {k}"] == pytest.approx(mor[f"test {k}"], abs=1e-12), k
    rr_tuned = json.loads((run / "models" / "rr" / "metrics.json").read_text())
    assert points[("ppd-rr", "tau=0")]["test HR@10"] == pytest.approx(rr_tuned["HR@10"], abs=1e-12)
    assert points[("ppd-rr", "tau=0")]["test DGU@10"] == pytest.approx(rr_tuned["DGU@10"], abs=1e-12)
    versus = result["versus"]
    assert set(versus) == {"ppd", "ppd-rr"} and all(v["against"] == "rr" for v in versus.values())
    for v in versus.values():
        lo, hi = v["DGU@10"]["ci"]
        assert lo <= v["DGU@10"]["delta"] <= hi
    picked = {name: p for name, p in result["selected"].items()}
    delta = picked["ppd"]["test HR@10"] - picked["rr"]["test HR@10"]
    assert versus["ppd"]["HR@10"]["delta"] == pytest.approx(delta, abs=1e-12)
    assert "Head to head against RR" in out.out and "Beyond GU at the picked points" in out.out
    assert 0 < points[("ppd", "tau=1")]["test coverage@10"] <= 1


def test_adjusted_tiger_search_matches_hf_generate_with_a_logits_processor():
    """The same hook in the encoder-decoder search (TIGER): PPD needs nothing of the backbone but its search."""
    from crabrec.config import TigerSection
    from crabrec.decode.beam import seq2seq_beam_search
    from crabrec.models.tiger import build_tiger, encode_inputs

    rng = np.random.default_rng(5)
    codes = np.unique(rng.integers(0, 8, (60, 3)), axis=0)
    cb = Codebook(codes=codes, sizes=[8] * 3, item_ids=[str(i) for i in range(len(codes))])
    size = TigerSection(d_model=32, layers=2, heads=2, d_kv=16, ff=64, dropout=0.0, user_bins=10)
    model = build_tiger(cb.sizes, size, seed=5).eval()
    trie, tokens = SidTrie.build(cb), item_tokens(cb.token_ids())
    freq = rng.zipf(1.5, cb.n_items).clip(max=500)
    ids, mask = encode_inputs(model.config, np.arange(5), rng.integers(0, cb.n_items, (5, 5)), np.full(5, 5), tokens)
    sid, score = seq2seq_beam_search(model, trie, ids, mask, 10, [PopularityPrior(trie, freq, 0.7)])
    theirs, their_score = hf_constrained_beams(
        model, ids, mask, 10, allowed_prefixes(tokens), cb.n_levels, bonus=reference_bonus(cb, freq, 0.7, 1.0)
    )
    assert torch.equal(theirs, torch.from_numpy(tokens[trie.representative()])[sid])
    torch.testing.assert_close(their_score, score, rtol=1e-5, atol=1e-5)


def test_a_frontier_on_data_without_item_text(ids_run, tmp_path, capsys):
    """Ids-only data has no embeddings.npy: a frontier point links what the base run has and runs PPD and RR."""
    import json
    import shutil

    from tests.conftest import cli

    run = tmp_path / "run"
    shutil.copytree(ids_run, run, symlinks=True)
    assert not (run / "embeddings.npy").exists()
    code, _ = cli(["frontier", str(run), "--only", "ppd,rr", "--grid", "ppd=0,0.5", "--grid", "rr=0"])
    assert code == 0, capsys.readouterr().err
    result = json.loads((run / "frontier" / "frontier.json").read_text())
    points = {(p["method"], p["setting"]): p for p in result["points"]}
    assert points[("ppd", "tau=0")]["test HR@10"] == pytest.approx(points[("mor", "base")]["test HR@10"], abs=1e-12)
    assert set(result["selected"]) == {"ppd", "rr"}


def test_ppd_tunes_tau_on_validation_by_rrs_rule_and_ranks_with_it(tiny_run, tmp_path):
    """A default run tunes PPD's τ on validation: one search per τ of the grid, τ = 0 being MOR's own validation, the
    lowest DGU@10 within 5% of its NDCG@10 picked (RR's rule); the test metrics are those of the same τ set by hand,
    and the method's ranker (recommend, the API, serve) searches at the stored τ."""
    import json
    import shutil

    from crabrec.baselines.rerank import choose_alpha
    from crabrec.config import load_config
    from crabrec.errors import CrabError
    from crabrec.methods import get
    from crabrec.methods.ppd import Settings
    from crabrec.runfiles import RunFiles
    from tests.conftest import cli

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    files, cfg = RunFiles(run), load_config(str(run / "config.yaml"))
    prior = json.loads((run / "models" / "ppd" / "prior.json").read_text())
    assert prior["tuned"] and [c["tau"] for c in prior["curve"]] == Settings().taus
    assert prior["tau"] == choose_alpha(prior["curve"], 0.05, knob="tau")
    mor_valid = get("mor").validate(files, cfg, None)
    for k, v in mor_valid.items():
        assert prior["curve"][0][k] == pytest.approx(v, abs=1e-12), k  # τ = 0: the plain search
    assert get("ppd").ranker(files, cfg).processors[0].tau == prior["tau"]
    tuned = json.loads((run / "models" / "ppd" / "metrics.json").read_text())
    summary = json.loads((run / "stages" / "ppd.json").read_text())["summary"]
    assert summary["tau"] == prior["tau"] and summary["train_seconds"] >= 0

    code, _ = cli(["evaluate", str(run), "--method", "ppd", "--force", "--set", f"ppd.tau={prior['tau']}"])
    assert code == 0
    fixed = json.loads((run / "models" / "ppd" / "metrics.json").read_text())
    for k in ("HR@10", "NDCG@10", "MGU@10", "DGU@10"):
        assert fixed[k] == pytest.approx(tuned[k], abs=1e-12), k
    assert json.loads((run / "models" / "ppd" / "prior.json").read_text())["tuned"] is False

    (run / "models" / "ppd" / "prior.json").unlink()
    missing = r"prior.json: missing: ppd's τ is tuned on validation when it is evaluated; run `crabrec evaluate "
    with pytest.raises(CrabError, match=missing):
        get("ppd").ranker(files, cfg)
    with pytest.raises(ValueError, match="contain 0"):
        Settings(taus=[0.5, 1.0])


def test_tiger_based_methods_search_tigers_model_and_are_compared_with_it(tiny_run, tmp_path):
    """TIGER+PPD, TIGER+RR, TIGER+PPD+RR and TIGER+CRAB debias TIGER's trained model: at τ = 0 TIGER+PPD's rankings
    are TIGER's own, each gets its change against TIGER with intervals (besides the one against MOR), and the report
    shows it in a table of its own."""
    import json
    import shutil

    import pandas as pd

    from tests.conftest import cli

    def metrics(run, method):
        return json.loads((run / "models" / method / "metrics.json").read_text())

    tiger = metrics(tiny_run, "tiger")
    for method in ("tiger-ppd", "tiger-rr", "tiger-ppd-rr", "tiger-crab"):
        got = metrics(tiny_run, method)
        assert got["vs_base"]["method"] == "tiger" and "vs_mor" in got
        for k in ("HR@10", "NDCG@10", "DGU@10", "MGU@10"):
            change = got["vs_base"][k]
            assert change["delta"] == pytest.approx(got[k] - tiger[k], abs=1e-12), (method, k)
            assert change["ci"][0] <= change["delta"] <= change["ci"][1]
    assert "vs_base" not in metrics(tiny_run, "ppd")  # PPD over MOR: its change against MOR is the one
    assert json.loads((tiny_run / "models" / "tiger-rr" / "rerank.json").read_text())["curve"][0]["alpha"] == 0.0
    report = (tiny_run / "report.md").read_text()
    against_tiger = report.split("### Change against TIGER")[1].split("###")[0]
    assert "| TIGER+RR |" in against_tiger and "| TIGER+PPD (ours) |" in against_tiger
    assert "| TIGER+PPD+RR (ours) |" in against_tiger and "| TIGER+CRAB |" in against_tiger
    assert "| PPD (ours) |" not in against_tiger

    run = tmp_path / "run"
    shutil.copytree(tiny_run, run)
    assert cli(["evaluate", str(run), "--method", "tiger-ppd", "--force", "--set", "ppd.tau=0"])[0] == 0
    plain = pd.read_parquet(run / "models" / "tiger" / "rankings.parquet")
    zero = pd.read_parquet(run / "models" / "tiger-ppd" / "rankings.parquet")
    assert all(np.array_equal(a, b) for a, b in zip(plain["items"], zero["items"]))
    assert all(v["delta"] == 0 for k, v in metrics(run, "tiger-ppd")["vs_base"].items() if "delta" in v)


def test_the_valid_test_gap_script_scores_the_test_rows_as_the_evaluation_does(tiny_run, capsys):
    """``scripts/valid_test_gap.py``: its test HR@10 over all rows is each method's evaluated one, and its subsets of
    the rows split it (popular/other and SID changed/kept, weighted by their shares, give the whole)."""
    import json
    import runpy
    import sys

    script = runpy.run_path("scripts/valid_test_gap.py")
    argv = sys.argv
    sys.argv = ["valid_test_gap.py", f"{tiny_run}:tiger", f"{tiny_run}:tiger-crab"]
    try:
        script["main"]()
    finally:
        sys.argv = argv
    rows = {}
    for line in capsys.readouterr().out.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        rows[cells[0], cells[1]] = cells[2], float(cells[3]), float(cells[4])
    for column, method in ((1, "tiger"), (2, "tiger-crab")):
        hr = json.loads((tiny_run / "models" / method / "metrics.json").read_text())["HR@10"]
        assert rows["test", "all"][column] == pytest.approx(hr, abs=5e-5), method
        for split in ("validation", "test"):
            for pair in (("popular", "other"), ("SID changed", "SID kept")):
                whole = sum(float(rows[split, p][0]) * rows[split, p][column] for p in pair)
                assert whole == pytest.approx(rows[split, "all"][column], abs=1e-3), (split, pair, method)
