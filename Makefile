# xiaoyarl: `make demo` trains PPO on CartPole; `make test` runs the fast tier of the tests,
# `make test-all` every test (README, "Development").
# Both create .venv on first use. torch is installed before the package so that an
# existing torch (for example a CUDA build you installed yourself) is kept as it is.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The torch to install when the venv has none. Pinned so a CPU machine gets a known build;
# override, e.g. `make test TORCH_SPEC=torch TORCH_INDEX=<your wheel index>`.
TORCH_SPEC ?= torch==2.13.0
TORCH_INDEX ?=
PIP := $(PY) -m pip install --disable-pip-version-check -q

.PHONY: demo hello test test-full test-all test-slow lint format bench docs docs-check clean venv

$(VENV)/.torch:
	$(PYTHON) -m venv $(VENV)
	@if $(PY) -c "import torch" 2>/dev/null; then \
		echo "keeping installed torch $$($(PY) -c 'import torch; print(torch.__version__)')"; \
	else \
		echo "installing $(TORCH_SPEC)"; \
		$(PIP) "$(TORCH_SPEC)" $(if $(TORCH_INDEX),--index-url $(TORCH_INDEX)); \
	fi
	touch $@

$(VENV)/.core: $(VENV)/.torch pyproject.toml
	$(PIP) -e .
	touch $@

$(VENV)/.test: $(VENV)/.core
	$(PIP) -e ".[test]"
	touch $@

$(VENV)/.docs: $(VENV)/.core
	$(PIP) -e ".[docs]"
	touch $@

$(VENV)/.bench: $(VENV)/.core
	$(PIP) -e ".[bench]"
	touch $@

venv: $(VENV)/.core

demo: $(VENV)/.core
	rm -rf runs/demo_ppo_cartpole
	$(VENV)/bin/xiaoyarl train ppo CartPole-v1 --seed 0 --cwd runs/demo_ppo_cartpole
	@echo "run folder: runs/demo_ppo_cartpole (learning_curve.png, recorder.csv, actor.pt)"

# the hello world: PPO learns CartPole-v1 on the library's core path (README, "Hello world")
hello: $(VENV)/.core
	$(PY) examples/hello_world.py

# The tests, in two tiers (markers in pyproject.toml), on every core (pytest-xdist), each test
# under a timeout (pytest-timeout). `make test COV=1` (and test-full, test-all) also measures the
# package's line coverage, in the processes the tests start too, and prints it; test-full adds
# to the fast tier's data, so `make test COV=1 && make test-full COV=1` prints the whole suite's.
FULL_TIER := learning or docs or bench or distributed or slow
WORKERS ?= auto
PYTEST = $(PY) -m pytest -q -n $(WORKERS) --dist worksteal
COV_ARGS = $(if $(COV),--cov --cov-report=term$(if $(filter full,$(1)), --cov-append,))

# the fast tier: units, references and short integration runs (a few minutes)
test: $(VENV)/.test
	$(PYTEST) $(call COV_ARGS,fast)

# the full tier's own tests: learning to targets, the docs site, benchmarks, torchrun, populations
# (the learning tests' extra seeds, marker `seeds`, run in test-all only)
test-full: $(VENV)/.test
	$(PYTEST) -m "($(FULL_TIER)) and not seeds" --durations=25 $(call COV_ARGS,full)

# every test: both tiers and the learning tests' extra seeds
test-all: $(VENV)/.test
	$(PYTEST) -m "" $(call COV_ARGS,fast)

# the learning tests alone (every algorithm trained to its target on several seeds)
test-slow: $(VENV)/.test
	$(PYTEST) -m learning

# The quick benchmarks behind BENCHMARKS.md (minutes); see benchmarks/ for the long ones.
bench: $(VENV)/.bench
	$(PY) benchmarks/env_throughput.py --envs CartPole-v1 Pendulum-v1 --threads 1
	$(PY) benchmarks/buffer_sampling.py --threads 1
	$(PY) benchmarks/sac_update.py --threads 1
	$(PY) benchmarks/ppo_backends.py --seeds 0 1 2 --threads 1
	$(PY) benchmarks/compare.py --quick

# The documentation site, from docs/ into site/ (git ignores it): --strict makes a warning, a
# broken link or a missing reference an error. Nothing is fetched from the network.
docs: $(VENV)/.docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

# every page of the built site in headless Chromium (Debian's chromium and chromium-driver):
# navigation, images, highlighting, links, no request off the machine; screenshots
docs-check: docs
	$(PY) docs/check_site.py site --screenshots site-screenshots

# ruff (lint + format) on the code, then mypy's type check of the package ([tool.mypy])
lint: $(VENV)/.test
	$(VENV)/bin/ruff check xiaoyarl tests benchmarks examples docs/*.py
	$(VENV)/bin/ruff format --check xiaoyarl tests benchmarks examples docs/*.py
	$(VENV)/bin/mypy xiaoyarl

format: $(VENV)/.test
	$(VENV)/bin/ruff format xiaoyarl tests benchmarks examples docs/*.py
	$(VENV)/bin/ruff check --fix xiaoyarl tests benchmarks examples docs/*.py

clean:
	rm -rf $(VENV) runs site site-screenshots .pytest_cache .ruff_cache .mypy_cache *.egg-info
