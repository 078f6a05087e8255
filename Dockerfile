# graphstore: partition servers and trainers in one image.
#
#   docker build -t graphstore .                                   # CPU-only torch (default)
#   docker build -t graphstore:cu121 \
#       --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu121 .   # a CUDA build of torch
#
# docker-compose.yml runs the demo cluster from this image: `docker compose up`.
FROM python:3.11-slim

# Where torch comes from, and which version: the CPU wheel index by default (a bare `pip install torch`
# would pull a multi-GB CUDA build); point TORCH_INDEX_URL at a CUDA index (e.g. .../whl/cu121) for GPUs.
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_SPEC=torch

ENV PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /app

# torch first, in its own layer: it is by far the largest dependency and changes least often.
RUN pip install --index-url "${TORCH_INDEX_URL}" "${TORCH_SPEC}"

# The package: pyproject.toml maps these folders into the `graphstore` namespace.
COPY pyproject.toml README.md ./
COPY graphstore_pkg/ graphstore_pkg/
COPY protos/ protos/
COPY partition/ partition/
COPY server/ server/
COPY client/ client/
COPY launcher/ launcher/
COPY compat/ compat/
RUN pip install . && graphstore --help > /dev/null

# What the services run: the examples, the configs and the Cora dataset.
COPY examples/ examples/
COPY configs/ configs/
COPY datasets/ datasets/

# The servers' default port range; the partitions live on a volume mounted at /data.
EXPOSE 50051 50052
VOLUME ["/data"]
CMD ["graphstore", "--help"]
