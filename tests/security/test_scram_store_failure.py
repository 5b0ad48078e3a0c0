"""AlterUserScramCredentials when the credential store cannot store (a full disk on a single node, ZooKeeper
out of reach in a cluster): each altered user is answered UNKNOWN_SERVER_ERROR and the connection stays."""

from __future__ import annotations

import pytest
from kio.schema.alter_user_scram_credentials.v0.request import (
    AlterUserScramCredentialsRequest,
    ScramCredentialUpsertion,
)
from kio.schema.metadata.v9.request import MetadataRequest
from kio.static.primitive import i8, i32
from kwire import WireClient
from seckit import Secured

from kaflite.protocol.errors import ErrorCode


def test_a_failed_store_is_answered_per_user_and_keeps_the_connection(
        secured: Secured, monkeypatch: pytest.MonkeyPatch) -> None:
    store = secured.broker.server.broker.scram_credentials

    def fail(users: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(store, "save", fail)
    with WireClient(secured.addr("PLAINTEXT")) as w:
        r = w.request(AlterUserScramCredentialsRequest(deletions=(), upsertions=(
            ScramCredentialUpsertion(name="ivan", mechanism=i8(1), iterations=i32(4096), salt=b"0123456789abcdef",
                                     salted_password=b"x" * 32),
            ScramCredentialUpsertion(name="", mechanism=i8(1), iterations=i32(4096), salt=b"0123456789abcdef",
                                     salted_password=b"x" * 32))))
        codes = {x.user: x.error_code for x in r.results}
        assert codes == {"ivan": ErrorCode.unknown_server_error, "": ErrorCode.unacceptable_credential}
        assert store.get("ivan", "SCRAM-SHA-256") is None
        w.request(MetadataRequest(topics=(), include_cluster_authorized_operations=False,
                                  include_topic_authorized_operations=False))  # still served
