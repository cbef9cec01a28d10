"""The generate calls of a tensor-parallel group (grpo/tensor_parallel.py): the ranks sharing one
colocated vLLM engine call it together with the same prompts and seeds, each keeps its own
slice, and a rank whose episodes are done joins its group's calls until all are, on 4 gloo ranks
(2 groups of 2) under torchrun, each asking for a different number of calls. vLLM is an edge
endstate does not own and is not installed here: the engine is a deterministic stand-in whose
output names the prompt and seed it answers, so a slice given to the wrong rank shows."""

import json
import sys

from grpo_fixtures import launcher_env, run_to_the_end

RANK_SCRIPT = '''
import json, os, sys
import torch.distributed as dist
from endstate.grpo.tensor_parallel import GroupBatches

dist.init_process_group("gloo")
rank = dist.get_rank()
group = GroupBatches.of(2)
calls = []  # what the engine was asked, on this rank

def run(prompts, seeds):
    calls.append([prompts, seeds])
    return [sum(p) * 1000 + s for p, s in zip(prompts, seeds)]

# the calls each rank's own episodes ask for: (prompt lengths per call), uneven within each group
wants = {0: [2, 1, 3], 1: [4], 2: [], 3: [1, 2]}[rank]
answers = []
for n, size in enumerate(wants):
    prompts = [[rank, n, i] for i in range(size)]
    seeds = [100 * rank + 10 * n + i for i in range(size)]
    answers.append([prompts, seeds, list(group.generate(prompts, seeds, run))])
group.finish(run)
out = sys.argv[1]
with open(os.path.join(out, f"rank-{rank}.json"), "w") as f:
    json.dump({"answers": answers, "calls": calls, "index": group.index}, f)
dist.barrier()
dist.destroy_process_group()
'''


def test_a_group_calls_its_engine_together_and_each_rank_gets_its_own_outputs(tmp_path):
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    run_to_the_end([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=4",
                    str(script), str(tmp_path)], timeout=600, what="4 ranks in 2 groups (deadlock?)",
                   env=launcher_env())
    ranks = [json.loads((tmp_path / f"rank-{r}.json").read_text()) for r in range(4)]
    assert [r["index"] for r in ranks] == [0, 1, 0, 1]  # groups of consecutive ranks
    for r in ranks:  # every output is the one for this rank's own prompt and seed
        for prompts, seeds, outputs in r["answers"]:
            assert outputs == [sum(p) * 1000 + s for p, s in zip(prompts, seeds)]
    for a, b in ((0, 1), (2, 3)):  # the engine saw the same calls on both ranks of a group
        assert ranks[a]["calls"] == ranks[b]["calls"]
    # group 0: rank 0's three calls, its first with rank 1's four prompts; group 1: rank 3's two
    assert [len(prompts) for prompts, _ in ranks[0]["calls"]] == [6, 1, 3]
    assert [len(prompts) for prompts, _ in ranks[2]["calls"]] == [1, 2]
    first_prompts, first_seeds = ranks[1]["calls"][0]
    assert first_prompts[:2] == [[0, 0, 0], [0, 0, 1]] and first_prompts[2:] == [[1, 0, i] for i in range(4)]
    assert first_seeds == [0, 1, 100, 101, 102, 103]
