"""Which optional extra of pyproject.toml brings each library a command may load late, and the
usage error (exit 2) a command gives when that library is not installed: a light install
(`pip install 'endstate[stats]'`: grade, bucket, evalstats, and rollout/probe against a served
model) meets it only on the paths that need the heavy stacks."""

from __future__ import annotations

from endstate.core.errors import EndstateError

# top-level module -> the extra that installs it (tests/test_light_install.py holds it to pyproject)
EXTRA_OF = {
    "numpy": "stats", "scipy": "stats", "matplotlib": "stats",
    "torch": "local", "transformers": "local", "accelerate": "local", "gguf": "local",
    "sentencepiece": "local",
    "deepspeed": "train",
    "tensorboard": "dashboards", "wandb": "wandb", "mcp": "mcp", "vllm": "serve",
}
# a command whose whole job needs a larger extra, and the extras that one includes
COMMAND_EXTRA = {"grpo": ("train", {"local", "dashboards", "train"})}
# what to run before `pip install 'endstate[EXTRA]'`, where pip alone would pick the wrong build
FIRST = {
    "local": "pip install torch --index-url https://download.pytorch.org/whl/cpu (or your CUDA "
             "build), then ",
    "train": "install torch first, then DS_BUILD_OPS=0 pip install --no-build-isolation "
             "deepspeed, then ",
}


def missing_extra(error: ModuleNotFoundError, command: str) -> EndstateError | None:
    """The usage error naming the extra that brings the missing module, or None when the module is
    none of the extras' (a missing core dependency is a broken install: an internal error)."""
    module = (error.name or "").partition(".")[0]
    extra = EXTRA_OF.get(module)
    if extra is None:
        return None
    larger, included = COMMAND_EXTRA.get(command.split()[0], (extra, ()))
    if extra in included:
        extra = larger
    return EndstateError(f"{command} needs {module}, from the `{extra}` extra: "
                         f"{FIRST.get(extra, '')}pip install 'endstate[{extra}]'")
