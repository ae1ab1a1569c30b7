# syntax=docker/dockerfile:1
# secure-sandbox MCP server: the server runs as the unprivileged `mcpuser` in python:3.12-slim.
#   docker build -t mcp-secure-sandbox .
#   docker run -i --rm -v "$(pwd)/sandbox_workspace:/sandbox/workspace" mcp-secure-sandbox
# `nox -s smoke` reproduces this image's install and start-up on a machine without an engine.

ARG PYTHON_IMAGE=python:3.12-slim
# PROFILE=datascience builds the data-science image: the server's [datascience] extra (numpy,
# pandas, matplotlib at the tested versions) is installed and SANDBOX_PROFILE=datascience set.
#   docker build --build-arg PROFILE=datascience -t mcp-secure-sandbox:datascience .
ARG PROFILE=none

# ---- build stage: wheels of the five packages from this checkout, installed into a venv --------
FROM ${PYTHON_IMAGE} AS build
ARG PROFILE
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY deploy/image-packages.txt deploy/image-packages.txt
COPY packages/ packages/
# Build one wheel per package listed in deploy/image-packages.txt (comments and blanks skipped),
# then install exactly those wheels and their third-party dependencies into /opt/venv. The server
# requires `secure-pysandbox` (built from packages/pysandbox), so pip takes it from /wheels; the
# unrelated PyPI project named `pysandbox` is never asked for.
RUN python -m venv /opt/venv \
 && grep -v -e '^#' -e '^$' deploy/image-packages.txt \
    | sed 's|^|packages/|' \
    | xargs /opt/venv/bin/pip wheel --no-deps --wheel-dir /wheels \
 && extra="" && if [ "${PROFILE}" = "datascience" ]; then extra="[datascience]"; fi \
 && server_wheel="$(ls /wheels/mcp_secure_sandbox-*.whl)" \
 && /opt/venv/bin/pip install /wheels/*.whl "${server_wheel}${extra}" \
 && /opt/venv/bin/mcp-secure-sandbox --help > /dev/null

# ---- final stage: the interpreter, the venv, nothing else -------------------------------------
FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
ARG PROFILE
LABEL org.opencontainers.image.title="mcp-secure-sandbox" \
      org.opencontainers.image.description="MCP server that runs untrusted Python in a layered sandbox, validates JSON and CSV, and snapshots its workspace" \
      org.opencontainers.image.source="https://github.com/secure-sandbox/secure-sandbox" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT"

# A fixed uid/gid so bind-mounted directories can be prepared on the host (chown 10001:10001).
RUN groupadd --system --gid 10001 mcpuser \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin mcpuser \
 && mkdir -p /sandbox/workspace /sandbox/snapshots \
 && chown 10001:10001 /sandbox/workspace /sandbox/snapshots \
 && chmod 0750 /sandbox/workspace /sandbox/snapshots

COPY --from=build /opt/venv /opt/venv

ENV PATH="/opt/venv/bin:${PATH}" \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HOME=/tmp \
    SANDBOX_WORKSPACE=/sandbox/workspace \
    SANDBOX_SNAPSHOTS=/sandbox/snapshots \
    SANDBOX_PROFILE=${PROFILE}

VOLUME ["/sandbox/workspace", "/sandbox/snapshots"]
WORKDIR /sandbox
# The issue and the seed name the user; it is created above with the fixed uid 10001, so a
# runtime that needs a numeric user (Kubernetes runAsNonRoot) can use --user 10001:10001.
# hadolint ignore=DL3066
USER mcpuser
ENTRYPOINT ["mcp-secure-sandbox"]
