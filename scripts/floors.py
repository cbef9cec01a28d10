"""What `make compat` installs and runs: each `>=` floor of endstate's dependencies (the core,
plus the extras named as arguments) as an `==` pin, so the declared floors are the tested ones;
and, with --tests, the test files that exercise those packages, which compat runs on the floors.

    python scripts/floors.py local test > floors.txt
    python scripts/floors.py --tests local test      # the test files, one line

Every dependency names its tests in TESTS (tests/test_setup.py holds it to pyproject):
a test file listed here runs whole, with its slow tests.
"""

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODEL = ["tests/test_local_agent.py", "tests/test_tokenizer_check.py", "tests/test_sampling_params.py"]
TRAINING = ["tests/test_grpo.py", "tests/test_grpo_correction.py", "tests/test_logprobs_chunked.py"]
DEEPSPEED = ["tests/test_grpo_train.py", "tests/test_grpo_distributed.py",
             "tests/test_grpo_zero3_init.py", "tests/test_grpo_zero_gradients.py"]
# the distribution name -> the test files whose paths import it
TESTS = {
    "click": ["tests/test_cli.py", "tests/test_flag_ranges.py"],
    "orjson": ["tests/test_records.py"],
    "httptools": ["tests/test_http.py", "tests/test_rollout_endpoints.py"],
    "msgspec": ["tests/test_record_structs.py", "tests/test_fastcheck.py"],
    "jsonschema": ["tests/test_schemas.py", "tests/test_fastcheck.py"],
    "tqdm": ["tests/test_rollout_endpoints.py"],  # every summary line goes through tqdm.write
    "sqlite-utils": ["tests/test_state.py"],
    "rich": ["tests/test_show.py"],
    "numpy": ["tests/test_bucket.py", "tests/test_evalstats.py", "tests/test_calibration.py"],
    "scipy": ["tests/test_bucket.py", "tests/test_evalstats.py", "tests/test_calibration.py"],
    "matplotlib": ["tests/test_figures.py", "tests/test_study.py"],
    "markdown-it-py": ["tests/test_study.py"],  # the Markdown report rendered as GitHub would
    # the local model's tests run on the embedded model make setup converted (Makefile: compat)
    "torch": MODEL + TRAINING, "transformers": MODEL + TRAINING,
    "accelerate": MODEL, "gguf": MODEL, "sentencepiece": MODEL,
    "deepspeed": DEEPSPEED,
    "tensorboard": ["tests/test_grpo_study.py"], "wandb": ["tests/test_grpo_study.py"],
    "mcp": ["tests/test_mcp_server.py", "tests/test_gateway.py"],
    "openenv-core": ["tests/test_openenv.py"],
    "jmespath": ["tests/test_trl_grpo.py"],  # trl's tool-call parser below transformers 5.13
    "pytest": [], "pytest-xdist": [],  # the run itself
    "hypothesis": ["tests/test_interpret.py", "tests/test_generated_code.py"],
}


def requirements(extras: list[str]) -> list[str]:
    """The core's requirements and those of `extras` (one level: `endstate[...]` lines skipped)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = list(project["dependencies"])
    for extra in extras:
        out += [r for r in project["optional-dependencies"][extra] if not r.startswith("endstate[")]
    return out


def name(requirement: str) -> str:
    return re.match(r"[A-Za-z0-9_.\-]+", requirement).group(0).lower()


def main(argv: list[str]) -> None:
    if argv[:1] == ["--tests"]:
        files = {f for r in requirements(argv[1:]) for f in TESTS[name(r)]}
        print(" ".join(sorted(files)))
        return
    for requirement in requirements(argv):
        if m := re.fullmatch(r"([A-Za-z0-9_.\-]+)>=([^,;\s]+)", requirement):
            print(f"{m.group(1)}=={m.group(2)}")


if __name__ == "__main__":
    main(sys.argv[1:])
