"""Fixtures for the security tests: development certificates (one set per session), and one broker per
module serving PLAINTEXT, SSL (client certificate requested), MTLS (an SSL listener whose certificate is
required), SASL_PLAINTEXT and SASL_SSL at once, with PLAIN users from JAAS and SCRAM users created over
the wire (AlterUserScramCredentials)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parent.parent / "server"))  # kwire

from seckit import SCRAM_USERS, Certs, Secured, create_scram_users, make_certs, secured_overrides  # noqa: E402

from kaflite.server.embedded import EmbeddedBroker  # noqa: E402


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def secured(certs: Certs, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with EmbeddedBroker(data_dir=tmp_path_factory.mktemp("secured"), overrides=secured_overrides(certs)) as b:
        ports = {li.name: li.port for li in b.server.bound}
        create_scram_users(f"127.0.0.1:{ports['PLAINTEXT']}", SCRAM_USERS)
        yield Secured(b, ports)
