"""Session fixtures of the container tests: the engine (each test skips, with the reason, where
no engine can run a container), the images built from this working tree, and a Docker API
socket for testcontainers.

The kbroker image and the Kafka image are built side by side (the Kafka one only once per
machine: the engine keeps it); testcontainers gets the socket through its client arguments, not
through DOCKER_HOST, so compat's engine detection elsewhere in the session is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from compat.container_engine import Engine, docker_api, find_engine
from compat.container_images import Built, build_kafka_image, build_kbroker_image, ensure_base_image


@pytest.fixture(scope="session")
def engine() -> Engine:
    found, why = find_engine()
    if found is None:
        pytest.skip(f"no container engine can run a container here: {why}")
    ensure_base_image(found)
    return found


@pytest.fixture(scope="session")
def _image_builds(engine: Engine) -> Iterator[dict[str, Future[Built]]]:
    with ThreadPoolExecutor(2, thread_name_prefix="image-build") as pool:
        yield {"kbroker": pool.submit(build_kbroker_image, engine), "kafka": pool.submit(build_kafka_image, engine)}


@pytest.fixture(scope="session")
def kbroker_image(_image_builds: dict[str, Future[Built]]) -> str:
    built = _image_builds["kbroker"].result()
    print(f"\n{built.image} built in {built.seconds:.1f} s")
    return built.image


@pytest.fixture(scope="session")
def kafka_image(_image_builds: dict[str, Future[Built]]) -> str:
    built = _image_builds["kafka"].result()
    print(f"\n{built.image} built in {built.seconds:.1f} s (0: the engine had it)")
    return built.image


@pytest.fixture(scope="session")
def docker_client_kw(engine: Engine) -> Iterator[dict[str, Any]]:
    """Arguments for testcontainers' Docker client, pointing at the engine's API socket."""
    from testcontainers.core.config import ConnectionMode
    from testcontainers.core.config import testcontainers_config as config

    saved = config.ryuk_disabled, config.connection_mode_override
    # Ryuk's image cannot be pulled here, and the containers are removed by the tests anyway; this
    # machine's own /.dockerenv would make testcontainers look for a bridge network instead of
    # the published ports on this host.
    config.ryuk_disabled, config.connection_mode_override = True, ConnectionMode.docker_host
    try:
        with docker_api(engine) as address:
            yield {"environment": {"DOCKER_HOST": address}}
    finally:
        config.ryuk_disabled, config.connection_mode_override = saved
