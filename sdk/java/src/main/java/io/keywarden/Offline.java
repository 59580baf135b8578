package io.keywarden;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.security.PublicKey;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * Offline license files (docs/protocol.md 12.5) and the clock record that guards them. A file is
 * {@code "kwlic1." base64url(PAYLOAD) "." base64url(Ed25519("kwlic1." base64url(PAYLOAD)))}, signed by a pinned
 * response-signing key. It is accepted only when, in this order (fixed by sdk/vectors/offline.json):
 * it has that shape and PAYLOAD is 12.5's JSON ({@code malformed}); its kid is pinned ({@code unknown_kid}); the
 * signature verifies ({@code bad_signature}); app_id is this application's ({@code wrong_app}); hwid is this
 * machine's ({@code wrong_hwid}); the clock is not more than 300 s below the latest time seen
 * ({@code clock_rolled_back}); issued_at is at most 300 s ahead ({@code issued_in_future}); the clock is before
 * valid_until ({@code expired}).
 */
public final class Offline {
    private Offline() {}

    public static final int MAX_FUTURE_SECONDS = 300;
    public static final int MAX_ROLLBACK_SECONDS = 300;
    private static final Pattern B64URL = Pattern.compile("^[A-Za-z0-9_-]+$");

    static byte[] b64url(String text) {
        if (!B64URL.matcher(text).matches() || text.length() % 4 == 1) return null;
        try {
            return Base64.getUrlDecoder().decode(text);
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    static boolean text(Map<String, Object> p, String name) {
        Object v = p.get(name);
        return v instanceof String && !((String) v).isEmpty();
    }

    static String trimAscii(String s) {
        int a = 0;
        int b = s.length();
        while (a < b && " \t\r\n".indexOf(s.charAt(a)) >= 0) a++;
        while (b > a && " \t\r\n".indexOf(s.charAt(b - 1)) >= 0) b--;
        return s.substring(a, b);
    }

    /**
     * Checks {@code file} as the class comment says; {@code now} and {@code lastSeen} in unix seconds ({@code lastSeen}
     * null: no record). Throws {@code offline_invalid} with an {@link OfflineReason}.
     */
    /** A decoded "tag.payload.signature": the signed text, the 64-byte signature, the payload object. */
    record Opened(String signed, byte[] sig, Map<String, Object> p) {}

    /**
     * Splits and decodes {@code tag.payload.signature}, else {@code offline_invalid} malformed. Shared by license
     * files (kwlic1) and seat pools (kwpool1).
     */
    static Opened open(String text, String tag) {
        if (text == null) throw KeywardenException.offline(OfflineReason.MALFORMED, "a " + tag + " text is a string");
        String[] parts = trimAscii(text).split("\\.", -1);
        if (parts.length != 3 || !parts[0].equals(tag)) throw KeywardenException.offline(OfflineReason.MALFORMED, "not \"" + tag + ".<payload>.<signature>\"");
        byte[] raw = b64url(parts[1]);
        byte[] sig = b64url(parts[2]);
        if (raw == null || sig == null || sig.length != 64) throw KeywardenException.offline(OfflineReason.MALFORMED, "payload or signature is not base64url (a signature is 64 bytes)");
        Map<String, Object> p;
        try {
            java.nio.charset.CharsetDecoder dec = StandardCharsets.UTF_8.newDecoder();
            p = Json.parseObject(dec.decode(java.nio.ByteBuffer.wrap(raw)).toString());
        } catch (Json.ParseException | java.nio.charset.CharacterCodingException e) {
            throw KeywardenException.offline(OfflineReason.MALFORMED, "payload is not UTF-8 JSON");
        }
        if (p == null) throw KeywardenException.offline(OfflineReason.MALFORMED, "payload is not a JSON object");
        return new Opened(tag + "." + parts[1], sig, p);
    }

    /** What files and pools both grant: v 1, an integer level, entitlement codes, the times. */
    static boolean grantFieldsOk(Map<String, Object> p) {
        Object ents = p.get("entitlements");
        return Long.valueOf(1).equals(p.get("v")) && p.get("level") instanceof Long
                && ents instanceof List && ((List<?>) ents).stream().allMatch(e -> e instanceof String)
                && p.containsKey("expires_at") && (p.get("expires_at") == null || Utc.parseMs(p.get("expires_at")) != null)
                && Utc.parseMs(p.get("issued_at")) != null && Utc.parseMs(p.get("valid_until")) != null;
    }

    public static OfflineLicense verify(String file, Map<String, PublicKey> keys, String appId, String hwid, double now,
            Double lastSeen) {
        Opened o = open(file, "kwlic1");
        Map<String, Object> p = o.p();
        Object ents = p.get("entitlements");
        boolean good = grantFieldsOk(p) && text(p, "kid") && text(p, "app_id") && text(p, "license_id") && text(p, "hwid")
                && p.containsKey("user") && (p.get("user") == null || p.get("user") instanceof String);
        if (!good) throw KeywardenException.offline(OfflineReason.MALFORMED, "payload lacks a field of docs/protocol.md 12.5 or has one of the wrong type");
        String kid = (String) p.get("kid");
        PublicKey key = keys.get(kid);
        if (key == null) throw KeywardenException.offline(OfflineReason.UNKNOWN_KID, "signed under key '" + kid + "', which this SDK does not pin");
        if (!Crypto.ed25519Verify(key, o.signed().getBytes(StandardCharsets.US_ASCII), o.sig())) throw KeywardenException.offline(OfflineReason.BAD_SIGNATURE, "the signature does not verify");
        if (!p.get("app_id").equals(appId)) throw KeywardenException.offline(OfflineReason.WRONG_APP, "issued for application '" + p.get("app_id") + "'");
        if (!p.get("hwid").equals(hwid.toLowerCase(Locale.ROOT))) throw KeywardenException.offline(OfflineReason.WRONG_HWID, "issued for another machine");
        double nowMs = now * 1000;
        if (lastSeen != null && nowMs < (lastSeen - MAX_ROLLBACK_SECONDS) * 1000) throw KeywardenException.offline(OfflineReason.CLOCK_ROLLED_BACK, "the clock reads " + Math.round(lastSeen - now) + " s before a time already seen");
        long issued = Utc.parseMs(p.get("issued_at"));
        long until = Utc.parseMs(p.get("valid_until"));
        if (issued > nowMs + MAX_FUTURE_SECONDS * 1000.0) throw KeywardenException.offline(OfflineReason.ISSUED_IN_FUTURE, "issued " + Math.round(issued / 1000.0 - now) + " s ahead of the clock");
        if (nowMs >= until) throw KeywardenException.offline(OfflineReason.EXPIRED, "valid until " + p.get("valid_until"));
        List<String> sorted = new ArrayList<>(new TreeSet<>(castStrings((List<?>) ents)));
        Long expires = Utc.parseMs(p.get("expires_at"));
        return new OfflineLicense((String) p.get("app_id"), (String) p.get("license_id"), (String) p.get("user"),
                (String) p.get("hwid"), (Long) p.get("level"), List.copyOf(sorted),
                expires == null ? null : Instant.ofEpochMilli(expires), Instant.ofEpochMilli(issued), Instant.ofEpochMilli(until), kid);
    }

    static List<String> castStrings(List<?> l) {
        List<String> out = new ArrayList<>();
        for (Object o : l) out.add((String) o);
        return out;
    }

    /**
     * Per user and application: {@code <state dir>/keywarden/<first 16 hex of sha256(api_key)>.json}, the state dir
     * being %LOCALAPPDATA%\Keywarden (Windows), ~/Library/Application Support/Keywarden (macOS), else
     * $XDG_STATE_HOME/keywarden or ~/.local/state/keywarden.
     */
    public static Path defaultStateFile(String apiKey) {
        String name = Crypto.sha256Hex(Crypto.utf8(apiKey)).substring(0, 16) + ".json";
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        String home = System.getProperty("user.home", ".");
        Path base;
        if (os.contains("win")) {
            String local = System.getenv("LOCALAPPDATA");
            base = (local != null && !local.isEmpty() ? Paths.get(local) : Paths.get(home, "AppData", "Local")).resolve("Keywarden");
        } else if (os.contains("mac")) {
            base = Paths.get(home, "Library", "Application Support", "Keywarden");
        } else {
            String xdg = System.getenv("XDG_STATE_HOME");
            base = (xdg != null && !xdg.isEmpty() ? Paths.get(xdg) : Paths.get(home, ".local", "state")).resolve("keywarden");
        }
        return base.resolve(name);
    }

    /**
     * The latest clock reading seen, in a JSON file {@code {"v": 1, "last_seen": <unix seconds>}}. An unreadable or
     * damaged file counts as no record; a file that cannot be written is logged and the check goes on.
     */
    static final class ClockRecord {
        final Path path;
        private final System.Logger log;

        ClockRecord(Path path, System.Logger log) {
            this.path = path;
            this.log = log;
        }

        Double lastSeen() {
            String text;
            try {
                byte[] b = Files.readAllBytes(path);
                text = new String(b, 0, Math.min(b.length, 4096), StandardCharsets.UTF_8);
            } catch (NoSuchFileException e) {
                return null;
            } catch (IOException e) {
                log.log(System.Logger.Level.WARNING, "keywarden.offline.state_unreadable: " + path + ": " + e.getMessage());
                return null;
            }
            try {
                Map<String, Object> v = Json.parseObject(text);
                Object seen = v == null ? null : v.get("last_seen");
                if (seen instanceof Number) return ((Number) seen).doubleValue();
            } catch (Json.ParseException e) {
                // damaged: no record
            }
            log.log(System.Logger.Level.WARNING, "keywarden.offline.state_unreadable: " + path + ": no last_seen");
            return null;
        }

        /** last_seen = max(last_seen, now), written atomically (a temporary file, then a rename). */
        synchronized void record(double now) {
            Double seen = lastSeen();
            if (seen != null && seen >= now) return;
            try {
                Path dir = path.toAbsolutePath().getParent();
                Files.createDirectories(dir);
                Path tmp = Files.createTempFile(dir, ".kwstate-", ".tmp");
                try {
                    Files.write(tmp, ("{\"v\":1,\"last_seen\":" + (long) now + "}").getBytes(StandardCharsets.UTF_8));
                    try {
                        Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
                    } catch (AtomicMoveNotSupportedException e) {
                        Files.move(tmp, path, StandardCopyOption.REPLACE_EXISTING);
                    }
                } finally {
                    Files.deleteIfExists(tmp);
                }
            } catch (IOException | RuntimeException e) {
                log.log(System.Logger.Level.WARNING, "keywarden.offline.state_unwritable: " + path + ": " + e.getMessage());
            }
        }
    }
}
