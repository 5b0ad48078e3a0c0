"""Sans-IO Kafka wire protocol: framing, headers, the supported-API table, hot encoders."""
