package io.keywarden;

import java.time.DateTimeException;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Strict ISO 8601 UTC times as docs/protocol.md 1 writes them ({@code 2026-11-21T22:00:00.000Z}): date, T, time, an
 * optional fraction of 1-9 digits (cut to milliseconds), then Z; nothing else. The same rule in every SDK.
 */
final class Utc {
    private Utc() {}

    private static final Pattern ISO = Pattern.compile("^(\\d{4})-(\\d{2})-(\\d{2})T(\\d{2}):(\\d{2}):(\\d{2})(?:\\.(\\d{1,9}))?Z$");

    /** Unix milliseconds of a strict ISO 8601 UTC string, else null (also for any non-string). */
    static Long parseMs(Object value) {
        if (!(value instanceof String)) return null;
        Matcher m = ISO.matcher((String) value);
        if (!m.matches()) return null;
        try {
            LocalDateTime d = LocalDateTime.of(Integer.parseInt(m.group(1)), Integer.parseInt(m.group(2)),
                    Integer.parseInt(m.group(3)), Integer.parseInt(m.group(4)), Integer.parseInt(m.group(5)),
                    Integer.parseInt(m.group(6)));
            String frac = m.group(7) == null ? "0" : m.group(7);
            int ms = Integer.parseInt((frac + "00").substring(0, 3));
            return d.toInstant(ZoneOffset.UTC).toEpochMilli() + ms;
        } catch (DateTimeException e) {
            return null;
        }
    }

    static Instant instant(Object value) {
        Long ms = parseMs(value);
        return ms == null ? null : Instant.ofEpochMilli(ms);
    }

    /** A lenient reading of an answer's date (expires_at): ISO 8601 with any offset, else null. */
    static Instant lenient(Object value) {
        if (!(value instanceof String) || ((String) value).isEmpty()) return null;
        Instant strict = instant(value);
        if (strict != null) return strict;
        try {
            return java.time.OffsetDateTime.parse((String) value).toInstant();
        } catch (DateTimeException e) {
            try {
                return LocalDateTime.parse((String) value).toInstant(ZoneOffset.UTC);
            } catch (DateTimeException e2) {
                return null;
            }
        }
    }
}
