"""The local agent on the embedded SmolLM2-135M: the model converts and loads, the token trace is
append-only and equals the chat template's own rendering, the prefix KV cache changes nothing,
and a real episode produces a valid record that `rollout parity` accepts."""

import asyncio
import json

import pytest
from conftest import run_tool
from numerics import assert_close, decoder_terms, logprob_magnitude

pytest.importorskip("transformers")


@pytest.fixture(scope="module")
def smol():
    from endstate.core.agent.local_model import load, resolve_model

    return load(resolve_model("embedded"))


def live(smol, cfg):
    """The local backend over the already loaded model, as grpo hands it its live policy."""
    from endstate.core.agent.local_model import LocalGenerator
    from endstate.core.agent.trace import ChatTemplate
    from endstate.core.episode.backends import LiveSampler

    model, tokenizer = smol
    generator = LocalGenerator(model, tokenizer, cfg.sampling, seed=cfg.seed or 0, max_batch=cfg.jobs)
    return LiveSampler(ChatTemplate(tokenizer), generator.submit)


def conversation():
    return [
        {"role": "system", "content": "You are a shop assistant."},
        {"role": "user", "content": "Where is my order W1?"},
        {"role": "assistant", "content": '<tool_call>\n{"name": "get_order", "arguments": {"order_id": "W1"}}\n</tool_call>'},
        {"role": "tool", "content": '{"id": "W1", "status": "shipped"}'},
        {"role": "assistant", "content": "It has shipped."},
        {"role": "user", "content": "Thanks!"},
    ]


def test_trace_deltas_equal_the_template_rendering(smol):
    from endstate.core.agent.trace import ChatTemplate, TokenTrace

    _, tokenizer = smol
    template = ChatTemplate(tokenizer)
    assert template.has_tool_role  # SmolLM2's ChatML renders any role
    msgs = conversation()
    trace = TokenTrace()
    trace.append_prompt(template.first_prompt(msgs[:2]))
    for assistant, observations in ((msgs[2], msgs[3:4]), (msgs[4], msgs[5:6])):
        ids = template.encode(assistant["content"]) + [tokenizer.eos_token_id]
        trace.append_completion(ids, [0.0] * len(ids))
        trace.append_prompt(template.delta(observations, completion_ended=True))
    whole = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert tokenizer.decode(trace.next_prompt()) == whole
    assert [len(t["completion_ids"]) for t in trace.turns] == [len(template.encode(msgs[2]["content"])) + 1,
                                                                len(template.encode(msgs[4]["content"])) + 1]


def test_a_cut_off_completion_gets_its_end_token_from_the_delta(smol):
    from endstate.core.agent.trace import ChatTemplate

    _, tokenizer = smol
    template = ChatTemplate(tokenizer)
    cut = template.delta([{"role": "user", "content": "hi"}], completion_ended=False)
    ended = template.delta([{"role": "user", "content": "hi"}], completion_ended=True)
    assert cut[0] == tokenizer.eos_token_id and cut[1:] == ended


@pytest.mark.numerics
def test_prefix_cache_gives_the_same_tokens(smol):
    from endstate.core.agent.local_model import LocalGenerator
    from endstate.core.agent.sampling import Sampling

    model, tokenizer = smol
    prefix = tokenizer("You are a helpful assistant. " * 12)["input_ids"]
    prompts = [prefix + tokenizer(q)["input_ids"] for q in (" What is 2+2?", " Name a colour, please.")]
    greedy = Sampling(max_new_tokens=8, temperature=0)
    plain = LocalGenerator(model, tokenizer, greedy).generate(prompts, prefix_lens=0)
    cached = LocalGenerator(model, tokenizer, greedy).generate(prompts, prefix_lens=len(prefix))
    assert [g.ids for g in plain] == [g.ids for g in cached]
    assert all(len(g.logprobs) == len(g.ids) and all(lp <= 0 for lp in g.logprobs) for g in cached)


@pytest.mark.numerics
def test_kept_episode_histories_give_the_same_tokens_as_running_the_whole_prompt(smol):
    """Turn 2 reuses each row's turn-1 KV and runs only the appended tokens; a fresh generator
    runs every prompt whole. Greedy tokens must agree, also for a row that has no history and one
    with another domain's prefix in the same batch."""
    from endstate.core.agent.local_model import LocalGenerator
    from endstate.core.agent.sampling import Sampling

    model, tokenizer = smol
    prefix = tokenizer("You are a helpful assistant. " * 12)["input_ids"]
    first = [prefix + tokenizer(q)["input_ids"] for q in (" What is 2+2?", " Name a colour, please.")]
    greedy = Sampling(max_new_tokens=6, temperature=0)
    kept = LocalGenerator(model, tokenizer, greedy)
    turn1 = kept.generate(first, prefix_lens=len(prefix))
    replies = (" No, say it in words.", " Another one?")
    second = [p + g.ids + tokenizer(r)["input_ids"] for p, g, r in zip(first, turn1, replies)]
    second.append(prefix + tokenizer(" A new episode asks: why is the sky blue?")["input_ids"])
    other = tokenizer("You are a terse pirate who answers in one word. " * 6)["input_ids"]
    second.append(other + tokenizer(" Where is the treasure?")["input_ids"])
    lens = [len(prefix)] * 3 + [len(other)]
    assert len(kept._histories) == 2
    reused = kept.generate(second, prefix_lens=lens)
    whole = LocalGenerator(model, tokenizer, greedy).generate(second, prefix_lens=0)
    assert [g.ids for g in reused] == [g.ids for g in whole]
    import torch

    for prompt, g, h in zip(second, reused, whole):  # two float32 forwards of one sequence: numerics rule 6
        sequence = torch.tensor([prompt + h.ids])
        with torch.no_grad():
            logits = model(input_ids=sequence).logits[0, len(prompt) - 1:]  # (N, V), greedy: raw
        assert_close(torch.tensor(g.logprobs), torch.tensor(h.logprobs), dtype=torch.float32, probable=True,
                     terms=decoder_terms(model.config, sequence.shape[1]), magnitude=logprob_magnitude(logits))
    assert len(kept._histories) == 4  # turn 1's two were used up; turn 2 left one per row
    assert len(kept._prefixes) == 2


def test_a_real_episode_on_the_embedded_model(smol, domains, tasks, tmp_path):
    from endstate.core.episode.backends import build_backend
    from endstate.core.episode.config import RunConfig
    from endstate.core.episode.loop import EpisodeSpec, run_episode
    from endstate.core.episode.users import ScriptedUser
    from endstate.core.records.schemas import problem
    from endstate.core.records.structs import Task

    cfg = RunConfig(max_new_tokens=48, temperature=0.7, max_turns=3, jobs=2)
    backend = build_backend(cfg, live(smol, cfg))
    task = Task.of(tasks.get("retail-cancel-pending"))

    async def two():
        specs = [EpisodeSpec(task, domains["retail"], a, cfg.policy(), cfg.max_turns) for a in (0, 1)]
        return await asyncio.gather(*(run_episode(s, backend, ScriptedUser.for_task(task),
                                                  lambda usage: None) for s in specs))

    episodes = [e.record() for e in asyncio.run(two())]
    for episode in episodes:
        assert problem("episode", episode) is None
        assert episode["termination"] in ("max_turns", "user_stop", "agent_done")
        turns = episode["turns"]
        assert 1 <= len(turns) <= 3 and turns[0]["prompt_ids"]
        # With the tool prefill, the first completion continues a <tool_call> opened in the prompt.
        assert episode["messages"][2]["raw"].startswith("<tool_call>\n")
        assert all(len(t["logprobs"]) == len(t["completion_ids"]) for t in turns)
    path = tmp_path / "episodes.jsonl"
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    p = run_tool("rollout", "parity", str(path))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "mismatch(es)" in p.stderr
    # One comparison, two ways of prompting: parity says so.
    episodes[1]["policy"] = {**episodes[1]["policy"], "tool_format": "json"}
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    p = run_tool("rollout", "parity", str(path))
    assert p.returncode == 1 and 'local episodes were prompted differently: tool_format "json" vs ' \
        '"signatures"' in p.stdout
    # Another backend is held against its own re-interpretation: a chat endpoint lists the tools
    # natively, so its prompting is not a mismatch of the local episodes' (make vllm-check).
    episodes[1]["policy"]["backend"] = "chat"
    path.write_text("".join(json.dumps(e) + "\n" for e in episodes))
    p = run_tool("rollout", "parity", str(path))
    assert p.returncode == 0 and "prompted differently" not in p.stdout, p.stdout


def test_tool_format_signatures_shortens_the_prompt_and_is_recorded(smol, domains):
    from endstate.core.episode.backends import build_backend
    from endstate.core.episode.config import RunConfig

    specs = [t.schema for t in domains["retail"].tools.values()]
    systems = {}
    for fmt in ("json", "signatures"):
        cfg = RunConfig(tool_format=fmt)
        systems[fmt] = build_backend(cfg, live(smol, cfg)).open(domains["retail"], specs).system
        assert cfg.policy().tool_format == fmt
    assert "get_order(order_id: string): " in systems["signatures"]
    assert RunConfig().prompting.tool_format == "signatures"  # the embedded model records it
    assert RunConfig(backend="chat", agent_urls=["http://x"]).prompting.tool_format == "json"
    tokens = {fmt: len(smol[1].encode(text)) for fmt, text in systems.items()}
    assert tokens["signatures"] < 0.6 * tokens["json"]
