"""probe: run each task n times with a policy, grade each episode, write attempt records."""

from __future__ import annotations

import click

from endstate.core.cli import ranges
from endstate.core.cli.command import (
    common_options,
    judge_options,
    run,
    tool_command,
)
from endstate.core.cli.run_options import run_options
from endstate.core.console.stdio import records_out
from endstate.core.episode.backends import build_backend
from endstate.core.episode.plan import (
    done_keys,
    episodes_path_writer,
    plan,
    refuse_unplayable,
    runnable_tasks,
)
from endstate.core.episode.preflight import check_endpoints, needs_judge
from endstate.core.episode.runtime import ATTEMPT_COUNTS, run_episodes
from endstate.core.grading.grader import Grader
from endstate.core.records.episode import attempt_record
from endstate.core.records.jsonl import checked_line, read_jsonl


@tool_command
@click.argument("task_files", nargs=-1, type=click.Path(allow_dash=True))
@click.option("-n", "--repeats", type=ranges.REPEATS, default=4, show_default=True, help="Attempts per task.")
@click.option("--episodes", "episodes_file", type=click.Path(dir_okay=False),
              help="Also append the graded episodes to this file.")
@click.option("--resume", type=click.Path(dir_okay=False),
              help="Skip (task_id, attempt) keys already in this attempts file.")
@run_options
@judge_options
@common_options(domains=True, skip_invalid=True, quiet=True)
def cli(task_files, repeats, episodes_file, resume, cfg, select, judge, domains, skip, quiet):
    """Run every task REPEATS times, grade each episode, and write one attempt record per line.

    System errors (endpoint failures after retries, a judge that cannot answer) are written with
    status system_error and reward null: re-run them with --resume.

    \b
    Example:
      probe tasks/train/retail.jsonl -n 8 --episodes episodes.jsonl > attempts.jsonl
      probe tasks/train/retail.jsonl -n 8 --resume attempts.jsonl >> attempts.jsonl
      jq -s 'group_by(.task_id) | map({task: .[0].task_id, k: (map(.reward // 0) | add)})' attempts.jsonl
    """
    grader = Grader(domains, judge)
    tasks = runnable_tasks(task_files, domains, skip, grader.task_problem, select=select)
    refuse_unplayable(tasks, cfg.user)
    out = records_out()
    done = done_keys(resume, out, "attempt")
    episodes_out = episodes_path_writer(episodes_file)
    if episodes_out and resume:
        # Killed between the two writes: the graded episode is there, its attempt is not.
        for _, graded in read_jsonl([episodes_file], "graded_episode"):
            key = (graded["task_id"], graded["attempt"])
            if graded["status"] == "ok" and key not in done and any(t["id"] == key[0] for t in tasks):
                out.write(checked_line("attempt", attempt_record(graded)))
                done.add(key)
        out.flush()
    keys = plan(tasks, repeats, done)
    if keys:
        check_endpoints(cfg, judge if needs_judge(tasks) else None, quiet=quiet, enabled=cfg.preflight)
    backend = build_backend(cfg) if keys else None

    async def write(task, episode):
        graded = await grader.agrade(episode.record(), task)
        if episodes_out:
            episodes_out.write(checked_line("graded_episode", graded))
            episodes_out.flush()
        out.write(checked_line("attempt", attempt_record(graded)))
        out.flush()
        return graded

    run_episodes(keys, cfg, domains, backend, write, what="probe", quiet=quiet, counts=ATTEMPT_COUNTS,
                 closing=[grader])


main = run(cli)

if __name__ == "__main__":  # python -m endstate.probe.cli, as under torchrun or srun
    main()
