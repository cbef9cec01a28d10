#!/usr/bin/env bash
# make demo: endstate's main job end to end on a laptop CPU, with the embedded SmolLM2-135M.
#
#   probe a slice of training candidates -> bucket by difficulty (histogram + plot)
#   -> a few GRPO steps on the kept pool -> probe a held-out bench slice with the base and the
#   trained policy -> evalstats compare, as a table -> the study's page (evalstats report).
#
# Sizes come from the environment (make demo DEMO_TASKS=... passes them); every intermediate file
# lands in $DEMO_OUT. Each stage resumes: rerunning after an interruption skips finished work.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${DEMO_OUT:-out/demo}
DOMAIN=${DEMO_DOMAIN:-retail}
TASKS=${DEMO_TASKS:-6}            # training candidates probed
REPEATS=${DEMO_REPEATS:-4}        # attempts per task, in probing and evaluation
STEPS=${DEMO_STEPS:-2}            # GRPO steps
GROUP=${DEMO_GROUP:-4}            # rollouts per task in a GRPO group
EVAL_TASKS=${DEMO_EVAL_TASKS:-4}  # held-out bench tasks
BIN=.venv/bin
# Short episodes keep the demo near 15 minutes on 2 cores (the tools' defaults are larger), and
# --micro-batch 1 keeps the update of ~3k-token SmolLM2 traces within ~6 GB (full-vocab logits).
EPISODE=(--max-new-tokens 64 --max-turns 4 --temperature 0.7 --seed 0)
mkdir -p "$OUT"
started=$(date +%s)
stage() { printf '\n== [%4ss] %s\n' "$(( $(date +%s) - started ))" "$*" >&2; }

# Every n-th task of a file, so a small slice still spans the templates.
spread() {  # FILE N
  local total
  total=$(wc -l < "$1")
  awk -v n="$2" -v t="$total" 'BEGIN { step = t / n; next_at = 0 } NR - 1 >= next_at && taken < n { print; taken++; next_at += step }' "$1"
}

stage "candidates: $TASKS $DOMAIN training tasks, $EVAL_TASKS bench tasks"
# The easiest templates first: a 135M model gets nowhere on the multi-step ones.
$BIN/grade tasks --split train --domain "$DOMAIN" --tag 'template:quick-*' --tag 'template:cancel-order' \
  --full > "$OUT/train_all.jsonl"
spread "$OUT/train_all.jsonl" "$TASKS" > "$OUT/candidates.jsonl"
$BIN/grade tasks --split bench --domain "$DOMAIN" --full > "$OUT/bench_all.jsonl"
spread "$OUT/bench_all.jsonl" "$EVAL_TASKS" > "$OUT/bench.jsonl"
rm "$OUT/train_all.jsonl" "$OUT/bench_all.jsonl"

stage "probe: $TASKS tasks x $REPEATS with the base policy"
touch "$OUT/attempts.jsonl"
$BIN/probe "$OUT/candidates.jsonl" -n "$REPEATS" "${EPISODE[@]}" \
  --episodes "$OUT/probe_episodes.jsonl" --resume "$OUT/attempts.jsonl" >> "$OUT/attempts.jsonl"

stage "bucket: Jeffreys posterior bands"
$BIN/bucket --report --plot "$OUT/bands.png" --posteriors "$OUT/posteriors.png" --min-clean-runs "$REPEATS" \
  --tasks "$OUT/candidates.jsonl" "$OUT/attempts.jsonl" > "$OUT/pool.jsonl"
pool="$OUT/pool.jsonl"
if [ ! -s "$pool" ]; then
  # SmolLM2-135M solves none of these tasks on CPU, so every group has zero variance and GRPO has
  # nothing to learn from: say so, and still run the step so every stage is exercised.
  echo "no candidate landed in a kept band: the base policy solved all or none of every task." \
       "Training on all candidates instead; expect zero-variance groups and skipped updates." >&2
  pool="$OUT/candidates.jsonl"
fi

stage "grpo: $STEPS steps on $(wc -l < "$pool") pooled tasks, groups of $GROUP"
read -ra resume <<< "$(scripts/grpo_resume.sh "$OUT/grpo")"
$BIN/grpo train --pool "$pool" --model embedded --out "$OUT/grpo" --steps "$STEPS" \
  --batch-tasks 2 --group-size "$GROUP" --max-rounds 1 --micro-batch 1 --lr 1e-5 --save-freq "$STEPS" \
  --max-new-tokens 64 --max-turns 4 --temperature 0.7 --plot "$OUT/training.png" "${resume[@]}"
TRAINED=$(ls -d "$OUT"/grpo/checkpoints/step-* | sort -V | tail -1)/hf

stage "evaluate: $EVAL_TASKS bench tasks x $REPEATS, base and trained"
for who in base trained; do
  model=embedded
  [ "$who" = trained ] && model=$TRAINED
  touch "$OUT/eval_$who.jsonl"
  # No prompting flags: the checkpoint's endstate.json records how it was trained (as the
  # embedded model's does), so base and trained are prompted alike.
  $BIN/probe "$OUT/bench.jsonl" -n "$REPEATS" "${EPISODE[@]}" --model "$model" \
    --episodes "$OUT/eval_${who}_episodes.jsonl" --resume "$OUT/eval_$who.jsonl" >> "$OUT/eval_$who.jsonl"
done

stage "evalstats compare: base -> trained"
$BIN/evalstats "$OUT/attempts.jsonl" > "$OUT/probe_metrics.json"
$BIN/evalstats compare --plot "$OUT/compare.png" "$OUT/eval_base.jsonl" "$OUT/eval_trained.jsonl" > "$OUT/compare.json"
$BIN/evalstats compare --format table "$OUT/eval_base.jsonl" "$OUT/eval_trained.jsonl"

stage "evalstats report: the tables and figures on one page"
$BIN/evalstats report --compare "$OUT/eval_base.jsonl" "$OUT/eval_trained.jsonl" \
  --graded "$OUT/eval_base_episodes.jsonl" --graded "$OUT/eval_trained_episodes.jsonl" \
  -o "$OUT/report.html"
stage "done: everything is in $OUT/ (open $OUT/report.html)"
ls "$OUT" >&2
