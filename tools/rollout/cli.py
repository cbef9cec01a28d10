"""rollout: run agent episodes on tasks and write episode records (with their database diffs)."""

from __future__ import annotations

import sys

import click
import orjson

from endstate.core.agent import prompting
from endstate.core.agent.interpret import parse
from endstate.core.cli import ranges
from endstate.core.cli.command import common_options, run, tool_group
from endstate.core.cli.run_options import run_options
from endstate.core.console import stdio
from endstate.core.episode.backends import build_backend
from endstate.core.episode.plan import done_keys, plan, refuse_unplayable, runnable_tasks
from endstate.core.episode.preflight import check_endpoints
from endstate.core.episode.runtime import run_episodes
from endstate.core.errors import ExitCode
from endstate.core.records.episode import prompting_of
from endstate.core.records.jsonl import checked_line, read_jsonl
from endstate.rollout.openenv_cmd import serve_openenv
from endstate.rollout.serve_cmd import serve_mcp


@tool_group(default="run")
def cli():
    """Run agent episodes, or audit how their output was interpreted.

    \b
      rollout tasks.jsonl -n 4 > episodes.jsonl     # same as: rollout run tasks.jsonl -n 4
      rollout parity episodes.jsonl
    """


@cli.command("run")
@click.argument("task_files", nargs=-1, type=click.Path(allow_dash=True))
@click.option("-n", "--repeats", type=ranges.REPEATS, default=1, show_default=True, help="Attempts per task.")
@click.option("--resume", type=click.Path(dir_okay=False),
              help="Skip (task_id, attempt) keys already in this episodes file.")
@run_options
@common_options(domains=True, skip_invalid=True, quiet=True)
def run_cmd(task_files, repeats, resume, cfg, select, domains, skip, quiet):
    """Run each task REPEATS times and write one episode record per line to stdout.

    Each episode gets a fresh sandbox; the record carries the transcript, the token trace
    (token-level backends), usage, timing and the database diff that `grade` scores.

    \b
    Example:
      rollout run tasks/bench/retail.jsonl -n 2 -j 4 > episodes.jsonl
      grade episodes.jsonl | jq -c '{task_id, attempt, reward}'
    """
    tasks = runnable_tasks(task_files, domains, skip, select=select)
    refuse_unplayable(tasks, cfg.user)
    out = stdio.records_out()
    keys = plan(tasks, repeats, done_keys(resume, out, "episode"))
    if keys:  # nothing left to run: no endpoint to ask, no model to load
        check_endpoints(cfg, quiet=quiet, enabled=cfg.preflight)
    backend = build_backend(cfg) if keys else None

    def write(task, episode):
        out.write(checked_line("episode", episode))
        out.flush()

    run_episodes(keys, cfg, domains, backend, write, quiet=quiet)


@cli.command()
@click.argument("episodes", nargs=-1, type=click.Path(allow_dash=True))
@common_options(domains=True, skip_invalid=True, quiet=True)
def parity(episodes, domains, skip, quiet):
    """Re-interpret every recorded raw completion with this endstate's interpreter and compare
    tool names, typed arguments, reasoning and text with what the episode recorded (what the
    serving endpoint parsed, for the chat backend). Prints mismatches per turn, and whether the
    episodes of one backend were prompted differently (few-shot, prefill, tool format,
    interpreter); exit 1 if any. Episodes of different backends are each held against their own
    re-interpretation: a chat endpoint lists tools natively and takes no prefill, so its
    prompting is not compared with a token-level backend's.

    \b
    Example:
      rollout parity episodes.jsonl && echo "training and serving read the model alike"
      rollout parity completions.jsonl chat.jsonl   # two backends, one audit
    """
    mismatches = turns = 0
    policies: dict[str, list] = {}  # backend -> the prompting of each of its episodes
    for loc, episode in read_jsonl(list(episodes), "episode", skip=skip):
        policy = episode.get("policy") or {}
        policies.setdefault(policy.get("backend") or "?", []).append(prompting_of(policy))
        tools = domains[episode["domain"]].tools if episode["domain"] in domains.by_name else {}
        params = {n: t.parameters for n, t in tools.items()}
        for i, m in enumerate(episode["messages"]):
            if m["role"] != "assistant" or m.get("raw") is None:
                continue
            turns += 1
            again = parse(m["raw"], params)
            recorded = [(c["function"]["name"], orjson.loads(c["function"]["arguments"]))
                        for c in m.get("tool_calls", [])]
            now = [(c.name, c.args()) for c in again.tool_calls]
            problems = []
            if recorded != now:
                problems.append(f"tool calls {recorded} != {now}")
            if (m.get("reasoning") or None) != (again.reasoning or None):
                problems.append("reasoning differs")
            if (m.get("content") or None) != (again.content or None) and not recorded:
                problems.append(f"text {m.get('content')!r} != {again.content!r}")
            if problems:
                mismatches += 1
                stdio.echo(f"{loc}: {episode['episode_id']} message {i}: " + "; ".join(problems))
    for backend, promptings in policies.items():
        mixed = prompting.differences(promptings)
        if mixed:  # one backend, two ways of prompting: its numbers would not mean one thing
            mismatches += 1
            stdio.echo(f"{backend} episodes were prompted differently: " + "; ".join(
                f"{k} {' vs '.join(sorted(v))}" for k, v in mixed.items()))
    if not quiet:
        click.echo(f"parity: {turns} turn(s), {mismatches} mismatch(es)", err=True)
    if mismatches:
        sys.exit(ExitCode.NO)


cli.add_command(serve_mcp)
cli.add_command(serve_openenv)

main = run(cli)

if __name__ == "__main__":  # python -m endstate.rollout.cli, as under torchrun or srun
    main()
