# graphstore developer and user entry points. `make demo` and `make test` do all the set-up.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
# A CPU build of torch; users with GPUs install their own build first (`make install TORCH_SPEC=torch`).
TORCH_SPEC ?= torch==2.13.0
STAMP  := $(VENV)/.installed

.PHONY: install test compose-test proto proto-check lint bench demo demo-large clean

install: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first and explicitly: a bare `torch` requirement would pull a multi-GB CUDA build.
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q "$(TORCH_SPEC)"
	$(PIP) install -q -e ".[dev]"
	touch $(STAMP)

test: install proto-check
	$(PY) -m pytest -q tests

# docker-compose.yml under a real Docker engine with compose v2 (not part of `make test`: CI has no
# daemon; it skips when none answers or the base image is missing). Builds the image once, runs the
# stack, a second `up`, two trainers, a server killed and one restarted mid-training, `down -v`.
# Build settings from the environment: BASE_IMAGE, TORCH_INDEX_URL, TORCH_SPEC (see the Dockerfile).
compose-test: install
	GRAPHSTORE_COMPOSE_TEST=1 $(PY) -m pytest -q -s -rs tests/launcher/test_compose_docker.py
	-docker image ls graphstore

proto: install
	$(PY) -m graphstore.protos.codegen

proto-check: install
	$(PY) -m graphstore.protos.codegen --check

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: install
	$(PY) bench/run_all.py

demo: install
	$(PY) -m graphstore.launcher.demo

demo-large: install
	$(PY) -m graphstore.launcher.demo --large

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache demo_out
