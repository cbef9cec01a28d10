"""Decoding speed of the local backend: endstate's LocalGenerator against transformers' default.

One batch of episodes' first turns on a real domain prompt (policy + tool specs + few-shot turns,
~3k tokens on support), sampled at temperature 0.7 with the same seed both ways:

  endstate   LocalGenerator.generate: the shared prefix's KV computed once, copied into a
             preallocated static cache for the batch
  baseline   the same prefix KV in transformers' default dynamic cache (deep-copied per batch,
             repeated per row), which concatenates every layer's keys and values at each step

Both produce the same tokens (checked); prints seconds per decoded token and the speed-up.

    .venv/bin/python bench/bench_local.py [--batch 16] [--new-tokens 64] [--domain support]
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from endstate.core.agents import few_shot_of
from endstate.core.domain import Domains
from endstate.core.interpret import render_system
from endstate.core.local_model import LocalGenerator, Sampling, load, resolve_model
from endstate.core.sandbox import Sandbox
from endstate.core.trace import ChatTemplate


def prompts_of(domain_name: str, tokenizer, batch: int) -> tuple[list[list[int]], int]:
    domain = Domains()[domain_name]
    with Sandbox(domain, None, None) as sandbox:
        specs = [t.schema for t in sandbox.tools.values()]
    static = [{"role": "system", "content": render_system(domain.policy, specs)},
              *(m for i, e in enumerate(few_shot_of(domain)) for m in e.messages(i))]
    template = ChatTemplate(tokenizer)
    prompts = [template.first_prompt([*static, {"role": "user", "content": f"Please close ticket "
                                                f"T9{i:04d}, thanks{'!' * i}"}]) for i in range(batch)]
    return prompts, min(template.shared_prefix_len(static, p) for p in prompts)


def baseline(generator: LocalGenerator, prompts: list[list[int]], prefix_len: int) -> list[list[int]]:
    """The dynamic-cache way: prefix KV deep-copied and repeated per row, grown by concatenation."""
    model, s = generator.model, generator.sampling
    prefix = prompts[0][:prefix_len]
    with torch.no_grad():
        cache = model(input_ids=torch.tensor([prefix]), use_cache=True).past_key_values
    cache = copy.deepcopy(cache)
    cache.batch_repeat_interleave(len(prompts))
    suffixes = [p[prefix_len:] for p in prompts]
    width = max(map(len, suffixes))
    pad = generator.pad_id
    ids = torch.tensor([prefix + [pad] * (width - len(x)) + x for x in suffixes])
    mask = torch.tensor([[1] * prefix_len + [0] * (width - len(x)) + [1] * len(x) for x in suffixes])
    torch.manual_seed(generator.seed)
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=mask, do_sample=True,
                             temperature=s.temperature, top_p=s.top_p, top_k=0,
                             max_new_tokens=s.max_new_tokens, pad_token_id=pad,
                             eos_token_id=generator.eos_id, cache=cache)
    rows = out[:, ids.shape[1]:].tolist()
    return [r[:r.index(generator.eos_id) + 1] if generator.eos_id in r else r for r in rows]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--domain", default="support")
    args = ap.parse_args()
    model, tokenizer = load(resolve_model("embedded"))
    prompts, prefix_len = prompts_of(args.domain, tokenizer, args.batch)
    generator = LocalGenerator(model, tokenizer, Sampling(args.new_tokens, 0.7, 1.0))
    generator.generate(prompts[:1], prefix_len)  # warm: the prefix KV is computed once per run
    generator.batches = 0
    start = time.perf_counter()
    ours = [g.ids for g in generator.generate(prompts, prefix_len)]
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    theirs = baseline(generator, prompts, prefix_len)
    theirs_s = time.perf_counter() - start
    steps = max(map(len, ours))
    print(f"batch {args.batch}, prompt {len(prompts[0])} tokens ({prefix_len} shared), "
          f"{steps} decoding steps, same tokens both ways: {ours == theirs}")
    print(f"endstate static cache   {ours_s:6.1f} s  {ours_s / steps * 1000:6.0f} ms/step")
    print(f"baseline dynamic cache  {theirs_s:6.1f} s  {theirs_s / steps * 1000:6.0f} ms/step")
    print(f"speed-up                {theirs_s / ours_s:6.2f}x")


if __name__ == "__main__":
    main()
