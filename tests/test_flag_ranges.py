"""Every option of every command refuses a hostile value with a usage error naming it (exit 2), or
runs: never a traceback, never exit 70. The property walks the click commands of all six tools
and feeds each option hostile text (nan, inf, 70-bit integers, 1e308, empty, garbage) and
hypothesis's own; every number has a declared range, both ends."""

from __future__ import annotations

import contextlib
import importlib
import os
import re
import tempfile
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from conftest import ROOT
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from endstate.core.cli.options import FiniteFloatRange

TOOLS = ("grade", "bucket", "evalstats", "rollout", "probe", "grpo")
FIXTURE = ROOT / "tests" / "fixtures" / "tau2_mini"
WORK = Path(os.environ.get("TMPDIR", "/tmp")) / f"endstate-flag-ranges-{os.getpid()}"


def commands():
    """(tool, path, command) of every leaf command, nested groups too (grade import tau2)."""
    def walk(cmd, path):
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*path, name])
        else:
            yield path, cmd
    for tool in TOOLS:
        cli = importlib.import_module(f"endstate.{tool}.cli").cli
        for path, cmd in walk(cli, []):
            yield tool, tuple(path), cli, cmd


def _files() -> dict[str, str]:
    WORK.mkdir(parents=True, exist_ok=True)
    empty = WORK / "empty.jsonl"
    empty.write_text("")
    task = (ROOT / "tasks" / "bench" / "retail.jsonl").read_text().splitlines()[0]
    tasks = WORK / "tasks.jsonl"
    tasks.write_text(task + "\n")
    pool = WORK / "pool.jsonl"  # a training candidate: grpo refuses a bench task in its pool
    pool.write_text((ROOT / "tasks" / "train" / "retail.jsonl").read_text().splitlines()[0] + "\n")
    return {"empty": str(empty), "tasks": str(tasks), "pool": str(pool), "work": str(WORK)}


F = _files()
# A cheap run of each command: what an option's value is added to.
BASES = {
    ("grade", ("score",)): [F["empty"], "--tasks", F["tasks"]],
    ("grade", ("validate",)): [F["empty"]],
    ("grade", ("tasks",)): [F["empty"]],
    ("grade", ("state",)): [F["empty"], "-o", f"{WORK}/state.db"],
    ("grade", ("show",)): [F["empty"]],
    ("grade", ("audit",)): [F["empty"], "--tasks", F["tasks"]],
    ("grade", ("import", "tau2")): [str(FIXTURE), "--out", f"{WORK}/imported/cyclehire"],
    ("grade", ("new-domain",)): ["shop", "--out", f"{WORK}/new"],
    ("bucket", ()): [F["empty"]],
    ("evalstats", ("summary",)): [F["empty"]],
    ("evalstats", ("compare",)): [F["empty"], F["empty"]],
    ("evalstats", ("tally",)): [F["empty"]],
    ("evalstats", ("report",)): [F["empty"], "-o", f"{WORK}/report.html"],
    ("rollout", ("run",)): [F["empty"]],
    ("rollout", ("parity",)): [F["empty"]],
    ("rollout", ("serve-mcp",)): [F["tasks"], "--out", f"{WORK}/mcp.jsonl", "--task", "nosuch"],
    ("rollout", ("serve-openenv",)): [F["tasks"], "--task", "nosuch"],
    ("probe", ()): [F["empty"]],
    ("grpo", ("train",)): ["--pool", F["pool"], "--out", f"{WORK}/run", "--dry-run"],
    ("grpo", ("export",)): [f"{WORK}/no-checkpoint", f"{WORK}/exported"],
}
# Options whose text is parsed into numbers by a callback: held to the numeric rule too.
NUMERIC_TEXT = {"--prior", "--edges", "--k", "--price", "--seed", "--shard", "--http"}
NUMERIC_TYPES = (click.types.IntParamType, click.types.FloatParamType)
NON_FINITE = re.compile(r"(?i)nan|inf|1e309|e308")


def cases():
    for tool, path, cli, cmd in commands():
        for param in cmd.params:
            if isinstance(param, click.Option) and not param.is_flag and param.opts:
                yield pytest.param(tool, path, cli, param, id=f"{tool} {' '.join(path)} {max(param.opts, key=len)}")


HOSTILE = ["nan", "inf", "-inf", "-1", "0", "1", "1e308", "1e309", str(2**70), str(-(2**70)), "",
           " ", "garbage", "1,2", "nan,1", "inf,1", "1e308,1e308", "-1,-1", "0/0", "1/0", "3/2",
           "m=nan,1", "m=1e309,1", "m=1,2", "ftp://host/v1", "127.0.0.1:99999", "host:", ":80",
           "é", "a" * 5000]


@contextlib.contextmanager
def inside(folder: Path):
    """Run in `folder`: a value taken as a file name lands there, not in the checkout."""
    before = os.getcwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def numeric(param: click.Parameter) -> bool:
    return isinstance(param.type, NUMERIC_TYPES) or max(param.opts, key=len) in NUMERIC_TEXT


@pytest.mark.parametrize("tool, path, cli, param", list(cases()))
@settings(max_examples=len(HOSTILE) + 6, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(value=st.one_of(st.sampled_from(HOSTILE),
                       st.floats(allow_nan=True, allow_infinity=True).map(repr),
                       st.integers(-(2**80), 2**80).map(str),
                       st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                               max_size=12)))
@example(value="nan")
@example(value="inf")
@example(value=str(2**70))
@example(value="1e308")
@example(value="")
def test_every_option_refuses_a_hostile_value_by_name_or_runs(tool, path, cli, param, value):
    flag = max(param.opts, key=len)
    args = [*path, *BASES[(tool, path)], flag, value]
    with inside(Path(tempfile.mkdtemp(dir=WORK))):
        result = CliRunner().invoke(cli, args, catch_exceptions=True)
    crashed = result.exception is not None and not isinstance(result.exception, (SystemExit, OSError))
    assert not crashed, f"{tool} {' '.join(args)}: {type(result.exception).__name__}: {result.exception}"
    assert result.exit_code in (0, 1, 2, 3, 4, 5), f"{tool} {' '.join(args)}: exit {result.exit_code}"
    assert "Traceback" not in result.output
    if numeric(param) and NON_FINITE.search(value):
        assert result.exit_code == 2, f"{tool} {' '.join(args)} ran: {result.output[-300:]}"
        assert flag in result.output or (param.secondary_opts and param.secondary_opts[0] in result.output)


def test_every_command_has_a_base_run():
    assert {(tool, path) for tool, path, _, _ in commands()} == set(BASES)


def test_every_number_has_a_declared_range():
    """Both ends of every integer and real flag are declared (reals: finite)."""
    undeclared = []
    for tool, path, _, cmd in commands():
        for param in cmd.params:
            kind = param.type
            if isinstance(kind, click.types.IntParamType) and not (
                    isinstance(kind, click.IntRange) and kind.min is not None and kind.max is not None):
                undeclared.append(f"{tool} {' '.join(path)} {param.opts}: {kind!r}")
            if isinstance(kind, click.types.FloatParamType) and not (
                    isinstance(kind, FiniteFloatRange) and kind.min is not None and kind.max is not None):
                undeclared.append(f"{tool} {' '.join(path)} {param.opts}: {kind!r}")
    assert not undeclared, "numbers without a declared range:\n" + "\n".join(undeclared)


# -- the defects the hostile sweep found, one test each --------------------------------------------

ATTEMPT = '{"task_id":"a","attempt":0,"reward":1,"status":"ok","episode_id":"a#0","model":"m",' \
          '"usage":{"agent":{"prompt_tokens":10,"completion_tokens":5}}}\n'


def refused(tool: str, args: list[str], flag: str, tmp_path, says: str = "") -> None:
    cli = importlib.import_module(f"endstate.{tool}.cli").cli
    with inside(tmp_path):
        result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, f"{tool} {args}: exit {result.exit_code}: {result.output[-400:]}"
    assert flag in result.output and says in result.output, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.fixture
def attempts(tmp_path):
    path = tmp_path / "att.jsonl"
    path.write_text(ATTEMPT)
    return str(path)


def test_expect_repeats_past_its_range_is_refused_not_enumerated(tmp_path, attempts):
    """Before: `evalstats --expect-repeats 10000000` listed ten million keys and never answered."""
    refused("evalstats", [attempts, "--expect-tasks", F["tasks"], "--expect-repeats", "10000000"],
            "--expect-repeats", tmp_path, "10000000 is not in the range 1<=x<=10000")


@pytest.mark.parametrize("prior", ["nan,1", "1e308,1e308", "inf,1", "1,1e5"])
def test_a_prior_that_is_no_pseudo_count_is_refused(tmp_path, attempts, prior):
    """Before: nan,1 and 1e308,1e308 were exit 70 (StopIteration), inf,1 wrote schema-invalid
    records."""
    refused("bucket", [attempts, "--all", "--prior", prior], "--prior", tmp_path)


def test_keep_if_nan_is_refused(tmp_path, attempts):
    """Before: --keep-if nan kept nothing, exit 0."""
    refused("bucket", [attempts, "--keep-if", "nan"], "--keep-if", tmp_path, "not a finite number")


@pytest.mark.parametrize("tool", ["evalstats", "rollout", "probe"])
@pytest.mark.parametrize("price", ["m=nan,1", "m=1e309,1", "m=1,inf"])
def test_a_price_that_is_no_price_is_refused(tmp_path, attempts, tool, price):
    """Before: nan or 1e309 priced every total null without a word, exit 0."""
    args = [attempts] if tool == "evalstats" else (["run"] if tool == "rollout" else []) + [F["empty"]]
    refused(tool, [*args, "--price", price], "--price", tmp_path, "prices from 0 to 1e+06")


@pytest.mark.parametrize("tool", ["rollout", "probe", "grpo"])
@pytest.mark.parametrize("flag", ["--top-k", "--seed"])
def test_integers_past_64_bits_are_refused_up_front(tmp_path, tool, flag):
    """Before: --top-k or --seed 2**70 ended every episode in exit 70."""
    args = {"rollout": ["run", F["empty"]], "probe": [F["empty"]],
            "grpo": ["train", "--pool", F["pool"], "--out", str(tmp_path / "r"), "--dry-run"]}[tool]
    refused(tool, [*args, flag, str(2**70)], flag, tmp_path)


@pytest.mark.parametrize("text, says", [
    (b"group_size: 1000000000000000000000000000000\n", "group_size: 1000000000000000000000000000000 is not in the range"),
    (b"clip_low: 5\n", "clip_low: 5.0 is not in the range 0<=x<=1"),
    (b"keep: [nosuchband]\n", "keep: no band named nosuchband"),
    (b"\xff\xfe: 1\n", "cannot read the config"),
    (b"a: " + b"[" * 10000 + b"]" * 10000 + b"\n", "cannot read the config"),
])
def test_a_grpo_config_outside_its_ranges_or_unreadable_is_a_usage_error(tmp_path, text, says):
    """Before: group_size 10**30, clip_low 5 and keep [nosuchband] were accepted, a config of bad
    UTF-8 or YAML nested too deep was exit 70."""
    config = tmp_path / "c.yaml"
    config.write_bytes(text)
    refused("grpo", ["train", "--config", str(config), "--pool", F["pool"], "--out",
                     str(tmp_path / "r"), "--dry-run"], says, tmp_path)


@pytest.mark.parametrize("tool, args", [
    ("rollout", ["run", F["empty"], "--agent-url", "ftp://host/v1"]),
    ("probe", [F["empty"], "--backend", "chat", "--agent-url", "ftp://host/v1"]),
    ("probe", [F["empty"], "--user-url", "localhost:8000"]),
    ("grade", ["score", F["empty"], "--judge-base-url", "ftp://host/v1", "--judge-model", "j"]),
])
def test_an_endpoint_url_that_is_no_http_url_is_refused_up_front(tmp_path, tool, args):
    """Before: --agent-url ftp://... failed inside every episode."""
    flag = next(a for a in args if a.endswith("url"))
    refused(tool, args, flag, tmp_path, "not an http:// or https:// URL")


@pytest.mark.parametrize("flag, value", [("--token", " "), ("--token", " s3cret"), ("--token", ""),
                                         ("--http", "127.0.0.1:99999"), ("--http", "8765"),
                                         ("--http", "localhost:http")])
def test_the_gateway_refuses_a_token_or_address_it_cannot_serve(tmp_path, flag, value):
    """Before: --token ' ' was accepted and then matched nothing, --http HOST:99999 listened on
    another port (99999 mod 65536)."""
    args = ["serve-mcp", F["tasks"], "--out", str(tmp_path / "g.jsonl"), "--http", "127.0.0.1:0",
            "--token", "s3cret", flag, value]
    refused("rollout", args, flag, tmp_path)


@pytest.mark.parametrize("tool, args", [
    ("bucket", [F["empty"], "--plot", "bands.pdf0"]),
    ("evalstats", ["compare", F["empty"], F["empty"], "--plot", "delta"]),
    ("evalstats", [F["empty"], "--by", ""]),
    ("evalstats", [F["empty"], "--cluster", "a\x1fb"]),
    ("rollout", ["run", F["empty"], "--shard", "inf"]),
    ("probe", [F["empty"], "--shard", "0/1180591620717411303424"]),
    ("grpo", ["train", "--pool", F["pool"], "--out", "r", "--dry-run", "--deepspeed", "notjson.txt"]),
])
def test_what_the_property_found(tmp_path, tool, args):
    """Exit 70 before: a --plot name matplotlib has no format for, a --by or --cluster name the
    record reader cannot take, a --deepspeed file that is not JSON; and --shard's error did not
    name the flag."""
    (tmp_path / "notjson.txt").write_text("0.0 is not a config\n")
    flag = next(a for a in args if a.startswith("--") and a not in ("--pool", "--out", "--dry-run"))
    refused(tool, args, flag if flag != "--deepspeed" else "not a JSON object", tmp_path)


# -- the flags and keys grpo train (user, judge, held-out evaluation) and evalstats (compare,
# tally, report) gained since: the same rules --------------------------------------------------------

GRPO_DRY = ["train", "--pool", F["pool"], "--dry-run"]


@pytest.mark.parametrize("flag, value, says", [
    ("--eval-repeats", "10000000", "is not in the range 1<=x<=10000"),
    ("--eval-every", "-1", "is not in the range 0<=x<=1000000"),
    ("--timeout", "nan", "nan is not a finite number"),
    ("--timeout", "inf", "inf is not a finite number"),
    ("--retries", str(2**70), "is not in the range 1<=x<=100"),
    ("--user-url", "ftp://host/v1", "not an http:// or https:// URL"),
    ("--judge-base-url", "localhost:8000", "not an http:// or https:// URL"),
])
def test_grpo_user_judge_and_eval_flags_have_ranges(tmp_path, flag, value, says):
    refused("grpo", [*GRPO_DRY, "--out", str(tmp_path / "r"), flag, value], flag, tmp_path, says)


@pytest.mark.parametrize("text, says", [
    (b"eval_repeats: 1.0e+30\n", "eval_repeats: "),
    (b"eval_every: -3\n", "eval_every: -3 is not in the range"),
    (b"timeout: .nan\n", "timeout: nan is not a finite number"),
    (b"retries: 1000\n", "retries: 1000 is not in the range 1<=x<=100"),
    (b"user_url: [ftp://host/v1]\n", "user_url: 'ftp://host/v1': not an http:// or https:// URL"),
    (b"user_url: [7]\n", "user_url: expected a list of strings"),
    (b"judge_base_url: 'http://host:99999/v1'\n", "judge_base_url: 'http://host:99999/v1': Port out of range"),
])
def test_grpo_user_judge_and_eval_keys_are_held_to_the_same_ranges(tmp_path, text, says):
    config = tmp_path / "c.yaml"
    config.write_bytes(text)
    refused("grpo", [*GRPO_DRY, "--config", str(config), "--out", str(tmp_path / "r")], says, tmp_path)


def test_a_grpo_judge_cache_that_is_no_sqlite_file_is_a_usage_error(tmp_path):
    (tmp_path / "notes.txt").write_text("not a database, just words " * 100)
    refused("grpo", [*GRPO_DRY, "--out", str(tmp_path / "r"), "--judge-model", "j", "--judge-base-url",
                     "http://127.0.0.1:9/v1", "--judge-cache", "notes.txt"], "--judge-cache notes.txt",
            tmp_path, "cannot keep verdicts there")


@pytest.mark.parametrize("tool, args, flag", [
    ("evalstats", ["compare", "A", "A", "--cluster", "a\x1fb"], "--cluster"),
    ("evalstats", ["compare", "A", "A", "--price", "m=nan,1"], "--price"),
    ("evalstats", ["compare", "A", "A", "--by", "x\"y"], "--by"),
    ("evalstats", ["tally", "A", "--top", "0"], "--top"),
    ("evalstats", ["tally", "A", "--top", str(2**70)], "--top"),
    ("evalstats", ["tally", "A", "--procs", "0"], "--procs"),
    ("evalstats", ["report", "A", "-o", "r.html", "--k", "10000001"], "--k"),
    ("evalstats", ["report", "A", "-o", "r.html", "--cluster", ""], "--cluster"),
    ("evalstats", ["summary", "A", "--cluster", "policy"], "--cluster"),  # exit 70 before
    ("evalstats", ["compare", "A", "A", "--cluster", "policy"], "--cluster"),
    ("evalstats", ["report", "A", "-o", "r.html", "--price", "m=1e309,1"], "--price"),
    ("evalstats", ["summary", "A", "--by", "policy", "--by", "a\nb"], "--by"),
    ("bucket", ["A", "--posteriors", "posteriors.svg"], "--posteriors"),
])
def test_the_new_evalstats_and_bucket_flags_follow_the_same_rules(tmp_path, attempts, tool, args, flag):
    refused(tool, [attempts if a == "A" else a for a in args], flag, tmp_path)


# -- a flag that has no effect without another is refused, naming the other ----------------------

DEAD = "http://127.0.0.1:9/v1"


@pytest.mark.parametrize("tool, args, other", [
    ("grpo", [*GRPO_DRY, "--eval-every", "2"], "--eval-tasks"),
    ("grpo", [*GRPO_DRY, "--eval-repeats", "2"], "--eval-tasks"),
    ("grpo", [*GRPO_DRY, "--rest-steps", "2"], "--rebucket"),
    ("grpo", [*GRPO_DRY, "--keep", "hard"], "--retire or --rebucket"),
    ("grpo", [*GRPO_DRY, "--base-attempts", "a.jsonl"], "--retire or --rebucket"),
    ("grpo", [*GRPO_DRY, "--user-url", DEAD], "--user llm"),
    ("grpo", [*GRPO_DRY, "--user-model", "m"], "--user llm"),
    ("grpo", [*GRPO_DRY, "--no-user-seed"], "--user llm"),
    ("grpo", [*GRPO_DRY, "--judge-cache", "j.sqlite"], "a judge"),
    ("grpo", [*GRPO_DRY, "--timeout", "5"], "--user llm or a judge"),
    ("grpo", [*GRPO_DRY, "--retries", "2"], "--user llm or a judge"),
    ("grpo", [*GRPO_DRY, "--vllm-gpu-memory", "0.5"], "--rollout-engine vllm"),
    ("grpo", [*GRPO_DRY, "--vllm-max-batched-tokens", "512"], "--rollout-engine vllm"),
    ("grpo", [*GRPO_DRY, "--rollout-is-cap", "3"], "importance weights: --rollout-is token|sequence"),
    ("rollout", ["run", F["empty"], "--user-url", DEAD], "--user llm"),
    ("probe", [F["empty"], "--user-model", "m"], "--user llm"),
    ("probe", [F["empty"], "--tokenizer", "embedded"], "--backend completions"),
    ("rollout", ["run", F["empty"], "--agent-url", DEAD], "--backend chat or completions"),
    ("probe", [F["empty"], "--judge-cache", "j.sqlite"], "a judge"),
    ("grade", ["score", F["empty"], "--judge-model", "j"], "a judge"),
    ("rollout", ["serve-mcp", F["tasks"], "--out", "g.jsonl", "--user-model", "m"], "--user llm"),
])
def test_a_flag_without_the_one_it_needs_is_refused_naming_it(tmp_path, monkeypatch, tool, args, other):
    """Before: each was ignored without a word (grpo --eval-every without --eval-tasks ran no
    evaluation, --user-url without --user llm ran the scripted user)."""
    for name in ("ENDSTATE_JUDGE_MODEL", "ENDSTATE_JUDGE_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    flag = next(a for a in args[::-1] if a.startswith("--") and a != "--dry-run")
    refused(tool, args, flag, tmp_path, f"has no effect without {other}")


@pytest.mark.parametrize("args", [
    ["--rest-steps", "2", "--rebucket"],
    ["--rollout-is-cap", "3", "--rollout-is", "token"],
    ["--timeout", "5", "--judge-model", "j", "--judge-base-url", DEAD],
])
def test_with_the_flag_it_needs_it_is_taken(tmp_path, args):
    from endstate.grpo.cli import cli

    with inside(tmp_path):
        result = CliRunner().invoke(cli, [*GRPO_DRY, "--out", str(tmp_path / "r"), *args])
    assert result.exit_code == 0, result.output
