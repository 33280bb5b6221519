"""``kbroker serve --add-scram``: Kafka's ``kafka-storage format --add-scram`` syntax and errors."""

from __future__ import annotations

import base64

import pytest
from kbroker.replication.quorum.metadata_image import MetadataImage

from kbroker.config.kafka_config import ConfigError
from kbroker.security.sasl.scram import ScramServer, salted_password
from kbroker.security.sasl.scram_seeding import parse_add_scram
from kbroker.security.scram_credentials import ScramCredentials
from tests.kbroker.security.sasl.test_scram import RFC_CLIENT_FINAL, RFC_CLIENT_FIRST, RFC_SALT, RFC_SERVER_FINAL
from tests.kbroker.test_cli import run_cli


def test_a_password_makes_a_credential_with_a_random_salt_and_4096_iterations() -> None:
    record = parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]")
    assert (record.name, record.mechanism, record.iterations) == ("alice", 1, 4096)
    assert len(bytes.fromhex(record.salt)) == 32
    assert b"alice-secret".hex() not in (record.stored_key, record.server_key)
    assert parse_add_scram("SCRAM-SHA-256=[name=alice,password=alice-secret]").salt != record.salt


def test_salt_and_iterations_given_reproduce_rfc_7677() -> None:
    salt = base64.b64encode(RFC_SALT).decode()
    by_password = parse_add_scram(f'SCRAM-SHA-256=[name=user,salt="{salt}",iterations=4096,password=pencil]')
    salted = base64.b64encode(salted_password("SCRAM-SHA-256", "pencil", RFC_SALT, 4096)).decode()
    by_salted = parse_add_scram(f"SCRAM-SHA-256=[name=user,salt={salt},saltedpassword={salted}]")
    assert by_password == by_salted
    image = MetadataImage()
    image.apply(0, by_password)
    server = ScramServer("SCRAM-SHA-256", ScramCredentials(lambda: image).lookup,
                         nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0")
    server.evaluate_response(RFC_CLIENT_FIRST)
    assert server.evaluate_response(RFC_CLIENT_FINAL) == RFC_SERVER_FINAL


@pytest.mark.parametrize(("argument", "message"), [
    ("SCRAM-SHA-256", "Failed to find equals sign in SCRAM argument"),
    ("SCRAM-SHA-1=[name=a,password=b]", "The add-scram mechanism SCRAM-SHA-1 is not supported."),
    ("SCRAM-SHA-256=name=a,password=b]", "Expected configuration string to start with ["),
    ("SCRAM-SHA-256=[name=a,password=b", "Expected configuration string to end with ]"),
    ("SCRAM-SHA-256=[password=b]", "You must supply 'name' to add-scram"),
    ("SCRAM-SHA-256=[name=a]", "You must supply one of 'password' or 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,saltedpassword=AAAA]", "You must supply 'salt' with 'saltedpassword' to add-scram"),
    ("SCRAM-SHA-256=[name=a,password=b,colour=red]", "Unknown SCRAM configurations: colour"),
    ("SCRAM-SHA-512=[name=a,password=b,iterations=4095]",
     "The 'iterations' value must be >= 4096 for add-scram using SCRAM-SHA-512"),
    ("SCRAM-SHA-512=[name=a,password=b,iterations=16385]",
     "The 'iterations' value must be <= 16384 for add-scram using SCRAM-SHA-512"),
    ("SCRAM-SHA-256=[name=a,password=b,iterations=many]", "Failed to parse iterations count: many"),
])
def test_kafkas_format_errors_never_repeating_the_password(argument: str, message: str) -> None:
    with pytest.raises(ConfigError) as failure:
        parse_add_scram(argument)
    assert str(failure.value) == f"--add-scram: {message}"
    assert "password=b" not in str(failure.value)


def test_a_bad_add_scram_exits_2_without_starting(tmp_path) -> None:
    result = run_cli("serve", "--override", "log.dirs=./d", "--add-scram",
                     "SCRAM-SHA-256=[name=alice,password=alice-secret,iterations=100]", cwd=str(tmp_path))
    assert result.returncode == 2
    assert ("--add-scram: The 'iterations' value must be >= 4096 for add-scram using SCRAM-SHA-256"
            in result.stderr)
    assert "alice-secret" not in result.stderr
    assert not (tmp_path / "d").exists()
