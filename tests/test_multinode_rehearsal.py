"""A multi-node rehearsal on one CPU box: slurm/grpo.sbatch itself, run as
sbatch would run it on two nodes, each starting two ranks: `srun` and `scontrol` are stand-ins
(Slurm is an edge endstate does not own) that start the script's launch line once per "node",
in parallel, on this machine. So the real path runs end to end: torchrun's c10d rendezvous on
$MASTER_ADDR (localhost), 2 nodes × 2 ranks = world 4 over gloo, each rank generating its share of
the episodes, ZeRO-3 (partitioned load, collective update and checkpoint) on the tiny model,
checkpoints on the "shared storage" both nodes write to, then a second submission that resumes
from it (the script adds --resume when OUT/checkpoints/latest exists).

Slow (two launches of four ranks on 2 cores): `make test-slow`, or ENDSTATE_SLOW=1 pytest -m slow.
"""

# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name
from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

import orjson
import pytest
from grpo_fixtures import buttons, run_to_the_end, tiny_model  # noqa: F401 - buttons, tiny_model: pytest fixtures

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "slurm" / "grpo.sbatch"
NODES, RANKS_PER_NODE = 2, 2
BATCH_TASKS, GROUP_SIZE = 4, 2  # one task per rank per round

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not os.environ.get("ENDSTATE_SLOW"),
                                 reason="2 launches × 4 ranks, ~2-4 min on 2 cores; make test-slow")]

SRUN = """#!/bin/bash
# srun stand-in: the command once per node of the allocation, all on this machine, in parallel;
# --kill-on-bad-exit: the first task to fail stops the others.
while [[ "$1" == --* ]]; do shift; done
pids=()
for ((node = 0; node < SLURM_NNODES; node++)); do
  echo "node $node" >> "$SRUN_LOG"
  SLURM_NODEID=$node SLURM_PROCID=$node SLURM_LOCALID=0 "$@" &
  pids+=($!)
done
for _ in "${pids[@]}"; do
  if ! wait -n; then kill "${pids[@]}" 2>/dev/null; wait; exit 1; fi
done
"""
SCONTROL = "#!/bin/bash\n# scontrol show hostnames: every node of this allocation is this machine\n" \
           "for _ in $(seq \"$SLURM_NNODES\"); do echo localhost; done\n"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def torch_extensions_dir() -> str:
    """Where DeepSpeed's CPU comm op is already built (torch's default), so that the script's
    default ($OUT/.torch_extensions) does not rebuild it for a minute."""
    from torch.utils.cpp_extension import get_default_build_root

    version = f"py{sys.version_info.major}{sys.version_info.minor}{sys.abiflags}"
    return os.environ.get("TORCH_EXTENSIONS_DIR") or os.path.join(get_default_build_root(), f"{version}_cpu")


def slurm_env(tmp_path: Path, tiny_model: Path, buttons: dict) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in (("srun", SRUN), ("scontrol", SCONTROL)):
        (bin_dir / name).write_text(text)
        (bin_dir / name).chmod(0o755)
    launch = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")  # an in-process test's
    return {**{k: v for k, v in os.environ.items() if k not in launch},
            "PATH": os.pathsep.join([str(bin_dir), str(Path(sys.executable).parent), os.environ["PATH"]]),
            "SRUN_LOG": str(tmp_path / "srun.log"), "TORCH_EXTENSIONS_DIR": torch_extensions_dir(),
            "POOL": buttons["pool"], "MODEL": str(tiny_model), "OUT": str(tmp_path / "shared" / "run"),
            "DEEPSPEED": "zero3", "DEVICE": "cpu", "ROLLOUT_ENGINE": "local",
            "GPUS_PER_NODE": str(RANKS_PER_NODE), "RDZV_PORT": str(free_port()),
            "SLURM_NNODES": str(NODES), "SLURM_JOB_NODELIST": "node-[0-1]", "SLURM_JOB_ID": "2020",
            "SLURM_CPUS_PER_TASK": str(RANKS_PER_NODE)}  # → OMP_NUM_THREADS=1 per rank


def submit(env: dict[str, str], config: Path, steps: int, buttons: dict) -> str:
    """One `sbatch slurm/grpo.sbatch`, with a config of tiny settings; returns its stderr."""
    config.write_text(f"domains: [{buttons['domain']}]\nsteps: {steps}\nbatch_tasks: {BATCH_TASKS}\n"
                      f"group_size: {GROUP_SIZE}\nmax_rounds: 3\nmax_new_tokens: 3\nmax_context: 512\n"
                      "few_shot: false\nmicro_batch: 1\nlr: 2.0e-2\ntemperature: 1.5\nsave_freq: 1\n"
                      "seed: 3\njobs: 8\n")
    # 1-2 min a launch on 2 idle cores, several times that on a loaded box; the limit catches a deadlock
    return run_to_the_end(["bash", str(SCRIPT)], timeout=1800, what="the 2-node rehearsal",
                          cwd=ROOT, env={**env, "CONFIG": str(config)})


def test_two_nodes_of_two_ranks_train_checkpoint_and_resume(tmp_path, tiny_model, buttons):
    env = slurm_env(tmp_path, tiny_model, buttons)
    out = Path(env["OUT"])
    submit(env, tmp_path / "first.yaml", 1, buttons)
    assert (out / "checkpoints/latest").read_text().strip() == "step-000001"
    assert orjson.loads((out / "config.json").read_bytes())["resume"] is False
    stderr = submit(env, tmp_path / "second.yaml", 2, buttons)  # resubmitted: the script resumes

    assert (tmp_path / "srun.log").read_text().splitlines() == ["node 0", "node 1"] * 2
    assert "resumed from" in stderr and "at step 1" in stderr, stderr[-3000:]
    config = orjson.loads((out / "config.json").read_bytes())
    assert (config["nodes"], config["gpus_per_node"], config["resume"]) == (NODES, RANKS_PER_NODE, True)
    metrics = [orjson.loads(line) for line in (out / "metrics.jsonl").read_bytes().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    assert any(not m["skipped"] for m in metrics), metrics  # an update ran on the 4 ranks
    attempts = [orjson.loads(line) for line in (out / "attempts.jsonl").read_bytes().splitlines()]
    for m in metrics:  # every rank's share of every round reached the log
        generated = sum(r["tasks"] for r in m["rounds_log"]) * GROUP_SIZE
        assert sum(a["step"] == m["step"] for a in attempts) == generated >= BATCH_TASKS * GROUP_SIZE
    assert len({(a["task_id"], a["attempt"]) for a in attempts}) == len(attempts)
    latest = out / "checkpoints" / (out / "checkpoints/latest").read_text().strip()
    assert latest.name == "step-000002" and (latest / "hf/model.safetensors").exists()
    world = NODES * RANKS_PER_NODE  # ZeRO-3 wrote one partition of the optimizer per rank
    assert sorted(p.name for p in (latest / "ds/state").glob("*optim_states.pt")) == [
        f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in range(world)]
    assert orjson.loads((latest / "state.json").read_bytes())["step"] == 2
