"""Policy.update's full gradient on every ZeRO stage × 1 and 2 gloo ranks × micro-batch 1, 3 and
6, against a float64 reference that runs each row separately on a plain transformers model
(grpo_fixtures/zero_gradients.py). The rows are laid out so that at one micro-batch index a rank
shares its rows' common prefix while the other does not (or runs the filler pass), and one row's
completion is empty. ZeRO-2 reduces gradients in the order the backward makes them ready; when
the ranks' paths differed that summed one rank's q gradient into the other's v (0.32 relative
error here): the prefix is now shared only where every rank shares it."""
# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name

import json
import math

import pytest
import torch
from grpo_fixtures import tiny_model  # noqa: F401 - a pytest fixture
from grpo_fixtures.zero_gradients import MICRO_BATCHES, STAGES, launch, reference
from numerics import approx, assert_close, decoder_terms, tolerance

# The prefix each micro-batch index ran once, per rank, under ZeRO 0-2 at micro-batch 3. Two
# ranks: index 0 pairs rank 0's group A (19 shared positions) with rank 1's unrelated rows, index
# 2 rank 0's group C with rank 1's filler: both run in full; index 1 has a group on each rank
# (19 and 23 positions): both share. One rank: A, A, the unrelated rows, E + B, C.
SHARED_AT_3 = {1: [[19, 19, 0, 23, 17]], 2: [[0, 19, 0], [0, 23, 0]]}


@pytest.mark.numerics
@pytest.mark.parametrize("world", [1, 2])
def test_update_gradient_equals_the_per_row_float64_reference_on_every_zero_stage(tmp_path, tiny_model,
                                                                                  world):
    from transformers import AutoConfig

    launch(str(tiny_model), tmp_path, world)  # 12 engines per rank, ~10 s
    expected = reference(str(tiny_model), world)
    # two float32 forward + backward passes against a float64 one (numerics rules 4 and 6), as in
    # test_grpo_correction's one-batch reference: the backward runs the forward's chain again and
    # sums over the rows' positions; the log-probs' error scales each gradient entry
    config = AutoConfig.from_pretrained(tiny_model)
    terms = 2 * decoder_terms(config, expected["longest"]) + expected["rows"] * expected["longest"]
    forward = 3 * expected["logits"] + math.log(config.vocab_size)  # numerics.logprob_magnitude
    bounds = {name: tolerance(torch.float32, reference=torch.float64, terms=terms, probable=True,
                              magnitude=grad.abs().max() * (1 + forward))[1]
              for name, grad in expected["grads"].items()}
    # |‖g‖ − ‖ref‖| ≤ ‖g − ref‖ ≤ √Σ (entries × bound²), plus the float32 norm's own sum of squares
    norm_bound = math.sqrt(sum(g.numel() * bounds[n] ** 2 for n, g in expected["grads"].items()))
    entries = sum(g.numel() for g in expected["grads"].values())
    for stage in STAGES:
        for micro in MICRO_BATCHES:
            saved = torch.load(tmp_path / f"grads-{stage}-{micro}.pt")
            where = f"ZeRO-{stage}, {world} rank(s), micro-batch {micro}"
            assert saved["grads"].keys() == expected["grads"].keys(), where
            for name, grad in expected["grads"].items():
                assert_close(saved["grads"][name].double(), grad, dtype=torch.float32, reference=torch.float64,
                             terms=terms, probable=True, magnitude=grad.abs().max() * (1 + forward),
                             msg=f"{where}: {name}")
            norm = approx(expected["norm"], dtype=torch.float32, terms=entries + 2, reference=float)
            assert saved["grad_norm"] == pytest.approx(expected["norm"], abs=norm_bound + norm.tolerance), where
            shared = [json.loads((tmp_path / f"prefixes-{r}-{stage}-{micro}.json").read_text())
                      for r in range(world)]
            if stage == 3 or micro == 1:  # off under ZeRO-3; one row has nothing to share
                assert all(p == 0 for part in shared for p in part), (where, shared)
            elif micro == 3:
                assert shared == SHARED_AT_3[world], (where, shared)
