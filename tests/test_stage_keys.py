"""Stage cache keys: a setting invalidates exactly the stages that read it.

Three links make the guarantee: (1) a stage's key hashes the settings it declares (minus speed-only ones), checked
by changing every setting of the config in turn; (2) while it runs, a stage can read nothing it has not declared
(the config view refuses it); (3) every declared setting is really read, checked on the states of two real runs
(text data and ids-only data), which record what each stage read.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from crabrec.config import is_speed_only, leaf_keys, load_config, parse_overrides
from crabrec.pipeline import ConfigView, RunContext, UndeclaredRead
from crabrec.stages import registry

# Settings whose use depends on the dataset's format (data.item_table, data.user_col, ...): a run reads some of them.
FORMAT_DEPENDENT = "data."


class Dumped:
    """A stand-in config whose dump is a given dict (so any setting can be changed, valid or not); attribute reads
    (which settings a choice brings in) go to the unchanged config."""

    def __init__(self, dump: dict[str, Any], real: Any) -> None:
        self._dump, self._real = dump, real

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)

    def model_dump(self, mode: str = "json") -> dict[str, Any]:
        return self._dump


def direct_invalidations(key: str) -> set[str]:
    """Stages whose own config part of the key changes when ``key`` changes."""
    cfg = load_config()
    stages = registry()
    before = RunContext(config=cfg, stages=stages)
    dump = cfg.model_dump(mode="json")
    node = dump
    *parents, last = key.split(".")
    for part in parents:
        node = node[part]
    node[last] = ["changed", node[last]]
    after = RunContext(config=Dumped(dump, cfg), stages=stages)  # type: ignore[arg-type]
    return {name for name in stages if before.settings(name) != after.settings(name)}


def test_each_setting_invalidates_exactly_the_stages_that_declare_it():
    stages, cfg = registry(), load_config()
    table = {}
    for key in leaf_keys():
        readers = {name for name, stage in stages.items() if key in stage.declared_keys(cfg)}
        expected = set() if is_speed_only(key) else readers
        table[key] = direct_invalidations(key)
        assert table[key] == expected, key
    # the review's examples
    assert table["train.hidden"] == {"train", "rw", "d2lr"}  # not TIGER, SASRec or the CRAB fine-tune's own key
    assert table["evaluate.batch_size"] == set() and table["train.threads"] == set()
    assert "rebalance" not in table["crab.gamma"] and table["crab.gamma"] == {"finetune", "tiger-finetune"}
    assert table["rr.alphas"] == {"rr", "ppd-rr", "tiger-rr", "tiger-ppd-rr"}  # RR's tuning, over any beams
    assert table["seed"] >= {"tokenize", "train", "tiger", "sasrec", "rw", "d2lr", "rebalance", "finetune"}
    assert table["tokenize.rqvae_epochs"] == set()  # the default quantizer is rqkmeans: RQ-VAE settings are unused
    assert table["tokenize.kmeans_iters"] == {"tokenize"}


def test_a_new_codebook_reruns_what_uses_semantic_ids_but_not_sasrec():
    def keys(**overrides) -> dict[str, str]:
        ctx = RunContext(config=load_config(overrides=overrides), stages=registry())
        return {name: ctx.key(name) for name in ctx.stages}

    base, other = keys(), keys(tokenize={"levels": 2})
    assert base["sasrec"] == other["sasrec"] and base["embed"] == other["embed"]
    changed = ("tokenize", "train", "evaluate", "tiger", "tiger-eval", "rebalance", "finetune", "crab-eval", "report")
    assert all(base[name] != other[name] for name in changed)


def test_a_stage_cannot_read_a_setting_it_does_not_declare():
    seen: set[str] = set()
    view = ConfigView(load_config(), {"train.lr"}, seen, "demo")
    assert view.train.lr == load_config().train.lr and view.run_dir.name == "office-quick"
    with pytest.raises(UndeclaredRead, match="'train.hidden'"):
        _ = view.train.hidden
    assert seen == {"train.lr"}


def test_every_declared_setting_is_read_by_a_real_run(tiny_run, ids_run):
    read: dict[str, set[str]] = {}
    declared: dict[str, set[str]] = {}
    for run in (tiny_run, ids_run):  # rqkmeans on text, imported SIDs without text
        cfg = load_config(str(run / "config.yaml"))
        for state in (run / "stages").glob("*.json"):
            read.setdefault(state.stem, set()).update(json.loads(state.read_text()).get("read", []))
            declared.setdefault(state.stem, set()).update(registry()[state.stem].declared_keys(cfg))
    for name in declared:
        unread = {k for k in declared[name] - read[name] if not k.startswith(FORMAT_DEPENDENT) and not is_speed_only(k)}
        assert not unread, f"stage {name} declares settings it never read: {sorted(unread)}"
    assert {"train", "tiger", "sasrec", "rw", "d2lr", "rr", "rebalance", "finetune", "crab-eval"} <= set(read)


def test_a_setting_added_later_keeps_what_was_cached_before_it():
    """``tiger.init`` came after TIGER models were cached, all trained from a random draw: ``random`` is left out of
    the key (those caches stay valid); the default ``auto`` and ``codebook`` change TIGER's results, so they key it."""
    settings = {}
    for init in ("random", "auto", "codebook"):
        ctx = RunContext(config=load_config(overrides={"tiger": {"init": init}}), stages=registry())
        settings[init] = ctx.settings("tiger")
    assert "tiger.init" not in settings["random"]
    assert settings["auto"] == {**settings["random"], "tiger.init": "auto"}
    assert settings["codebook"]["tiger.init"] == "codebook"
    assert load_config().tiger.init == "auto"


def test_tigers_own_seed_keys_only_tiger():
    """``tiger.seed`` re-seeds TIGER alone: unset it is not in any key (cached TIGER models stay valid); set, it keys
    TIGER and nothing upstream, so the semantic IDs stay the ones the run's ``seed`` drew."""
    plain = RunContext(config=load_config(), stages=registry())
    own = RunContext(config=load_config(overrides={"tiger": {"seed": 7}}), stages=registry())
    assert "tiger.seed" not in plain.settings("tiger")
    assert own.settings("tiger") == {**plain.settings("tiger"), "tiger.seed": 7}
    for upstream in ("data", "embed", "tokenize"):
        assert own.settings(upstream) == plain.settings(upstream)


def test_a_stage_revision_keys_that_stage_and_what_reads_it_and_revision_0_is_in_no_key():
    """A stage whose code changed its results (``Stage.revision`` bumped) gets a new key, and so do the stages that
    read its output; the others keep theirs, and a stage at revision 0 has the key it had before revisions existed."""
    import dataclasses

    from crabrec.io import sha256_of

    cfg = load_config()
    stages = registry()
    now = RunContext(config=cfg, stages=stages)
    assert stages["tiger"].revision >= 1  # the per-level layout's starting weights changed its results
    assert stages["data"].revision == 0
    plain = {"stage": "data", "config": now.settings("data"), "inputs": {}}
    assert now.key("data") == sha256_of(plain)
    bumped = dict(stages)
    bumped["tiger"] = dataclasses.replace(stages["tiger"], revision=stages["tiger"].revision + 1)
    later = RunContext(config=cfg, stages=bumped)
    changed = {name for name in stages if now.key(name) != later.key(name)}

    def reads_tiger(name: str) -> bool:
        return name == "tiger" or any(reads_tiger(dep) for dep in now.needs(name))

    assert changed == {name for name in stages if reads_tiger(name)}
    assert {"tiger", "tiger-eval", "report"} <= changed and "evaluate" not in changed


def test_a_result_of_an_older_revision_is_recomputed_and_the_log_says_why(tmp_path, caplog):
    """A finished stage recorded under revision 0 is not done under revision 1 (its key changed), and the log names
    the revision change as the reason for recomputing it; a state at the current revision says nothing."""
    import dataclasses
    import logging

    from crabrec.io import write_json

    cfg = load_config(overrides={"runs_dir": str(tmp_path), "name": "r"})
    stages = dict(registry())
    old = RunContext(config=cfg, stages=stages)
    write_json(old.state_path("data"), {"key": old.key("data"), "summary": {}, "read": []})
    stages["data"] = dataclasses.replace(stages["data"], revision=1)
    new = RunContext(config=cfg, stages=stages)
    assert new.key("data") != old.key("data") and not new.is_done("data")
    with caplog.at_level(logging.INFO, logger="crabrec"):
        new._say_if_revised("data")
    assert "[data] its code changed since this run computed it (revision 0 -> 1): recomputing" in caplog.text
    caplog.clear()
    write_json(new.state_path("data"), {"key": new.key("data"), "revision": 1, "summary": {}, "read": []})
    with caplog.at_level(logging.INFO, logger="crabrec"):
        new._say_if_revised("data")
    assert caplog.text == ""


def test_grouping_rows_by_length_keys_the_decoder_trainings_only_when_set():
    """``train.group_by_length`` came after decoder models were cached: off, it is in no key (those caches stay
    valid); on, it keys MOR, RW, D²LR and CRAB's fine-tune, which batch their rows with it, and nothing else."""
    off = RunContext(config=load_config(), stages=registry())
    on = RunContext(config=load_config(overrides={"train": {"group_by_length": True}}), stages=registry())
    changed = {name for name in registry() if off.settings(name) != on.settings(name)}
    assert changed == {"train", "rw", "d2lr", "finetune"}
    assert all("train.group_by_length" not in off.settings(name) for name in changed)


def test_dropping_missing_items_keys_the_data_stage_only_when_set():
    """``data.missing_items`` came after runs were cached: at its default (an error, so any data that loads is the
    same as before) it is in no key; set to drop, it keys the data stage."""
    error = RunContext(config=load_config(), stages=registry())
    drop = RunContext(config=load_config(overrides={"data": {"missing_items": "drop"}}), stages=registry())
    assert {name for name in registry() if error.settings(name) != drop.settings(name)} == {"data"}
    assert "data.missing_items" not in error.settings("data")
    assert error.key("data") != drop.key("data")


# The default run's stage keys (their first 16 hex digits). A change here re-runs every stage of every user's cached
# runs after an upgrade. When that is meant (a stage's results changed: bump its ``revision``), update the table; a new
# setting that leaves results as they were at its old behaviour is ``keyed_when_set`` instead, and keeps these keys.
DEFAULT_KEYS = {
    "data": "72b0509104d4ae9e",
    "embed": "75fb121b43db6bb0",
    "tokenize": "890d2c99e18db116",
    "train": "2bfd554d72eca43d",
    "evaluate": "f00be6c82adb44f3",
    "tiger": "03b0001b48a263d8",
    "tiger-eval": "56a060c22f3ddba2",
    "sasrec": "bb956496693c7303",
    "sasrec-eval": "1cf6255ac489d1b3",
    "rw": "b36fc36fdd6e53c6",
    "rw-eval": "c4b0a993a67d5403",
    "rr": "950cd29b80d228a6",
    "d2lr": "eb08ea812ec05687",
    "d2lr-eval": "c0023691bee0c0dc",
    "rebalance": "173e9f08937ea1dd",
    "finetune": "ce4bb4607aa29535",
    "crab-eval": "373cf667a5b6fa1f",
    "ppd": "8fb72c01ba1fa3c2",
    "ppd-rr": "9f8a4dab24c53588",
    "crab-ppd": "bb270785eceadaf3",
    "tiger-rr": "89c59962089cf946",
    "tiger-finetune": "77ca22a249c9e9c2",
    "tiger-crab-eval": "9eefc06d996b8b04",
    "tiger-ppd": "53d849b1ffe2cf94",
    "tiger-ppd-rr": "7b5c10b0de4179df",
    "pop-eval": "0b4671919ee52cba",
    "random-eval": "6191a1cfc8edb05b",
    "report": "c22940b2c58d66d7",
}


def test_an_upgrade_keeps_the_default_runs_cached_results():
    ctx = RunContext(config=load_config(), stages=registry())
    assert {name: ctx.key(name)[:16] for name in registry()} == DEFAULT_KEYS


def test_a_run_at_a_fixed_tau_keeps_its_cached_ppd_results():
    """PPD's τ is tuned on validation now; a run saved at a fixed τ (every run before, ``ppd.tau: 0.5`` in its
    config.yaml) keeps the keys it had, as its tuning settings are keyed only when changed."""
    before = {"ppd": "74fc21d0a1202f1f", "ppd-rr": "b099baa2d0c9546f", "crab-ppd": "794d93e96f147ed6"}
    ctx = RunContext(config=load_config(None, parse_overrides(["ppd.tau=0.5"])), stages=registry())
    assert {name: ctx.key(name)[:16] for name in before} == before
