"""Tokens/s of one GRPO update: endstate's (DeepSpeed engine, token-mean, logits only at completion
positions, a common prefix of the rows run once) against TRL's GRPOTrainer loss (loss_type="bnpo":
token-mean over the batch) on the same model, the same batch and the same torch AdamW (fused, as
grpo and TRL's trainer default to), measured in the same run: on a GRPO group (one prompt, the
batch's completions of it: the figure) and on a prompt per row (no common prefix: the same work).

One update = forward + backward over the batch + the optimizer step. The TRL baseline comes from
the `bench` extra (make bench installs it against the torch in use); without TRL the baseline is
reported as skipped and only endstate's update is timed.

    python bench/bench_grpo.py [--model embedded] [--batch 4] [--prompt 128] [--completion 64] [--repeats 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from results import record

os.environ.setdefault("DS_ACCELERATOR", "cpu")


def make_batch(vocab: int, batch: int, prompt: int, completion: int, seed: int, group: bool):
    """`group`: one prompt for every row, as the G completions of a GRPO group have; else a
    prompt per row."""
    import torch

    g = torch.Generator().manual_seed(seed)
    prompt_ids = torch.randint(100, vocab - 100, (1 if group else batch, prompt), generator=g)  # (B, P)
    prompt_ids = prompt_ids.expand(batch, prompt).contiguous()
    completion_ids = torch.randint(100, vocab - 100, (batch, completion), generator=g)  # (B, C)
    advantages = torch.linspace(-1, 1, batch) + 0.25  # (B,) not summing to 0: a non-zero loss to compare
    return prompt_ids, completion_ids, advantages


def endstate_update(model_dir, batch, lr):
    from endstate.grpo.batch import Sample
    from endstate.grpo.distributed import init_distributed
    from endstate.grpo.engine import LossConfig, Policy, ds_config, resolve_ds_config

    init_distributed("cpu")
    prompt_ids, completion_ids, advantages = batch
    n = prompt_ids.shape[0]
    ds = ds_config(resolve_ds_config("zero0"), micro_batch=n, grad_accum=1, world=1, bf16=False, grad_clip=1.0)
    policy = Policy(model_dir, ds, lr, 0.0, "cpu", reference=False, seed=0)
    samples = [Sample(p + c, [False] * len(p) + [True] * len(c), [float("nan")] * (len(p) + len(c)), a)
               for p, c, a in zip(prompt_ids.tolist(), completion_ids.tolist(), advantages.tolist())]
    loss = LossConfig(micro_batch=n)
    norm = float(completion_ids.numel())

    def step():
        stats = policy.update(samples, loss, norm, 1)
        return stats["loss"]

    return step


def trl_update(model_dir, batch, lr):
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    prompt_ids, completion_ids, advantages = batch
    n, c = completion_ids.shape
    from endstate.grpo.engine import plain_config

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, config=plain_config(model_dir))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    args = GRPOConfig(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=n, num_generations=n,
                      max_completion_length=c, loss_type="bnpo", beta=0.0, use_cpu=True, report_to=[],
                      bf16=False, gradient_accumulation_steps=1, save_strategy="no", learning_rate=lr)
    trainer = GRPOTrainer(model=model, reward_funcs=lambda completions, **kw: [0.0] * len(completions),
                          args=args, train_dataset=Dataset.from_dict({"prompt": ["hi"] * n}),
                          processing_class=tokenizer)
    model = trainer.model
    model.train()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, fused=True)  # TRL's default
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids),
              "completion_ids": completion_ids, "completion_mask": torch.ones_like(completion_ids),
              "advantages": advantages, "num_items_in_batch": torch.tensor(float(completion_ids.numel()))}

    def step():
        trainer.current_gradient_accumulation_steps = 1
        loss = trainer.compute_loss(model, inputs)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        return float(loss)

    return step


def timed(steps, repeats):
    """Each step's times over `repeats` (sorted) and last loss, the steps interleaved so that load
    from other processes on the machine falls on both alike."""
    losses = [step() for step in steps]  # warm-up (allocations, first-call overheads)
    times: list[list[float]] = [[] for _ in steps]
    for _ in range(repeats):
        for i, step in enumerate(steps):
            t = time.perf_counter()
            losses[i] = step()
            times[i].append(time.perf_counter() - t)
    return [sorted(t) for t in times], losses


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="embedded")
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--completion", type=int, default=64)
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args()
    try:
        import trl  # noqa: F401
        skip_trl = None
    except ImportError:
        skip_trl = "TRL is not installed (make bench installs it: pip install -e '.[bench]')"
    import torch

    from endstate.core.agent.local_model import resolve_model

    model_dir = resolve_model(a.model)
    from transformers import AutoConfig

    vocab = AutoConfig.from_pretrained(model_dir).vocab_size
    tokens = a.batch * (a.prompt + a.completion)
    print(f"model {model_dir.name}, batch {a.batch} × ({a.prompt} prompt + {a.completion} completion) "
          f"= {tokens} tokens, torch {torch.__version__}, {torch.get_num_threads()} threads")
    # A GRPO group (its rows share the prompt: endstate runs it once) is the update's batch;
    # distinct prompts leave both the same work (the figure without that saving).
    ours = {}
    for group, figure in ((True, "grpo.update_x_trl"), (False, "grpo.update_x_trl_distinct")):
        batch = make_batch(vocab, a.batch, a.prompt, a.completion, seed=0, group=group)
        torch.manual_seed(0)
        updates = [endstate_update(model_dir, batch, 1e-6)]
        if not skip_trl:
            updates.append(trl_update(model_dir, batch, 1e-6))
        times, losses = timed(updates, a.repeats)
        seconds = [t[0] for t in times]  # the best of each: the ratio's
        ours[group] = seconds[0]
        print("one prompt for the batch (a GRPO group):" if group else "a prompt per row:")
        print(f"  endstate grpo update: {seconds[0]:.2f} s  {tokens / seconds[0]:,.0f} tokens/s  "
              f"(loss {losses[0]:+.5f}; {_spread(times[0])})")
        if skip_trl:
            print(f"  TRL GRPOTrainer loss: skipped: {skip_trl}")
            continue
        print(f"  TRL GRPOTrainer loss: {seconds[1]:.2f} s  {tokens / seconds[1]:,.0f} tokens/s  "
              f"(loss {losses[1]:+.5f}; {_spread(times[1])})")
        print(f"  ratio endstate/TRL tokens/s: {seconds[1] / seconds[0]:.2f}x")
        record(figure, seconds[1] / seconds[0], "x", better="higher")
    # endstate against itself: what running the group's prompt once saves (TRL's step time drifts
    # by half between runs on a shared box; this ratio does not depend on it)
    print(f"endstate on the group / on a prompt per row: {ours[False] / ours[True]:.2f}x faster")
    record("grpo.group_x_distinct", ours[False] / ours[True], "x", better="higher")


def _spread(times: list[float]) -> str:
    return f"{len(times)} runs {times[0]:.2f}–{times[-1]:.2f} s"


if __name__ == "__main__":
    main()
