"""The cluster controller: a pure state machine (controller.py) over Kafka's partition and replica
states (states.py) with Kafka's leader election algorithms (election.py), fed events and answering
decisions (events.py)."""

from kaflite.cluster.controller.controller import Controller, ControllerConfig
from kaflite.cluster.controller.states import PartitionState, ReplicaState

__all__ = ["Controller", "ControllerConfig", "PartitionState", "ReplicaState"]
