"""GRPO with TRL's GRPOTrainer on endstate tasks, through the OpenEnv environment that
`rollout serve-openenv` serves: the environment owns the episode (a fresh sandbox per rollout, the
simulated user, max_turns) and the reward (endstate's grade of the database's end state).

How it maps onto TRL 1.16's environment mode (`environment_factory`):
  - one environment instance per rollout, each an OpenEnv session (EndstateEnvClient) of its own;
  - `reset(task_id=...)` is called with the dataset row: it resets the served environment to that
    task and returns the user's opening, which TRL appends to the prompt (system: the domain policy);
  - every tool of the domain is a method TRL lists to the model (name, typed arguments and their
    descriptions, from the schemas the reset listed), plus `send_message_to_user`: the model talks
    to the simulated user through it, as in `rollout serve-mcp`, and its result is the reply;
  - `get_reward()` ends the episode if the model stopped before the user did (a turn with nothing
    more to say: agent_done) and returns the final observation's reward: 1 or 0, or None for a
    system error, which TRL leaves out of the group (NaN) instead of scoring it 0.

Run (the server in one shell, training in another; the model needs a tool-calling chat template,
which --chat-template qwen2.5 gives the embedded SmolLM2):
    rollout serve-openenv tasks/bench/retail.jsonl --skip-invalid --save-episodes served.jsonl
    python examples/trl_grpo.py --env-url http://127.0.0.1:8000 --tasks tasks/bench/retail.jsonl \
        --steps 2 --out runs/trl --rewards-out runs/trl/rewards.jsonl
    grade served.jsonl | jq -c '{episode_id, reward}'     # the rewards TRL trained on
Needs: pip install 'endstate[trl]' (TRL 1.16, transformers >= 5.2, openenv-core).
"""

from __future__ import annotations

import argparse
import inspect
import json
import sys
from pathlib import Path
from typing import Any, ClassVar

from endstate.api import EndstateAction, EndstateEnvClient

JSON_TYPES = {"string": str, "integer": int, "number": float, "boolean": bool, "array": list,
              "object": dict}
USER_TOOL = "send_message_to_user"


def tool_method(spec: dict[str, Any]):
    """A method TRL can list as a tool: the signature, type hints and Google-style docstring that
    transformers reads into a JSON schema, built from the tool's own schema; calling it is a step."""
    params = spec["parameters"].get("properties", {})
    required = set(spec["parameters"].get("required", []))

    def call(self, **arguments):
        return self._step(EndstateAction(tool=spec["name"], arguments=arguments))

    hints = {n: JSON_TYPES.get(p.get("type"), str) for n, p in params.items()}
    call.__signature__ = inspect.Signature(
        [inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        + [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, annotation=hints[n],
                             default=inspect.Parameter.empty if n in required else None)
           for n in params], return_annotation=str)
    call.__annotations__ = {**hints, "return": str}
    described = [f"    {n}: {(p.get('description') or n).strip().splitlines()[0]}"
                 + (f" (one of {', '.join(map(str, p['enum']))})" if "enum" in p else "")
                 for n, p in params.items()]
    call.__doc__ = ((spec.get("description") or spec["name"]).strip().splitlines()[0]
                    + ("\n\nArgs:\n" + "\n".join(described) if described else "")
                    + "\n\nReturns:\n    The tool's result.")
    call.__name__ = call.__qualname__ = spec["name"]
    return call


class EndstateToolEnv:
    """One rollout's OpenEnv session. Subclassed per served domain (environment_class), which
    adds one method per tool."""

    env_url = "http://127.0.0.1:8000"
    seen: ClassVar[list[dict[str, Any]]] = []  # what get_reward returned, per episode

    def __init__(self):
        self.client = EndstateEnvClient(base_url=self.env_url, message_timeout_s=300).sync()
        self.client.connect()
        self.last = None

    def reset(self, task_id: str | None = None, **row) -> str:
        self.last = self.client.reset(task_id=task_id)
        return self.last.observation.content

    def _step(self, action: EndstateAction) -> str:
        self.last = self.client.step(action)
        return self.last.observation.content

    def send_message_to_user(self, message: str) -> str:
        """Send a message to the customer; their reply is returned. The only way to talk to them.

        Args:
            message: What you say to the customer.

        Returns:
            The customer's reply.
        """
        return self._step(EndstateAction(message=message))

    def get_reward(self) -> float | None:
        if not self.last.done:
            self.last = self.client.step(EndstateAction())  # nothing more to say: agent_done
        seen = {"episode_id": self.last.observation.episode_id, "reward": self.last.reward}
        type(self).seen.append(seen)
        return self.last.reward


def environment_class(env_url: str, task_id: str) -> tuple[type, str]:
    """An EndstateToolEnv subclass with the tools a reset of `task_id` lists, and the policy that
    opens every prompt (the tasks of one training file share a domain)."""
    with EndstateEnvClient(base_url=env_url).sync() as probe:
        first = probe.reset(task_id=task_id).observation
    if first.kind == "error":
        sys.exit(f"trl_grpo: {first.content}")
    methods = {s["function"]["name"]: tool_method(s["function"]) for s in first.tools}
    return type(f"Endstate_{first.domain}", (EndstateToolEnv,),
                {**methods, "env_url": env_url, "seen": []}), first.system


def dataset_of(task_file: str, policy: str, limit: int | None):
    from datasets import Dataset

    tasks = [json.loads(line) for line in Path(task_file).read_text().splitlines() if line.strip()]
    rows = [{"prompt": [{"role": "system", "content": policy}, {"role": "user", "content": ""}],
             "task_id": t["id"]} for t in tasks[:limit]]
    return Dataset.from_list(rows)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env-url", default="http://127.0.0.1:8000", help="rollout serve-openenv's URL")
    p.add_argument("--tasks", required=True, help="the task file the server serves (one domain)")
    p.add_argument("--limit", type=int, help="train on the first N tasks only")
    p.add_argument("--model", help="a local model folder (default: endstate's embedded SmolLM2)")
    p.add_argument("--chat-template", choices=["qwen2.5", "model"], default="qwen2.5",
                   help="qwen2.5: TRL's Qwen2.5 template (hermes <tool_call>), for models whose "
                        "own template cannot render tools, as SmolLM2's cannot")
    p.add_argument("--steps", type=int, default=2)
    p.add_argument("--generations", type=int, default=2, help="rollouts per task (GRPO group)")
    p.add_argument("--max-completion-length", type=int, default=96)
    p.add_argument("--max-tool-calls", type=int, default=3, help="tool-calling turns per rollout")
    p.add_argument("--lr", type=float, default=1e-6)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default="runs/trl", help="the trainer's output folder")
    p.add_argument("--rewards-out", help="write each rollout's (episode_id, reward) here (JSONL)")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Train; return the trainer's log history (one dict per logged step)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer
    from trl.chat_template_utils import qwen2_5_chat_template

    args = parse(argv)
    if args.model is None:
        from endstate.core.agent.local_model import embedded_model_dir

        args.model = str(embedded_model_dir())
    first_task = json.loads(Path(args.tasks).read_text().splitlines()[0])["id"]
    env_class, policy = environment_class(args.env_url, first_task)
    tokenizer = AutoTokenizer.from_pretrained(args.model, padding_side="left")
    if args.chat_template == "qwen2.5":
        tokenizer.chat_template = qwen2_5_chat_template
    config = GRPOConfig(
        output_dir=args.out, max_steps=args.steps, learning_rate=args.lr, seed=args.seed,
        per_device_train_batch_size=args.generations, num_generations=args.generations,
        gradient_accumulation_steps=1, max_completion_length=args.max_completion_length,
        max_tool_calling_iterations=args.max_tool_calls, logging_steps=1, save_strategy="no",
        report_to="none", use_cpu=True, bf16=False, temperature=1.0, beta=0.0)
    trainer = GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(args.model), args=config,
        train_dataset=dataset_of(args.tasks, policy, args.limit), processing_class=tokenizer,
        environment_factory=env_class)
    trainer.train()
    if args.rewards_out:
        with open(args.rewards_out, "w") as fh:
            fh.writelines(json.dumps(s) + "\n" for s in env_class.seen)
    for entry in trainer.state.log_history:
        print(json.dumps(entry), file=sys.stderr)
    return trainer.state.log_history


if __name__ == "__main__":
    main()
