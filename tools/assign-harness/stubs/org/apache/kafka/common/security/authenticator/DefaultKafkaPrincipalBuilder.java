/*
 * Harness-only stand-in (never part of kaflite): Kafka's ConfigDef pulls in BrokerSecurityConfigs, which
 * names this class as a default; the real one needs message classes Kafka generates at build time.
 * The assignors never build principals.
 */
package org.apache.kafka.common.security.authenticator;

import org.apache.kafka.common.security.auth.AuthenticationContext;
import org.apache.kafka.common.security.auth.KafkaPrincipal;
import org.apache.kafka.common.security.auth.KafkaPrincipalBuilder;

public class DefaultKafkaPrincipalBuilder implements KafkaPrincipalBuilder {
    @Override
    public KafkaPrincipal build(AuthenticationContext context) {
        throw new UnsupportedOperationException("harness stand-in");
    }
}
