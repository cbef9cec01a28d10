#!/usr/bin/env bash
# make demo-learn: does GRPO make the embedded SmolLM2-135M better on tasks it never trained on?
#
#   split the easiest retail templates by instance (stratified by template and reason): train / held out
#   -> probe the held-out split with the base policy (once; it does not depend on the seed)
#   -> the pool (LEARN_POOL=probe, the reference study's selection): probe the train split with the
#      base policy, keep what bucket puts in the learnable bands (LEARN_POOL=template: all of it)
#   -> for each training seed: GRPO on the pool (--rebucket), probe the held-out split with the
#      trained policy, evalstats compare (Δpass@1, P(new better)), grade audit of every success
#   -> transfer, base and the first seed's trained policy: a hand-written retail bench slice (in
#      distribution: a domain it trained on) and a slice of the out-of-distribution benchmark
#      (tasks/ood: domains, databases and tools it never saw), side by side in one
#      `evalstats compare --by split` table.
#   -> one page with every seed's comparison and figures (evalstats report), and one for the
#      bench and ood slices.
#
# Sizes and seeds come from the environment (make demo-learn LEARN_SEEDS="0 1 2" ...); every file
# lands in $LEARN_OUT. Each stage resumes, so rerunning after an interruption skips finished work.
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=${LEARN_OUT:-out/demo-learn}
SEEDS=${LEARN_SEEDS:-0 1 2}
HOLDOUT_EVERY=${LEARN_HOLDOUT_EVERY:-3}  # instances 2, 5, 8, ... of each stratum are held out
REPEATS=${LEARN_REPEATS:-8}              # attempts per held-out task, base and trained
STEPS=${LEARN_STEPS:-6}
BATCH=${LEARN_BATCH:-4}                  # tasks per GRPO step
GROUP=${LEARN_GROUP:-4}                  # rollouts per task
LR=${LEARN_LR:-2e-5}
BENCH_TASKS=${LEARN_BENCH_TASKS:-8}
BENCH_REPEATS=${LEARN_BENCH_REPEATS:-4}
OOD_TASKS=${LEARN_OOD_TASKS:-8}          # of the ood split's tasks tagged $OOD_TAG, spread evenly
OOD_TAG=${LEARN_OOD_TAG:-single-call}    # the easy tier: the only one a 135M model reaches
POOL=${LEARN_POOL:-probe}                # probe: the tasks probe + bucket keep (re-bucketed
                                         # online); template: the whole training split
PROBE_REPEATS=${LEARN_PROBE_REPEATS:-4}  # pool=probe: base attempts per training task
KEEP_IF=${LEARN_KEEP_IF:-0.5}            # pool=probe: keep a task when P(learnable bands) >= this
TRANSFER=${LEARN_TRANSFER:-1}            # 1: the bench and ood slices, base and the first seed; 0: none
BIN=${LEARN_BIN:-.venv/bin}
# Short episodes: a 135M model that has not solved a task in 4 agent turns will not in 30.
EPISODE=(--max-new-tokens 64 --max-turns 4 --temperature 0.7)
case "$POOL" in probe|template) ;; *) echo "demo-learn: LEARN_POOL=$POOL: use probe or template" >&2; exit 2 ;; esac
mkdir -p "$OUT"
started=$(date +%s)
stage() { printf '\n== [%4ss] %s\n' "$(( $(date +%s) - started ))" "$*" >&2; }

stage "split: easy retail templates, every ${HOLDOUT_EVERY}rd instance of each (template, reason) held out"
$BIN/grade tasks --split train --domain retail --tag 'template:quick-*' --tag 'template:cancel-order' \
  --full > "$OUT/easy.jsonl"
# Stratified by template and by the cancel reason the task's check expects (none for an address
# change): the n-th instance of each stratum is held out when n % HOLDOUT_EVERY == 1, so both
# splits ask for each reason in the same proportion and no held-out task is ever trained on.
# Unstratified by reason, the split decided the result: a policy that always gives the reason
# most common in its training successes scores by luck of which reasons were held out.
split='group_by([(.tags[] | select(startswith("template:"))),
                  ([.checks[].expect.cancel_reason? | strings] | first)])
  | map(sort_by(.id | capture("-(?<n>[0-9]+)$").n | tonumber) | to_entries[]
        | select((.key % $k == 1) == $held) | .value) | .[]'
jq -s -c --argjson k "$HOLDOUT_EVERY" --argjson held true "$split" "$OUT/easy.jsonl" > "$OUT/heldout.jsonl"
jq -s -c --argjson k "$HOLDOUT_EVERY" --argjson held false "$split" "$OUT/easy.jsonl" > "$OUT/train.jsonl"
$BIN/grade tasks --split bench --domain retail --full > "$OUT/bench_all.jsonl"
spread() {  # N FILE: N lines of FILE, evenly spread
  awk -v n="$1" -v t="$(wc -l < "$2")" \
    'BEGIN { step = t / n } NR - 1 >= next_at && taken < n { print; taken++; next_at += step }' "$2"
}
spread "$BENCH_TASKS" "$OUT/bench_all.jsonl" > "$OUT/bench.jsonl"
$BIN/grade tasks --split ood --tag "$OOD_TAG" --full > "$OUT/ood_all.jsonl"
spread "$OOD_TASKS" "$OUT/ood_all.jsonl" > "$OUT/ood.jsonl"
cat "$OUT/bench.jsonl" "$OUT/ood.jsonl" > "$OUT/transfer_tasks.jsonl"  # their split: bench or ood
echo "train $(wc -l < "$OUT/train.jsonl") tasks, held out $(wc -l < "$OUT/heldout.jsonl"), bench $(wc -l < "$OUT/bench.jsonl"), ood $(wc -l < "$OUT/ood.jsonl")" >&2

evaluate() {  # MODEL TASKS REPEATS OUTFILE (attempts; episodes go beside it)
  touch "$4"
  $BIN/probe "$2" -n "$3" "${EPISODE[@]}" --seed 0 --model "$1" \
    --episodes "${4%.jsonl}_episodes.jsonl" --resume "$4" >> "$4"
}

slices=""
[ "$TRANSFER" = 1 ] && slices=", bench and ood slices ($(wc -l < "$OUT/transfer_tasks.jsonl") x $BENCH_REPEATS)"
stage "base policy: held-out split ($(wc -l < "$OUT/heldout.jsonl") tasks x $REPEATS)$slices"
evaluate embedded "$OUT/heldout.jsonl" "$REPEATS" "$OUT/heldout_base.jsonl"
if [ "$TRANSFER" = 1 ]; then
  evaluate embedded "$OUT/bench.jsonl" "$BENCH_REPEATS" "$OUT/bench_base.jsonl"
  evaluate embedded "$OUT/ood.jsonl" "$BENCH_REPEATS" "$OUT/ood_base.jsonl"
  cat "$OUT/bench_base.jsonl" "$OUT/ood_base.jsonl" > "$OUT/transfer_base.jsonl"
fi

pool=("$OUT/train.jsonl") rebucket=()
if [ "$POOL" = probe ]; then
  # The study's selection: probe every training task with the base policy, keep the ones whose
  # Jeffreys posterior puts at least KEEP_IF in the learnable bands (a base that never solves a
  # task gives GRPO only zero-variance groups there). Probing is seed-independent, so it runs
  # once; its rollouts still count against this arm's budget in docs/demo-learn.md.
  stage "pool=probe: the training split x $PROBE_REPEATS with the base policy, then bucket --keep-if $KEEP_IF"
  evaluate embedded "$OUT/train.jsonl" "$PROBE_REPEATS" "$OUT/train_probe.jsonl"
  $BIN/bucket --report --keep-if "$KEEP_IF" --tasks "$OUT/train.jsonl" "$OUT/train_probe.jsonl" \
    > "$OUT/pool.jsonl"
  if [ -s "$OUT/pool.jsonl" ]; then
    pool=("$OUT/pool.jsonl") rebucket=(--rebucket --base-attempts "$OUT/train_probe.jsonl")
    echo "pool=probe: $(wc -l < "$OUT/pool.jsonl") of $(wc -l < "$OUT/train.jsonl") training tasks kept" \
      "($(wc -l < "$OUT/train_probe.jsonl") probe rollouts)" | tee "$OUT/pool.txt" >&2
  else  # e.g. the base solved none in its tries here (another CPU samples other tokens)
    echo "pool=probe: bucket kept no training task (its table above says why); training on the" \
      "whole training split instead (LEARN_PROBE_REPEATS=8 probes more)" | tee "$OUT/pool.txt" >&2
  fi
fi

for seed in $SEEDS; do
  run="$OUT/seed-$seed"
  stage "seed $seed: grpo, $STEPS steps of $BATCH tasks x $GROUP rollouts, lr $LR"
  read -ra resume <<< "$(scripts/grpo_resume.sh "$run/grpo")"
  $BIN/grpo train --pool "${pool[@]}" "${rebucket[@]}" --save-episodes --model embedded \
    --out "$run/grpo" --steps "$STEPS" --batch-tasks "$BATCH" --group-size "$GROUP" --max-rounds 2 \
    --micro-batch 1 --lr "$LR" --save-freq "$STEPS" --seed "$seed" "${EPISODE[@]}" --plot "$run/training.png" "${resume[@]}"
  trained=$(ls -d "$run"/grpo/checkpoints/step-* | sort -V | tail -1)/hf
  # the budget and the signal: rollouts generated, informative groups and reward per step
  jq -s -r --argjson rollouts "$(wc -l < "$run/grpo/attempts.jsonl")" '
    "rollouts \($rollouts), informative groups per step \(map(.groups) | join(" ")), " +
    "reward per step \(map(.reward_mean // 0 | . * 100 | round / 100) | join(" "))"' \
    "$run/grpo/metrics.jsonl" > "$run/training.txt"

  stage "seed $seed: trained policy on the held-out split (and the first seed's on the bench and ood slices)"
  evaluate "$trained" "$OUT/heldout.jsonl" "$REPEATS" "$run/heldout_trained.jsonl"
  $BIN/evalstats compare --plot "$run/heldout_compare.png" "$OUT/heldout_base.jsonl" \
    "$run/heldout_trained.jsonl" > "$run/heldout_compare.json"
  $BIN/evalstats compare --format table "$OUT/heldout_base.jsonl" "$run/heldout_trained.jsonl" \
    > "$run/heldout_compare.txt"
  # reward hacking: successes (training and held out) whose end state differs from the gold
  # calls' (docs/grade.md)
  $BIN/grade audit -q --tasks "$OUT/easy.jsonl" --summary "$run/grpo/episodes.jsonl" \
    "$run/heldout_trained_episodes.jsonl" > "$run/audit.txt"
  [ "$TRANSFER" = 1 ] && [ "$seed" = "${SEEDS%% *}" ] || continue  # transfer: the first seed's policy
  evaluate "$trained" "$OUT/bench.jsonl" "$BENCH_REPEATS" "$run/bench_trained.jsonl"
  evaluate "$trained" "$OUT/ood.jsonl" "$BENCH_REPEATS" "$run/ood_trained.jsonl"
  cat "$run/bench_trained.jsonl" "$run/ood_trained.jsonl" > "$run/transfer_trained.jsonl"
  for split in bench ood; do
    $BIN/evalstats compare --format table "$OUT/${split}_base.jsonl" "$run/${split}_trained.jsonl" \
      > "$run/${split}_compare.txt"
  done
  # in and out of distribution side by side: the task records say each task's split
  $BIN/evalstats compare --by split --tasks "$OUT/transfer_tasks.jsonl" --format table \
    "$OUT/transfer_base.jsonl" "$run/transfer_trained.jsonl" > "$run/transfer_compare.txt"
done

stage "evalstats report: base and every seed's trained policy on the held-out split; the bench and ood slices"
pairs=() graded=(--graded "$OUT/heldout_base_episodes.jsonl")
for seed in $SEEDS; do
  pairs+=(--compare "$OUT/heldout_base.jsonl" "$OUT/seed-$seed/heldout_trained.jsonl")
  graded+=(--graded "$OUT/seed-$seed/heldout_trained_episodes.jsonl")
done
$BIN/evalstats report "${pairs[@]}" "${graded[@]}" -o "$OUT/report.html"
[ "$TRANSFER" = 1 ] && $BIN/evalstats report --compare "$OUT/transfer_base.jsonl" "$OUT/seed-${SEEDS%% *}/transfer_trained.jsonl" \
  --tasks "$OUT/transfer_tasks.jsonl" -o "$OUT/bench_report.html"  # retail (bench), insurance and consulting (ood)

stage "done: base -> trained, per seed (tables in $OUT/seed-*/, pages $OUT/report.html and $OUT/bench_report.html)"
[ "$POOL" = probe ] && cat "$OUT/pool.txt"
for seed in $SEEDS; do
  printf '\nseed %s, training (pool=%s): %s\n' "$seed" "$POOL" "$(cat "$OUT/seed-$seed/training.txt")"
  printf 'seed %s, held out (unseen instances of the trained templates):\n' "$seed"
  cat "$OUT/seed-$seed/heldout_compare.txt"
  [ "$TRANSFER" = 1 ] && [ "$seed" = "${SEEDS%% *}" ] || continue
  printf 'seed %s, transfer: split=bench is a trained domain (retail), split=ood domains it never saw:\n' "$seed"
  cat "$OUT/seed-$seed/transfer_compare.txt"
done
