"""Speed of the local backend: endstate's LocalGenerator against transformers' defaults.

A batch of episodes on a real domain prompt (policy + tool specs + few-shot turns, ~3k tokens on
support), sampled at temperature 0.7 with the same seed both ways.

Turn 1 (decoding):
  endstate   the shared prefix's KV computed once, copied into a preallocated static cache
  baseline   the same prefix KV in transformers' default dynamic cache (deep-copied per batch,
             repeated per row), which concatenates every layer's keys and values at each step
Turn 2 (a tool result appended to each episode):
  endstate   the generator kept each episode's KV from turn 1 and runs only the new tokens
  baseline   a generator without those histories: the domain prefix is reused, the rest of the
             conversation runs again

Both ways produce the same tokens (checked); prints seconds and the speed-ups.

    .venv/bin/python bench/bench_local.py [--batch 16] [--new-tokens 64] [--domain support]
"""

from __future__ import annotations

import argparse
import copy
import time

import torch

from endstate.core.agent.interpret import render_system
from endstate.core.agent.local_model import LocalGenerator, load, resolve_model
from endstate.core.agent.sampling import Sampling
from endstate.core.agent.session import few_shot_of
from endstate.core.agent.trace import ChatTemplate
from endstate.core.env.domain import Domains
from endstate.core.env.sandbox import Sandbox
from endstate.core.records.structs import as_dicts


def prompts_of(domain_name: str, tokenizer, batch: int) -> tuple[list[list[int]], int]:
    domain = Domains()[domain_name]
    with Sandbox(domain, None, None) as sandbox:
        specs = [t.schema for t in sandbox.tools.values()]
    static = [{"role": "system", "content": render_system(domain.policy, specs)},
              *as_dicts([m for i, e in enumerate(few_shot_of(domain)) for m in e.messages(i)])]
    template = ChatTemplate(tokenizer)
    prompts = [template.first_prompt([*static, {"role": "user", "content": f"Please close ticket "
                                                f"T9{i:04d}, thanks{'!' * i}"}]) for i in range(batch)]
    return prompts, min(template.shared_prefix_len(static, p) for p in prompts)


def baseline(generator: LocalGenerator, prompts: list[list[int]], prefix_len: int) -> list[list[int]]:
    """The dynamic-cache way: prefix KV deep-copied and repeated per row, grown by concatenation."""
    model, s = generator.model, generator.sampling
    prefix = prompts[0][:prefix_len]
    with torch.no_grad():
        cache = model(input_ids=torch.tensor([prefix]), use_cache=True).cache
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
    generator = LocalGenerator(model, tokenizer, Sampling(max_new_tokens=args.new_tokens, temperature=0.7))
    generator.generate(prompts[:1], prefix_len)  # warm: the prefix KV is computed once per run
    generator.batches = 0
    start = time.perf_counter()
    ours = [g.ids for g in generator.generate(prompts, prefix_len)]
    ours_s = time.perf_counter() - start
    start = time.perf_counter()
    theirs = baseline(generator, prompts, prefix_len)
    theirs_s = time.perf_counter() - start
    steps = max(map(len, ours))
    print(f"turn 1: batch {args.batch}, prompt {len(prompts[0])} tokens ({prefix_len} shared), "
          f"{steps} decoding steps, same tokens both ways: {ours == theirs}")
    print(f"  endstate static cache   {ours_s:6.1f} s  {ours_s / steps * 1000:6.0f} ms/step")
    print(f"  baseline dynamic cache  {theirs_s:6.1f} s  {theirs_s / steps * 1000:6.0f} ms/step")
    print(f"  speed-up                {theirs_s / ours_s:6.2f}x")

    result = tokenizer(" <tool_response>" + " {\"ticket\": \"T90001\", \"status\": \"open\"}" * 12
                       + " </tool_response>")["input_ids"]
    second = [p + g + result for p, g in zip(prompts, ours)]
    greedy = Sampling(max_new_tokens=args.new_tokens, temperature=0.0)
    generator.sampling = greedy
    start = time.perf_counter()
    kept = [g.ids for g in generator.generate(second, prefix_len)]
    kept_s = time.perf_counter() - start
    fresh = LocalGenerator(model, tokenizer, greedy)
    fresh.generate(second[:1], prefix_len)  # the prefix KV, as above
    fresh._histories.clear()
    start = time.perf_counter()
    whole = [g.ids for g in fresh.generate(second, prefix_len)]
    whole_s = time.perf_counter() - start
    print(f"turn 2: {len(second[0]) - prefix_len}..{max(map(len, second)) - prefix_len} tokens past "
          f"the prefix per episode, same tokens both ways: {kept == whole}")
    print(f"  endstate kept history   {kept_s:6.1f} s")
    print(f"  baseline run it again   {whole_s:6.1f} s")
    print(f"  speed-up                {whole_s / kept_s:6.2f}x")


if __name__ == "__main__":
    main()
