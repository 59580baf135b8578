package io.keywarden;

import java.time.Instant;

/**
 * What a heartbeat tells its program: one record per kind, delivered to {@link Heartbeat.Listener}s. From Kotlin,
 * {@code when (e) { is HeartbeatEvent.Beat -> ...; is HeartbeatEvent.Killed -> ... }}.
 */
public sealed interface HeartbeatEvent {
    /** A beat whose signature and proof verified. */
    record Beat(long index, long count) implements HeartbeatEvent {}

    /**
     * A beat failed (did not reach the server or did not verify). {@code lost}: the token may have moved on;
     * {@code lastBeatAt}: when the last beat (or the start) verified.
     */
    record Degraded(KeywardenException error, boolean lost, boolean reauthenticating, Instant lastBeatAt,
            int verificationFailures) implements HeartbeatEvent {}

    /** {@code compromisedAfter} verification failures in a row: automatic re-authentication stops. */
    record Compromised(KeywardenException error, int failures, Instant lastBeatAt) implements HeartbeatEvent {}

    /** Re-authentication opened a new heartbeat session. */
    record Recovered(String session) implements HeartbeatEvent {}

    /** Final: stop the protected feature ({@code heartbeat_killed}, {@code banned}, {@code expired}...). */
    record Killed(KeywardenException error) implements HeartbeatEvent {}

    /** The loop has ended: reason "stop" or "killed". */
    record Stopped(String reason) implements HeartbeatEvent {}

    /**
     * Pushed on the realtime channel: key, user or app revoked (reason as the server sent it); Killed follows. An
     * expiry is told as {@link Expired} instead.
     */
    record Revoked(String reason, String detail) implements HeartbeatEvent {}

    /**
     * The license (or end user) reached its expiry while running (docs/protocol.md 12.8: pushed on the channel as
     * revoked with reason "expired", or a beat refused, or no answer at all, after the known expiry). Final; Killed
     * (code {@code expired}) follows. {@code expiresAt} is the expiry the client knew, may be null.
     */
    record Expired(Instant expiresAt, KeywardenException error) implements HeartbeatEvent {}

    /** Pushed: this version is outdated. */
    record UpdateRequired(String message, String latestVersion, String updateUrl) implements HeartbeatEvent {}

    /** Pushed: a message from the vendor's dashboard ({@code at}: ISO 8601 UTC, may be null). */
    record Notice(String message, String at) implements HeartbeatEvent {}

    /** The realtime channel opened ("open") or closed ("closed"); code and error may be null. */
    record ChannelState(String state, Integer code, KeywardenException error) implements HeartbeatEvent {}

    /** The service cannot be reached and the grace period covers now: the license stays valid until graceUntil. */
    record Offline(KeywardenException error, Instant graceUntil) implements HeartbeatEvent {}

    /** Still unreachable and the grace period is over (told the moment it ends): the program decides. */
    record GraceExpired(Instant graceUntil, KeywardenException error) implements HeartbeatEvent {}
}
