#!/usr/bin/env bash
# The records of a fixed-seed run, as digests: to show that a change kept every byte the tools
# write. Runs rollout, grade, probe, grade validate, bucket, evalstats and rollout parity on three
# retail bench tasks × 2 with the embedded model (-j 1 and seed 0: deterministic on one machine),
# normalises what differs run to run (the random suffix of episode ids, wall-clock timings) and
# prints one sha256 per output. Compare two checkouts with the same .venv:
#
#   scripts/record_digests.sh /tmp/before /path/to/old-checkout > before.txt
#   scripts/record_digests.sh /tmp/after > after.txt && diff before.txt after.txt && echo identical
set -euo pipefail
OUT=$1
CHECKOUT=$(cd "${2:-$(dirname "$0")/..}" && pwd)
VENV=$(cd "$(dirname "$0")/.." && pwd)/.venv/bin
SHIM=$(mktemp -d)
trap 'rm -rf "$SHIM"' EXIT
ln -s "$CHECKOUT/tools" "$SHIM/endstate"  # `import endstate` is CHECKOUT's code, whatever is installed
export PYTHONPATH=$SHIM OMP_NUM_THREADS=1
mkdir -p "$OUT"
cd "$CHECKOUT"
head -n 3 tasks/bench/retail.jsonl > "$OUT/tasks.jsonl"
common=(--max-new-tokens 48 --max-turns 3 --temperature 0.7 -j 1 --seed 0 -q)
"$VENV/rollout" run "$OUT/tasks.jsonl" -n 2 "${common[@]}" > "$OUT/episodes.jsonl"
"$VENV/grade" "$OUT/episodes.jsonl" > "$OUT/graded.jsonl" 2>/dev/null
"$VENV/probe" "$OUT/tasks.jsonl" -n 2 "${common[@]}" --episodes "$OUT/probe-episodes.jsonl" > "$OUT/attempts.jsonl"
"$VENV/grade" validate tasks/bench/retail.jsonl > "$OUT/validate.jsonl" 2>/dev/null || true
"$VENV/bucket" --all "$OUT/attempts.jsonl" > "$OUT/difficulty.jsonl"
"$VENV/evalstats" "$OUT/attempts.jsonl" > "$OUT/metrics.json"
"$VENV/rollout" parity "$OUT/episodes.jsonl" 2> "$OUT/parity.txt" || true
"$VENV/python" - "$OUT" <<'PY'
import hashlib, json, re, sys
from pathlib import Path

def norm(x):
    if isinstance(x, dict):
        return {k: re.sub(r"/[0-9a-f]{8}$", "/X", v) if k == "episode_id" and isinstance(v, str)
                else "T" if k == "timing" else norm(v) for k, v in x.items()}
    return [norm(v) for v in x] if isinstance(x, list) else x

for path in sorted(Path(sys.argv[1]).iterdir()):
    if path.suffix in (".jsonl", ".json"):
        text = "".join(json.dumps(norm(json.loads(line)), ensure_ascii=False) + "\n"
                       for line in path.read_text().splitlines() if line.strip())
    elif path.suffix == ".txt":
        text = path.read_text()
    else:
        continue
    print(hashlib.sha256(text.encode()).hexdigest(), path.name)
PY
