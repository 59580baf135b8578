package io.keywarden;

/** The SDK's error codes: the same strings in every Keywarden SDK (sdk/vectors/errors.json). */
public enum ErrorCode {
    INVALID_KEY("invalid_key"),
    KEY_USED("key_used"),
    BANNED("banned"),
    EXPIRED("expired"),
    HWID_MISMATCH("hwid_mismatch"),
    APP_DISABLED("app_disabled"),
    UPDATE_REQUIRED("update_required"),
    RATE_LIMITED("rate_limited"),
    LOCKED_OUT("locked_out"),
    SESSION_EXPIRED("session_expired"),
    HEARTBEAT_KILLED("heartbeat_killed"),
    VERIFICATION("verification"),
    CLOCK_SKEW("clock_skew"),
    NETWORK("network"),
    TIMEOUT("timeout"),
    /** The fallback: an answer that matches nothing else (status and detail stay on the error). */
    SERVER("server"),
    TRIAL_DISABLED("trial_disabled"),
    TRIAL_USED("trial_used"),
    OFFLINE_DISABLED("offline_disabled"),
    /** An offline license file this SDK refuses; the reason is an {@link OfflineReason}. */
    OFFLINE_INVALID("offline_invalid"),
    SESSION_LIMIT("session_limit");

    private final String wire;

    ErrorCode(String wire) {
        this.wire = wire;
    }

    /** The code as every SDK spells it, e.g. {@code "hwid_mismatch"}. */
    public String wire() {
        return wire;
    }

    /** The code of a wire string, or null. */
    public static ErrorCode fromWire(String s) {
        for (ErrorCode c : values()) if (c.wire.equals(s)) return c;
        return null;
    }

    @Override
    public String toString() {
        return wire;
    }
}
