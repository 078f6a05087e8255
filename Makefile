# graphstore developer and user entry points. `make demo` and `make test` do all the set-up.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(VENV)/bin/pip
# A CPU build of torch. TORCH_SPEC goes to pip as is, so a CUDA build can come from PyTorch's index:
# `make install TORCH_SPEC="torch --index-url https://download.pytorch.org/whl/cu121"` (on a fresh
# venv: a torch already in $(VENV) is kept). The oldest torch supported is pyproject.toml's floor.
TORCH_SPEC ?= torch==2.13.0
STAMP  := $(VENV)/.installed
# `make bench-dgl`: DGL's last CPU release installable from PyPI here (cp311) and the torch it was
# built for, in a venv of their own (torch 2.2.1 from PyPI brings its CUDA libraries: ~5 GB).
DGL_VENV    ?= .venv-dgl
DGL_PY      := $(DGL_VENV)/bin/python
DGL_STAMP   := $(DGL_VENV)/.installed
DGL_PACKAGES ?= dgl==2.1.0 torch==2.2.1 torchdata==0.7.1 "numpy<2" "pandas<2.3" pydantic pyyaml
BENCH_DGL_ARGS ?= --runs 7
# `make bench-dgl-publish`: the README's table (docs/bench-dgl.md); BENCH_DGL_EXTRA comes after these flags and
# overrides them (a smoke run: BENCH_DGL_EXTRA="--runs 1 --quick --load-threshold 0").
BENCH_DGL_PUBLISH_ARGS := --headline --runs 5 --cpu-list 0-1 --train-frac 0.55
BENCH_DGL_EXTRA ?=

# `make gpu-check`: the GPU machine's Python (3.12, with CUDA torch, numpy, pytest) lacks these; `make
# gpu-wheels` fetches them here for it, in the versions this venv runs (the checked-in stubs need them).
GPU_WHEELS      ?= .whl
GPU_PY_VERSION  ?= 3.12
GPU_PLATFORMS   := manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_24_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64
GPU_WHEEL_NAMES := grpcio protobuf grpcio-health-checking pymetis cmeel cmeel-metis cmeel-gklib

.PHONY: install test compose-test proto proto-check lint dgl-coverage bench bench-dgl bench-dgl-publish pyg-sparse demo demo-large clean gpu-wheels gpu-check gpu-check-dry

install: $(STAMP)
	@echo "graphstore is installed in $(VENV); 'source $(VENV)/bin/activate' puts graphstore and its python on PATH"

$(STAMP): pyproject.toml deploy/system-packages.sh
	# MPI and the ParMETIS-API library for the parallel partitioner (Debian's packages; see the script).
	bash deploy/system-packages.sh
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# torch first and explicitly: a bare `torch` requirement would pull a multi-GB CUDA build.
	$(PY) -c "import torch" 2>/dev/null || $(PIP) install -q $(TORCH_SPEC)
	$(PIP) install -q -e ".[dev,test,pyg,mpi]"
	touch $(STAMP)

# The suite on TEST_WORKERS processes (pytest-xdist; work stealing keeps both cores busy to the end).
# Every test binds free ports and writes under its own tmp_path, so they run side by side;
# TEST_WORKERS=0 runs them one after another in this process.
TEST_WORKERS ?= 2
test: install proto-check
	$(PY) -m pytest -q -n $(TEST_WORKERS) --dist worksteal tests

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

# docs/compat.md's coverage tables, regenerated from the compat namespace (tests/compat/test_compat_coverage.py
# fails when they are stale).
dgl-coverage: install
	$(PY) tools/dgl_coverage.py --write

bench: install
	$(PY) bench/run_all.py

# graphstore vs DGL's dgl.distributed, side by side (docs/bench-dgl.md); never part of `make test`.
bench-dgl: install $(DGL_STAMP)
	$(PY) bench/dgl/side_by_side.py --dgl-python $(DGL_PY) $(BENCH_DGL_ARGS)

# The headline rows only, 5 runs pinned to cores 0-1, the 200k-node graph with a 55% training set (about
# 54 batches per trainer): at most 25 minutes on an idle machine. Run it before builds and tests load it.
bench-dgl-publish: install $(DGL_STAMP)
	$(PY) bench/dgl/side_by_side.py --dgl-python $(DGL_PY) $(BENCH_DGL_PUBLISH_ARGS) $(BENCH_DGL_EXTRA)

# Opt-in: torch-scatter and torch-sparse, from source (PyPI has no wheels for this torch; pyg-lib has no
# release there), so that PyG's own in-memory NeighborLoader runs beside graphstore.compat.pyg
# (bench/pyg_loader.py's pyg_in_memory, and the test comparing the batches with it). C++ builds against
# the venv's torch: torch-sparse alone took 50 minutes here with MAX_JOBS=1 on 2 busy cores.
pyg-sparse: install
	$(PIP) install -q scipy
	MAX_JOBS=$${MAX_JOBS:-2} $(PIP) install --no-build-isolation --no-deps torch-scatter torch-sparse==0.6.18
	$(PY) -c "import torch_geometric.typing as t; assert t.WITH_TORCH_SPARSE, 'torch_sparse did not load'"

$(DGL_STAMP):
	test -x $(DGL_PY) || $(PYTHON) -m venv $(DGL_VENV)
	$(DGL_PY) -m pip install -q --upgrade pip
	$(DGL_PY) -m pip install -q $(DGL_PACKAGES)
	DGLBACKEND=pytorch $(DGL_PY) -c "import dgl.distributed, torch; print('dgl', dgl.__version__, 'torch', torch.__version__)"
	touch $(DGL_STAMP)

# Wheels for the GPU machine (no network there): run here before a device run; .whl/ travels with the tree.
gpu-wheels: install
	rm -rf $(GPU_WHEELS) && mkdir -p $(GPU_WHEELS)
	$(PY) -m pip download -q --no-deps --only-binary=:all: --python-version $(GPU_PY_VERSION) --implementation cp \
		$(foreach p,$(GPU_PLATFORMS),--platform $(p)) -d $(GPU_WHEELS) \
		$$($(PY) -m pip freeze | grep -iE '^($(shell echo $(GPU_WHEEL_NAMES) | tr ' ' '|'))==')
	ls $(GPU_WHEELS)

# On the GPU machine (its own python3, no .venv): the wheels and the project, then every GPU check, packed
# into $$OUT/gpu-check.tar.gz within 9 minutes (bench/gpu_check.py).
gpu-check:
	$(PYTHON) -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $(GPU_WHEELS)/*.whl
	$(PYTHON) -m pip install -q --no-index --no-deps --no-build-isolation -e .
	$(PYTHON) bench/gpu_check.py --out "$${OUT:-gpu-check-out}" $(GPU_CHECK_ARGS)

# The same steps on the CPU with small graphs: tests the script itself (tests/bench/test_gpu_check.py).
gpu-check-dry: install
	$(PY) bench/gpu_check.py --dry --workdir /tmp/gpu-check-dry --out gpu-check-dry-out

demo: install
	$(PY) -m graphstore.launcher.demo

demo-large: install
	$(PY) -m graphstore.launcher.demo --large

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache demo_out
