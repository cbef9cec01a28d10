"""Sampling settings beyond temperature and top-p: --top-k, --min-p, the presence, frequency and
repetition penalties, --stop and --extra-body.

They reach an endpoint's request body (the OpenAI double records it) and every episode's
`policy.sampling`; the local generator applies them as vLLM does (checked against independent
computations on the tiny model of grpo_fixtures); grpo honours top-k (the trainer's log-probs are
the sampler's, top-k renormalised) and refuses, with the reason, what its trainer cannot match."""
# ruff: noqa: F811 - the grpo_fixtures fixtures are imported, then requested by name

from __future__ import annotations

import asyncio
import math

import orjson
import pytest
from click.testing import CliRunner
from conftest import ROOT, run_tool, without_judge
from grpo_fixtures import tiny_model  # noqa: F401 - a pytest fixture
from numerics import approx, decoder_terms, logprob_magnitude, tolerance
from openai_double import FakeEndpoint, gold_policy

from endstate.core.agent.sampling import Sampling
from endstate.core.errors import EndstateError

FLAGS = ["--top-k", "20", "--min-p", "0.05", "--presence-penalty", "0.5", "--frequency-penalty",
         "0.25", "--repetition-penalty", "1.1", "--stop", "</answer>", "--stop", "END",
         "--extra-body", '{"chat_template_kwargs": {"enable_thinking": false}, "priority": 3}']
SENT = {"top_k": 20, "min_p": 0.05, "presence_penalty": 0.5, "frequency_penalty": 0.25,
        "repetition_penalty": 1.1, "stop": ["</answer>", "END"]}
EXTRA = {"chat_template_kwargs": {"enable_thinking": False}, "priority": 3}


def one_task(tmp_path) -> tuple[dict, str]:
    line = next(x for x in (ROOT / "tasks/bench/retail.jsonl").read_bytes().splitlines() if x.strip())
    (tmp_path / "t.jsonl").write_bytes(line + b"\n")
    return orjson.loads(line), str(tmp_path / "t.jsonl")


# -- endpoints: the request body and the record ------------------------------------------------------

def test_sampling_flags_reach_the_chat_request_body_and_the_episode_policy(tmp_path):
    task, tasks_file = one_task(tmp_path)
    with FakeEndpoint(policy=gold_policy([task])) as endpoint:
        done = run_tool("rollout", "run", tasks_file, "--backend", "chat", "--agent-url",
                        endpoint.base_url, "--model", "double", "--temperature", "0.6",
                        "--top-p", "0.95", *FLAGS)
        plain = run_tool("rollout", "run", tasks_file, "--backend", "chat", "--agent-url",
                         endpoint.base_url, "--model", "double")
    assert done.returncode == 0 and plain.returncode == 0, done.stderr + plain.stderr
    requests = endpoint.requests
    flagged = [r for r in requests if "top_k" in r]
    assert flagged and len(flagged) < len(requests)  # the plain run sent none of them
    for body in flagged:
        assert {k: body[k] for k in SENT} == SENT and {k: body[k] for k in EXTRA} == EXTRA
        assert (body["temperature"], body["top_p"], body["model"]) == (0.6, 0.95, "double")
    for body in requests[len(flagged):]:  # unset settings are not sent: hosted APIs reject top_k
        assert not set(body) & {*SENT, *EXTRA}
    [episode] = [orjson.loads(x) for x in done.stdout.splitlines()]
    assert episode["policy"]["sampling"] == {"temperature": 0.6, "top_p": 0.95, "max_new_tokens": 256,
                                             **SENT, "extra_body": EXTRA}
    [plain_episode] = [orjson.loads(x) for x in plain.stdout.splitlines()]
    assert plain_episode["policy"]["sampling"] == {"temperature": 1.0, "top_p": 1.0, "max_new_tokens": 256}


def test_sampling_settings_reach_the_completions_request_body():
    from endstate.core.agent.tokens import completions_sampler
    from endstate.core.wire.endpoints import Endpoints, RetryPolicy

    sampling = Sampling(max_new_tokens=16, temperature=0.7, top_p=0.9, top_k=20, min_p=0.05,
                        repetition_penalty=1.1, presence_penalty=0.5, frequency_penalty=0.25,
                        stop=("</answer>", "END"),
                        extra_body={"priority": 3})
    with FakeEndpoint(completions=lambda body: [7, 2]) as endpoint:
        endpoints = Endpoints([endpoint.base_url], None, 5.0, RetryPolicy(attempts=1))
        asyncio.run(completions_sampler(endpoints, "double", sampling, 0, 2, 100)([5, 6]))
    [body] = endpoint.requests
    assert {k: body[k] for k in SENT} == SENT and body["priority"] == 3
    assert (body["max_tokens"], body["temperature"], body["top_p"], body["prompt"]) == (16, 0.7, 0.9, [5, 6])
    assert body["return_token_ids"] is True and body["logprobs"] == 1  # endstate's own keys stay


@pytest.mark.parametrize("body, message", [
    ('{"model": "x"}', "'model' is set by endstate itself"),
    ('{"messages": []}', "'messages' is set by endstate itself"),
    ('{"prompt": [1]}', "'prompt' is set by endstate itself"),
    ('{"top_k": 5}', "'top_k' has its own flag, --top-k"),
    ('{"max_tokens": 5}', "'max_tokens' has its own flag, --max-new-tokens"),
    ("[1, 2]", "is not a JSON object"),
    ("{model: x}", "is not JSON"),
])
def test_extra_body_refuses_what_endstate_sets_or_a_flag_sets(tmp_path, body, message):
    _, tasks_file = one_task(tmp_path)
    done = run_tool("rollout", "run", tasks_file, "--backend", "chat", "--agent-url",
                    "http://127.0.0.1:9/v1", "--model", "m", "--extra-body", body)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert message in done.stderr and "Traceback" not in done.stderr


@pytest.mark.parametrize("flag, value", [("--temperature", "nan"), ("--top-p", "nan"),
                                         ("--min-p", "nan"), ("--presence-penalty", "nan"),
                                         ("--repetition-penalty", "inf"), ("--temperature", "inf"),
                                         ("--timeout", "nan")])
def test_a_setting_that_is_not_a_finite_number_is_refused(tmp_path, flag, value):
    """nan passes click's range checks and orjson sends it as null (the server's default,
    recorded as null): refused before any call, naming the flag."""
    _, tasks_file = one_task(tmp_path)
    done = run_tool("rollout", "run", tasks_file, "--backend", "chat", "--agent-url",
                    "http://127.0.0.1:9/v1", "--model", "m", flag, value)
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert f"Invalid value for '{flag}': {value} is not a finite number" in done.stderr


def test_extra_body_and_empty_stop_strings_are_refused_where_they_cannot_apply(tmp_path):
    _, tasks_file = one_task(tmp_path)
    local = run_tool("rollout", "run", tasks_file, "--extra-body", '{"priority": 1}')
    assert local.returncode == 2 and "the local backend sends none" in local.stderr
    with pytest.raises(EndstateError, match="stop strings are non-empty"):
        Sampling(stop=("",))
    from endstate.grpo.config import resolve

    for body in ({"seed": 1}, {"model": "m"}):  # grpo's reason, not rollout's advice to use --seed
        with pytest.raises(EndstateError, match="extra_body: grpo cannot train on it"):
            resolve(None, {"pool": "p.jsonl", "extra_body": body})
    with pytest.raises(EndstateError, match="stop strings are non-empty"):
        resolve(None, {"pool": "p.jsonl", "stop": [""]})


def test_the_default_timeout_follows_max_new_tokens():
    from endstate.core.episode.config import RunConfig

    assert RunConfig().timeout == 64.0  # 256 tokens at 4/s, past the 60 s floor
    assert RunConfig(max_new_tokens=64).timeout == 60.0
    assert RunConfig(max_new_tokens=8192).timeout == 2048.0  # the reference gives 8,192 tokens 1,800 s
    assert RunConfig(max_new_tokens=8192, timeout=30.0).timeout == 30.0  # --timeout wins


# -- the local generator: the same settings, checked independently -----------------------------------

@pytest.fixture(scope="module")
def tiny(tiny_model):
    from endstate.core.agent.local_model import load

    model, tokenizer = load(tiny_model)
    prompts = [tokenizer(f"<|im_start|> user press {c} <|im_end|> <|im_start|> assistant")["input_ids"]
               for c in ("red", "blue", "red blue", "blue red")]
    return model, tokenizer, prompts


def next_logits(model, ids: list[int]):
    """The raw logits after `ids`, from a plain forward pass (no cache, no padding). (V,)"""
    import torch

    with torch.no_grad():
        return model(input_ids=torch.tensor([ids])).logits[0, -1].float()


def forward_bound(model, positions: int, logits) -> dict:
    """The bound on a log-prob after `positions` tokens between two float32 forward passes of
    `model` (the sampler's, with its cache and padding, and a plain one), as numerics arguments:
    tests/numerics.py rule 6, the logits' scale as the magnitude."""
    import torch

    return {"dtype": torch.float32, "terms": decoder_terms(model.config, positions),
            "magnitude": logprob_magnitude(logits), "probable": True}


@pytest.mark.numerics
def test_local_top_k_samples_from_the_k_most_likely_and_logs_their_renormalised_probability(tiny):
    """Sampler side of the grpo check: every token is among the top 3 of that step's logits, and
    its log-prob (logprobs_at_temperature) is log softmax over those 3 only, at T = 0.8."""
    from endstate.core.agent.local_model import LocalGenerator

    model, tokenizer, prompts = tiny
    generator = LocalGenerator(model, tokenizer, Sampling(max_new_tokens=6, temperature=0.8, top_k=3), seed=1,
                               logprobs_at_temperature=True)
    tokens = 0
    for prompt in prompts:
        [g] = generator.generate([prompt])
        for k, (token, logprob) in enumerate(zip(g.ids, g.logprobs)):
            logits = next_logits(model, prompt + g.ids[:k]) / 0.8
            scaled = logits.tolist()
            top = sorted(range(len(scaled)), key=lambda i: -scaled[i])[:3]
            assert token in top
            norm = math.log(sum(math.exp(scaled[i]) for i in top))
            assert logprob == approx(scaled[token] - norm, **forward_bound(model, len(prompt) + k, logits))
            tokens += 1
    assert tokens >= 8


@pytest.mark.numerics
def test_local_min_p_keeps_only_tokens_near_the_most_likely(tiny):
    import torch

    from endstate.core.agent.local_model import LocalGenerator

    model, tokenizer, prompts = tiny
    generator = LocalGenerator(model, tokenizer, Sampling(max_new_tokens=6, min_p=0.9), seed=2)
    for prompt in prompts:
        [g] = generator.generate([prompt])
        for k, token in enumerate(g.ids):
            logits = next_logits(model, prompt + g.ids[:k])
            p = torch.softmax(logits, -1)
            # the sampler's p and this one differ by a factor within e^±bound each
            _, bound = tolerance(**forward_bound(model, len(prompt) + k, logits))
            assert p[token] >= 0.9 * p.max() * math.exp(-2 * bound)


def greedy_as_vllm_penalises(model, prompt: list[int], n: int, eos: int, repetition: float,
                             presence: float, frequency: float) -> list[int]:
    """Greedy decoding with vLLM's penalty rules, written out: repetition over prompt and output
    (positive logits divided, negative multiplied), presence and frequency over the output."""
    out: list[int] = []
    for _ in range(n):
        logits = next_logits(model, prompt + out).tolist()
        for t in set(prompt + out):
            logits[t] = logits[t] / repetition if logits[t] > 0 else logits[t] * repetition
        for t in set(out):
            logits[t] -= presence + frequency * out.count(t)
        out.append(max(range(len(logits)), key=logits.__getitem__))
        if out[-1] == eos:
            break
    return out


@pytest.mark.numerics
@pytest.mark.parametrize("repetition, presence, frequency", [(1.0, 0.0, 0.0), (1.3, 0.0, 0.0),
                                                              (1.0, 0.4, 0.0), (1.0, 0.0, 0.3),
                                                              (1.2, 0.2, 0.1)])
def test_local_penalties_follow_vllm(tiny, repetition, presence, frequency):
    from endstate.core.agent.local_model import LocalGenerator

    model, tokenizer, prompts = tiny
    sampling = Sampling(max_new_tokens=10, temperature=0.0, repetition_penalty=repetition, presence_penalty=presence,
                        frequency_penalty=frequency)
    generator = LocalGenerator(model, tokenizer, sampling)
    got = [g.ids for g in generator.generate(prompts)]  # one left-padded batch
    want = [greedy_as_vllm_penalises(model, p, 10, tokenizer.eos_token_id, repetition, presence,
                                     frequency) for p in prompts]
    assert got == want


def test_penalties_change_what_is_generated(tiny):
    """The parametrised test above is not vacuous: with these prompts the penalties matter."""
    model, tokenizer, prompts = tiny
    plain = greedy_as_vllm_penalises(model, prompts[0], 10, tokenizer.eos_token_id, 1.0, 0.0, 0.0)
    penalised = greedy_as_vllm_penalises(model, prompts[0], 10, tokenizer.eos_token_id, 1.0, 2.0, 0.0)
    assert len(set(plain)) < len(plain) and plain != penalised


@pytest.mark.numerics
def test_local_stop_strings_end_the_completion_with_the_token_that_completes_them(tiny):
    """Same seed with and without --stop: each completion is the unstopped one cut right after
    its first `done`, not finished (the next delta supplies the end of turn, as for vLLM)."""
    from endstate.core.agent.local_model import LocalGenerator

    model, tokenizer, prompts = tiny
    done = tokenizer.convert_tokens_to_ids("done")
    free = LocalGenerator(model, tokenizer, Sampling(max_new_tokens=12, temperature=1.5), seed=3).generate(prompts * 2)
    stopped = LocalGenerator(model, tokenizer, Sampling(max_new_tokens=12, temperature=1.5, stop=("done",)), seed=3).generate(prompts * 2)
    cut = 0
    for f, s in zip(free, stopped):
        ended = f.ids.index(tokenizer.eos_token_id) if f.finished else len(f.ids)
        if done in f.ids[:ended]:
            cut += 1
            assert s.ids == f.ids[:f.ids.index(done) + 1] and not s.finished
            # the same batch through the same ops up to the stop (a stopped row is padded, not
            # dropped): bit for bit
            assert s.logprobs == f.logprobs[:len(s.ids)]
        else:
            assert (s.ids, s.finished) == (f.ids, f.finished)
    assert cut >= 2


# -- grpo: top-k honoured with matching log-probs; what the trainer cannot match is refused ------------

@pytest.mark.numerics
def test_grpo_trainer_logprobs_under_top_k_are_the_samplers(tiny_model, tiny):
    """One batch: the tiny model samples at T = 0.8 with top-k 3; the trainer's log-probs through
    the DeepSpeed engine's own path (Policy._logprobs, the processing LossConfig carries) equal
    the sampler's and an independent top-k computation, and without top-k they visibly do not."""
    import torch

    from endstate.core.agent.local_model import LocalGenerator
    from endstate.grpo.batch import collate, sample_of
    from endstate.grpo.config import TrainConfig
    from endstate.grpo.distributed import init_distributed
    from endstate.grpo.engine import Policy, ds_config, resolve_ds_config
    from endstate.grpo.objective import LossConfig

    model, tokenizer, prompts = tiny
    loss = LossConfig.of(TrainConfig(temperature=0.8, top_k=3))
    assert (loss.temperature, loss.top_k, loss.top_p) == (0.8, 3, 1.0)
    generator = LocalGenerator(model, tokenizer, Sampling(max_new_tokens=6, temperature=0.8, top_k=3), seed=4,
                               logprobs_at_temperature=True)
    generations = [generator.generate([p])[0] for p in prompts]
    samples = [sample_of([{"prompt_ids": p, "completion_ids": g.ids, "logprobs": g.logprobs}], 1.0)
               for p, g in zip(prompts, generations)]
    init_distributed("cpu")
    ds = ds_config(resolve_ds_config("zero0"), micro_batch=4, grad_accum=1, world=1, bf16=False, grad_clip=1.0)
    policy = Policy(tiny_model, ds, 1e-3, 0.0, "cpu", reference=False, seed=0)
    batch = collate(samples, policy.pad_id)
    columns = batch.columns
    mask = batch.mask[:, columns].bool()
    with torch.no_grad():
        trainer, _ = policy._logprobs(policy.engine, batch, columns, loss.temperature, loss.top_k, loss.top_p)
        untruncated, _ = policy._logprobs(policy.engine, batch, columns, 0.8)
    sampler = batch.old_logprobs[:, columns]
    assert mask.sum() >= 8
    with torch.no_grad():
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits / 0.8
    agree = forward_bound(model, batch.input_ids.shape[1], logits)
    _, bound = tolerance(**agree)
    assert (trainer - sampler)[mask].abs().max() <= bound
    assert (untruncated - sampler)[mask].abs().max() > 0.05 > bound  # top-k is what makes them agree
    for row, (prompt, g) in enumerate(zip(prompts, generations)):  # and by hand, token by token
        for k, token in enumerate(g.ids):
            scaled = (next_logits(model, prompt + g.ids[:k]) / 0.8).tolist()
            top = sorted(range(len(scaled)), key=lambda i: -scaled[i])[:3]
            column = (columns == len(prompt) - 1 + k).nonzero().item()
            expected = scaled[token] - math.log(sum(math.exp(scaled[i]) for i in top))
            assert trainer[row, column].item() == approx(expected, **agree)


@pytest.mark.parametrize("flag, value, reason", [
    ("--min-p", "0.1", "vLLM applies min-p before top-k/top-p and transformers after"),
    ("--presence-penalty", "0.5", "a penalty changes each token's distribution"),
    ("--frequency-penalty", "0.5", "a penalty changes each token's distribution"),
    ("--repetition-penalty", "1.1", "a penalty changes each token's distribution"),
    ("--extra-body", '{"priority": 1}', "grpo's engines send no request body"),
])
def test_grpo_refuses_sampling_its_trainer_cannot_match_with_the_reason(tmp_path, flag, value, reason):
    from endstate.grpo.cli import cli

    result = CliRunner().invoke(cli, ["train", "--pool", without_judge(ROOT / "tasks/train/retail.jsonl"),
                                      "--out", str(tmp_path / "r"), flag, value, "--dry-run"])
    assert result.exit_code == 2, result.output
    assert reason in result.output and "leave it unset for grpo" in result.output


def test_grpo_takes_top_k_and_stop_from_flags_and_yaml(tmp_path):
    from endstate.grpo.cli import cli
    from endstate.grpo.config import resolve

    result = CliRunner().invoke(cli, ["train", "--pool", without_judge(ROOT / "tasks/train/retail.jsonl"),
                                      "--out", str(tmp_path / "r"), "--top-k", "20", "--stop",
                                      "</tool_call>", "--dry-run"])
    assert result.exit_code == 0, result.output
    assert "top_k: 20" in result.output and "stop: ['</tool_call>']" in result.output
    y = tmp_path / "c.yaml"
    y.write_text("pool: p.jsonl\ntop_k: 20\nstop: 'a, b'\n")  # one stop string, comma and all
    assert (resolve(str(y), {}).top_k, resolve(str(y), {}).stop) == (20, ["a, b"])
