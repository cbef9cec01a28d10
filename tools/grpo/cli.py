"""grpo: train a tool-using agent with GRPO on terminal-state rewards (see train.py for the
algorithm), and export DeepSpeed checkpoints as plain HF folders."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import click

from endstate.core.cli import options as flags
from endstate.core.cli.command import common_options, run, tool_group
from endstate.core.console import stdio
from endstate.core.errors import EndstateError
from endstate.grpo.config import DECLARED, TrainConfig, launch_command, resolve
from endstate.grpo.settings import flag_types, help_texts

# every flag of `grpo train` from the settings' declarations (grpo/settings.py)
config_options = flags.options(TrainConfig, help_texts(DECLARED), flag_types(DECLARED), layered=True)


@tool_group()
def cli():
    """Train a tool-using agent with GRPO on terminal-state rewards.

    \b
      grpo train --pool pool.jsonl --model embedded --out runs/smol --dry-run
      grpo train --config configs/grpo.yaml --pool pool.jsonl --out runs/r1
      grpo export runs/r1 runs/r1-hf
    """


class RecordingCommand(click.Command):
    """Keeps the raw arguments, so --dry-run can print the exact command."""

    def parse_args(self, ctx, args):
        ctx.meta["grpo.argv"] = list(args)
        return super().parse_args(ctx, args)


@cli.command(cls=RecordingCommand)
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False),
              help="YAML file of config keys (flags override it); see configs/grpo.yaml.")
@click.option("--dry-run", is_flag=True, help="Resolve and check everything, print the launch "
              "command, start nothing.")
@config_options
@common_options(quiet=True)
def train(config_file, dry_run, quiet, **flags):
    """Run GRPO: B tasks × G rollouts per step through the rollout/grade path, one AdamW step.

    Writes OUT/metrics.jsonl (one line per step), OUT/attempts.jsonl (one attempt record per
    training episode, readable by bucket and evalstats) and OUT/checkpoints/step-N/{hf,ds}.

    \b
    Example:
      grpo train --config configs/grpo.yaml --pool pool.jsonl --out runs/r1 --dry-run
      grpo train --config configs/grpo.yaml --pool pool.jsonl --out runs/r1
      grpo train --config configs/grpo.yaml --pool pool.jsonl --out runs/r1 --resume
      # the memory plan of a 27B on 3 × 8 H100s, without the weights (docs/grpo.md):
      grpo train --config configs/grpo.yaml --pool pool.jsonl --model-config gemma3-27b --nodes 3 \\
          --gpus-per-node 8 --device cuda --deepspeed zero3-offload --rollout-engine vllm \\
          --vllm-tensor-parallel 4 --activation-checkpointing --gpu-memory 79.6 --host-memory 1800 \\
          --dry-run
    """
    flags = {k: (list(v) if isinstance(v, tuple) else v) for k, v in flags.items()}
    flags = {k: (None if v == [] else v) for k, v in flags.items()}
    cfg = resolve(config_file, flags)
    if dry_run:
        argv = click.get_current_context().meta["grpo.argv"]
        dry_run_report(cfg, [a for a in argv if a != "--dry-run"])
        return
    from endstate.grpo.distributed import end_rank
    from endstate.grpo.train import train as run_training

    run_training(cfg, quiet)
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # a launched rank: see end_rank
        end_rank(0)


def dry_run_report(cfg, args: list[str]) -> None:
    """Check pool, model, output folder, DeepSpeed config and divisibility; print the resolved
    config and the memory plan; refuse a plan over --gpu-memory / --host-memory (exit 2, naming
    the knob), else print the launch command and exit 0."""
    from endstate.core.agent.local_model import resolve_model
    from endstate.core.grading.grader import Grader
    from endstate.grpo.config import pool_domains, pool_tasks
    from endstate.grpo.engine import resolve_ds_config
    from endstate.grpo.evaluation import Evaluation
    from endstate.grpo.memory_plan import plan_lines, require_fit
    from endstate.grpo.prepare import judge_of, runnable_pool

    tasks = pool_tasks(cfg)
    grader = Grader(pool_domains(cfg, tasks), judge_of(cfg))
    runnable_pool(tasks, grader, cfg.user)  # the refusals a run would meet before step 1
    evaluation = Evaluation.of(cfg, Path(cfg.out), tasks)
    if evaluation:
        runnable_pool(evaluation.tasks, grader, cfg.user)
    model = resolve_model(cfg.model)
    ds = resolve_ds_config(cfg.deepspeed)
    out = Path(cfg.out)
    if (out / "metrics.jsonl").exists() and not cfg.resume:
        raise EndstateError(f"{out}/metrics.jsonl exists; pass --resume or choose another --out")
    if cfg.resume and not (out / "checkpoints" / "latest").exists():
        raise EndstateError(f"--resume: no checkpoint under {out}/checkpoints")
    probe = out if out.exists() else next(p for p in out.parents if p.exists())
    if not shutil.disk_usage(probe).free:
        raise EndstateError(f"{probe}: no free space for checkpoints")
    lines = [f"{key}: {value}" for key, value in cfg.to_dict().items()]
    lines += [f"pool_tasks: {len(tasks)}", f"model_dir: {model}", f"deepspeed_config: {ds}",
              f"rollout_is_level: {cfg.rollout_is_level}",
              f"world_size: {cfg.world}",
              (f"episodes_per_step: {cfg.batch_tasks * cfg.group_size} "
               f"({cfg.batch_tasks * cfg.group_size // cfg.world} per rank)")]
    plan, plan_text = plan_lines(cfg, model, ds)
    stdio.echo("\n".join(lines + plan_text))
    require_fit(plan)  # the plan is on stdout by now; the error names what to change
    stdio.echo(f"launch: {launch_command(cfg, args)}")


@cli.command()
@click.argument("checkpoint", type=click.Path(exists=True, file_okay=False))
@click.argument("target", type=click.Path(file_okay=False))
@common_options(quiet=True)
def export(checkpoint, target, quiet):
    """Write CHECKPOINT (a run folder: its latest checkpoint; or a checkpoints/step-N folder) as a
    plain HF folder TARGET (fp32 weights rebuilt from the DeepSpeed state, config, tokenizer).

    \b
    Example:
      grpo export runs/r1 runs/r1-hf
      rollout tasks/bench/retail.jsonl -n 4 --model runs/r1-hf > episodes.jsonl
    """
    # rebuilding the weights is CPU work: no accelerator probe (DeepSpeed warns on a box without one)
    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from endstate.grpo.export import export_checkpoint

    folder = export_checkpoint(Path(checkpoint), Path(target))
    if not quiet:
        click.echo(f"exported {folder} to {target}", err=True)


main = run(cli)


if __name__ == "__main__":  # torchrun -m endstate.grpo.cli train ...
    main()
