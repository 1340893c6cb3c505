"""scripts/gpu_playbook.sh: its dry run (every step on the CPU with tiny settings), its time budget, and the device
side's bundle delivery (parts carried by separate calls, unpacked and installed once all are there)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "gpu_playbook.sh"
BEAUTY = ROOT.parent / "shared" / "datasets" / "amazon14_beauty_ids"


def playbook(*args: str, **env: str) -> subprocess.CompletedProcess:
    full = {**os.environ, "PY": sys.executable, **env}
    return subprocess.run(["bash", str(SCRIPT), *args], env=full, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def beauty_slice(tmp_path_factory) -> Path:
    """The first 300 Beauty users with their items' published SIDs (the TIGER benchmark's layout)."""
    if not BEAUTY.is_dir():
        pytest.skip(f"{BEAUTY} not found")
    inter = json.loads((BEAUTY / "Beauty.inter.json").read_text())
    index = json.loads((BEAUTY / "Beauty.rqvae_native.index.json").read_text())
    users = dict(list(inter.items())[:300])
    used = {str(i) for seq in users.values() for i in seq}
    folder = tmp_path_factory.mktemp("beauty_slice")
    (folder / "Beauty.inter.json").write_text(json.dumps(users))
    (folder / "Beauty.rqvae_native.index.json").write_text(json.dumps({k: v for k, v in index.items() if k in used}))
    return folder


@pytest.fixture(scope="module")
def office_80(tmp_path_factory) -> Path:
    """The first 80 Office users: the dry run's time is its main line of LLM steps (1, 2, 5), which scale with it."""
    from tests.conftest import office_head

    return office_head(tmp_path_factory.mktemp("office_80"), 80, "OfficeSmall")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    """The random Llama the dry run makes first (``crabrec backbone tiny``), made once in this process: the dry runs
    below find it in their WORK folder and skip the command's start-up."""
    from crabrec.models.backbone import tiny_backbone

    return tiny_backbone(tmp_path_factory.mktemp("backbone") / "tiny")


def test_dry_run_runs_every_step_and_returns_what_a_gpu_session_reads(tmp_path, tiny, office_80, beauty_slice):
    (tmp_path / "tiny").symlink_to(tiny)
    out = tmp_path / "out"
    variants = "tiger.head=level-tied; tiger.weight_decay=0.1"  # the dry run trains the first one, for one epoch
    res = playbook("--dry-run", WORK=str(tmp_path), OUT=str(out), OFFICE_DATA=str(office_80),
                   BEAUTY_DATA=str(beauty_slice), TIGER_VARIANTS=variants)  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    for n in (1, 2, 3, 4, 5):
        assert f"step {n} done" in res.stdout
    names = sorted(p.name for p in out.iterdir())
    assert len(names) <= 8 * 5  # the device returns at most 8 files a call, one step a call
    office = json.loads((out / "office-llm-metrics.json").read_text())
    for stage in ("evaluate", "rr", "crab-eval", "rw-eval", "d2lr-eval", "tiger-eval", "sasrec-eval", "report"):
        assert stage in office["stages"], stage
    assert office["stages"]["crab-eval"]["HR@10"] >= 0
    assert office["curves"]["mor"][0]["epoch"] == 1  # per-epoch loss and validation come back
    rr = office["methods"]["rr"]  # each method's test metrics with its change against MOR and the intervals
    assert rr["HR@10"] == pytest.approx(office["stages"]["rr"]["HR@10"], abs=5e-5)  # the summary rounds to 4
    assert len(rr["vs_mor"]["DGU@10"]["ci"]) == 2
    tables = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "playbook_tables.py"), str(out)], capture_output=True, text=True
    )
    assert tables.returncode == 0, tables.stderr
    assert "paired-bootstrap 95% interval" in tables.stdout  # Table 1 with CIs, made here from what came back
    assert "| TIGER | " in tables.stdout.split("Steps eager and replayed from CUDA graphs")[1]  # step 3's comparison
    for label in ("| MOR (base) |", "| RR |", "| CRAB |", "| RW |", "| D²LR", "- mor (epoch: loss / valid"):
        assert label in tables.stdout, label
    report = (out / "office-llm-report.md").read_text()
    for label in ("| MOR (base)", "| RR", "| CRAB", "| RW", "| D²LR", "| PPD (ours)", "| TIGER", "| SASRec"):
        assert label in report, label  # every method of Table 1 on the backbone's plumbing
    from crabrec.models.backbone import load_tokenizer

    mor = tmp_path / "runs" / "smoke" / "models" / "mor" / "model"
    assert load_tokenizer(mor).convert_tokens_to_ids("<a_0>") > 0  # the SID tokens were added to the backbone's
    benches = {"bench_llm.json": ["train"], "bench_small.json": ["train", "tiger"], "bench_llm_cudnn.json": ["train"]}
    for bench, stages in benches.items():
        measured = json.loads((out / bench).read_text())
        assert sorted(measured["stages"]) == sorted(stages)
        if bench != "bench_small.json":  # the backbone named, whatever the run's own settings say
            assert f"train.backbone={tmp_path / 'tiny'}" in measured["sets"]
        assert measured["cudnn_attention"] == (bench == "bench_llm_cudnn.json")
        for row in measured["stages"].values():
            assert row["flop_per_s"] > 0 and row["rows_per_s"] > 0 and row["epoch_s"] > row["step_s"] > 0
            if bench != "bench_llm_cudnn.json":  # the comparison run is timed, not traced
                assert row["trace"]["aten_calls"] > 0 and row["trace"]["top"]  # what the host issues per step
    graphs = json.loads((out / "bench_small.json").read_text())["cuda_graphs"]  # the small models with cuda_graphs
    assert list(graphs["stages"]) == ["tiger"] and "tiger.cuda_graphs=true" in graphs["sets"]  # on the GPU: MOR too
    wide = json.loads((out / "bench_small.json").read_text())["wide"]  # the same at WIDE_BATCH rows a step
    assert "tiger.batch_size=32" in wide["sets"] and list(wide["stages"]) == ["tiger"]
    assert not (out / "bench_graphs.json").exists()  # folded into bench_small.json: a call returns at most 8 files
    assert not (out / "bench_wide.json").exists()
    compiled = json.loads((out / "bench_small.json").read_text())["wide_compiled"]  # widecompiled: compiled too
    assert {"tiger.compile=true", "tiger.batch_size=32"} <= set(compiled["sets"])
    assert compiled["stages"]["tiger"]["compiled"] and not (out / "bench_wide_compiled.json").exists()
    llm = json.loads((out / "bench_llm.json").read_text())  # the LLM's variants, folded into bench_llm.json
    compiled = llm["compiled"]["stages"]["train"]
    assert compiled["compiled"] and compiled["compile_warmup_steps"] == 3 and compiled["step_s"] > 0
    assert "train.backbone_dtype=bfloat16" in llm["bf16_backbone"]["sets"]
    assert not (out / "bench_compiled.json").exists() and not (out / "bench_bf16.json").exists()
    assert "train.cuda_graphs=true" in llm["cuda_graphs"]["sets"]  # on the CPU its steps run eagerly
    assert not (out / "bench_llm_graphs.json").exists()
    assert "train.batch_size=32" in llm["cuda_graphs_wide"]["sets"]  # llmwide: LLM_WIDE_BATCH rows a step
    assert not (out / "bench_llm_wide.json").exists()
    both = llm["compiled_graphs"]  # llmcompiledgraphs: compiled and replayed (on the CPU: compiled, eager steps)
    assert {"train.compile=true", "train.cuda_graphs=true"} <= set(both["sets"])
    assert both["stages"]["train"]["compiled"] and both["stages"]["train"]["compile_warmup_steps"] == 3
    assert "train.batch_size=32" in llm["compiled_graphs_wide"]["sets"]  # llmcompiledwide
    assert not (out / "bench_llm_cg.json").exists() and not (out / "bench_llm_cg_wide.json").exists()
    variants = tables.stdout.split("The LLM's step, eager and its variants")[1]
    for label in ("| eager, frozen weights in float32 | ", "| frozen weights in bfloat16 | ",
                  "| frozen weights in bfloat16, compiled | ",
                  "| frozen weights in bfloat16, replayed CUDA graphs | ",
                  "| frozen weights in bfloat16, replayed CUDA graphs, a wide batch | ",
                  "| frozen weights in bfloat16, compiled and replayed CUDA graphs | ",
                  "| frozen weights in bfloat16, compiled and replayed CUDA graphs, a wide batch | "):  # fmt: skip
        assert label in variants, label
    frontier = json.loads((out / "office-llm-frontier.json").read_text())  # step 5 (here CRAB's points alone)
    assert {p["method"] for p in frontier["points"]} == {"mor", "crab"} and "crab" in frontier["selected"]
    frontier_md = (out / "office-llm-frontier.md").read_text()
    assert "Accuracy–fairness frontier" in frontier_md
    # CRAB's point against its control (the same fine-tune, no split), with intervals
    assert "| CRAB | gamma=0.2,levels=all,ratio=0.1 | gamma=0.2,levels=all,ratio=0 | " in frontier_md
    assert [(c["setting"], c["against"]) for c in frontier["controls"]] == [
        ("gamma=0.2,levels=all,ratio=0.1", "gamma=0.2,levels=all,ratio=0")
    ]
    # each finished point's metrics come back too (a step stopped by its budget writes no frontier.json)
    assert sorted(office["points"]) == ["crab gamma=0.2,levels=all,ratio=0", "crab gamma=0.2,levels=all,ratio=0.1"]
    assert "Frontier points (test):" in tables.stdout and "| CRAB (gamma=0.2,levels=all,ratio=0.1) |" in tables.stdout
    point = office["point_runs"]["crab gamma=0.2,levels=all,ratio=0.1"]  # its stage records and fine-tune curve
    assert point["stages"]["rebalance"]["split"] > 0 and point["seconds"]["finetune"] > 0
    assert "- crab gamma=0.2,levels=all,ratio=0.1 (epoch: loss / valid NDCG@10): 1: " in tables.stdout
    assert "(rec " in tables.stdout and "alignment " in tables.stdout
    beauty = json.loads((out / "beauty-metrics.json").read_text())
    assert "HR@10" in beauty["stages"]["evaluate"] and "HR@10" in beauty["stages"]["tiger-eval"]
    assert sorted(beauty["curves"]) == ["mor", "tiger"]  # each trained once, side by side
    # a TIGER variant (the dry run keeps the first): trained beside them in a linked run, evaluated against the same MOR
    variant = json.loads((out / "beauty-v1-metrics.json").read_text())
    assert variant["variant"] == "tiger.head=level-tied tiger.epochs=1"
    assert not (out / "beauty-v2-metrics.json").exists()
    assert variant["stages"]["evaluate"] == beauty["stages"]["evaluate"]  # MOR linked, not retrained
    assert len(variant["methods"]["tiger"]["vs_mor"]["HR@10"]["ci"]) == 2
    model = json.loads((tmp_path / "runs" / "beauty-v1" / "models" / "tiger" / "model" / "config.json").read_text())
    assert model["crabrec_head"] == "level-tied"
    assert "TIGER variant: `tiger.head=level-tied tiger.epochs=1`" in tables.stdout


def test_a_step_past_its_budget_stops_and_says_how_to_go_on(tmp_path, tiny, office_slice):
    (tmp_path / "tiny").symlink_to(tiny)
    res = playbook("--dry-run", "--step", "1", WORK=str(tmp_path), OFFICE_DATA=str(office_slice), STEP_SECONDS="2")
    assert res.returncode == 124
    assert "step 1 stopped at its budget of 2s: run --step 1 again on the same machine to go on" in res.stdout


def _wheel(folder: Path) -> None:
    """A minimal pure-Python wheel (one module) for the install the device side does."""
    name = "playbookprobe-1.0"
    files = {
        "playbookprobe.py": "ANSWER = 42\n",
        f"{name}.dist-info/METADATA": "Metadata-Version: 2.1\nName: playbookprobe\nVersion: 1.0\n",
        f"{name}.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{k},,\n" for k in files) + f"{name}.dist-info/RECORD,,\n"
    with zipfile.ZipFile(folder / "playbookprobe-1.0-py3-none-any.whl", "w") as z:
        for k, v in {**files, f"{name}.dist-info/RECORD": record}.items():
            z.writestr(k, v)


def test_the_device_side_waits_for_every_part_then_unpacks_and_installs_once(tmp_path):
    bundle = tmp_path / "bundle"
    (bundle / "whl").mkdir(parents=True)
    _wheel(bundle / "whl")
    (bundle / "runs" / "office-llm").mkdir(parents=True)
    (bundle / "runs" / "office-llm" / "config.yaml").write_text("name: office-llm\n")
    archive = tmp_path / "bundle.tar.xz"
    with tarfile.open(archive, "w:xz") as tar:
        tar.add(bundle, arcname=".")
    data = archive.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    half = len(data) // 2
    for i, chunk in ((1, data[:half]), (2, data[half:])):
        part = tmp_path / f"call{i}" / f".gpu-{i}"
        part.mkdir(parents=True)
        (part / "bundle.part").write_bytes(chunk)
        (part / "manifest").write_text(f"{i} 2 {digest}\n")
    env = {"STASH": str(tmp_path / "stash"), "RUNS": str(tmp_path / "runs"), "OUT": str(tmp_path / "out")}

    early = playbook("--step", "2", PARTS=str(tmp_path / "none"), **env)  # nothing received yet
    assert early.returncode == 2
    assert "step 2 needs every part of the bundle; this machine has: none" in early.stderr
    first = playbook("--step", "0", PARTS=str(tmp_path / "call1"), **env)
    assert first.returncode == 0 and "received part 1 of 2" in first.stdout
    assert not (tmp_path / "stash" / "ready").exists()
    second = playbook("--step", "0", PARTS=str(tmp_path / "call2"), **env)
    assert second.returncode == 0, second.stderr
    assert "bundle complete and installed" in second.stdout
    assert (tmp_path / "stash" / "site" / "playbookprobe.py").is_file()
    assert (tmp_path / "runs" / "office-llm" / "config.yaml").is_file()

    (tmp_path / "call2" / ".gpu-2" / "bundle.part").write_bytes(b"corrupt")
    (tmp_path / "stash" / "ready").unlink()
    bad = playbook("--step", "0", PARTS=str(tmp_path / "call2"), **env)
    assert bad.returncode == 2 and "the parts do not add up to the bundle" in bad.stderr


def test_a_typo_in_step3s_measurements_stops_before_any_device_time(tmp_path):
    res = playbook("--step", "3", STEP3_MEASURE="llm compield", STASH=str(tmp_path / "stash"))
    assert res.returncode == 2
    assert "STEP3_MEASURE: unknown measurement 'compield' (expected some of: llm small cudnn graphs" in res.stderr


def _bench(step_ms: float, **extra) -> dict:
    row = {"step_s": step_ms / 1000, "flop_per_s": 4e13, "rows_per_epoch": 1280, "steps_per_epoch": 10, **extra}
    return {"device": "GPU X", "peak_flop_per_s": 8e14, "stages": {"train": row}}


def test_tables_read_step3s_measurements_left_unnested_by_a_step_stopped_at_its_budget(tmp_path):
    """A step 3 cut short returns its measurements as separate files and no metrics file: the LLM's variants are
    still set beside its eager step, with what the trace says the device spent its time on."""
    trace = {"device_busy_ms": 100.0, "kernel_launches": 6000, "top": [{"name": "aten::copy_", "device_ms": 29.2}]}
    (tmp_path / "bench_llm.json").write_text(json.dumps(_bench(200.0, trace=trace, padding=1.25)))
    (tmp_path / "bench_compiled.json").write_text(
        json.dumps(_bench(100.0, compiled=True, compilations_in_timed_steps=0))
    )
    replayed = {"replayed_steps": 30, "timed_steps": 40, "replayed_step_s": 0.05}  # 150 ms a step with the eager ones
    (tmp_path / "bench_llm_graphs.json").write_text(json.dumps(_bench(150.0, **replayed)))
    wide = {**replayed, "replayed_step_s": 0.1, "rows_per_epoch": 5120, "steps_per_epoch": 10}
    (tmp_path / "bench_llm_wide.json").write_text(json.dumps(_bench(300.0, **wide)))
    both = {**replayed, "replayed_step_s": 0.04, "compiled": True, "compilations_in_timed_steps": 0}
    (tmp_path / "bench_llm_cg.json").write_text(json.dumps(_bench(120.0, **both)))
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "playbook_tables.py"), str(tmp_path)], capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    eager_row = "| eager, frozen weights in float32 | 128 | 200.0 | 1.00x | 5.0% | 1.25 | 50% | 6,000 | `copy_` 29.2 |"
    assert eager_row + " – |" in res.stdout  # positions / token 1.25; a measurement from before that count: "–"
    assert "| frozen weights in bfloat16, compiled | 128 | 100.0 | 2.00x | 5.0% | – | – | – | – | 0 |" in res.stdout
    replayed_row = (
        "| frozen weights in bfloat16, replayed CUDA graphs (30 of 40 steps replayed) | 128 | 50.0 | 4.00x | 15.0% |"
    )
    assert replayed_row in res.stdout  # the replayed steps' own time and rate
    # 4 times the rows in twice the time: a row twice as fast as at the training batch (8 times the eager step's)
    wide_row = (
        "| frozen weights in bfloat16, replayed CUDA graphs, a wide batch (30 of 40 steps replayed) | 512 | 100.0 | "
    )
    assert wide_row + "8.00x | 15.0% |" in res.stdout
    both_row = "| frozen weights in bfloat16, compiled and replayed CUDA graphs (30 of 40 steps replayed) | 128 | "
    assert both_row + "40.0 | 5.00x | 15.0% | – | – | – | – | 0 |" in res.stdout  # compiled: none in the timed steps
    empty = tmp_path / "empty"
    empty.mkdir()
    res = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "playbook_tables.py"), str(empty)], capture_output=True, text=True
    )
    assert res.returncode == 2 and "no *-metrics.json there" in res.stderr


def test_the_curves_say_where_a_budget_stopped_an_epoch():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import playbook_tables
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    log = [{"epoch": 1, "loss": 2.5, "valid_ndcg@10": 0.01}, {"epoch": 2, "loss": 2.1, "valid_ndcg@10": None}]
    log[1]["steps"] = [1400, 11173]
    (line,) = playbook_tables.curves({"curves": {"mor": log}})
    assert line.endswith("1: 2.500 / 0.0100, 2 (1,400 of 11,173 steps): 2.100 / –")


def test_the_wide_table_names_the_device_of_a_lone_measurement_and_keeps_a_stage_that_replayed_nothing():
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import playbook_tables
    finally:
        sys.path.remove(str(ROOT / "scripts"))
    stage = {"rows_per_epoch": 4000, "steps_per_epoch": 2, "step_s": 0.05, "flop_per_s": 1e12, "rows_per_s": 40000}
    wide = {
        "device": "GPU X",
        "peak_flop_per_s": 1e14,
        "stages": {
            "train": {**stage, "replayed_step_s": 0.0, "timed_steps": 18},
            "tiger": {**stage, "replayed_step_s": 0.04, "replayed_rows_per_s": 50000},
        },
    }
    table = playbook_tables.wide_table({"wide": wide})  # step 3 measured `wide` alone: no bench_small.json
    assert "(GPU X)" in table
    assert "| MOR | 2,000 | none replayed (18 timed steps eager, 50.0 ms) | 40,000 | – |" in table
    assert "| TIGER | 2,000 | 40.0 | 50,000 | 1.2% |" in table
    compiled = {**wide, "stages": {"tiger": {**stage, "replayed_step_s": 0.02, "replayed_rows_per_s": 100000}}}
    table = playbook_tables.wide_table({"wide": wide, "wide_compiled": compiled})  # widecompiled: a row of its own
    assert "| TIGER | 2,000 | 40.0 | 50,000 | 1.2% |" in table
    assert "| TIGER, compiled | 2,000 | 20.0 | 100,000 | 2.5% |" in table
