package io.keywarden;

import java.time.Instant;
import java.util.List;

/**
 * A verified offline license file (docs/protocol.md 12.5). {@code user} is null for a license-only key, {@code
 * expiresAt} null for a lifetime key; the file is accepted until {@code validUntil}.
 */
public record OfflineLicense(String appId, String licenseId, String user, String hwid, long level,
        List<String> entitlements, Instant expiresAt, Instant issuedAt, Instant validUntil, String kid) {
    public boolean hasEntitlement(String code) {
        return entitlements.contains(code);
    }
}
