"""Plugins: an installed package registers a domain, a check kind, a tool result format, an agent
backend and a simulated user through entry points (docs/example/plugin, installed with pip into a folder of its own, never
into the project's environment), and the CLIs use them; registries read plugins once, at first
use; a plugin that fails to load, or takes a name already registered, is refused naming it."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, run_tool

from endstate.core.registry import Registry, RegistryError, entry_point_group

PLUGIN = ROOT / "docs" / "example" / "plugin"


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The example plugin, built and installed by pip into a target folder (no network, no
    dependencies: endstate is the project's own)."""
    work = tmp_path_factory.mktemp("plugin")
    source, target = work / "source", work / "site"
    shutil.copytree(PLUGIN, source)  # the build writes build/ and *.egg-info beside the sources
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-index",
                    "--no-build-isolation", "--target", str(target), str(source)],
                   check=True, capture_output=True, text=True, timeout=300)
    return target


def on_path(*folders: Path) -> dict[str, str]:
    """The environment of a command that sees `folders` too (where a plugin is installed)."""
    return {"PYTHONPATH": os.pathsep.join([*map(str, folders), os.environ.get("PYTHONPATH", "")])}


def counter_tasks(site: Path) -> str:
    return str(site / "endstate_counter" / "counter" / "tasks" / "counter.jsonl")


def test_an_installed_plugin_adds_a_domain_a_check_kind_a_result_format_and_a_backend(installed):
    env, tasks = on_path(installed), counter_tasks(installed)
    p = run_tool("grade", "validate", tasks, env=env)  # no --domains: the plugin's domain
    assert p.returncode == 0, p.stderr
    verdict = json.loads(p.stdout)
    assert verdict["sound"] and verdict["gold_reward"] == 1 and verdict["empty_reward"] == 0

    p = run_tool("probe", "--backend", "counter-bot", "-n", "2", tasks, env=env)
    assert p.returncode == 0, p.stderr
    assert [(a["attempt"], a["reward"]) for a in map(json.loads, p.stdout.splitlines())] == [(0, 1), (1, 1)]

    episodes = run_tool("rollout", "run", "--backend", "counter-bot", "--user", "polite", tasks, env=env)
    graded = json.loads(run_tool("grade", input=episodes.stdout, env=env).stdout)
    assert [(m["role"], m.get("content")) for m in graded["messages"][2:]] == [
        ("assistant", None), ("tool", "id=C1 value=7"),  # the plain format
        ("assistant", "Done."), ("user", "Thank you!"), ("assistant", "Done.")]  # the polite user
    assert graded["termination"] == "user_stop"
    assert graded["checks"][0] == {"id": "total-ten", "kind": "total", "passed": True,
                                   "detail": "total of counters.value: expected 10, got 10"}
    help_text = run_tool("rollout", "run", "--help", env=env).stdout
    assert "counter-bot" in help_text and "polite" in help_text
    grpo_help = " ".join(run_tool("grpo", "train", "--help", env=env).stdout.split())
    assert re.search(r"--user \[[^]]*polite", grpo_help), grpo_help  # grpo trains with it too


# registry -> (its group, the source of a plugin's module defining ENTRY, the flag it is a choice of)
GRPO_ENTRIES = {
    "LOSS_AGGREGATIONS": ("endstate.loss_aggregations", (
        "from endstate.grpo.algorithm import LossAgg\n"
        "ENTRY = LossAgg(lambda loss, mask: (loss * mask).sum(), lambda n, tokens: 1.0)\n"),
        "--loss-agg"),
    "POLICY_LOSSES": ("endstate.policy_losses",
                      "from endstate.grpo.algorithm import ppo_clip as ENTRY\n", "--policy-loss"),
}


@pytest.mark.parametrize("registry", sorted(GRPO_ENTRIES))
def test_grpo_reads_the_same_entry_points(tmp_path, registry):
    """grpo's registries are registries like the others: a package's entry is a choice of its flag."""
    group, source, flag = GRPO_ENTRIES[registry]
    site = fake_distribution(tmp_path, "grpo-plugin", {group: {"from-a-plugin": "grpo_plugin:ENTRY"}},
                             {"grpo_plugin.py": source})
    p = run_tool("grpo", "train", "--help", env=on_path(site))
    assert p.returncode == 0, p.stderr
    assert re.search(re.escape(flag) + r" \[[^]]*from-a-plugin", " ".join(p.stdout.split())), p.stdout


def test_without_the_plugin_its_domain_is_unknown(installed):
    p = run_tool("grade", "validate", counter_tasks(installed))
    assert p.returncode == 1 and "unknown domain 'counter'" in p.stderr


def fake_distribution(site: Path, name: str, entry_points: dict[str, dict[str, str]],
                      modules: dict[str, str]) -> Path:
    """A distribution as an installer leaves it (its dist-info, entry_points.txt, modules), for
    the plugins that must fail: no build needed to get a broken one."""
    info = site / f"{name.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n"
        for group, entries in entry_points.items()))
    for filename, source in modules.items():
        (site / filename).write_text(source)
    return site


def validate_the_example(site: Path) -> subprocess.CompletedProcess:
    return run_tool("grade", "validate", "--domains", "docs/example/domains",
                    "docs/example/tasks.jsonl", env=on_path(site), cwd=ROOT)


def test_a_plugin_that_cannot_load_stops_the_command_naming_it_and_the_fix(tmp_path):
    site = fake_distribution(tmp_path, "broken-plugin", {"endstate.check_kinds": {
        "missing": "broken_plugin:nothing_here"}}, {"broken_plugin.py": ""})
    p = validate_the_example(site)
    assert p.returncode == 2
    assert p.stderr.splitlines()[-1] == (
        "plugin broken-plugin (endstate.check_kinds: missing = broken_plugin:nothing_here) "
        "cannot be loaded: AttributeError: module 'broken_plugin' has no attribute "
        "'nothing_here'; fix the plugin, or uninstall it (pip uninstall broken-plugin)")


def test_a_plugin_taking_a_registered_name_is_refused_naming_both(tmp_path):
    site = fake_distribution(tmp_path, "other-plugin", {"endstate.check_kinds": {
        "row": "other_plugin:row"}}, {"other_plugin.py": "def row(check, ctx):\n    return True, ''\n"})
    p = validate_the_example(site)
    assert p.returncode == 2
    assert ("check kind 'row' is registered twice: endstate.core.grading.checks.check_row and "
            "plugin other-plugin (endstate.check_kinds: row = other_plugin:row); rename one") in p.stderr


def test_a_domain_is_named_after_its_folder(tmp_path):
    folder = tmp_path / "shop"
    shutil.copytree(ROOT / "docs" / "example" / "domains" / "library", folder)
    site = fake_distribution(tmp_path / "site", "shop-plugin", {"endstate.domains": {
        "store": "shop_plugin:FOLDER"}}, {"shop_plugin.py": f"FOLDER = {str(folder)!r}\n"})
    p = run_tool("grade", "tasks", "--summary", env=on_path(site))
    assert p.returncode == 2
    assert ("plugin shop-plugin (endstate.domains: store = shop_plugin:FOLDER) registers domain "
            f"'store' at {folder}: a domain is named after its folder; name the entry point "
            "'shop', or the folder 'store'") in p.stderr


def test_a_registry_reads_its_plugins_once_at_first_use(tmp_path, monkeypatch):
    site = fake_distribution(tmp_path, "widget-plugin", {"endstate.widgets": {
        "spinner": "widget_plugin:spinner"}}, {"widget_plugin.py": (
            "import builtins\nbuiltins.widget_imports = getattr(builtins, 'widget_imports', 0) + 1\n"
            "spinner = 'a spinner'\n")})
    monkeypatch.syspath_prepend(str(site))
    widgets: Registry[str] = Registry("widget")
    widgets.register("wheel")("a wheel")
    assert "widget_plugin" not in sys.modules  # made, not read: nothing of the plugin ran
    assert widgets["spinner"] == "a spinner" and list(widgets) == ["wheel", "spinner"]
    assert "spinner" in widgets and widgets.origin("spinner").startswith("plugin widget-plugin")
    import builtins
    assert builtins.widget_imports == 1  # once, whatever was asked
    del builtins.widget_imports, sys.modules["widget_plugin"]


def test_a_registry_refuses_what_its_entries_cannot_be(tmp_path, monkeypatch):
    from endstate.api import Backend
    from endstate.core.registry import instance_of

    site = fake_distribution(tmp_path, "bare-plugin", {"endstate.gadgets": {
        "bare": "bare_plugin:build"}}, {"bare_plugin.py": "def build(cfg, live=None):\n    pass\n"})
    monkeypatch.syspath_prepend(str(site))
    gadgets = Registry("gadget", accept=instance_of(Backend))
    with pytest.raises(RegistryError, match=r"plugin bare-plugin \(endstate.gadgets: bare = "
                       r"bare_plugin:build\) cannot be loaded: TypeError: the entry point's object "
                       r"is a function, not an endstate.api.Backend; fix the plugin"):
        "bare" in gadgets  # noqa: B015
    with pytest.raises(RegistryError, match="cannot be loaded"):  # and again: not half-loaded
        list(gadgets)
    sys.modules.pop("bare_plugin", None)


@pytest.mark.parametrize("what,group", [
    ("check kind", "endstate.check_kinds"), ("agent backend", "endstate.agent_backends"),
    ("simulated user", "endstate.simulated_users"), ("domain", "endstate.domains"),
    ("policy loss", "endstate.policy_losses"), ("KL penalty", "endstate.kl_penalties"),
    ("tool result format", "endstate.tool_result_formats"),
])
def test_a_registry_group_is_the_plural_of_what_it_holds(what, group):
    assert entry_point_group(what) == group
