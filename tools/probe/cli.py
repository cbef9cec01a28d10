"""probe: run each task n times with a policy, grade each episode, write attempt records."""

from __future__ import annotations

import sys

import click
import orjson

from endstate.core.cli import (
    domains_option,
    env_domain_dirs,
    run,
    skip_invalid_option,
    verbose_option,
)
from endstate.core.domain import Domains
from endstate.core.records import SkipLog, dumps
from endstate.grade.cli import judge_options
from endstate.grade.grader import Grader
from endstate.grade.judge import Judge
from endstate.rollout.options import run_options
from endstate.rollout.runner import (
    build_backend,
    done_keys,
    episodes_path_writer,
    load_tasks,
    plan,
    run_episodes,
    shard_of,
)


def attempt_record(graded: dict) -> dict:
    """The attempt record (schemas/attempt.schema.json) of a graded episode."""
    return {"task_id": graded["task_id"], "domain": graded["domain"], "attempt": graded["attempt"],
            "reward": graded["reward"], "status": graded["status"],
            "model": graded["policy"].get("model"), "usage": graded["usage"],
            "cost_usd": graded["cost_usd"], "episode_id": graded["episode_id"],
            "error": graded.get("error")}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("task_files", nargs=-1, type=click.Path(allow_dash=True))
@click.option("-n", "--repeats", type=int, default=4, show_default=True, help="Attempts per task.")
@click.option("--episodes", "episodes_file", type=click.Path(dir_okay=False),
              help="Also append the graded episodes to this file.")
@click.option("--resume", type=click.Path(dir_okay=False),
              help="Skip (task_id, attempt) keys already in this attempts file.")
@run_options
@judge_options
@domains_option
@skip_invalid_option
@verbose_option
def cli(task_files, repeats, episodes_file, resume, cfg, shard, judge_model, judge_base_url,
        judge_cache, domain_dirs, skip_invalid):
    """Run every task REPEATS times, grade each episode, and write one attempt record per line.

    System errors (endpoint failures after retries, a judge that cannot answer) are written with
    status system_error and reward null: re-run them with --resume.

    \b
    Example:
      probe tasks/train/retail.jsonl -n 8 --episodes episodes.jsonl > attempts.jsonl
      probe tasks/train/retail.jsonl -n 8 --resume attempts.jsonl >> attempts.jsonl
      jq -s 'group_by(.task_id) | map({task: .[0].task_id, k: (map(.reward // 0) | add)})' attempts.jsonl
    """
    skip = SkipLog() if skip_invalid else None
    domains = Domains([*domain_dirs, *env_domain_dirs()])
    grader = Grader(domains, Judge.from_options(judge_model, judge_base_url, judge_cache))
    tasks = shard_of(load_tasks(task_files, skip), shard)
    done = done_keys(resume)
    out = sys.stdout.buffer
    episodes_out = episodes_path_writer(episodes_file)
    if episodes_out and resume:
        # Killed between the two writes: the graded episode is there, its attempt is not.
        for raw in open(episodes_file, "rb"):
            graded = orjson.loads(raw)
            key = (graded["task_id"], graded["attempt"])
            if graded["status"] == "ok" and key not in done and any(t["id"] == key[0] for t in tasks):
                out.write(dumps(attempt_record(graded)))
                done.add(key)
        out.flush()
    keys = plan(tasks, repeats, done)
    backend = build_backend(cfg) if keys else None
    rewards = {0: 0, 1: 0, None: 0}

    def write(task, episode):
        graded = grader.grade(episode, task)
        rewards[graded["reward"]] += 1
        if episodes_out:
            episodes_out.write(dumps(graded))
            episodes_out.flush()
        out.write(dumps(attempt_record(graded)))
        out.flush()

    run_episodes(keys, cfg, domains, backend, write, what="probe")
    if skip:
        skip.report()
    click.echo(f"probed {len(keys)} episode(s): reward 1 ×{rewards[1]}, 0 ×{rewards[0]}, "
               f"system_error ×{rewards[None]}", err=True)


main = run(cli)
