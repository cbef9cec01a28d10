"""Peak memory of the update's log-probs: the direct computation (the whole logits, then
log-softmax; what grpo did before the chunked head) against the chunked lm_head (tools/grpo/logprobs.py),
forward + backward over one 3k-token sequence at the embedded model's shape (hidden 576,
vocabulary 49152), fp32 on CPU, temperature 0.7.

Each variant runs in a process of its own; its peak is the resident-set high-water mark
(ru_maxrss) minus the resident set just before the forward, so it counts every allocation torch
makes (tracemalloc does not see them). Printed beside the measurement: the memory plan's
analytic logits figure for the same shape (memory_plan.logits_bytes).

    python bench/bench_logprobs.py [--positions 3072] [--hidden 576] [--vocab 49152] [--chunks 1024,256]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

GB = 1e9


def resident_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def measure(variant: str, positions: int, hidden_size: int, vocab: int, chunk: int) -> dict:
    """One forward + backward in this process; returns its peak bytes and seconds."""
    import torch

    from endstate.core.agent.sampling import processed_logits
    from endstate.grpo.algorithm import token_logprobs
    from endstate.grpo.logprobs import chunked_token_logprobs

    torch.manual_seed(0)
    hidden = torch.randn(1, positions, hidden_size, requires_grad=True)  # (B, T, H)
    weight = (torch.randn(vocab, hidden_size) * 0.02).requires_grad_()  # (V, H)
    targets = torch.randint(0, vocab, (1, positions))  # (B, T)
    advantage = torch.linspace(-1, 1, positions).view(1, positions)
    before = resident_bytes()
    started = time.perf_counter()
    if variant == "direct":
        logits = processed_logits((hidden @ weight.T).float(), 0.7, None, 1.0)  # (B, T, V)
        logp, _ = token_logprobs(logits, targets)
        del logits
    else:
        logp, _ = chunked_token_logprobs(hidden, weight, targets, 0.7, chunk)
    (logp * advantage).sum().backward()
    seconds = time.perf_counter() - started
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux
    return {"peak": peak - before, "seconds": seconds}


def run_variant(a, variant: str, chunk: int = 0) -> dict:
    args = [sys.executable, __file__, "--variant", variant, "--positions", str(a.positions),
            "--hidden", str(a.hidden), "--vocab", str(a.vocab), "--chunks", str(chunk)]
    done = subprocess.run(args, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--positions", type=int, default=3072)
    parser.add_argument("--hidden", type=int, default=576)
    parser.add_argument("--vocab", type=int, default=49152)
    parser.add_argument("--chunks", default="1024,256", help="chunk sizes to measure, comma-separated")
    parser.add_argument("--variant", choices=("direct", "chunked"), help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.variant:  # the child process
        print(json.dumps(measure(a.variant, a.positions, a.hidden, a.vocab, int(a.chunks))))
        return
    from endstate.grpo.memory_plan import logits_bytes

    print(f"log-probs over {a.positions} positions × {a.vocab} vocabulary (hidden {a.hidden}), fp32, "
          "forward + backward; peak = resident-set growth")
    direct = run_variant(a, "direct")
    print(f"  direct:          peak {direct['peak'] / GB:5.2f} GB  {direct['seconds']:5.1f} s   "
          f"plan {logits_bytes(a.positions, a.vocab, 4) / GB:5.2f} GB")
    for chunk in map(int, a.chunks.split(",")):
        chunked = run_variant(a, "chunked", chunk)
        print(f"  chunk {chunk:5d}:     peak {chunked['peak'] / GB:5.2f} GB  {chunked['seconds']:5.1f} s   "
              f"plan {logits_bytes(chunk, a.vocab, 4) / GB:5.2f} GB   "
              f"direct / chunked: {direct['peak'] / chunked['peak']:.1f}x")


if __name__ == "__main__":
    main()
