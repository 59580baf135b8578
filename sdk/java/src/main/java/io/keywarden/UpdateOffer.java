package io.keywarden;

import java.time.Instant;
import java.util.List;

/** The release an upgrade check offers: its artifacts for the platform and arch asked, every signature verified. */
public record UpdateOffer(String version, String channel, String notes, Instant publishedAt, List<Artifact> artifacts) {}
