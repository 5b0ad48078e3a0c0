/*
 * Harness-only stand-in (never part of kaflite): Kafka's JoinGroupRequest is built on message classes that
 * Kafka generates at build time, which a plain javac of its sources does not have. ConsumerGroupMetadata
 * needs only these two constants from it (values as in Kafka's JoinGroupRequest).
 */
package org.apache.kafka.common.requests;

public final class JoinGroupRequest {
    public static final String UNKNOWN_MEMBER_ID = "";
    public static final int UNKNOWN_GENERATION_ID = -1;

    private JoinGroupRequest() {
    }
}
