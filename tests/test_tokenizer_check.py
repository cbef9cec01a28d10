"""`--backend completions` checks its tokenizer against the server before the first episode.

endstate renders prompts with the local `--tokenizer` and sends token ids; ids from another
vocabulary are garbage prompts, not errors. So the tokenizer is required (unless the model is the
embedded one), and at start-up a conversation rendered with its chat template is tokenized here
and by the server (vLLM's `POST /tokenize`, played by tests/openai_double.py), and the served name
and length are read from `GET /v1/models`. The CLI runs as a user runs it, in a subprocess."""
# ruff: noqa: F811 - the grpo_fixtures fixture is imported, then requested by name

from __future__ import annotations

import orjson
import pytest
from conftest import ROOT, run_tool
from grpo_fixtures import tiny_model  # noqa: F401 - a pytest fixture: another vocabulary
from openai_double import FakeEndpoint

pytest.importorskip("transformers")

TASK = ROOT / "tasks" / "bench" / "retail.jsonl"


@pytest.fixture(scope="module")
def embedded_dir():
    from endstate.core.agent.local_model import resolve_model

    return resolve_model("embedded")


@pytest.fixture
def one_task(tmp_path):
    first = next(line for line in TASK.read_bytes().splitlines() if line.strip())
    path = tmp_path / "task.jsonl"
    path.write_bytes(first + b"\n")
    return str(path)


PREFLIGHT = [("GET", "/v1/models"), ("POST", "/v1/completions")]  # core.wire.preflight's requests


def done_then_end(eos: int):
    """A completions policy: the agent says "Done." and ends its turn."""
    from transformers import AutoTokenizer

    from endstate.core.agent.local_model import resolve_model

    done = AutoTokenizer.from_pretrained(resolve_model("embedded"))("Done.", add_special_tokens=False)["input_ids"]
    return lambda body: [*done, eos]


def completions_run(task_file, url, *args):
    return run_tool("rollout", "run", task_file, "--backend", "completions", "--agent-url", url,
                    "--model", "double", "-n", "1", "--max-turns", "2", "--retries", "1", *args)


def test_a_mismatched_tokenizer_stops_the_run_before_the_first_episode_showing_both(
        one_task, tiny_model):
    with FakeEndpoint(completions=done_then_end(2), tokenizer=tiny_model, served=["double"]) as ep:
        done = completions_run(one_task, ep.base_url, "--tokenizer", "embedded")
        assert ep.requests == []  # no model call: no episode began
        # the preflight (the model listed, one token), then the tokenizer check
        assert [(m, p) for m, p, _ in ep.checks] == PREFLIGHT + [("GET", "/v1/models"), ("POST", "/tokenize")]
    assert done.returncode == 2 and done.stdout == "", done.stderr
    assert "Traceback" not in done.stderr
    message = done.stderr
    assert "--tokenizer embedded is not the served model's" in message
    assert f"127.0.0.1:{ep.port}/tokenize from token 0 on" in message
    local, served = [line for line in message.splitlines() if line.startswith("  ")][:2]
    # each side: position:id 'piece' — SmolLM2's <|im_start|> is id 1, the tiny vocabulary's is 2
    assert local.startswith("  --tokenizer embedded: 0:1 '<|im_start|>'")
    assert served.startswith("  server:               0:2 '<|im_start|>'")
    assert "[UNK]" in served and "Pass --tokenizer the folder of the model" in message


def test_a_tokenizer_that_splits_the_template_tokens_is_caught_too(one_task, embedded_dir):
    """Same vocabulary, but the chat template's special tokens are not special there (a broken
    tokenizer_config): the ids differ only where the template puts them."""
    from transformers import AutoTokenizer

    split = AutoTokenizer.from_pretrained(embedded_dir, split_special_tokens=True)
    with FakeEndpoint(completions=done_then_end(2), tokenizer=split, served=["double"]) as ep:
        done = completions_run(one_task, ep.base_url, "--tokenizer", "embedded")
    assert done.returncode == 2 and ep.requests == [], done.stderr
    local, served = [line for line in done.stderr.splitlines() if line.startswith("  ")][:2]
    assert "0:1 '<|im_start|>'" in local and "0:1 " not in served


def test_a_matching_tokenizer_passes_and_the_run_goes_on(one_task, embedded_dir):
    with FakeEndpoint(completions=done_then_end(2), tokenizer=embedded_dir, served=["double"]) as ep:
        done = completions_run(one_task, ep.base_url, "--tokenizer", "embedded")
        calls = len(ep.requests)
    assert done.returncode == 0, done.stderr
    assert "warning" not in done.stderr
    [episode] = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert episode["status"] == "ok" and calls >= 1
    assert [(m, p) for m, p, _ in ep.checks] == PREFLIGHT + [("GET", "/v1/models"), ("POST", "/tokenize")]
    assert ep.checks[-1][2]["add_special_tokens"] is False and ep.checks[-1][2]["model"] == "double"


def test_a_server_without_tokenize_gets_a_warning_and_the_run_goes_on(one_task):
    with FakeEndpoint(completions=done_then_end(2)) as ep:  # answers 404 to both checks
        done = completions_run(one_task, ep.base_url, "--tokenizer", "embedded")
        calls = len(ep.requests)
    assert done.returncode == 0, done.stderr
    assert f"POST http://127.0.0.1:{ep.port}/tokenize: HTTP 404" in done.stderr
    assert "the tokenizer check could not run" in done.stderr
    assert "the served model's name and length were not checked" in done.stderr
    [episode] = [orjson.loads(line) for line in done.stdout.splitlines()]
    assert episode["status"] == "ok" and calls >= 1


def test_completions_without_tokenizer_is_a_usage_error_naming_the_flag(one_task):
    done = run_tool("rollout", "run", one_task, "--backend", "completions", "--agent-url",
                    "http://127.0.0.1:9/v1", "--model", "Qwen/Qwen3-8B")
    assert done.returncode == 2 and done.stdout == ""
    assert "--backend completions --model Qwen/Qwen3-8B needs --tokenizer" in done.stderr
    assert "the served model's tokenizer files" in done.stderr and "Traceback" not in done.stderr


# -- /v1/models: the served name and length, in process ------------------------------------------

def check(urls: str | list[str], model: str, max_context: int, embedded_dir) -> None:
    from transformers import AutoTokenizer

    from endstate.core.agent.served import check_served_tokenizer
    from endstate.core.agent.trace import ChatTemplate
    from endstate.core.wire.endpoints import Endpoints, RetryPolicy

    template = ChatTemplate(AutoTokenizer.from_pretrained(embedded_dir))
    endpoints = Endpoints([urls] if isinstance(urls, str) else urls, None, 5.0, RetryPolicy(attempts=1))
    check_served_tokenizer(endpoints, model, max_context, template, "embedded")


def test_a_model_name_the_server_does_not_serve_is_refused(embedded_dir):
    from endstate.core.errors import ConfigurationError

    with FakeEndpoint(tokenizer=embedded_dir, served=["smollm2", "other"]) as ep:
        with pytest.raises(ConfigurationError, match="serves smollm2, other, not --model double") as e:
            check(ep.base_url, "double", 4096, embedded_dir)
        check(ep.base_url, "smollm2", 4096, embedded_dir)  # the served name passes
    assert e.value.exit_code == 2


def test_a_max_context_past_the_served_length_is_refused(embedded_dir):
    from endstate.core.errors import ConfigurationError

    with FakeEndpoint(tokenizer=embedded_dir, served=["double"], max_model_len=4096) as ep:
        with pytest.raises(ConfigurationError, match="--max-context 8192 exceeds the max_model_len "
                                                     "4096 served at .*: pass --max-context 4096"):
            check(ep.base_url, "double", 8192, embedded_dir)
        check(ep.base_url, "double", 4096, embedded_dir)


def test_every_endpoint_is_checked(embedded_dir, tiny_model):
    """Several --agent-url: one serving another model's tokenizer is enough to stop."""
    from endstate.core.errors import ConfigurationError

    with FakeEndpoint(tokenizer=embedded_dir, served=["double"]) as good, \
            FakeEndpoint(tokenizer=tiny_model, served=["double"]) as bad:
        with pytest.raises(ConfigurationError, match=f"127.0.0.1:{bad.port}/tokenize"):
            check([good.base_url, bad.base_url], "double", 4096, embedded_dir)
    assert len(good.checks) == len(bad.checks) == 2


def test_a_model_list_without_names_is_refused_and_a_length_below_one_is_ignored(embedded_dir):
    """Garbage from /v1/models: ids that are not names (a list, an object) are not a served name,
    never a crash; a max_model_len of -1 is no length to advise --max-context from."""
    from endstate.core.errors import ConfigurationError

    with FakeEndpoint(tokenizer=embedded_dir, served=[["double"], {"name": "double"}]) as ep:
        with pytest.raises(ConfigurationError, match="serves no model, not --model double"):
            check(ep.base_url, "double", 4096, embedded_dir)
    with FakeEndpoint(tokenizer=embedded_dir, served=["double"], max_model_len=-1) as ep:
        check(ep.base_url, "double", 4096, embedded_dir)


def test_a_server_slow_to_answer_the_checks_is_a_warning_after_the_check_limit(embedded_dir, monkeypatch,
                                                                               capsys):
    """The start-up checks wait CHECK_TIMEOUT_S, not --timeout (which follows --max-new-tokens:
    2,048 s for 8,192 tokens), before warning that they could not run."""
    from endstate.core.wire import endpoints

    monkeypatch.setattr(endpoints, "CHECK_TIMEOUT_S", 0.2)
    with FakeEndpoint(tokenizer=embedded_dir, served=["double"], latency=2.0) as ep:
        check(ep.base_url, "double", 4096, embedded_dir)  # endpoint timeout 5 s: not waited for
    warned = capsys.readouterr().err
    assert f"GET {ep.base_url}/models: TimeoutError: no answer within 0.2 s" in warned
    assert "/tokenize: TimeoutError: no answer within 0.2 s" in warned
    assert "the tokenizer check could not run" in warned


@pytest.mark.parametrize("length", ["8192", 8192.5, None, True])
def test_a_served_length_that_is_no_integer_is_a_warning_not_a_silent_skip(embedded_dir, capsys, length):
    """Before: a max_model_len that was no integer skipped the --max-context check, saying nothing."""
    with FakeEndpoint(tokenizer=embedded_dir, served=["double"], max_model_len=length) as ep:
        check(ep.base_url, "double", 4096, embedded_dir)
    said = capsys.readouterr().err
    assert (f"gives max_model_len {length!r}, not a positive integer: --max-context 4096 was not "
            "checked" in said) == (length is not None), said
