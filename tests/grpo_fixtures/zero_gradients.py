"""The update's full gradient under every ZeRO stage, on ranks that take different paths.

`Policy.update` runs on 1 or 2 gloo ranks (under torchrun) over a fixed set of rows laid out so
that, at the same micro-batch index, one rank's rows share a prompt (GRPO groups: the common-prefix
path) and the other's do not, or the other runs the filler pass, or holds a row whose completion is
empty. Each rank saves DeepSpeed's full gradient (`safe_get_full_grad`, reduced over the ranks,
taken just before the optimizer step) and the reported `grad_norm`. `reference` recomputes the
gradient in float64 on a plain transformers model, one row at a time, with the GRPO loss written
out here (no endstate math): at π_old = π_θ the token-mean loss is −Σ_rows A·Σ_completion log p /
(completion tokens in the batch).

    python tests/grpo_fixtures/zero_gradients.py        # the table: stage × ranks × micro-batch

prints the largest relative error per configuration; tests/test_grpo_zero_gradients.py asserts it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

STAGES = (0, 1, 2, 3)
MICRO_BATCHES = (1, 3, 6)
WORLDS = (1, 2)


def rows() -> dict[str, list]:
    """Named rows (endstate Samples): groups A (6 rows, a 20-token prompt), B (2 rows and E, whose
    completion is empty, on a 24-token prompt), C (3 rows, 18 tokens), and S (3 rows, prompts of
    their own). Token ids lie in the tiny model's vocabulary."""
    import torch

    from endstate.grpo.batch import Sample

    g = torch.Generator().manual_seed(7)

    def ids(n: int) -> list[int]:
        return torch.randint(4, 16, (n,), generator=g).tolist()

    def row(prompt: list[int], done: int, advantage: float) -> Sample:
        completion = ids(done)
        logprobs = [float("nan")] * done  # π_old = π_θ: the ratio is 1, the loss −A·log p
        return Sample(prompt + completion, [False] * len(prompt) + [True] * done,
                      [float("nan")] * len(prompt) + logprobs, advantage)

    out: dict[str, list] = {}
    for name, length, size in (("A", 20, 6), ("B", 24, 2), ("C", 18, 3)):
        prompt = ids(length)
        out[name] = [row(prompt, 3 + i % 3, (-1.0) ** i * (0.5 + 0.25 * i)) for i in range(size)]
        if name == "B":
            out["E"] = [row(prompt, 0, 1.0)]
    out["S"] = [row([4 + i] + ids(19 + i), 4, 1.0 - i) for i in range(3)]
    return out


def layout(world: int) -> list[list]:
    """This world's rows per rank. Two ranks, micro-batch 3: rank 0 runs A, A, C (each a shared
    prefix), rank 1 runs S (none), E+B (a shared prefix of another length; E has no completion
    token), then the filler pass; micro-batch 1 puts E alone in a micro-batch."""
    r = rows()
    if world == 1:
        return [r["A"] + r["S"] + r["E"] + r["B"] + r["C"]]
    assert world == 2, world
    return [r["A"] + r["C"], r["S"] + r["E"] + r["B"]]


def zero_config(stage: int, out: Path) -> Path:
    """The shipped DeepSpeed config of that stage (zero0, zero2, zero3); stage 1 is zero2's at stage 1."""
    from endstate.grpo.engine import resolve_ds_config

    if stage != 1:
        return resolve_ds_config(f"zero{stage}")
    config = json.loads(resolve_ds_config("zero2").read_text())
    config["zero_optimization"]["stage"] = 1
    path = out / "zero1.json"
    path.write_text(json.dumps(config))
    return path


def run_rank(model: str, out: str) -> None:
    """Under torchrun: every stage × micro-batch, this rank's rows through Policy.update; rank 0
    saves `grads-<stage>-<micro>.pt` ({name: full gradient}, grad_norm), every rank the prefix
    each micro-batch ran once, `prefixes-<rank>-<stage>-<micro>.json`, in `out`."""
    import torch
    from deepspeed.utils import safe_get_full_grad

    from endstate.grpo.distributed import end_rank, init_distributed, leave_distributed
    from endstate.grpo.engine import Policy, ds_config
    from endstate.grpo.objective import LossConfig

    rank, world = init_distributed("cpu")
    folder = Path(out)
    mine = layout(world)[rank]
    norm = float(sum(s.completion_tokens for part in layout(world) for s in part))
    engines = []
    for stage in STAGES:
        for micro in MICRO_BATCHES:
            count = max(-(-len(part) // micro) for part in layout(world))
            ds = ds_config(zero_config(stage, folder), micro_batch=micro, grad_accum=count, world=world,
                           bf16=False, grad_clip=1e9)
            policy = Policy(Path(model), ds, 1e-3, 0.0, "cpu", reference=False, seed=0)
            captured: dict[str, torch.Tensor] = {}
            step = policy.engine.step

            def capture(policy=policy, step=step, captured=captured):
                if policy.engine.is_gradient_accumulation_boundary():
                    for name, p in policy.module.named_parameters():  # collective under ZeRO 1-3
                        captured[name] = safe_get_full_grad(p).detach().clone()
                step()

            policy.engine.step = capture
            prefixes = policy._prefixes

            def record(*args, prefixes=prefixes, name=f"prefixes-{rank}-{stage}-{micro}.json"):
                chosen = prefixes(*args)
                (folder / name).write_text(json.dumps(chosen))
                return chosen

            policy._prefixes = record
            stats = policy.update(mine, LossConfig(micro_batch=micro), norm, count)
            if rank == 0:
                torch.save({"grads": captured, "grad_norm": stats["grad_norm"]},
                           folder / f"grads-{stage}-{micro}.pt")
            engines.append(policy.engine)
    leave_distributed(*engines)
    end_rank(0)


def reference(model_dir: str, world: int) -> dict:
    """The batch loss's float64 gradient, one row at a time on a plain transformers model:
    `grads` {name: gradient}, `norm` its norm, `rows`, `longest` (ids), `logits` (max |logit|)."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float64)
    samples = [s for part in layout(world) for s in part]
    norm = sum(sum(s.completion) for s in samples)
    largest = 0.0
    for s in samples:
        if not any(s.completion):
            continue  # nothing sampled, nothing trained
        ids = torch.tensor([s.ids])  # (1, T + 1)
        logits = model(input_ids=ids[:, :-1]).logits[0]  # (T, V)
        largest = max(largest, float(logits.detach().abs().max()))
        logp = torch.log_softmax(logits, -1).gather(-1, ids[0, 1:, None])[:, 0]  # (T,)
        trained = torch.tensor(s.completion[1:])  # position t predicts token t + 1
        (-s.advantage * logp[trained].sum() / norm).backward()
    grads = {n: p.grad for n, p in model.named_parameters()}
    total = float(torch.sqrt(sum((g ** 2).sum() for g in grads.values())))
    return {"grads": grads, "norm": total, "rows": len(samples),
            "longest": max(len(s.ids) for s in samples), "logits": largest}


def launch(model: str, out: Path, world: int) -> None:
    """torchrun with `world` ranks running run_rank (a hang or a failure fails with the end of stderr)."""
    from grpo_fixtures import launcher_env, run_to_the_end

    args = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={world}",
            __file__, "rank", model, str(out)]
    run_to_the_end(args, timeout=900, what=f"the gradients on {world} rank(s)", env=launcher_env())


def relative_error(got: dict, expected: dict) -> float:
    """‖got − expected‖ / ‖expected‖ over the whole gradient."""
    import torch

    diff = sum(float(((got[n].double() - g) ** 2).sum()) for n, g in expected.items())
    size = sum(float((g ** 2).sum()) for g in expected.values())
    return (diff / size) ** 0.5 if size else float(torch.inf)


def table(model: str, out: Path) -> list[dict]:
    """One row per stage × world × micro-batch: the gradient's and grad_norm's relative errors."""
    import torch

    lines = []
    for world in WORLDS:
        folder = out / f"world-{world}"
        folder.mkdir(parents=True, exist_ok=True)
        launch(model, folder, world)
        expected = reference(model, world)
        for stage in STAGES:
            for micro in MICRO_BATCHES:
                saved = torch.load(folder / f"grads-{stage}-{micro}.pt")
                lines.append({"stage": stage, "ranks": world, "micro_batch": micro,
                              "gradient": relative_error(saved["grads"], expected["grads"]),
                              "grad_norm": abs(saved["grad_norm"] - expected["norm"]) / expected["norm"]})
    return lines


def main() -> None:
    import tempfile

    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from grpo_fixtures.tiny import make_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model = str(make_tiny_model(Path(tmp) / "tiny"))
        print("stage  ranks  micro-batch  gradient rel. error  grad_norm rel. error")
        for line in table(model, Path(tmp)):
            print(f"{line['stage']:>5}  {line['ranks']:>5}  {line['micro_batch']:>11}  "
                  f"{line['gradient']:>19.2e}  {line['grad_norm']:>20.2e}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["rank"]:
        run_rank(*sys.argv[2:4])
    else:
        main()
