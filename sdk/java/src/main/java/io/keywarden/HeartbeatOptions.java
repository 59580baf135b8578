package io.keywarden;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.function.BooleanSupplier;
import java.util.function.Consumer;

/**
 * How {@link Client#startHeartbeat(HeartbeatOptions)} beats; made with {@link #builder()}, every field optional.
 */
public final class HeartbeatOptions {
    final String systemId;
    final String codeHash;
    final Duration interval;
    final Long codeSize;
    final BooleanSupplier debuggerDetected;
    final boolean reauth;
    final Consumer<Client> reauthWith;
    final boolean channel;
    final int compromisedAfter;
    final List<Heartbeat.Listener<HeartbeatEvent>> listeners;

    private HeartbeatOptions(Builder b) {
        this.systemId = b.systemId;
        this.codeHash = b.codeHash;
        this.interval = b.interval;
        this.codeSize = b.codeSize;
        this.debuggerDetected = b.debuggerDetected;
        this.reauth = b.reauth || b.reauthWith != null;
        this.reauthWith = b.reauthWith;
        this.channel = b.channel;
        this.compromisedAfter = b.compromisedAfter;
        this.listeners = List.copyOf(b.listeners);
    }

    public static Builder builder() {
        return new Builder();
    }

    public static HeartbeatOptions defaults() {
        return new Builder().build();
    }

    public static final class Builder {
        private String systemId;
        private String codeHash;
        private Duration interval;
        private Long codeSize;
        private BooleanSupplier debuggerDetected;
        private boolean reauth;
        private Consumer<Client> reauthWith;
        private boolean channel = true;
        private int compromisedAfter = 5;
        private final List<Heartbeat.Listener<HeartbeatEvent>> listeners = new ArrayList<>();

        private Builder() {}

        /** Default: the machine hwid. */
        public Builder systemId(String v) {
            this.systemId = v;
            return this;
        }

        /** Default: {@link Client#selfHash()}. */
        public Builder codeHash(String v) {
            this.codeHash = v;
            return this;
        }

        /** Beat faster than the server's beat_interval (allowed: only late beats drift). */
        public Builder interval(Duration v) {
            this.interval = v;
            return this;
        }

        public Builder codeSize(long v) {
            this.codeSize = v;
            return this;
        }

        /** Default: {@link Machine#debuggerAttached()}. */
        public Builder debuggerDetected(BooleanSupplier v) {
            this.debuggerDetected = v;
            return this;
        }

        /** Re-authenticate by itself (init, the same login/license, heartbeat/start) when a beat's answer was lost. */
        public Builder reauth(boolean v) {
            this.reauth = v;
            return this;
        }

        /** Re-authenticate with your own code (it must leave the client initialised and activated). */
        public Builder reauthWith(Consumer<Client> v) {
            this.reauthWith = v;
            return this;
        }

        /** true (default): beat on the realtime channel when the server offers it; false: REST only. */
        public Builder channel(boolean v) {
            this.channel = v;
            return this;
        }

        /** Verification failures in a row after which Compromised is emitted (default 5). */
        public Builder compromisedAfter(int v) {
            this.compromisedAfter = v;
            return this;
        }

        /** A listener of every event, attached before the first beat. */
        public Builder listener(Heartbeat.Listener<HeartbeatEvent> l) {
            this.listeners.add(l);
            return this;
        }

        public HeartbeatOptions build() {
            if (interval != null && (interval.isNegative() || interval.isZero())) throw new ConfigException("heartbeat interval must be positive");
            if (compromisedAfter < 1) throw new ConfigException("compromisedAfter must be a positive integer");
            return new HeartbeatOptions(this);
        }
    }
}
