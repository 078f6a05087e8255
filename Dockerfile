# graphstore: partition servers and trainers in one image (every docker-compose.yml service runs it).
#
#   docker build -t graphstore .                                   # CPU-only torch (the default)
#   docker build -t graphstore:cu121 \
#       --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cu121 .   # a CUDA build of torch
#   docker build -t graphstore --build-arg BASE_IMAGE=registry.local/python:3.11-slim \
#       --build-arg TORCH_INDEX_URL=https://pypi.mirror.local/simple --build-arg TORCH_SPEC=torch==2.5.1+cpu .
#
# Build arguments: BASE_IMAGE, any Debian-like image with Python 3.11 (python:3.11-slim by default;
# point it at a mirror where Docker Hub cannot be reached); TORCH_INDEX_URL, the index torch comes from
# (the CPU wheel index by default; a bare `pip install torch` would pull a multi-GB CUDA build);
# TORCH_SPEC, the torch requirement.
#
# Two stages: `build` installs torch and the package into a virtual environment; the final image is
# the base image plus that environment and the files the services run (examples, configs, Cora), with
# no source tree, build files or pip caches.
ARG BASE_IMAGE=python:3.11-slim

FROM ${BASE_IMAGE} AS build
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_SPEC=torch
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PATH=/opt/graphstore/bin:$PATH
RUN python3 -m venv /opt/graphstore
# torch first, in its own layer: it is by far the largest dependency and changes least often.
RUN pip install --index-url "${TORCH_INDEX_URL}" "${TORCH_SPEC}"
# The torch wheel carries C++ test programs (about 90 MB) that nothing here runs.
RUN rm -rf /opt/graphstore/lib/python3*/site-packages/torch/test && \
    find /opt/graphstore/lib/python3*/site-packages/torch/bin -type f \( -name '*Test' -o -name 'test_*' \) -delete
# The package: pyproject.toml maps these folders into the `graphstore` namespace.
WORKDIR /src
COPY pyproject.toml README.md ./
COPY graphstore_pkg/ graphstore_pkg/
COPY protos/ protos/
COPY partition/ partition/
COPY server/ server/
COPY client/ client/
COPY launcher/ launcher/
COPY compat/ compat/
RUN pip install . && graphstore --help > /dev/null

FROM ${BASE_IMAGE}
ENV PATH=/opt/graphstore/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
COPY --from=build /opt/graphstore /opt/graphstore
WORKDIR /app
# What the services run: the examples, the configs and the Cora dataset.
COPY examples/ examples/
COPY configs/ configs/
COPY datasets/ datasets/

# The servers' default port range; the partitions live on a volume mounted at /data.
EXPOSE 50051 50052
VOLUME ["/data"]
CMD ["graphstore", "--help"]
