"""Who is connecting: TLS contexts for SSL listeners, the SASL state machine and its mechanisms (PLAIN,
SCRAM-SHA-256/512), JAAS parsing and the SCRAM credential store. docs/security.md describes the keys."""
