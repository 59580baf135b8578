package io.keywarden;

import java.time.Instant;
import java.util.List;

/**
 * A verified login or register answer. {@code expiresAt} is null for an account without expiry; {@code entitlements}
 * are the key's codes, sorted (docs/protocol.md 12.3).
 */
public record UserInfo(String username, long level, Instant expiresAt, String message, List<String> entitlements) {
    public boolean hasEntitlement(String code) {
        return entitlements.contains(code);
    }
}
