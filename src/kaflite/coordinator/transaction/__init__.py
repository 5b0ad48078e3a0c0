"""The transaction coordinator: pure shards over `__transaction_state` on the coordinator runtime."""

from .coordinator import (
    InitPidAnswer,
    MarkerJob,
    TransactionCoordinatorShard,
    TxnAnswer,
    TxnConfig,
    TxnRecord,
    TxnResult,
)
from .state import TxnMetadata, TxnState
from .txn_log import TRANSACTION_STATE_TOPIC, partition_for

__all__ = ["InitPidAnswer", "MarkerJob", "TRANSACTION_STATE_TOPIC", "TransactionCoordinatorShard", "TxnAnswer",
           "TxnConfig", "TxnMetadata", "TxnRecord", "TxnResult", "TxnState", "partition_for"]
