"""The memory plan of `grpo train --dry-run`: its arithmetic against a real
model (parameter count, the activations autograd keeps) and against DeepSpeed's own estimator, and
the dry run that prints it, refuses a plan over --gpu-memory / --host-memory and names the knob."""

# ruff: noqa: F811 - the grpo_fixtures fixture is imported, then requested by name
from __future__ import annotations

import json
from dataclasses import replace

import pytest
from click.testing import CliRunner
from conftest import without_judge
from grpo_fixtures import tiny_model  # noqa: F401 - a pytest fixture
from numerics import approx, stated

from endstate.grpo.memory_plan import (
    Setup,
    activation_bytes,
    deepspeed_estimate,
    make_plan,
    read_model_config,
)

ROOT = __import__("pathlib").Path(__file__).resolve().parent.parent
POOL = without_judge(ROOT / "tasks/train/retail.jsonl")
REFERENCE = ["--model-config", "gemma3-27b", "--nodes", "3", "--gpus-per-node", "8", "--device", "cuda",
             "--deepspeed", "zero3-offload", "--rollout-engine", "vllm", "--batch-tasks", "18",
             "--group-size", "8", "--micro-batch", "4", "--max-context", "8192", "--gpu-memory", "79.6",
             "--host-memory", "1800", "--vllm-tensor-parallel", "4"]


def test_parameter_count_is_the_models(tiny_model):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model)
    shape = read_model_config(str(tiny_model), None)
    assert shape.params == sum(p.numel() for p in model.parameters())  # tied: the lm_head counts once
    # against published figures, to the precision they are given in: Qwen3-8B's model card says
    # 8.2B; the Gemma 3 report's 27B text decoder is 1,416M embedding + 25,600M other parameters,
    # the latter to 3 significant figures (±50M)
    assert read_model_config("qwen3-8b", None).params == stated(8.2e9, abs=0.05e9)
    assert read_model_config("gemma3-27b", None).params == stated(27.016e9, abs=0.051e9)


def kept_for_backward(model, ids) -> int:
    """Bytes of the activations (not the weights) autograd keeps after the decoder's forward."""
    import torch

    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    kept = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in weights:
            kept[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model.model(input_ids=ids)
    return sum(kept.values())


@pytest.mark.parametrize("checkpointing", [False, True])
def test_activation_estimate_against_what_autograd_keeps(tiny_model, checkpointing):
    import torch
    from transformers import AutoModelForCausalLM

    from endstate.grpo.engine import enable_activation_checkpointing

    model = AutoModelForCausalLM.from_pretrained(tiny_model, dtype=torch.float32)
    if checkpointing:
        enable_activation_checkpointing(model)
    model.train()
    measured = kept_for_backward(model, torch.randint(4, 16, (2, 256)))
    planned = activation_bytes(read_model_config(str(tiny_model), None),
                               Setup(cuda=False, micro_batch=2, max_context=256, checkpointing=checkpointing))
    if checkpointing:  # the plan adds one layer recomputed in the backward, which the forward does not keep
        assert measured < planned < 25 * measured
    else:  # the accuracy docs/grpo.md claims for the activation figure
        assert planned == stated(measured, rel=0.1)


@pytest.mark.parametrize("stage, offload", [(2, False), (2, True), (3, False), (3, True)])
def test_model_states_agree_with_deepspeeds_estimator(stage, offload):
    """Where DeepSpeed's formula and the plan count the same things, the figures agree: ZeRO-2
    exactly; ZeRO-3 offloaded, on the host, up to DeepSpeed's 1.5× buffer. Without offload
    DeepSpeed puts ZeRO-3's 16-bit weights inside its 18 bytes per parameter: the plan counts 2 more."""
    shape = read_model_config("qwen3-8b", None)
    setup = Setup(nodes=2, gpus_per_node=8, stage=stage, offload_param=offload and stage == 3,
                  offload_optimizer=offload)
    plan = make_plan(shape, setup)
    gpu, host = deepspeed_estimate(shape, setup)
    # the same bytes from two float64 formulas: products and quotients of counts, a few sums of
    # positive terms, and /1.5 or + 2·params/world here: ≤ 8 roundings each, nothing cancels
    same = {"dtype": float, "terms": 8}
    if stage == 2:
        assert plan.states_gpu == approx(gpu, **same)
    elif offload:
        assert plan.states_gpu == approx(gpu, **same)  # the gathered largest layer
        assert plan.states_host == approx(host / 1.5, **same)
    else:
        assert plan.states_gpu == approx(gpu + 2 * shape.params / setup.world, **same)


def test_zero3_loads_partitioned_but_every_rank_reads_a_whole_copy_below_it():
    shape = read_model_config("gemma3-27b", None)
    reference = Setup(nodes=3, gpus_per_node=8, stage=3, offload_param=True, offload_optimizer=True,
                      rollout="vllm")
    loads = {s.stage: next(size for label, size in make_plan(shape, s).host if label.startswith("model load"))
             for s in (reference, replace(reference, stage=2, offload_param=False))}
    assert loads[2] == shape.params * 2 * 8  # 8 ranks × 54 GB per node
    assert loads[3] < loads[2] / 100


def dry_run(tmp_path, *args):
    from endstate.grpo.cli import cli

    return CliRunner().invoke(cli, ["train", "--pool", POOL, "--out", str(tmp_path / "run"), *args, "--dry-run"])


def test_the_reference_plan_fits_with_activation_checkpointing(tmp_path):
    result = dry_run(tmp_path, *REFERENCE, "--activation-checkpointing")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[-1].startswith("launch: torchrun --nnodes=3")
    plan = lines[next(i for i, line in enumerate(lines) if line.startswith("memory_plan: gemma3-27b")):]
    assert any("activations (4 × 8192 tokens, checkpointed)" in line for line in plan)
    assert any("vLLM colocated (0.35 of the GPU, tensor parallel 4)" in line and "27.86" in line for line in plan)
    assert sum(": fits" in line for line in plan) == 3  # GPU, the engine's share and host
    assert any(line.strip().startswith("per GPU") for line in plan)  # DeepSpeed's figure beside the plan's
    assert not (tmp_path / "run").exists()


def test_a_plan_over_the_gpu_names_the_knobs_and_exits_2(tmp_path):
    result = dry_run(tmp_path, *REFERENCE)  # no activation checkpointing: 62 layers × 32k tokens
    assert result.exit_code == 2, result.output
    assert "DOES NOT FIT" in result.output and "launch:" not in result.output
    assert "the memory plan does not fit" in result.output and "--gpu-memory 79.6" in result.output
    assert "any one of these fits: --activation-checkpointing" in result.output
    knobs = dry_run(tmp_path, *REFERENCE, "--activation-checkpointing", "--vllm-gpu-memory", "0.6")
    assert knobs.exit_code == 2, knobs.output
    message = knobs.output.splitlines()[-1]
    for knob in ("--micro-batch", "--vllm-gpu-memory", "--max-context"):
        assert knob in message, message


def test_a_plan_over_the_host_memory_names_more_nodes(tmp_path):
    result = dry_run(tmp_path, *REFERENCE, "--activation-checkpointing", "--host-memory", "100")
    assert result.exit_code == 2, result.output
    message = result.output.splitlines()[-1]
    assert "GiB of host memory per node, --host-memory 100" in message and "--nodes " in message, message


def test_an_8b_plan_on_one_node(tmp_path):
    result = dry_run(tmp_path, "--model-config", "qwen3-8b", "--gpus-per-node", "8", "--device", "cuda",
                     "--deepspeed", "zero3", "--rollout-engine", "vllm", "--activation-checkpointing",
                     "--max-context", "8192", "--gpu-memory", "80", "--host-memory", "1000")
    assert result.exit_code == 0, result.output
    assert "qwen3-8b, 8.19B parameters" in result.output


def test_the_plan_reads_the_model_folder_when_no_model_config_is_given(tmp_path, tiny_model):
    result = dry_run(tmp_path, "--model", str(tiny_model), "--deepspeed", "zero0")
    assert result.exit_code == 0, result.output
    assert f"memory_plan: {tiny_model.name}, 0.00B parameters" in result.output
    assert "DeepSpeed's estimator: none for ZeRO-0" in result.output


SMALL = {"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 10, "num_attention_heads": 4,
         "intermediate_size": 8}


@pytest.mark.parametrize("config, message", [
    ("nowhere", "model config 'nowhere' not found: give a config.json path, a model folder or one of"),
    ({"hidden_size": 64, "num_hidden_layers": 2, "vocab_size": 10, "num_attention_heads": 4,
      "intermediate_size": 8, "num_local_experts": 8}, "a mixture of experts"),
    ({"hidden_size": 64}, "needs num_hidden_layers, vocab_size, num_attention_heads, intermediate_size"),
    # absurd values: a plan of nothing, a division by zero, a crash on a string (exit 70 before)
    ({**SMALL, "num_hidden_layers": 0}, "m: num_hidden_layers 0: the memory plan needs positive integers"),
    ({**SMALL, "num_attention_heads": 0}, "num_attention_heads 0: the memory plan needs positive"),
    ({**SMALL, "num_key_value_heads": "2", "head_dim": True}, "num_key_value_heads '2', head_dim True:"),
    ({**SMALL, "vocab_size": -5}, "vocab_size -5:"),
    ([1, 2], "m: not a model config (a transformers config.json is a JSON object)"),
])
def test_a_model_config_the_plan_cannot_read_is_a_usage_error(tmp_path, config, message):
    if isinstance(config, (dict, list)):
        (tmp_path / "m.json").write_text(json.dumps(config))
        config = str(tmp_path / "m.json")
    result = dry_run(tmp_path, "--model-config", config)
    assert result.exit_code == 2 and message in result.output, result.output



@pytest.mark.parametrize("value", ["nan", "inf", "0"])
def test_a_memory_limit_that_is_not_a_positive_number_is_a_usage_error(tmp_path, value):
    result = dry_run(tmp_path, "--model-config", "qwen3-8b", "--gpu-memory", value)
    assert result.exit_code == 2, result.output  # nan and inf were exit 70 (int(nan × GiB))
    assert "Invalid value for '--gpu-memory'" in result.output


# -- the colocated vLLM engine's share ------------------------------------------------------------------

def test_the_engine_share_against_the_arithmetic_by_hand(tmp_path):
    """Gemma 3 27B in 0.35 of an H100 (79.6 GiB), at tensor-parallel 1, 2 and 4, from its config's
    numbers: the bf16 weights / TP, the start-up peak (4096 batched tokens through the widest
    layers, 256 sequences' fp32 logits and probabilities, 1 GiB of CUDA graphs) and one 8192-token
    sequence of KV cache (K and V, 62 layers, 16 / TP KV heads of 128, bf16)."""
    from endstate.grpo.vllm_share import kv_room, share_fits, share_items

    shape = read_model_config("gemma3-27b", None)
    share = 0.35 * int(79.6 * 2**30)
    for tp in (1, 2, 4):
        setup = Setup(nodes=3, gpus_per_node=8, stage=3, offload_param=True, offload_optimizer=True,
                      rollout="vllm", vllm_tp=tp, gpu_bytes=int(79.6 * 2**30), max_context=8192)
        weights = shape.params * 2 / tp
        peak = 4096 * (2 * 5376 + 2 * 21504 // tp + (32 + 2 * 16) * 128 // tp) * 2 + 256 * 262208 * 8 + 2**30
        kv_sequence = 8192 * 2 * 62 * (16 // tp) * 128 * 2
        [(_, planned_weights), (_, planned_peak)] = share_items(shape, setup)
        # a product and a quotient of exact counts, and a sum of three: ≤ 4 roundings apart
        assert planned_weights == approx(weights, dtype=float, terms=4)
        assert planned_peak == peak  # integers
        # a difference: the bound is on the terms' magnitude (rule 3), a few roundings each side
        assert kv_room(shape, setup) == approx(share - weights - peak, dtype=float, terms=8,
                                               magnitude=share + weights + peak)
        assert share_fits(shape, setup) == (weights + peak + kv_sequence <= share), tp
    assert [share_fits(shape, replace(setup, vllm_tp=tp)) for tp in (1, 2, 4)] == [False, False, True]
    assert shape.params * 2 > share  # TP 1: the weights alone exceed the share


def test_a_plan_whose_weights_exceed_the_engine_share_is_refused_naming_what_fits(tmp_path):
    """Before: the reference topology at tensor-parallel 1 was said to fit, ~50 GiB of bf16
    weights in a 27.9 GiB share; the engine would have failed at start."""
    at_one = REFERENCE[:-2]  # without --vllm-tensor-parallel 4
    assert REFERENCE[-2:] == ["--vllm-tensor-parallel", "4"]
    result = dry_run(tmp_path, *at_one, "--activation-checkpointing")
    assert result.exit_code == 2, result.output
    message = result.output.splitlines()[-1]
    assert ("the colocated vLLM's share, 27.9 GiB (--vllm-gpu-memory 0.35 of --gpu-memory 79.6), "
            "holds 50.3 GiB of weights per GPU at --vllm-tensor-parallel 1: its weights alone "
            "exceed it") in message, message
    assert message.endswith("any one of these fits: --vllm-tensor-parallel 4"), message
    odd = dry_run(tmp_path, *at_one, "--activation-checkpointing", "--vllm-tensor-parallel", "3")
    assert odd.exit_code == 2 and "a tensor-parallel group is ranks of one node" in odd.output
