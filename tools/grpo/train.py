"""GRPO on terminal-state rewards: the training loop of `grpo train`.

The algorithm, per step:
  1. Draw B tasks from the fixed pool (shuffled passes without replacement; the sampler state is
     checkpointed) and run G episodes of each with the *current* weights, through the same episode
     loop and grader as `rollout`/`probe`. Reward 1 when every check on the terminal database
     state passes, else 0.
  2. A group whose G rewards are all equal has zero advantage: drop it and draw a fresh task in
     its place (DAPO's dynamic sampling). A group with a `system_error` episode is never scored:
     its task is generated again. Both are bounded: at most `max_rounds` generation rounds per step,
     `max_regenerations` per task; every count goes to the metrics line.
  3. Advantage of an episode = reward − group mean, divided by (group std + ε) unless --no-std-norm
     (--advantage: algorithm.ADVANTAGES). Every completion token of the episode carries it; prompt,
     observation and padding tokens are masked out. Training ids are the sampler's own ids (no
     re-tokenization).
  4. Loss (--policy-loss: algorithm.POLICY_LOSSES, GSPO's sequence ratio in losses/gspo.py) =
     clipped surrogate −min(ρA, clip(ρ, 1−ε_low, 1+ε_high)A) per token, capped at c·|A|
     for A < 0 (dual clip), ρ = π_θ / π_old, every log-prob at the sampling temperature (logits/T,
     sampler and trainer alike). π_old is the sampler's log-prob, or, with the rollout importance
     correction on (default for the vllm engine), the trainer's own and the loss is weighted by
     min(π_trainer / π_sampler, C) per token or sequence (correction.py). Aggregated token-mean over
     all completion tokens of the batch (or seq-mean-token-mean, seq-mean-token-sum-norm),
     + β·KL(π‖π_ref) when kl_coef > 0 (k3 per token, or --kl-penalty's). Micro-batches
     accumulate; one AdamW step, gradients clipped at 1.0. If every advantage is zero (no informative group survived), the step is skipped.
  5. Append one attempt record per episode to attempts.jsonl (each training group is a probe),
     one metrics line to metrics.jsonl; optionally retire tasks whose posterior left the kept bands
     (--retire), or re-bucket the pool online (--rebucket, grpo/retire.py);
     every `save_freq` steps write a checkpoint (HF weights + DeepSpeed optimizer state + sampler,
     counters and RNG state). --resume continues from the latest one exactly.

Departures from textbook GRPO (DeepSeekMath): one optimizer step per batch (π_old is the sampler,
so ρ ≈ 1 up to sampler/trainer numerics and clipping guards against their drift, as in verl and
TRL with one iteration); token-mean aggregation over the batch instead of per-sequence means (DAPO;
a long episode is not down-weighted); no KL term by default (β = 0, no reference model loaded);
zero-variance groups are replaced rather than trained on with zero advantage; asymmetric clip
(ε_high) available; the reward is a database check, binary.

Launch:
  # one CPU process, the embedded SmolLM2-135M (fp32, gloo):
  grpo train --pool pool.jsonl --model embedded --out runs/smol --batch-tasks 2 --group-size 4 \\
      --steps 2 --max-new-tokens 64 --max-turns 4 --deepspeed zero0
  # one GPU node, 8 ranks, vLLM colocated in each rank:
  torchrun --nproc-per-node=8 -m endstate.grpo.cli train --config configs/grpo.yaml --device cuda \\
      --rollout-engine vllm --gpus-per-node 8
  # 3 nodes × 8 GPUs under Slurm: sbatch slurm/grpo.sbatch (srun + torchrun rendezvous)
  # see what a config resolves to and the command, without starting anything:
  grpo train --config configs/grpo.yaml --dry-run
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

from endstate.core.agent.local_model import LocalGenerator, resolve_model
from endstate.core.agent.trace import ChatTemplate
from endstate.core.console.progress import Progress, note
from endstate.core.errors import EndstateError
from endstate.core.grading.grader import Grader
from endstate.core.records.episode import attempt_record
from endstate.core.records.jsonl import checked_line, dumps
from endstate.grpo.algorithm import advantages, normalizer
from endstate.grpo.batch import Sample, sample_of
from endstate.grpo.checkpoint import (
    latest_checkpoint,
    restore_rng,
    rng_state,
    save_checkpoint,
    truncate_log,
)
from endstate.grpo.config import TrainConfig, pool_domains, pool_tasks
from endstate.grpo.dashboards import Dashboards, scalars
from endstate.grpo.distributed import init_distributed, leave_distributed
from endstate.grpo.engine import Policy, ds_config, resolve_ds_config
from endstate.grpo.evaluation import Evaluation
from endstate.grpo.metrics import reduce_stats, step_line, step_log, step_metrics
from endstate.grpo.objective import LossConfig
from endstate.grpo.outcome import Outcome
from endstate.grpo.prepare import check_run_endpoints, judge_of, runnable_pool, seed_everything
from endstate.grpo.retire import retirement_of
from endstate.grpo.rollouts import run_config, run_groups, slim
from endstate.grpo.sampling import Collected, Group, PoolSampler, collect
from endstate.grpo.settings import recorded

LOGS = ("metrics.jsonl", "attempts.jsonl", "episodes.jsonl")  # per step: cut back on --resume


def log(message: str) -> None:
    note(f"grpo: {message}")


def derived_seed(*parts: Any) -> int:
    """A seed for (run seed, step, round, rank): stable across runs and resumes."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "little")


def shard_samples(samples: list[Sample], rank: int, world: int) -> list[Sample]:
    """Side by side as they begin (a domain's episodes share its system prompt and tools, which
    the update runs once for a micro-batch's rows: logprobs.forward), longest first among those,
    dealt round-robin: every rank gets |samples|/world sequences of similar length."""
    order = sorted(range(len(samples)),
                   key=lambda i: (samples[i].ids[:OPENING], -len(samples[i].ids), i))
    return [samples[i] for i in order[rank::world]]


OPENING = 256  # leading ids that tell the domains' prompts apart


class Trainer:
    def __init__(self, cfg: TrainConfig, quiet: bool = False):
        self.cfg, self.quiet = cfg, quiet
        self.out = Path(cfg.out)
        # what cannot train is refused first, before any rank, model or engine starts
        tasks = pool_tasks(cfg)
        self.domains = pool_domains(cfg, tasks)  # fails now on an unknown domain, not mid-run
        self.tasks = {t["id"]: t for t in tasks}
        self.grader = Grader(self.domains, judge_of(cfg))
        runnable_pool(tasks, self.grader, cfg.user)
        self.evaluation = Evaluation.of(cfg, self.out, tasks)
        self.last_eval: float | None = None  # pass@1 of the latest held-out evaluation
        if self.evaluation:
            runnable_pool(self.evaluation.tasks, self.grader, cfg.user)
        check_run_endpoints(cfg, self.grader.judge, quiet)  # before a rank or a model starts
        if cfg.device == "cuda":  # before NCCL comes up: each rank on its own GPU
            import torch

            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        self.rank, self.world = init_distributed(cfg.device)
        if self.world != cfg.world:
            log(f"running on {self.world} rank(s) (the config says {cfg.world}); using {self.world}")
            if (cfg.batch_tasks * cfg.group_size) % self.world:
                raise EndstateError(f"batch_tasks × group_size is not divisible by {self.world} ranks")
        self.model_dir = resolve_model(cfg.model)
        per_rank = cfg.batch_tasks * cfg.group_size // self.world
        ds = ds_config(resolve_ds_config(cfg.deepspeed), micro_batch=cfg.micro_batch,
                       grad_accum=max(1, -(-per_rank // cfg.micro_batch)), world=self.world,
                       bf16=cfg.device != "cpu", grad_clip=cfg.grad_clip)
        self.policy = Policy(self.model_dir, ds, cfg.lr, cfg.weight_decay, cfg.device,
                             reference=cfg.kl_coef > 0, seed=cfg.seed,
                             replica=cfg.rollout_engine == "local", logits_chunk=cfg.logits_chunk,
                             checkpointing=cfg.activation_checkpointing)
        self.template = ChatTemplate(self.policy.tokenizer)
        self.prompting = run_config(cfg, 0).prompting  # resolved (and any override said) once
        self.sampler = PoolSampler(list(self.tasks), cfg.seed)
        self.attempts: dict[str, int] = {}  # next attempt number per task
        self.retirement = retirement_of(cfg)
        self.outcome = Outcome(cfg.max_error_steps)
        self.step = 0
        self.vllm = None
        if cfg.rollout_engine == "vllm":
            from endstate.grpo.vllm_engine import VLLMGenerator

            self.vllm = VLLMGenerator(self.model_dir, cfg.max_context, cfg.vllm_gpu_memory, cfg.seed,
                                      cfg.vllm_max_batched_tokens, device=cfg.device,
                                      tensor_parallel=cfg.vllm_tensor_parallel)
        if cfg.resume:
            self._resume()
        elif self.rank == 0:
            for name in LOGS:
                if (self.out / name).exists() and (self.out / name).stat().st_size:
                    raise EndstateError(f"{self.out / name} exists; pass --resume to continue that "
                                        "run, or choose another --out")
        self.dashboards = Dashboards(cfg.report_to, self.out, cfg.to_dict(), active=self.rank == 0)
        if not cfg.resume:
            self.dashboards.pool_bands(tasks)

    # -- state -------------------------------------------------------------------------------------

    def client_state(self) -> dict[str, Any]:
        return {"step": self.step, "sampler": self.sampler.state_dict(), "attempts": dict(self.attempts),
                "rng": rng_state(), "retirement": self.retirement.state_dict() if self.retirement else None,
                "vllm_seeds": self._all_ranks(self.vllm.seeds.state_dict()) if self.vllm else None,
                "outcome": self.outcome.state_dict(),
                "config": self.cfg.to_dict()}

    def _all_ranks(self, value: Any) -> list[Any]:
        """`value` of every rank, by rank (DeepSpeed saves rank 0's client state only). Collective."""
        if self.world == 1:
            return [value]
        import torch.distributed as dist

        values: list[Any] = [None] * self.world
        dist.all_gather_object(values, value)
        return values

    def _resume(self) -> None:
        folder = latest_checkpoint(self.out)
        if folder is None:
            raise EndstateError(f"--resume: no checkpoint under {self.out}/checkpoints")
        state = self.policy.load(folder)
        self.step = state["step"]
        self.sampler.load_state_dict(state["sampler"])
        self.attempts = dict(state["attempts"])
        if self.retirement and state.get("retirement"):
            self.retirement.load_state_dict(state["retirement"])
        restore_rng(state["rng"])
        if self.vllm and state.get("vllm_seeds"):
            self.vllm.seeds.load_state_dict(state["vllm_seeds"][self.rank])
        self._refresh_rollout_weights()
        if self.rank == 0:
            for name in LOGS:
                truncate_log(self.out / name, self.step)
        self.outcome.load_state_dict(state.get("outcome"))
        self.say(f"resumed from {folder} at step {self.step}")

    # -- rollouts ----------------------------------------------------------------------------------

    def _refresh_rollout_weights(self) -> None:
        """After a step (or a resume), give the sampler the current weights: pushed into vLLM, or
        gathered into the local engine's replica under ZeRO-3. Collective: every rank calls it."""
        if self.vllm:
            self.vllm.push(self.policy.named_weights())
        else:
            self.policy.refresh_replica()

    def _generator(self, seed: int):
        sampling = run_config(self.cfg, seed, self.prompting).sampling  # the episodes' own
        if self.vllm:
            return self.vllm.sampler(sampling, seed)
        module = self.policy.rollout_model()
        module.eval()
        # log-probs at the sampling temperature: what the update's ratio compares against
        return LocalGenerator(module, self.policy.tokenizer, sampling,
                              seed=seed, max_batch=self.cfg.jobs, logprobs_at_temperature=True).generate

    def generate(self, task_ids: list[str], round_: int) -> list[Group]:
        """G episodes per task: each rank runs its share, then all ranks hold all groups."""
        bases = []
        for task_id in task_ids:  # every rank numbers every task, so the numbers agree
            bases.append(self.attempts.get(task_id, 0))
            self.attempts[task_id] = bases[-1] + self.cfg.group_size
        return self._groups([self.tasks[i] for i in task_ids], self.cfg.group_size, bases,
                            derived_seed(self.cfg.seed, self.step, round_, self.rank))

    def _groups(self, tasks: list[dict[str, Any]], size: int, bases: list[int], seed: int) -> list[Group]:
        """`size` episodes of each task with the current weights, the ranks sharing the tasks."""
        mine = list(range(self.rank, len(tasks), self.world))
        generate = self._generator(seed)
        local = run_groups([tasks[i] for i in mine], size, run_config(self.cfg, seed, self.prompting),
                           self.domains, self.grader, self.template, generate,
                           [bases[i] for i in mine], quiet=self.quiet or self.rank != 0)
        getattr(generate, "finish", lambda: None)()  # a shared engine: until its group is done
        keep = (lambda e: e) if self.cfg.save_episodes else slim  # --save-episodes: rank 0 writes them whole
        local = [Group(g.task_id, g.rewards, [keep(e) for e in g.episodes]) for g in local]
        if self.world == 1:
            return local
        import torch.distributed as dist

        gathered: list[list[Group] | None] = [None] * self.world
        dist.all_gather_object(gathered, list(zip(mine, local)))
        by_index = dict(pair for part in gathered for pair in part)
        return [by_index[i] for i in range(len(tasks))]

    def evaluate(self) -> dict[str, Any]:
        """The held-out evaluation at this step, unless a resumed run wrote it already: its
        summary as `eval_*` metrics (nothing when none is due)."""
        ev = self.evaluation
        if ev is None or not ev.due(self.step, self.cfg.steps):
            return {}
        summary = ev.done(self.step)
        if summary is None:
            groups = self._groups(ev.tasks, ev.repeats, [0] * len(ev.tasks),
                                  derived_seed(self.cfg.seed, "eval", self.step, self.rank))
            if self.rank == 0:
                summary = ev.write(self.step, [e for g in groups for e in g.episodes])
                self.say(f"eval at step {self.step}: pass@1 {summary['pass_at_1']:.3f} "
                    f"(95% {summary['pass_at_1_ci95']}) over {summary['attempts']} attempt(s)")
        if summary is None:  # ranks other than 0
            return {}
        values = {f"eval_{k}": summary[k] for k in ("pass_at_1", "pass_at_1_ci95", "attempts")}
        low, high = summary["pass_at_1_ci95"] or (None, None)  # none when every attempt failed to run
        self.dashboards.log(self.step, {tag: v for tag, v in (
            ("eval/pass_at_1", summary["pass_at_1"]), ("eval/ci95_low", low),
            ("eval/ci95_high", high)) if v is not None})
        self.last_eval = summary["pass_at_1"]
        return values

    # -- one step ----------------------------------------------------------------------------------

    def train_step(self) -> dict[str, Any]:
        cfg = self.cfg
        started = time.perf_counter()
        collected = collect(self.sampler.draw, self.generate, cfg.batch_tasks, cfg.max_rounds,
                            cfg.max_regenerations)
        rollout_s = time.perf_counter() - started
        samples = [sample_of(e["turns"], a, e["episode_id"])
                   for g in collected.groups
                   for e, a in zip(g.episodes, advantages(g.rewards, cfg))]
        # no token sampled, nothing to train (its reward is in its group's advantages): dropped, counted
        empty = sum(not s.completion_tokens for s in samples)
        samples = [s for s in samples if s.completion_tokens]
        skipped = not samples or all(s.advantage == 0 for s in samples)
        stats: dict[str, float] = {}
        t = time.perf_counter()
        if not skipped:
            mine = shard_samples(samples, self.rank, self.world)
            per_rank = max(-(-len(shard_samples(samples, r, self.world)) // cfg.micro_batch)
                           for r in range(self.world))
            norm = normalizer([s.completion_tokens for s in samples], cfg.loss_agg, cfg.max_new_tokens)
            stats = self.policy.update(mine, LossConfig.of(cfg), norm, per_rank)
            stats = reduce_stats(stats, self.world, self.policy.engine.device)
            self._refresh_rollout_weights()
        elif samples:
            self.say(f"step {self.step + 1}: every advantage is zero; optimizer step skipped")
        update_s = time.perf_counter() - t
        self.step += 1
        metrics = step_metrics(self.step, collected, samples, stats, skipped,
                               time.perf_counter() - started, rollout_s, update_s, recorded(cfg), empty)
        metrics.update(self.retirement.step_metrics(collected.generated, self.sampler, self.step)
                       if self.retirement else {"retired": []})
        metrics.update(self.evaluate())
        if self.rank == 0:
            self._write(collected, metrics)
        # after the step's lines are written: at too many error steps in a row the run stops here
        self.outcome.after_step(self.step, not skipped, [e for g in collected.generated for e in g.episodes])
        return metrics

    def _write(self, collected: Collected, metrics: dict[str, Any]) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        episodes = [e for g in collected.generated for e in g.episodes]
        with open(self.out / "attempts.jsonl", "ab") as fh:
            fh.writelines(checked_line("attempt", {**attempt_record(e), "step": self.step}) for e in episodes)
        if self.cfg.save_episodes:
            with open(self.out / "episodes.jsonl", "ab") as fh:
                fh.writelines(checked_line("graded_episode", {**e, "step": self.step}) for e in episodes)
        with open(self.out / "metrics.jsonl", "ab") as fh:
            fh.write(dumps(metrics))
        self.dashboards.log(self.step, scalars(metrics))
        for entry in collected.log:
            self.say(f"step {self.step} round {entry['round']}: {entry['tasks']} task(s), "
                     f"{entry['informative']} informative, {entry['zero_variance']} zero-variance, "
                     f"{entry['system_error']} with a system error")
        self.say(f"step {self.step}: {step_log(metrics)}")

    def say(self, message: str) -> None:
        """A progress line on stderr: rank 0's, and none under --quiet (errors only)."""
        if self.rank == 0 and not self.quiet:
            log(message)

    def run(self) -> list[dict[str, Any]]:
        cfg = self.cfg
        if self.rank == 0:
            self.out.mkdir(parents=True, exist_ok=True)
            (self.out / "config.json").write_bytes(dumps(cfg.to_dict()))
        history = []
        progress = Progress(cfg.steps - self.step, "grpo", unit="step",
                            quiet=self.quiet or self.rank != 0, counts=("trained", "skipped", "error"))
        try:
            if self.step == 0:
                self.evaluate()  # the base policy, before any update
            while self.step < cfg.steps:
                history.append(self.train_step())
                progress.status(step_line(history[-1], self.last_eval))
                kind = ("trained" if not history[-1]["skipped"] else
                        "error" if self.outcome.error_run[-1:] == [self.step] else "skipped")
                progress.advance({kind: 1}, history[-1]["generated_tokens"])
                due = self.step % cfg.save_freq == 0 or self.step == cfg.steps
                if due and self.checkpoint() and cfg.plot and self.rank == 0:
                    from endstate.grpo.plot import plot_metrics

                    plot_metrics(self.out / "metrics.jsonl", cfg.plot)
        finally:
            progress.close()
            self.dashboards.close()
        return history

    def checkpoint(self) -> bool:
        """A checkpoint of this step, if an update was made since the last one (grpo/outcome.py)."""
        if not self.outcome.checkpoint_due():
            self.say(f"step {self.step}: no checkpoint: no update since "
                     f"{'the last one' if self.outcome.saved_updates else 'the start'}")
            return False
        self.outcome.saved()  # before client_state: the checkpoint holds it as saved
        save_checkpoint(self.policy, self.out, self.step, self.client_state(), self.prompting)
        return True


def train(cfg: TrainConfig, quiet: bool = False) -> list[dict[str, Any]]:
    seed_everything(cfg.seed)
    trainer = Trainer(cfg, quiet)
    history = trainer.run()
    if trainer.rank == 0 and not quiet:
        latest = latest_checkpoint(trainer.out)
        log(f"{trainer.outcome.summary(len(history))}; "
            + (f"latest checkpoint {latest}" if latest else "no checkpoint: no update was made"))
    if trainer.world > 1:  # a launched rank: leave the group together (the CLI then ends the rank)
        leave_distributed(trainer.policy.engine, trainer.policy.ref)
    return history
