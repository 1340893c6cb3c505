#!/usr/bin/env bash
# The Beauty (TIGER benchmark) model grid behind docs/results/beauty.md: every variant trains in parallel on one GPU
# with a wall-clock budget (train.max_minutes) and a schedule that needs no epoch count; the variant to report is
# picked by its best validation NDCG@10, never by test. Usage:
#   bash scripts/beauty_grid.sh [DATA_DIR] [MINUTES] [VARIANT ...]      (default: ../shared/datasets/amazon14_beauty_ids 8)
# CRAB=".venv/bin/crabrec" picks the command (default: python -m crabrec); LOGS=DIR where the per-variant logs go.
set -euo pipefail
DATA=${1:-../shared/datasets/amazon14_beauty_ids}
MIN=${2:-8}
shift 2 || true
CRAB=${CRAB:-python -m crabrec}
COMMON=(--config configs/beauty.yaml --set data.path=$DATA --set tokenize.import_path=$DATA/Beauty.rqvae_native.index.json
        --set train.valid_samples=5000 --set train.max_minutes=$MIN --set train.threads=2 --set evaluate.batch_size=256)
declare -A V=(
  [mor-h128-l2-d01]="--method mor --set train.hidden=128 --set train.layers=2 --set train.ff=512 --set train.dropout=0.1 --set train.attention_dropout=0.1 --set train.lr=0.002 --set train.batch_size=256 --set train.schedule=plateau --set train.patience=4 --set train.epochs=200"
  [mor-h256-l2-d02]="--method mor --set train.hidden=256 --set train.layers=2 --set train.ff=1024 --set train.dropout=0.2 --set train.attention_dropout=0.1 --set train.lr=0.001 --set train.batch_size=256 --set train.schedule=plateau --set train.patience=4 --set train.epochs=200"
  [mor-h256-l4-d02]="--method mor --set train.hidden=256 --set train.layers=4 --set train.ff=1024 --set train.dropout=0.2 --set train.attention_dropout=0.1 --set train.lr=0.001 --set train.batch_size=256 --set train.schedule=plateau --set train.patience=4 --set train.epochs=200"
  [mor-h128-l1-d02-ls]="--method mor --set train.hidden=128 --set train.layers=1 --set train.ff=512 --set train.dropout=0.2 --set train.label_smoothing=0.1 --set train.lr=0.003 --set train.batch_size=256 --set train.schedule=plateau --set train.patience=4 --set train.epochs=200"
  [tiger-paper-isqrt]="--method tiger --set tiger.layers=4 --set tiger.heads=6 --set tiger.d_kv=64 --set tiger.ff=1024 --set tiger.dropout=0.1 --set tiger.lr=0.003 --set tiger.schedule=inverse_sqrt --set tiger.warmup_steps=2000 --set tiger.batch_size=256 --set tiger.patience=4 --set tiger.epochs=200"
  [tiger-paper-plateau]="--method tiger --set tiger.layers=4 --set tiger.heads=6 --set tiger.d_kv=64 --set tiger.ff=1024 --set tiger.dropout=0.1 --set tiger.lr=0.001 --set tiger.schedule=plateau --set tiger.batch_size=256 --set tiger.patience=4 --set tiger.epochs=200"
  [mor-h256-l4-d02-lr2]="--method mor --set train.hidden=256 --set train.layers=4 --set train.ff=1024 --set train.dropout=0.2 --set train.attention_dropout=0.1 --set train.lr=0.002 --set train.batch_size=256 --set train.schedule=plateau --set train.plateau_factor=0.7 --set train.patience=5 --set train.epochs=200"
  [mor-h384-l4-d02]="--method mor --set train.hidden=384 --set train.layers=4 --set train.heads=6 --set train.ff=1536 --set train.dropout=0.2 --set train.attention_dropout=0.1 --set train.lr=0.001 --set train.batch_size=256 --set train.schedule=plateau --set train.plateau_factor=0.7 --set train.patience=5 --set train.epochs=200"
  [mor-h256-l6-d03]="--method mor --set train.hidden=256 --set train.layers=6 --set train.ff=1024 --set train.dropout=0.3 --set train.attention_dropout=0.1 --set train.lr=0.001 --set train.batch_size=256 --set train.schedule=plateau --set train.plateau_factor=0.7 --set train.patience=5 --set train.epochs=200"
  [tiger-paper-b512]="--method tiger --set tiger.layers=4 --set tiger.heads=6 --set tiger.d_kv=64 --set tiger.ff=1024 --set tiger.dropout=0.1 --set tiger.lr=0.002 --set tiger.schedule=plateau --set tiger.plateau_factor=0.7 --set tiger.batch_size=512 --set tiger.patience=5 --set tiger.epochs=200"
  [mor-h512-l4-d02]="--method mor --set train.hidden=512 --set train.layers=4 --set train.heads=8 --set train.ff=2048 --set train.dropout=0.2 --set train.attention_dropout=0.1 --set train.lr=0.001 --set train.batch_size=256 --set train.schedule=plateau --set train.plateau_factor=0.7 --set train.patience=5 --set train.epochs=200"
  [sasrec]="--method sasrec --set sasrec.epochs=200 --set sasrec.patience=5"
)
NAMES=("$@")
[ ${#NAMES[@]} -eq 0 ] && NAMES=("${!V[@]}")
$CRAB run "${COMMON[@]}" --name beauty-grid-base --until tokenize
for n in "${NAMES[@]}"; do
  # shellcheck disable=SC2086
  $CRAB train "${COMMON[@]}" --set "name=beauty-$n" ${V[$n]} > "${LOGS:-.}/$n.log" 2>&1 &
done
wait
python scripts/collect_runs.py $(printf "runs/beauty-%s " "${NAMES[@]}")
