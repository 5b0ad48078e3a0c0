/*
 * Harness-only stand-in (never part of kaflite): protocol.types.Struct takes two constants from Kafka's
 * MessageUtil, whose other members need message classes Kafka generates at build time.
 * Values as in Kafka's MessageUtil.
 */
package org.apache.kafka.common.protocol;

public final class MessageUtil {
    public static final long UNSIGNED_INT_MAX = 4294967295L;
    public static final int UNSIGNED_SHORT_MAX = 65535;

    private MessageUtil() {
    }
}
