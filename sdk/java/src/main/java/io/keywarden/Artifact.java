package io.keywarden;

import java.time.Instant;

/**
 * One file of an offered release, its signature already verified. {@code version} is the release's (part of the
 * signed message); {@code sha512} lower-case hex; {@code url} the short-lived download link.
 */
public record Artifact(String appId, String version, String filename, String platform, String arch, long size,
        String sha512, String signature, String kid, String url, Instant urlExpiresAt) {
    /** A copy with another download URL. */
    public Artifact withUrl(String other) {
        return new Artifact(appId, version, filename, platform, arch, size, sha512, signature, kid, other, urlExpiresAt);
    }
}
