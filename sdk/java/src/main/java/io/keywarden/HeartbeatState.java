package io.keywarden;

/** Where a heartbeat stands ({@link Heartbeat#getState()}). */
public enum HeartbeatState {
    /** The last beat verified. */
    HEALTHY("healthy"),
    /**
     * The service cannot be reached and the grace period (docs/protocol.md 12.6) covers now: the license stays valid.
     */
    OFFLINE("offline"),
    /** The last beat did not reach the server or did not verify (and no grace covers it). */
    DEGRADED("degraded"),
    /** Verification failures in a row reached the limit: the answers are being tampered with. */
    COMPROMISED("compromised"),
    /** Ended: revoked by a push on the realtime channel (ban, deletion, app disabled...). */
    REVOKED("revoked"),
    /** Ended: the license reached its expiry while running (docs/protocol.md 12.8); grace never covers it. */
    EXPIRED("expired"),
    /** Ended: the server refused the heartbeat (debugger, banned, a broken token chain...). */
    KILLED("killed"),
    /** Ended: {@link Heartbeat#stop()}. */
    STOPPED("stopped");

    private final String wire;

    HeartbeatState(String wire) {
        this.wire = wire;
    }

    public String wire() {
        return wire;
    }

    /** True for the states a heartbeat ends in. */
    public boolean isFinal() {
        return this == REVOKED || this == EXPIRED || this == KILLED || this == STOPPED;
    }

    @Override
    public String toString() {
        return wire;
    }
}
