# graphstore developer and user entry points. `make demo` and `make test` do all the set-up.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
# A CPU build of torch; users with GPUs install their own build first (`make install TORCH_SPEC=torch`).
TORCH_SPEC ?= torch==2.13.0
STAMP  := $(VENV)/.installed

.PHONY: install test proto proto-check lint bench demo demo-large clean

install: $(STAMP)
	@echo "graphstore is installed in $(VENV); 'source $(VENV)/bin/activate' puts graphstore and its python on PATH"

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first and explicitly: a bare `torch` requirement would pull a multi-GB CUDA build.
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q "$(TORCH_SPEC)"
	$(PIP) install -q -e ".[dev,test]"
	touch $(STAMP)

test: install proto-check
	$(PY) -m pytest -q tests

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
