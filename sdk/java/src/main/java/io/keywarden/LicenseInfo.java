package io.keywarden;

import java.time.Instant;
import java.util.List;

/** A verified license activation. {@code expiresAt} is null for a lifetime key; entitlements sorted. */
public record LicenseInfo(long level, Instant expiresAt, String message, List<String> entitlements) {
    public boolean hasEntitlement(String code) {
        return entitlements.contains(code);
    }
}
