package io.keywarden;

import java.util.Map;

/**
 * Every failure of this SDK: unchecked, with an {@link ErrorCode}. Network calls throw nothing else, and nothing in
 * this SDK exits the process.
 *
 * <p>{@code status} and {@code detail} are the server's (verified) answer exactly as sent (detail: a String, the 426
 * Map or the 422 List); {@code reason} is a {@link VerificationReason} for {@code verification} and an
 * {@link OfflineReason} for {@code offline_invalid}; {@code retryAfter} seconds for {@code rate_limited} and
 * {@code locked_out}; {@code notSent} is true when the request certainly never reached the server.
 */
public class KeywardenException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final ErrorCode code;
    private final Integer status;
    private final transient Object detail;
    private final Enum<?> reason;
    private final Double retryAfter;
    private final String latestVersion;
    private final String updateUrl;
    private final boolean notSent;

    public KeywardenException(ErrorCode code, String message) {
        this(code, message, null, null, null, null, null, null, false, null);
    }

    KeywardenException(ErrorCode code, String message, Integer status, Object detail, Enum<?> reason, Double retryAfter,
            String latestVersion, String updateUrl, boolean notSent, Throwable cause) {
        super(message, cause);
        this.code = code;
        this.status = status;
        this.detail = detail;
        this.reason = reason;
        this.retryAfter = retryAfter;
        this.latestVersion = latestVersion;
        this.updateUrl = updateUrl;
        this.notSent = notSent;
    }

    public ErrorCode getCode() {
        return code;
    }

    /** HTTP status of a verified server answer, else null. */
    public Integer getStatus() {
        return status;
    }

    /** The answer's {@code detail} exactly as sent, else null. */
    public Object getDetail() {
        return detail;
    }

    /** A {@link VerificationReason} for {@code verification}, an {@link OfflineReason} for {@code offline_invalid}, else null. */
    public Enum<?> getReason() {
        return reason;
    }

    /** The reason's wire string ({@code "bad_signature"}, {@code "wrong_hwid"}...), else null. */
    public String getReasonName() {
        return reason == null ? null : reason.toString();
    }

    public Double getRetryAfter() {
        return retryAfter;
    }

    public String getLatestVersion() {
        return latestVersion;
    }

    public String getUpdateUrl() {
        return updateUrl;
    }

    /** True when the request certainly never reached the server (safe to send again). */
    public boolean isNotSent() {
        return notSent;
    }

    @Override
    public String toString() {
        return "KeywardenException(code=" + code + (status != null ? ", status=" + status : "")
                + (reason != null ? ", reason=" + reason : "") + ", message=" + getMessage() + ")";
    }

    // --- factories ---------------------------------------------------------------------------------

    static KeywardenException verification(VerificationReason reason, String message) {
        return new KeywardenException(ErrorCode.VERIFICATION, "response refused (" + reason + "): " + message, null, null,
                reason, null, null, null, false, null);
    }

    static KeywardenException offline(OfflineReason reason, String message) {
        return new KeywardenException(ErrorCode.OFFLINE_INVALID, "offline license refused (" + reason + "): " + message,
                null, null, reason, null, null, null, false, null);
    }

    static KeywardenException network(ErrorCode code, String message, boolean notSent) {
        return new KeywardenException(code, message, null, null, null, null, null, null, notSent, null);
    }

    KeywardenException withCode(ErrorCode c, String message) {
        return new KeywardenException(c, message, status, detail, reason, retryAfter, latestVersion, updateUrl, notSent, this);
    }

    static Double parseRetryAfter(String v) {
        if (v == null) return null;
        try {
            double n = Double.parseDouble(v.trim());
            if (Double.isNaN(n) || Double.isInfinite(n) || n < 0) return null;
            return n;
        } catch (NumberFormatException e) {
            return null;
        }
    }

    /** The error for a verified non-200 answer. */
    public static KeywardenException fromAnswer(int status, Object detail, String retryAfterHeader) {
        ErrorCode code = ErrorTable.codeFor(status, detail);
        String text = detail instanceof String ? (String) detail : Json.write(detail);
        String latest = null;
        String url = null;
        if (code == ErrorCode.UPDATE_REQUIRED && detail instanceof Map) {
            Map<?, ?> d = (Map<?, ?>) detail;
            latest = Json.str(d.get("latest_version"));
            url = Json.str(d.get("update_url"));
            if (d.get("message") instanceof String) text = (String) d.get("message");
        }
        return new KeywardenException(code, code + ": " + status + " " + text, status, detail, null,
                parseRetryAfter(retryAfterHeader), latest, url, false, null);
    }
}
