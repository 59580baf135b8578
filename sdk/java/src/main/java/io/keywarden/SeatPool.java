package io.keywarden;

import java.time.Instant;
import java.util.List;

/**
 * A verified seat pool (kwpool1): what the relay's license grants and until when.
 *
 * @param entitlements sorted codes
 * @param expiresAt the key's own expiry, null for a lifetime key
 */
public record SeatPool(String appId, String licenseId, String relayId, long seats, long level, List<String> entitlements,
        Instant expiresAt, Instant validUntil, Instant issuedAt, String kid) {}
