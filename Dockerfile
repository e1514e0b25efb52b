# The gateway image (also runs the Docker socket proxy of the compose stack). The base image is a build
# argument: python:3.12-slim by default, or a base made locally where no registry is reachable.
# scripts/build-images puts wheels for the base's Python into wheels/ so the build fetches nothing;
# with wheels/ empty, pip installs from the package index.
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

COPY wheels/ /tmp/wheels/
# The sources, for the install without wheels; the installed package is what runs.
COPY pyproject.toml README.md /src/
COPY gateway /src/gateway
COPY connectors /src/connectors
COPY sandbox /src/sandbox
COPY runtime /src/runtime
RUN set -eu; \
    if ls /tmp/wheels/*.whl >/dev/null 2>&1; then \
        python3 "$(ls /tmp/wheels/pip-*.whl)/pip" install --no-cache-dir --no-index --find-links /tmp/wheels \
            --break-system-packages --disable-pip-version-check harmony-gateway; \
    else python3 -m pip install --no-cache-dir --break-system-packages /src; fi; \
    rm -rf /tmp/wheels /src; \
    mkdir -p /data /files && chown 1000:1000 /data /files

COPY configs /app/configs
ENV HOME=/data PYTHONUNBUFFERED=1
WORKDIR /app
USER 1000:1000
EXPOSE 8080
CMD ["python3", "-m", "gateway", "serve", "--config", "/app/configs/compose.yaml"]
