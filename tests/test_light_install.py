"""The light install: `pip install 'endstate[stats]'` from the built wheel, in a fresh venv that
has no torch, transformers or DeepSpeed, evaluates a served model end to end (grade, rollout and
probe against an OpenAI-compatible endpoint, bucket, evalstats), and a command that needs a heavy
extra says which, with the pip command, exit 2.

The endpoint is tests/openai_double.py (the edge endstate does not own), playing the gold calls of
some tasks. The install itself comes from the package registries (pip's own client): slow.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib

import pytest
from click.testing import CliRunner
from conftest import ROOT, build_wheel
from openai_double import FakeEndpoint, gold_policy

from endstate.core.cli.command import _wrap_each_command
from endstate.core.cli.extras import COMMAND_EXTRA, EXTRA_OF, missing_extra

HEAVY = ("torch", "transformers", "deepspeed")


def test_every_module_is_named_by_the_extra_that_installs_it():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for module, extra in EXTRA_OF.items():
        names = {r.split(">")[0].split("=")[0].split("[")[0].strip() for r in extras[extra]}
        assert module in names, f"{module} is not in the {extra!r} extra: {sorted(names)}"
    for larger, included in COMMAND_EXTRA.values():  # `train` = endstate[local,dashboards] + ...
        named = {e for r in extras[larger] if r.startswith("endstate[")
                 for e in r.removeprefix("endstate[").removesuffix("]").split(",")}
        assert included == named | {larger}


def test_grpo_names_the_train_extra_for_what_it_includes():
    assert "endstate[train]" in missing_extra(ModuleNotFoundError(name="torch"), "grpo train").message
    assert "endstate[stats]" in missing_extra(ModuleNotFoundError(name="matplotlib"), "grpo train").message


@pytest.mark.parametrize("module, code", [("torch", 2), ("scipy.special", 2), ("not_an_extra", 70)])
def test_a_missing_extra_is_a_usage_error_naming_it(module, code, monkeypatch):
    import click

    from endstate.core.console import stdio

    # in-process: the wrapper must not move this worker's stdout (the later tests' CliRunner
    # output would go there)
    monkeypatch.setattr(stdio, "reserve_stdout", lambda: None)

    @click.command()
    def needs():
        raise ModuleNotFoundError(f"No module named {module!r}", name=module)

    _wrap_each_command(needs)
    result = CliRunner().invoke(needs, [], prog_name="probe")
    if code == 2:
        extra = EXTRA_OF[module.partition(".")[0]]
        assert result.exit_code == 2, result.output
        assert f"probe needs {module.partition('.')[0]}" in result.output
        assert f"pip install 'endstate[{extra}]'" in result.output
    else:  # a core dependency missing is a broken install, not a usage error
        assert isinstance(result.exception, ModuleNotFoundError)
        assert missing_extra(result.exception, "probe") is None


@pytest.fixture(scope="module")
def light(tmp_path_factory):
    """A venv holding the wheel and its `stats` extra, nothing else; its bin folder."""
    tmp = tmp_path_factory.mktemp("light")
    wheel, _ = build_wheel(tmp)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True)
    subprocess.run([venv / "bin" / "python", "-m", "pip", "install", "-q", f"{wheel}[stats]"],
                   check=True, capture_output=True, timeout=900)
    return venv / "bin"


def run(bin_, *args: str, cwd, input: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the venv's own endstate
    return subprocess.run([str(bin_ / args[0]), *args[1:]], capture_output=True, text=True, cwd=cwd,
                          input=input, env=env, timeout=600, check=False)


def ok(p: subprocess.CompletedProcess) -> str:
    assert p.returncode == 0, f"exit {p.returncode}: {p.stderr[-2000:]}"
    return p.stdout


@pytest.mark.slow
def test_a_light_install_evaluates_a_served_model(light, tmp_path):
    for module in HEAVY:
        found = run(light, "python", "-c", f"import {module}", cwd=tmp_path)
        assert found.returncode != 0, f"{module} is installed in the light venv"
    tasks = [json.loads(line) for line in
             ok(run(light, "grade", "tasks", "--full", "--split", "bench", "--domain", "retail",
                    cwd=tmp_path)).splitlines()[:6]]
    (tmp_path / "tasks.jsonl").write_text("".join(json.dumps(t) + "\n" for t in tasks))
    assert all(json.loads(v)["sound"] for v in
               ok(run(light, "grade", "validate", "tasks.jsonl", cwd=tmp_path)).splitlines())
    runs = {}
    for name, solved in (("base", tasks[:2]), ("new", tasks[:5])):
        chat = ("--backend", "chat", "--model", f"served-{name}", "--seed", "none")
        with FakeEndpoint(policy=gold_policy(solved)) as endpoint:
            runs[name] = ok(run(light, "probe", "tasks.jsonl", "-n", "2", *chat, "--agent-url",
                                endpoint.base_url, "--episodes", f"{name}_episodes.jsonl", cwd=tmp_path))
            episodes = ok(run(light, "rollout", "run", "tasks.jsonl", *chat, "--agent-url",
                              endpoint.base_url, cwd=tmp_path))
        (tmp_path / f"{name}.jsonl").write_text(runs[name])
        graded = [json.loads(g) for g in ok(run(light, "grade", cwd=tmp_path, input=episodes)).splitlines()]
        assert {g["task_id"]: g["reward"] for g in graded} == {t["id"]: int(t in solved) for t in tasks}
    bands = [json.loads(d) for d in ok(run(light, "bucket", "--all", "base.jsonl", cwd=tmp_path)).splitlines()]
    assert {d["task_id"]: d["band"] for d in bands} == {
        t["id"]: "too_easy" if t in tasks[:2] else "too_hard" for t in tasks}
    compared = json.loads(ok(run(light, "evalstats", "compare", "base.jsonl", "new.jsonl", cwd=tmp_path)))
    assert (compared["pass_at_1"]["base"], compared["pass_at_1"]["new"]) == (2 / 6, 5 / 6)
    ok(run(light, "evalstats", "report", "--compare", "base.jsonl", "new.jsonl", "--graded",
           "new_episodes.jsonl", "-o", "report.html", cwd=tmp_path))
    assert "<html" in (tmp_path / "report.html").read_text()[:500].lower()
    # what a light install cannot do says which extra does, with the pip command, exit 2
    for args, extra in ((("probe", "tasks.jsonl", "-n", "1"), "local"),
                        (("grpo", "train", "--pool", "tasks.jsonl", "--allow-bench", "--out", "r"), "train"),
                        (("rollout", "serve-mcp", "tasks.jsonl", "--task", tasks[0]["id"], "--out", "mcp.jsonl"), "mcp")):
        p = run(light, *args, cwd=tmp_path, input="")
        assert p.returncode == 2 and f"pip install 'endstate[{extra}]'" in p.stderr, (args, p.stderr)
