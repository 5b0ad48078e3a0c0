"""The coordinator services of a broker: the shells that run the pure coordinator shards
(kaflite.coordinator) on the coordinator runtime over their internal topics, and those topics' writers.
The request handlers (kaflite.server.handlers) parse and answer requests and call into these; these never
import the handlers (tests/test_layers.py)."""
