/*
 * Harness-only stand-in (never part of kaflite): the assignors serialise their user data with Kafka's
 * protocol.types, whose RECORDS types mention MemoryRecords; the real class needs message classes Kafka
 * generates at build time. Only what protocol.types.Type uses; the assignors never read or write records.
 */
package org.apache.kafka.common.record;

import java.nio.ByteBuffer;

public final class MemoryRecords implements BaseRecords {
    private final ByteBuffer buffer;

    private MemoryRecords(ByteBuffer buffer) {
        this.buffer = buffer;
    }

    public static MemoryRecords readableRecords(ByteBuffer buffer) {
        return new MemoryRecords(buffer);
    }

    public ByteBuffer buffer() {
        return buffer.duplicate();
    }

    @Override
    public int sizeInBytes() {
        return buffer.limit();
    }

    @Override
    public RecordsSend<? extends BaseRecords> toSend() {
        throw new UnsupportedOperationException("harness stand-in");
    }
}
