"""Authorizer keys (Kafka's AclAuthorizer configs) and the client quotas' windows (Kafka's quota.window.*,
controller.quota.window.*).

This subsystem owns these keys; `kaflite.server.config.broker_config` assembles every subsystem's table
into `BROKER_CONFIGS`. docs/security.md describes each key.
"""

from __future__ import annotations

from kaflite.server.config.definitions import AtLeast, ConfigKey, OneOf, _k

__all__ = ["ACL_AUTHORIZERS", "KEYS", "NOT_READ"]

# Kafka's two spellings of its ZooKeeper-mode ACL authorizer (SimpleAclAuthorizer is the pre-2.4 name)
ACL_AUTHORIZERS = ("kafka.security.authorizer.AclAuthorizer", "kafka.security.auth.SimpleAclAuthorizer")

KEYS: list[ConfigKey] = [
    _k("authorizer.class.name", "string", "",
       "The authorizer: empty allows every request (the ACL APIs answer SECURITY_DISABLED); "
       "kafka.security.authorizer.AclAuthorizer (or its old name kafka.security.auth.SimpleAclAuthorizer) "
       "decides by ACLs, stored in the data directory on a single node and in ZooKeeper in a cluster.",
       OneOf(("",) + ACL_AUTHORIZERS)),
    _k("super.users", "string", "",
       "Principals allowed everything, separated by semicolons (User:admin;User:broker)."),
    _k("allow.everyone.if.no.acl.found", "boolean", False,
       "Whether a resource no ACL applies to is open to every principal (false: only super users)."),
    _k("quota.window.num", "int", 11,
       "The number of samples a client quota's rate is measured over.", AtLeast(1)),
    _k("quota.window.size.seconds", "int", 1,
       "The time span of each sample of a client quota's rate.", AtLeast(1)),
    _k("controller.quota.window.num", "int", 11,
       "The number of samples of the controller mutation quota: its token bucket holds this many windows "
       "of its rate.", AtLeast(1)),
    _k("controller.quota.window.size.seconds", "int", 1,
       "The time span of each sample of the controller mutation quota.", AtLeast(1)),
]

NOT_READ: dict[str, str] = {}
