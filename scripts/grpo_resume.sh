#!/usr/bin/env bash
# grpo_resume.sh OUT: prints --resume when the grpo run in OUT has a checkpoint to continue from.
# A run killed before its first checkpoint has nothing to resume, and grpo refuses an OUT holding
# its metrics without --resume: that OUT is removed, so the caller starts the run again.
set -euo pipefail
if [ -e "$1/checkpoints/latest" ]; then
  echo --resume
else
  rm -rf -- "$1"
fi
