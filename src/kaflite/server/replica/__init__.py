"""The data plane under the handlers: `Partition` (one partition's replicas, ISR, epochs, high watermark)
and `ReplicaManager` (the partitions this broker hosts, the one door for per-partition requests).
Kafka's `kafka.cluster.Partition` and `kafka.server.ReplicaManager`; the replica fetcher (followers) joins
here. It sits in `server/` because it uses the purgatory and is used only by the server's handlers and
coordinators; it imports storage, cluster and protocol, never the handlers."""

from kaflite.server.replica.partition import Partition, PartitionState
from kaflite.server.replica.replica_manager import ReplicaManager, TopicSettings, fetch_key, produce_key

__all__ = ["Partition", "PartitionState", "ReplicaManager", "TopicSettings", "fetch_key", "produce_key"]
