"""Client quotas (Kafka's ClientQuotaManager): the pure manager in `manager`."""

from kaflite.server.quota.manager import (
    CONSUMER_BYTE_RATE,
    CONTROLLER_MUTATION_RATE,
    DEFAULT,
    PRODUCER_BYTE_RATE,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    MutationQuota,
    QuotaEntity,
    QuotaManager,
    Rate,
    TokenBucket,
)

__all__ = [
    "CONSUMER_BYTE_RATE",
    "CONTROLLER_MUTATION_RATE",
    "DEFAULT",
    "MutationQuota",
    "PRODUCER_BYTE_RATE",
    "QUOTA_KEYS",
    "REQUEST_PERCENTAGE",
    "QuotaEntity",
    "QuotaManager",
    "Rate",
    "TokenBucket",
]
