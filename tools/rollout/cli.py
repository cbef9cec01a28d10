"""rollout: run agent episodes on tasks and write episode records (with their database diffs)."""

from __future__ import annotations

import sys

import click
import orjson

from endstate.core import prompting, stdio
from endstate.core.cli import common_options, env_domain_dirs, run, tool_group
from endstate.core.domain import Domains
from endstate.core.errors import ExitCode
from endstate.core.interpret import parse
from endstate.core.records import SkipLog, checked_line, read_jsonl
from endstate.core.run_options import run_options
from endstate.core.runtime import build_backend, run_episodes
from endstate.core.tasks import done_keys, plan, runnable_tasks, shard_of


@tool_group(default="run")
def cli():
    """Run agent episodes, or audit how their output was interpreted.

    \b
      rollout tasks.jsonl -n 4 > episodes.jsonl     # same as: rollout run tasks.jsonl -n 4
      rollout parity episodes.jsonl
    """


@cli.command("run")
@click.argument("task_files", nargs=-1, type=click.Path(allow_dash=True))
@click.option("-n", "--repeats", type=click.IntRange(min=1), default=1, show_default=True, help="Attempts per task.")
@click.option("--resume", type=click.Path(dir_okay=False),
              help="Skip (task_id, attempt) keys already in this episodes file.")
@run_options
@common_options(domains=True, skip_invalid=True, quiet=True)
def run_cmd(task_files, repeats, resume, cfg, shard, select, domain_dirs, skip_invalid, quiet):
    """Run each task REPEATS times and write one episode record per line to stdout.

    Each episode gets a fresh sandbox; the record carries the transcript, the token trace
    (token-level backends), usage, timing and the database diff that `grade` scores.

    \b
    Example:
      rollout run tasks/bench/retail.jsonl -n 2 -j 4 > episodes.jsonl
      grade episodes.jsonl | jq -c '{task_id, attempt, reward}'
    """
    skip = SkipLog() if skip_invalid else None
    domains = Domains([*domain_dirs, *env_domain_dirs()])
    tasks = shard_of(runnable_tasks(task_files, domains, skip, select=select), shard)
    out = stdio.records_out()
    keys = plan(tasks, repeats, done_keys(resume, out))
    backend = build_backend(cfg)

    def write(task, episode):
        out.write(checked_line("episode", episode))
        out.flush()

    run_episodes(keys, cfg, domains, backend, write, quiet=quiet)
    if skip:
        skip.report()


@cli.command()
@click.argument("episodes", nargs=-1, type=click.Path(allow_dash=True))
@common_options(domains=True, skip_invalid=True)
def parity(episodes, domain_dirs, skip_invalid):
    """Re-interpret every recorded raw completion with this endstate's interpreter and compare
    tool names, typed arguments, reasoning and text with what the episode recorded (what the
    serving endpoint parsed, for the chat backend). Prints mismatches per turn, and whether the
    episodes were prompted differently (few-shot, prefill, tool format, interpreter); exit 1 if
    any.

    \b
    Example:
      rollout parity episodes.jsonl && echo "training and serving read the model alike"
    """
    mismatches = turns = 0
    skip = SkipLog() if skip_invalid else None
    domains = Domains([*domain_dirs, *env_domain_dirs()])
    policies = []
    for loc, episode in read_jsonl(list(episodes), "episode", skip=skip):
        policies.append(prompting.of(episode.get("policy") or {}))
        tools = domains[episode["domain"]].tools if episode["domain"] in domains.by_name else {}
        params = {n: t.parameters for n, t in tools.items()}
        for i, m in enumerate(episode["messages"]):
            if m["role"] != "assistant" or m.get("raw") is None:
                continue
            turns += 1
            again = parse(m["raw"], params)
            recorded = [(c["function"]["name"], orjson.loads(c["function"]["arguments"]))
                        for c in m.get("tool_calls", [])]
            now = [(c.name, c.arguments) for c in again.tool_calls]
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
    if skip:
        skip.report()
    mixed = prompting.differences(policies)
    if mixed:  # one comparison, two ways of prompting: the numbers would not mean one thing
        mismatches += 1
        stdio.echo("episodes were prompted differently: " + "; ".join(
            f"{k} {' vs '.join(sorted(v))}" for k, v in mixed.items()))
    click.echo(f"parity: {turns} turn(s), {mismatches} mismatch(es)", err=True)
    if mismatches:
        sys.exit(ExitCode.NO)


@cli.command("serve-mcp")
@click.argument("task_file", type=click.Path(exists=True, dir_okay=False, allow_dash=True))
@click.option("--task", "task_id", help="The task's id [default: the file's only task].")
@click.option("--out", "out_file", required=True, type=click.Path(dir_okay=False),
              help="Append the episode here when the session ends (stdout is the MCP channel).")
@click.option("--attempt", type=click.IntRange(0), default=0, show_default=True,
              help="Attempt number recorded in the episode.")
@common_options(domains=True, skip_invalid=True)
def serve_mcp(task_file, task_id, out_file, attempt, domain_dirs, skip_invalid):
    """Serve a fresh sandbox of one task as an MCP server over stdio: the task's tools with their
    JSON schemas, results as text. When the client ends the session the episode (with its
    database diff) is appended to --out, ready for `grade`. Needs: pip install 'endstate[mcp]'.

    \b
    Example (any MCP client can start this command; here the SDK's inspector would do too):
      rollout serve-mcp tasks/bench/retail.jsonl --task retail-cancel-pending --out mcp.jsonl
      grade mcp.jsonl | jq -c '{task_id, reward}'
    """
    from endstate.rollout.mcp_server import serve_stdio

    domains = Domains([*domain_dirs, *env_domain_dirs()])
    skip = SkipLog() if skip_invalid else None
    tasks = runnable_tasks([task_file], domains, skip)
    if skip:
        skip.report()
    if task_id is None and len(tasks) != 1:
        raise click.UsageError(f"{task_file} has {len(tasks)} tasks: pick one with --task ID")
    matches = [t for t in tasks if task_id is None or t["id"] == task_id]
    if not matches:
        raise click.UsageError(f"no task {task_id!r} in {task_file}; ids: "
                               + ", ".join(t["id"] for t in tasks[:5]) + (" ..." if len(tasks) > 5 else ""))
    task = matches[0]
    serve_stdio(domains[task["domain"]], task, out_file, attempt)


main = run(cli)

if __name__ == "__main__":  # python -m endstate.rollout.cli, as under torchrun or srun
    main()
