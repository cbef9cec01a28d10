"""grpo's settings are declared once (grpo/settings.py): the flags, their help and ranges, the YAML
keys and checks, the refusal of a flag without its partner, the loss config, the metrics that
record settings and the table in docs/grpo.md all come from the declarations. The registries the
settings choose from (advantage, KL penalty) against numbers by hand, and sampling reaching vLLM
by name."""

from __future__ import annotations

import dataclasses
import importlib.util
import re

import click
import pytest
import yaml
from click.testing import CliRunner
from conftest import ROOT, without_judge

from endstate.core.agent.sampling import Sampling
from endstate.core.errors import EndstateError
from endstate.grpo.cli import cli, train
from endstate.grpo.config import DECLARED, TrainConfig, resolve
from endstate.grpo.objective import LossConfig, LossSettings
from endstate.grpo.settings import flag, read_yaml, recorded

YAML = ROOT / "configs" / "grpo.yaml"
# options of `grpo train` that are no setting of a run
NOT_SETTINGS = {"config_file", "dry_run", "quiet", "verbose", "version", "help"}


def _docs_tables():
    spec = importlib.util.spec_from_file_location("docs_tables", ROOT / "scripts" / "docs_tables.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# -- the docs table ------------------------------------------------------------------------------------

def test_the_settings_table_in_the_docs_is_the_one_the_declarations_make():
    docs = _docs_tables()
    path = ROOT / "docs" / "grpo.md"
    text = path.read_text()
    assert docs.regenerated(text, docs.grpo_settings(), path) == text, \
        "docs/grpo.md's settings table is stale: run make docs (python scripts/docs_tables.py)"
    assert docs.main(["--check"]) == 0


def test_a_stale_settings_table_is_caught():
    """A row edited by hand, or a setting added without regenerating, is a difference."""
    docs = _docs_tables()
    path = ROOT / "docs" / "grpo.md"
    text = path.read_text()
    table = docs.grpo_settings()
    assert "| `policy_loss` | `--policy-loss` | `ppo-clip` | `ppo-clip`, `gspo`" in table
    kl_row = next(r for r in table.splitlines() if r.startswith("| `kl_penalty`")) + "\n"
    for stale in (text.replace("| `clip_low` | `--clip-low` | `0.2`", "| `clip_low` | `--clip-low` | `0.3`"),
                  text.replace(kl_row, "")):
        assert stale != text and docs.regenerated(stale, table, path) == text


def test_every_setting_is_a_row_and_every_row_a_setting():
    table = _docs_tables().grpo_settings()
    keys = re.findall(r"^\| `(\w+)` \|", table, re.MULTILINE)
    assert keys == [p.name for p in train.params if p.name in DECLARED]
    assert sorted(keys) == sorted(f.name for f in dataclasses.fields(TrainConfig))


# -- the flags -----------------------------------------------------------------------------------------

def test_every_flag_is_a_declared_setting_with_its_declared_help_and_type():
    options = {p.name: p for p in train.params if p.name not in NOT_SETTINGS}
    assert options.keys() == DECLARED.keys()
    types = {f.name: f.type for f in dataclasses.fields(TrainConfig)}
    for name, declared in DECLARED.items():
        option = options[name]
        assert option.help.startswith(declared.help), name
        assert flag(name, types[name]).split("/")[0] in option.opts, (name, option.opts)
        if declared.kind is not None:
            assert option.type is declared.kind, name


def test_the_sampling_settings_grpo_refuses_say_so_in_its_help():
    result = CliRunner().invoke(cli, ["train", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert re.search(r"--min-p FLOAT RANGE\s+Refused by grpo: vLLM applies min-p", result.output)


# -- a flag without the setting it needs -----------------------------------------------------------------

DRY = ["train", "--pool", without_judge(ROOT / "tasks/train/retail.jsonl"), "--dry-run"]


@pytest.mark.parametrize("args, refused, other", [
    (["--advantage", "rloo", "--no-std-norm"], "--std-norm/--no-std-norm", "--advantage grpo"),
    (["--advantage", "rloo", "--adv-eps", "0.1"], "--adv-eps", "--advantage grpo"),
    (["--kl-penalty", "k1"], "--kl-penalty", "--kl-coef above 0"),
])
def test_a_setting_given_without_the_one_it_needs_is_refused(tmp_path, args, refused, other):
    result = CliRunner().invoke(cli, [*DRY, "--out", str(tmp_path / "r"), *args])
    assert result.exit_code == 2, result.output
    assert f"{refused} has no effect without {other}: add it, or drop {refused}" in result.output


@pytest.mark.parametrize("args", [["--advantage", "rloo"], ["--kl-penalty", "k2", "--kl-coef", "0.1"],
                                  ["--policy-loss", "gspo", "--clip-low", "0.0003", "--clip-high", "0.0004"]])
def test_with_what_it_needs_a_setting_is_taken(tmp_path, args):
    result = CliRunner().invoke(cli, [*DRY, "--out", str(tmp_path / "r"), *args])
    assert result.exit_code == 0, result.output
    for name, value in zip(args[::2], args[1::2]):
        assert f"{name[2:].replace('-', '_')}: {value}" in result.output


@pytest.mark.parametrize("key, value, says", [
    ("policy_loss", "cispo", "policy_loss 'cispo': choose one of ppo-clip, gspo"),
    ("advantage", "gae", "advantage 'gae': choose one of grpo, rloo"),
    ("kl_penalty", "k4", "kl_penalty 'k4': choose one of k3, k1, k2"),
    ("device", "tpu", "device 'tpu': choose one of cpu, cuda"),
])
def test_a_yaml_value_meets_its_flags_choices(tmp_path, key, value, says):
    config = tmp_path / "c.yaml"
    config.write_text(f"{key}: {value}\n")
    with pytest.raises(EndstateError, match=re.escape(says)):
        resolve(str(config), {"pool": "p.jsonl"})


# -- configs/grpo.yaml -------------------------------------------------------------------------------------

def test_the_reference_config_reads_and_says_the_declared_defaults():
    """configs/grpo.yaml is the reference run, which is the defaults: every value is its key's
    declared default, and a comment listing alternatives (`# or a, b`) names registered ones."""
    values = read_yaml(str(YAML), TrainConfig)
    defaults = TrainConfig()
    assert {k: v for k, v in values.items() if getattr(defaults, k) != v} == {}
    cfg = resolve(str(YAML), {"pool": "p.jsonl"})
    assert cfg.policy_loss == "ppo-clip" and cfg.loss_agg == "token-mean"
    listed = 0
    for line in YAML.read_text().splitlines():
        key, _, comment = line.partition("#")
        alternatives = re.match(r"\s*or ([\w-]+(?:, [\w-]+)*)", comment)
        if alternatives and ":" in key:
            name = key.split(":")[0].strip()
            assert isinstance(DECLARED[name].kind, click.Choice), name
            for choice in alternatives.group(1).split(", "):
                assert choice in DECLARED[name].kind.choices, (name, choice)
                listed += 1
    assert listed >= 5
    deepspeed = re.search(r"^deepspeed: \S+ +# (.*)$", YAML.read_text(), re.MULTILINE).group(1)
    shipped = {p.stem for p in (ROOT / "configs" / "deepspeed").glob("*.json")}
    assert set(deepspeed.split(" | ")) - {"path/to.json"} == shipped


def test_every_yaml_key_is_a_field_and_the_file_is_plain_yaml():
    keys = yaml.safe_load(YAML.read_text())
    assert set(keys) <= DECLARED.keys()


# -- the loss config and the metrics, derived ------------------------------------------------------------

def test_the_loss_config_takes_every_loss_setting_by_name():
    changed = {"policy_loss": "gspo", "clip_low": 0.1, "clip_high": 0.3, "dual_clip": 4.0,
               "log_ratio_clamp": 10.0, "loss_agg": "seq-mean-token-mean", "kl_coef": 0.5,
               "kl_penalty": "k2", "rollout_is_cap": 3.0, "micro_batch": 2}
    assert changed.keys() == {f.name for f in dataclasses.fields(LossSettings)}
    assert all(changed[k] != f.default for f in dataclasses.fields(LossSettings) for k in [f.name])
    loss = LossConfig.of(TrainConfig(**changed, rollout_is="sequence", temperature=0.5, top_k=7, top_p=0.9))
    assert {k: getattr(loss, k) for k in changed} == changed
    assert (loss.rollout_is, loss.temperature, loss.top_k, loss.top_p) == ("sequence", 0.5, 7, 0.9)


def test_a_metrics_line_records_the_settings_in_force():
    assert recorded(TrainConfig(rollout_engine="vllm", policy_loss="gspo", advantage="rloo")) == {
        "policy_loss": "gspo", "kl_penalty": "k3", "advantage": "rloo", "rollout_is": "token"}
    assert recorded(TrainConfig())["rollout_is"] == "off"  # auto, local engine


# -- the registries a setting chooses from ---------------------------------------------------------------

def test_rloo_advantages_by_hand():
    from endstate.grpo.algorithm import advantages

    # G = 5, three successes: 1 − 2/4 = 0.5, 0 − 3/4 = −0.75 (dyadic: exact in float64)
    assert advantages([1, 0, 0, 1, 1], TrainConfig(advantage="rloo")) == [0.5, -0.75, -0.75, 0.5, 0.5]
    assert advantages([1, 1, 0, 0], TrainConfig(std_norm=False)) == [0.5, 0.5, -0.5, -0.5]  # grpo


def test_kl_penalties_by_hand():
    import torch

    from endstate.grpo.algorithm import KL_PENALTIES

    logp, ref = torch.tensor([[-1.0, -0.5]]), torch.tensor([[-0.5, -1.5]])
    assert KL_PENALTIES["k1"](logp, ref).tolist() == [[-0.5, 1.0]]  # log π − log π_ref
    assert KL_PENALTIES["k2"](logp, ref).tolist() == [[0.125, 0.5]]  # ½ (log π − log π_ref)²


def test_an_unknown_name_is_refused_naming_the_registered_ones():
    from endstate.grpo.algorithm import POLICY_LOSSES

    with pytest.raises(KeyError, match="no policy loss 'cispo'; registered: ppo-clip, gspo"):
        POLICY_LOSSES["cispo"]


# -- sampling reaches vLLM by name -------------------------------------------------------------------------

def test_vllm_sampling_params_are_the_sampling_settings_by_name():
    from endstate.grpo.vllm_engine import sampling_params

    sampling = Sampling(max_new_tokens=7, temperature=0.5, top_p=0.9, top_k=3, stop=["</x>"])
    assert sampling_params(sampling) == {"max_tokens": 7, "temperature": 0.5, "top_p": 0.9,
                                         "top_k": 3, "stop": ["</x>"]}
    assert sampling_params(Sampling()) == {"max_tokens": 256, "temperature": 1.0, "top_p": 1.0}
    with pytest.raises(EndstateError, match="extra_body"):
        sampling_params(Sampling(extra_body={"k": 1}))


def test_a_loss_registered_from_outside_endstate_is_a_choice_the_update_runs(tmp_path):
    """As a user's module (or a plugin) registers one: `--policy-loss` takes its name, and the
    update calls it, with the batch's tensors, where it calls the built-in ones."""
    import torch

    from endstate.grpo.algorithm import POLICY_LOSSES, Surrogate
    from endstate.grpo.objective import micro_batch_loss

    def reinforce(logprobs, old_logprobs, advantages, mask, cfg):
        zero = torch.zeros_like(logprobs)
        return Surrogate(-logprobs * advantages, zero, zero, zero)  # (B, T): −A·log π

    POLICY_LOSSES.register("reinforce")(reinforce)
    try:
        result = CliRunner().invoke(cli, [*DRY, "--out", str(tmp_path / "r"), "--policy-loss", "reinforce"])
        assert result.exit_code == 0 and "policy_loss: reinforce" in result.output, result.output
        logp = torch.tensor([[-1.0, -2.0, -0.5]], requires_grad=True)
        mask, adv = torch.tensor([[1.0, 1.0, 0.0]]), torch.full((1, 3), 0.5)
        cfg = LossConfig(policy_loss="reinforce")
        objective, _ = micro_batch_loss(logp, logp.detach(), adv, mask, cfg, 2.0)
        objective.backward()
        # (0.5·1 + 0.5·2) / 2 and −A / 2 on the two completion tokens: dyadic, exact
        assert objective.item() == 0.75 and logp.grad.tolist() == [[-0.25, -0.25, 0.0]]
    finally:
        POLICY_LOSSES._entries.pop("reinforce")
