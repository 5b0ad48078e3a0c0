"""SaslHandshake (17), SaslAuthenticate (36), DescribeUserScramCredentials (50) and
AlterUserScramCredentials (51).

Rules:
- the SASL exchange itself happens before any request reaches a handler (server/security/sasl.py); a
  SaslHandshake or SaslAuthenticate that reaches this module came on a PLAINTEXT or SSL connection or
  after authentication, and is answered ILLEGAL_SASL_STATE (Kafka's KafkaApis);
- DescribeUserScramCredentials: every user with credentials when `users` is null or empty; a named user without
  any is RESOURCE_NOT_FOUND, a user named twice DUPLICATE_RESOURCE; it needs DESCRIBE on the cluster;
- AlterUserScramCredentials (needs ALTER on the cluster), per user: an unknown mechanism is
  UNSUPPORTED_SASL_MECHANISM; iterations outside 4096..16384, an empty name or an empty salt or salted
  password UNACCEPTABLE_CREDENTIAL; a user with the same mechanism twice DUPLICATE_RESOURCE; deleting a
  credential that does not exist RESOURCE_NOT_FOUND; a user with any error changes nothing, the others'
  changes are stored durably (written to disk, or to ZooKeeper in a cluster, in a thread) before the answer;
  a store that fails (a full disk, ZooKeeper out of reach) answers each altered user UNKNOWN_SERVER_ERROR,
  as Kafka's per-user ApiError, and the connection stays;
- nothing here logs a salt, a salted password or a key.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from typing import Any

from kaflite.protocol.errors import ErrorCode
from kaflite.server.acl import rules
from kaflite.server.context import RequestContext, build
from kaflite.server.handlers import ApiTable
from kaflite.server.security.scram import (
    MAX_ITERATIONS,
    MECHANISMS,
    MIN_ITERATIONS,
    ScramCredential,
    credential_from_salted_password,
)
from kaflite.server.services import Slot

log = logging.getLogger("kaflite.server")
_ZERO = datetime.timedelta(0)
_BY_CODE = {code: name for name, (_, code) in MECHANISMS.items()}
_ALTER_LOCK: Slot[asyncio.Lock] = Slot("scram-alter-lock")  # one credential change at a time


async def handle_sasl_handshake(ctx: RequestContext, request: Any) -> Any:
    return build(ctx.response.SaslHandshakeResponse, error_code=ErrorCode.illegal_sasl_state, mechanisms=())


async def handle_sasl_authenticate(ctx: RequestContext, request: Any) -> Any:
    return build(ctx.response.SaslAuthenticateResponse, error_code=ErrorCode.illegal_sasl_state,
                 error_message="SaslAuthenticate request received after successful authentication or on "
                               "a listener without SASL", auth_bytes=b"")


async def handle_describe_scram(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    store = ctx.broker.scram_credentials
    if not ctx.allowed(rules.DESCRIBE_SCRAM):
        return build(R.DescribeUserScramCredentialsResponse, throttle_time=_ZERO,
                     error_code=ErrorCode.cluster_authorization_failed, error_message=None, results=())
    await asyncio.to_thread(store.refresh)  # a cluster's ZooKeeper: read there, as Kafka's ZooKeeper mode
    # null or empty: every user with a credential (Kafka's ZkAdminManager; librdkafka sends an empty list)
    names = sorted(store.users) if not request.users else [u.name for u in request.users]
    results = []
    for name in dict.fromkeys(names):
        if names.count(name) > 1:
            code, message, infos = ErrorCode.duplicate_resource, f"Cannot describe SCRAM credentials for the " \
                f"same user twice in a single request: {name}", ()
        elif not store.users.get(name):
            code, message, infos = ErrorCode.resource_not_found, \
                f"Attempt to describe a user credential that does not exist: {name}", ()
        else:
            code, message = ErrorCode.none, None
            infos = tuple(build(R.CredentialInfo, mechanism=MECHANISMS[m][1], iterations=c.iterations)
                          for m, c in sorted(store.users[name].items()))
        results.append(build(R.DescribeUserScramCredentialsResult, user=name, error_code=code,
                             error_message=message, credential_infos=infos))
    return build(R.DescribeUserScramCredentialsResponse, throttle_time=_ZERO, error_code=ErrorCode.none,
                 error_message=None, results=tuple(results))


def _check(users: dict[str, list[tuple[ErrorCode, str]]], name: str, code: ErrorCode, message: str) -> None:
    users.setdefault(name, []).append((code, message))


async def handle_alter_scram(ctx: RequestContext, request: Any) -> Any:
    R = ctx.response
    store = ctx.broker.scram_credentials
    names = list(dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions]))
    if not ctx.allowed(rules.ALTER_SCRAM):
        return build(R.AlterUserScramCredentialsResponse, throttle_time=_ZERO, results=tuple(
            build(R.AlterUserScramCredentialsResult, user=n, error_code=ErrorCode.cluster_authorization_failed,
                  error_message=None) for n in names))
    errors: dict[str, list[tuple[ErrorCode, str]]] = {}
    seen: set[tuple[str, str]] = set()
    deletions: set[tuple[str, str]] = set()
    upserts: dict[tuple[str, str], ScramCredential] = {}
    for d in request.deletions:
        mech = _BY_CODE.get(int(d.mechanism))
        if not d.name:
            _check(errors, d.name, ErrorCode.unacceptable_credential, "Username must not be empty")
        elif mech is None:
            _check(errors, d.name, ErrorCode.unsupported_sasl_mechanism, f"Unknown SCRAM mechanism {d.mechanism}")
        elif (d.name, mech) in seen:
            _check(errors, d.name, ErrorCode.duplicate_resource, "A user credential cannot be altered twice in "
                                                                 "the same request")
        elif store.get(d.name, mech) is None:
            seen.add((d.name, mech))
            _check(errors, d.name, ErrorCode.resource_not_found,
                   "Attempt to delete a user credential that does not exist")
        else:
            seen.add((d.name, mech))
            deletions.add((d.name, mech))
    for u in request.upsertions:
        mech = _BY_CODE.get(int(u.mechanism))
        if not u.name:
            _check(errors, u.name, ErrorCode.unacceptable_credential, "Username must not be empty")
        elif mech is None:
            _check(errors, u.name, ErrorCode.unsupported_sasl_mechanism, f"Unknown SCRAM mechanism {u.mechanism}")
        elif (u.name, mech) in seen:
            _check(errors, u.name, ErrorCode.duplicate_resource, "A user credential cannot be altered twice in "
                                                                 "the same request")
        elif not MIN_ITERATIONS <= int(u.iterations) <= MAX_ITERATIONS:
            seen.add((u.name, mech))
            _check(errors, u.name, ErrorCode.unacceptable_credential,
                   f"Iterations {u.iterations} not in the allowed range {MIN_ITERATIONS}..{MAX_ITERATIONS} "
                   f"for {mech}")
        elif not u.salt or not u.salted_password:
            # Kafka takes any non-empty salt (librdkafka's 0081 sends the 4 bytes "salt"); the login with a
            # short one works: server/security/sasl.py lifts scramp's 12-byte minimum
            seen.add((u.name, mech))
            _check(errors, u.name, ErrorCode.unacceptable_credential,
                   "The salt and the salted password must not be empty")
        else:
            seen.add((u.name, mech))
            upserts[(u.name, mech)] = credential_from_salted_password(mech, bytes(u.salt), bytes(u.salted_password),
                                                                      int(u.iterations))
    deletions = {k for k in deletions if k[0] not in errors}
    upserts = {k: v for k, v in upserts.items() if k[0] not in errors}
    if deletions or upserts:
        lock = ctx.broker.services.get_or_make(_ALTER_LOCK, asyncio.Lock)
        async with lock:  # one change at a time: each writes the whole table
            users = store.with_changes(upserts, deletions)
            try:
                await asyncio.to_thread(store.save, users)  # fsync, ZooKeeper: never on the event loop
            except Exception as e:  # noqa: BLE001 - a full disk, ZooKeeper out of reach: answered, not a crash
                log.warning("storing SCRAM credentials failed: %s", type(e).__name__)
                for name in {u for u, _ in [*upserts, *deletions]}:
                    _check(errors, name, ErrorCode.unknown_server_error,
                           f"The credentials could not be stored ({type(e).__name__}); describe them to see "
                           f"which changes were stored")
    results = []
    for name in names:
        errs = errors.get(name)
        code, message = errs[0] if errs else (ErrorCode.none, None)
        results.append(build(R.AlterUserScramCredentialsResult, user=name, error_code=code, error_message=message))
    return build(R.AlterUserScramCredentialsResponse, throttle_time=_ZERO, results=tuple(results))


APIS: ApiTable = {
    17: (0, 1, handle_sasl_handshake),
    36: (0, 2, handle_sasl_authenticate),
    50: (0, 0, handle_describe_scram),
    51: (0, 0, handle_alter_scram),
}
