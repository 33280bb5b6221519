# A kbroker node: `docker build -t kbroker:0.1.0 .` then `docker run -p 9092:9092 kbroker:0.1.0`
# (README, "Run it in a container"). Settings come from KAFKA_* variables, a mounted
# /mnt/shared/config/server.properties and the image's defaults (kbroker/container/container_config.py).
#
# Build arguments: BASE_IMAGE, any image with python3 (3.11+) and its venv module. The default
# is the slim Python image of the Debian release and Python version the suite runs on.
# Optional BuildKit secret `pip-ca`: a CA bundle pip must trust (a TLS-inspecting proxy);
# without it pip uses its own.
ARG BASE_IMAGE=python:3.11-slim-bookworm

FROM ${BASE_IMAGE} AS install
# Dependencies first, from pyproject.toml alone, so a source change rebuilds only the last layer.
COPY pyproject.toml /src/pyproject.toml
RUN --mount=type=secret,id=pip-ca \
    set -eu; \
    if [ -s /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi; \
    python3 -m venv /opt/kbroker; \
    python3 -c 'import tomllib; print("\n".join(tomllib.load(open("/src/pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > /src/requirements.txt; \
    /opt/kbroker/bin/pip install --no-cache-dir --disable-pip-version-check \
        -r /src/requirements.txt "setuptools>=68" wheel
COPY README.md /src/README.md
COPY kbroker /src/kbroker
COPY protocol /src/protocol
COPY storage /src/storage
COPY replication /src/replication
COPY spark /src/spark
# The image keeps the installed package only: no pip, no build tools, no sources.
RUN set -eu; \
    /opt/kbroker/bin/pip install --no-cache-dir --disable-pip-version-check --no-deps --no-build-isolation /src; \
    /opt/kbroker/bin/pip uninstall --yes --disable-pip-version-check setuptools wheel pip

FROM ${BASE_IMAGE}
ARG KBROKER_VERSION=unknown
LABEL org.opencontainers.image.title="kbroker" \
      org.opencontainers.image.description="A Kafka-wire-compatible message broker written in Python" \
      org.opencontainers.image.version="${KBROKER_VERSION}" \
      org.opencontainers.image.licenses="Apache-2.0"
RUN set -eu; \
    useradd --system --user-group --uid 999 --home-dir /var/lib/kbroker --shell /usr/sbin/nologin kbroker; \
    mkdir -p /var/lib/kbroker /mnt/shared/config; \
    chown kbroker:kbroker /var/lib/kbroker
COPY --from=install /opt/kbroker /opt/kbroker
ENV PATH=/opt/kbroker/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1
USER kbroker
WORKDIR /var/lib/kbroker
VOLUME /var/lib/kbroker
EXPOSE 9092 9093 8080
# Ready for clients, not just listening: ApiVersions, then Metadata listing this node as a broker
# with a known controller (DescribeQuorum with a leader on a controller-only node).
HEALTHCHECK --interval=5s --timeout=5s --start-period=60s --retries=3 CMD ["kbroker", "healthcheck"]
STOPSIGNAL SIGTERM
ENTRYPOINT ["kbroker"]
CMD ["container"]
