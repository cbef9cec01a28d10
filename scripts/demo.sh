#!/usr/bin/env bash
# make demo: does GRPO make the embedded SmolLM2-135M better on tasks it never trained on?
# Minutes on 2 CPU cores (docs/demo-learn.md has its three seeds, docs/benchmarks.md the timings).
#
#   the bank domain's one-call tasks (freeze a card, move money into a savings pot), two per
#   template instance: every other instance is a training candidate, the rest held out
#   -> probe the candidates with the base policy -> bucket by difficulty: keep the tasks the base
#   sometimes solves (a group that always or never succeeds teaches GRPO nothing)
#   -> GRPO on the kept pool -> probe the held-out tasks with the base and the trained policy
#   -> evalstats compare (Δpass@1, P(new better)) as a table -> the study's page (evalstats report).
#
# Sizes and the training seed come from the environment (make demo DEMO_SEED=1 ...); every file
# lands in $DEMO_OUT. Each stage resumes: rerunning after an interruption skips finished work, and
# another DEMO_SEED reuses the base policy's probes and trains and evaluates only its own policy.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${DEMO_OUT:-out/demo}
SEED=${DEMO_SEED:-0}            # the training seed (the pool sampler and GRPO's generation)
REPEATS=${DEMO_REPEATS:-4}      # attempts per task, probing and evaluating
STEPS=${DEMO_STEPS:-3}          # GRPO steps
BATCH=${DEMO_BATCH:-2}          # tasks per step
GROUP=${DEMO_GROUP:-8}          # rollouts per task: a group
LR=${DEMO_LR:-1e-5}            # 3e-5 learns faster and, on one seed in three, unlearns held out
BIN=${DEMO_BIN:-.venv/bin}
# One agent call per episode: these tasks take one tool call, and the grader reads the end state.
# --micro-batch $GROUP: a group's rows share their ~2.6k-token prompt, which the update then runs
# once (docs/grpo.md) instead of once per row.
EPISODE=(--max-new-tokens 40 --max-turns 1 --temperature 0.7)
mkdir -p "$OUT"
started=$(date +%s)
stage() { printf '\n== [%4ss] %s\n' "$(( $(date +%s) - started ))" "$*" >&2; }
probe() {  # MODEL TASKS OUTFILE: attempts, resumable; the graded episodes beside them
  touch "$3"
  $BIN/probe "$2" -n "$REPEATS" -j 16 "${EPISODE[@]}" --seed 0 --model "$1" \
    --episodes "${3%.jsonl}_episodes.jsonl" --resume "$3" >> "$3"
}

stage "tasks: the bank domain's one-call templates; odd instances are candidates, even ones held out"
$BIN/grade tasks --split train --domain bank --tag 'template:quick-*' --full > "$OUT/tasks.jsonl"
awk 'NR % 2 == 1' "$OUT/tasks.jsonl" > "$OUT/candidates.jsonl"
awk 'NR % 2 == 0' "$OUT/tasks.jsonl" > "$OUT/heldout.jsonl"
echo "$(wc -l < "$OUT/candidates.jsonl") candidates, $(wc -l < "$OUT/heldout.jsonl") held out" \
  "(never trained on): $(jq -r '.tags[] | select(startswith("template:"))' "$OUT/tasks.jsonl" \
  | sort | uniq -c | awk '{printf "%s%s ×%d", sep, $2, $1 / 2; sep = ", "}')" >&2

stage "probe: the candidates × $REPEATS with the base policy"
probe embedded "$OUT/candidates.jsonl" "$OUT/attempts.jsonl"

stage "bucket: each candidate's Jeffreys posterior and band; the middle bands are the pool"
$BIN/bucket --report --plot "$OUT/bands.png" --posteriors "$OUT/posteriors.png" \
  --min-clean-runs "$REPEATS" --tasks "$OUT/candidates.jsonl" "$OUT/attempts.jsonl" > "$OUT/pool.jsonl"
if [ ! -s "$OUT/pool.jsonl" ]; then
  echo "bucket kept no candidate: the base policy solved every one always or never on this machine" \
       "(its table above). GRPO would see only zero-variance groups; try DEMO_REPEATS=8." >&2
  exit 1
fi

run="$OUT/seed-$SEED"
stage "grpo: $STEPS steps of $BATCH tasks × $GROUP rollouts on the $(wc -l < "$OUT/pool.jsonl") pooled tasks, seed $SEED"
read -ra resume <<< "$(scripts/grpo_resume.sh "$run/grpo")"
$BIN/grpo train --pool "$OUT/pool.jsonl" --model embedded --out "$run/grpo" --steps "$STEPS" \
  --batch-tasks "$BATCH" --group-size "$GROUP" --max-rounds 2 --micro-batch "$GROUP" --lr "$LR" \
  --save-freq "$STEPS" --seed "$SEED" "${EPISODE[@]}" --plot "$run/training.png" "${resume[@]}"
trained=$(ls -d "$run"/grpo/checkpoints/step-* | sort -V | tail -1)/hf

stage "evaluate: the held-out tasks × $REPEATS, base and trained (prompted alike: the checkpoint records how)"
probe embedded "$OUT/heldout.jsonl" "$OUT/heldout_base.jsonl"
probe "$trained" "$OUT/heldout.jsonl" "$run/heldout_trained.jsonl"

stage "evalstats compare: base -> trained on the held-out tasks"
$BIN/evalstats compare --plot "$run/compare.png" "$OUT/heldout_base.jsonl" "$run/heldout_trained.jsonl" \
  > "$run/compare.json"
# overall, then per template (a task's tags include its template)
$BIN/evalstats compare --by tags --tasks "$OUT/tasks.jsonl" --format table "$OUT/heldout_base.jsonl" \
  "$run/heldout_trained.jsonl" | grep -e '^group' -e '^overall' -e 'template:' | tee "$run/compare.txt"
$BIN/evalstats report --compare "$OUT/heldout_base.jsonl" "$run/heldout_trained.jsonl" \
  --graded "$OUT/heldout_base_episodes.jsonl" --graded "$run/heldout_trained_episodes.jsonl" \
  --tasks "$OUT/tasks.jsonl" -o "$run/report.html"
stage "done: everything is in $OUT/ (the page: $run/report.html)"
