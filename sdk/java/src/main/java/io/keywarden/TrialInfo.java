package io.keywarden;

import java.time.Instant;
import java.util.List;

/**
 * A trial key created for this device and activated at once (docs/protocol.md 12.4); {@code key} is shown this once.
 */
public record TrialInfo(String key, long level, Instant expiresAt, String message, List<String> entitlements) {
    public boolean hasEntitlement(String code) {
        return entitlements.contains(code);
    }
}
