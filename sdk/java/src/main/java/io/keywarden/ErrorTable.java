package io.keywarden;

import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * This SDK's copy of the error table (sdk/vectors/errors.json, generated from the server's src/errors.ts through
 * sdk/vectors/error-map.ts). The unit tests fail when the two differ: update both together.
 */
public final class ErrorTable {
    private ErrorTable() {}

    /** An answer with exactly this status and detail string maps to code. */
    public record Entry(int status, String detail, ErrorCode code) {}

    public static final List<Entry> ENTRIES = List.of(
        new Entry(413, "Payload too large", ErrorCode.SERVER),
        new Entry(400, "Malformed JSON body", ErrorCode.SERVER),
        new Entry(429, "Rate limit exceeded", ErrorCode.RATE_LIMITED),
        new Entry(404, "Not found", ErrorCode.SERVER),
        new Entry(405, "Method not allowed", ErrorCode.SERVER),
        new Entry(500, "Internal server error", ErrorCode.SERVER),
        new Entry(503, "Service unavailable", ErrorCode.SERVER),
        new Entry(404, "Application not found", ErrorCode.APP_DISABLED),
        new Entry(401, "Invalid or expired session", ErrorCode.SESSION_EXPIRED),
        new Entry(401, "Invalid request signature", ErrorCode.CLOCK_SKEW),
        new Entry(403, "Access denied", ErrorCode.BANNED),
        new Entry(403, "Application disabled", ErrorCode.APP_DISABLED),
        new Entry(429, "Too many failed attempts, try again later.", ErrorCode.LOCKED_OUT),
        new Entry(426, "A new version is required.", ErrorCode.UPDATE_REQUIRED),
        new Entry(400, "Encryption key required", ErrorCode.SERVER),
        new Entry(403, "Binary hash mismatch", ErrorCode.SERVER),
        new Entry(403, "Invalid binary token", ErrorCode.SERVER),
        new Entry(400, "Invalid license key", ErrorCode.INVALID_KEY),
        new Entry(400, "License key already used", ErrorCode.KEY_USED),
        new Entry(400, "Username already taken", ErrorCode.SERVER),
        new Entry(403, "License key is banned", ErrorCode.BANNED),
        new Entry(403, "License validation is temporarily paused for this application.", ErrorCode.APP_DISABLED),
        new Entry(403, "Access is temporarily paused for this application.", ErrorCode.APP_DISABLED),
        new Entry(403, "Heartbeat session required. Call /heartbeat/start first.", ErrorCode.SERVER),
        new Entry(409, "License state changed mid-activation, please retry", ErrorCode.SERVER),
        new Entry(409, "License activation in progress, retry.", ErrorCode.SERVER),
        new Entry(401, "Invalid username or password", ErrorCode.INVALID_KEY),
        new Entry(403, "License not valid", ErrorCode.INVALID_KEY),
        new Entry(403, "HWID mismatch. Key locked to another device.", ErrorCode.HWID_MISMATCH),
        new Entry(403, "License expired", ErrorCode.EXPIRED),
        new Entry(403, "Session not activated. Call /login, /register or /license first.", ErrorCode.SESSION_EXPIRED),
        new Entry(409, "heartbeat session already exists for this nonce", ErrorCode.SERVER),
        new Entry(403, "rejected", ErrorCode.HEARTBEAT_KILLED),
        new Entry(401, "Invalid heartbeat token", ErrorCode.HEARTBEAT_KILLED),
        new Entry(403, "Trials are not enabled for this application.", ErrorCode.TRIAL_DISABLED),
        new Entry(403, "Trial already used on this device.", ErrorCode.TRIAL_USED),
        new Entry(403, "Offline licenses are not enabled for this application.", ErrorCode.OFFLINE_DISABLED),
        new Entry(409, "Concurrent session limit reached", ErrorCode.SESSION_LIMIT),
        // A download link (update downloads report these as UpdateException DOWNLOAD_FAILED).
        new Entry(403, "Download link expired", ErrorCode.SERVER),
        new Entry(416, "Range not satisfiable", ErrorCode.SERVER)
    );

    /** Used when no entry matches: data-driven details (an app's disabled_message, the 426 object, any other 429). */
    public static final Map<Integer, ErrorCode> STATUS_FALLBACKS;

    static {
        Map<Integer, ErrorCode> m = new HashMap<>();
        m.put(403, ErrorCode.APP_DISABLED);
        m.put(426, ErrorCode.UPDATE_REQUIRED);
        m.put(429, ErrorCode.RATE_LIMITED);
        STATUS_FALLBACKS = Collections.unmodifiableMap(m);
    }

    public static final ErrorCode FALLBACK = ErrorCode.SERVER;

    /** The code for a failure answer: exact (status, detail) entry, else the status fallback, else {@code server}. */
    public static ErrorCode codeFor(int status, Object detail) {
        if (detail instanceof String) {
            for (Entry e : ENTRIES) if (e.status() == status && e.detail().equals(detail)) return e.code();
        }
        return STATUS_FALLBACKS.getOrDefault(status, FALLBACK);
    }
}
