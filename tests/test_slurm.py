"""slurm/probe_array.sbatch: valid bash; `--shard I/N` over I covers every task exactly once; an
array run against the endpoint test double, merged and checked with evalstats, and the array
re-submitted until the coverage gate passes (resuming re-runs the system-error keys; their clean
records supersede the errors). Slurm itself is not needed: the
script is run with the SLURM_ARRAY_* variables an array task would get. slurm/grpo.sbatch hands the
CPU count on to srun (checked with srun/scontrol stand-ins)."""

from __future__ import annotations

import os
import subprocess

import orjson
import pytest
from conftest import BIN, ROOT
from openai_double import HTTP_500, FakeEndpoint, gold_policy
from test_rollout_endpoints import bench_tasks, write_tasks

from endstate.core.episode.plan import shard_of

SCRIPT = ROOT / "slurm" / "probe_array.sbatch"


def test_the_array_script_is_valid_bash():
    subprocess.run(["bash", "-n", str(SCRIPT)], check=True)


@pytest.mark.parametrize("n", [1, 2, 3, 7, 16, 200])
def test_shards_cover_every_task_exactly_once(n):
    tasks = [{"id": f"t{k}"} for k in range(122)]
    shards = [shard_of(tasks, (i, n)) for i in range(n)]
    ids = [t["id"] for shard in shards for t in shard]
    assert sorted(ids) == sorted(t["id"] for t in tasks) and len(ids) == len(set(ids))
    assert max(map(len, shards)) - min(map(len, shards)) <= 1  # balanced


def shard(env, i, n, tasks_file):
    return subprocess.run(["bash", str(SCRIPT), tasks_file], capture_output=True, text=True, timeout=120,
                          env={**env, "SLURM_ARRAY_TASK_ID": str(i + 1), "SLURM_ARRAY_TASK_MIN": "1",
                               "SLURM_ARRAY_TASK_COUNT": str(n)})


def merge(env, tasks_file, *mode):
    return subprocess.run(["bash", str(SCRIPT), *(mode or ["merge"]), tasks_file], capture_output=True,
                          text=True, timeout=60, env=env)


def test_array_run_merge_gate_and_resubmit(tmp_path):
    tasks = bench_tasks(per_domain=2)[:5]
    tasks_file = write_tasks(tmp_path / "tasks.jsonl", tasks)
    out, n, repeats = tmp_path / "run", 3, 2
    env = {**os.environ, "ENDSTATE_OUT": str(out), "ENDSTATE_BIN": str(BIN), "ENDSTATE_MODEL": "double",
           "ENDSTATE_REPEATS": str(repeats), "ENDSTATE_JOBS": "8"}
    broken = tasks[1]
    policy = gold_policy(tasks)

    def flaky(body):  # every call of one task fails: its attempts become system errors
        return HTTP_500 if any(m.get("content") == broken["user"]["opening"] for m in body["messages"]) \
            else policy(body)

    with FakeEndpoint(policy=flaky) as endpoint:
        env["ENDSTATE_AGENT_URLS"] = endpoint.base_url
        for i in range(n):
            assert shard(env, i, n, tasks_file).returncode == 0
    files = [out / f"attempts-{i}-of-{n}.jsonl" for i in range(n)]
    per_shard = [{(r["task_id"], r["attempt"]) for r in map(orjson.loads, f.read_bytes().splitlines())}
                 for f in files]
    assert sum(map(len, per_shard)) == len(set().union(*per_shard)) == len(tasks) * repeats
    assert [sorted({k[0] for k in keys}) for keys in per_shard] == [
        sorted(t["id"] for t in shard_of(tasks, (i, n))) for i in range(n)]

    gate = merge(env, tasks_file)
    assert gate.returncode == 3
    listed = [line.split("\t") for line in gate.stderr.splitlines() if "\t" in line]
    assert sorted(listed) == [["system_error", broken["id"], str(a)] for a in range(repeats)]

    before = [f.read_bytes() for f in files]
    with FakeEndpoint(policy=policy) as endpoint:  # the endpoint is healthy again: re-submit
        env["ENDSTATE_AGENT_URLS"] = endpoint.base_url
        for i in range(n):
            assert shard(env, i, n, tasks_file).returncode == 0
        assert len(endpoint.requests) > 0
    changed = [i for i, f in enumerate(files) if f.read_bytes() != before[i]]
    assert changed == [next(i for i in range(n) if broken in shard_of(tasks, (i, n)))]

    gate = merge(env, tasks_file)
    assert gate.returncode == 0, gate.stderr
    assert orjson.loads(gate.stdout)["overall"]["pass_at_1"] == 1
    merged = [orjson.loads(line) for line in (out / "attempts.jsonl").read_bytes().splitlines()]
    assert len(merged) == len(tasks) * repeats + repeats  # the superseded system errors stay on record
    assert sum(r["status"] == "system_error" for r in merged) == repeats


# -- slurm/grpo.sbatch ------------------------------------------------------------------------------

GRPO = ROOT / "slurm" / "grpo.sbatch"


def test_every_srun_in_the_sbatch_scripts_gets_the_cpu_count():
    """Slurm >= 22.05 does not hand #SBATCH --cpus-per-task on to srun: each srun must say it."""
    for script in sorted((ROOT / "slurm").glob("*.sbatch")):
        subprocess.run(["bash", "-n", str(script)], check=True)
        sruns = [line for line in script.read_text().splitlines() if line.lstrip().startswith("srun ")]
        assert all("--cpus-per-task=" in line for line in sruns), (script.name, sruns)
    assert "export SRUN_CPUS_PER_TASK=" in GRPO.read_text()


def test_grpo_sbatch_passes_the_cpus_to_srun(tmp_path):
    """Run the script as sbatch would, with `srun` and `scontrol` stand-ins (Slurm is an edge
    endstate does not own) that record what they were given."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "scontrol").write_text("#!/bin/bash\necho node-a\necho node-b\n")
    (bin_dir / "srun").write_text('#!/bin/bash\n{ printf "%s\\n" "$@"; echo "SRUN_CPUS_PER_TASK=$SRUN_CPUS_PER_TASK";'
                                  ' echo "OMP_NUM_THREADS=$OMP_NUM_THREADS"; } > "$RECORD"\n')
    for tool in ("scontrol", "srun"):
        (bin_dir / tool).chmod(0o755)
    record = tmp_path / "srun.txt"
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "RECORD": str(record),
           "POOL": "/shared/pool.jsonl", "MODEL": "/shared/model", "OUT": str(tmp_path / "run"),
           "SLURM_CPUS_PER_TASK": "64", "SLURM_JOB_NODELIST": "node-[a-b]", "SLURM_NNODES": "2",
           "SLURM_JOB_ID": "77"}
    done = subprocess.run(["bash", str(GRPO)], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    lines = record.read_text().splitlines()
    assert "--cpus-per-task=64" in lines and "SRUN_CPUS_PER_TASK=64" in lines
    assert "OMP_NUM_THREADS=8" in lines  # 64 CPUs over the node's 8 ranks
    command = next(line for line in lines if line.startswith("torchrun"))
    assert "--rdzv-endpoint=node-a:29500" in command and "--nnodes=2" in command

    env.pop("SLURM_CPUS_PER_TASK")
    outside = subprocess.run(["bash", str(GRPO)], capture_output=True, text=True, timeout=60, env=env, cwd=ROOT)
    assert outside.returncode != 0 and "SLURM_CPUS_PER_TASK" in outside.stderr
