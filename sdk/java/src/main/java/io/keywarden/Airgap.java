package io.keywarden;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.PublicKey;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeSet;

/**
 * Air-gapped machines (the server's docs/air-gapped.md; vectors: sdk/vectors/airgap.json).
 *
 * <p>Activation request: {@code "kwreq1." base64url(UTF-8 JSON {"v": 1, "app_id", "key", "hwid", "components"?,
 * "nonce", "created_at"})}, written with no network. The nonce (16 random bytes) stays in a small JSON file; the
 * answer is an offline license file whose payload carries {@code request_nonce}, accepted only when every
 * offline-file check passes and that nonce is the one of this machine's latest request (else
 * {@code offline_invalid} / {@code wrong_request}).
 *
 * <p>Seat pool: {@code "kwpool1." base64url(PAYLOAD) "." base64url(Ed25519 over the part before the second dot)},
 * signed by a pinned response key. A relay hands it out with every lease; a lease is believed only when its pool
 * verifies, names this application and is still valid.
 */
public final class Airgap {
    /** The relay's detail when every seat of its pool is leased ({@code session_limit}). */
    public static final String NO_SEATS = "No seats available";

    private Airgap() {}

    /** The request text for these values (nonce and time are the caller's). */
    public static String buildRequest(String appId, String key, String hwid, String nonce, String createdAt,
            Map<String, String> components) {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("v", 1L);
        body.put("app_id", appId);
        body.put("key", key);
        body.put("hwid", hwid);
        if (components != null && !components.isEmpty()) body.put("components", new LinkedHashMap<String, Object>(components));
        body.put("nonce", nonce);
        body.put("created_at", createdAt);
        return "kwreq1." + Base64.getUrlEncoder().withoutPadding().encodeToString(Json.write(body).getBytes(StandardCharsets.UTF_8));
    }

    /** After the offline-file checks passed: request_nonce must be {@code nonce} (null: none kept), else wrong_request. */
    public static void checkRequestNonce(String file, String nonce) {
        if (nonce == null) throw KeywardenException.offline(OfflineReason.WRONG_REQUEST, "no activation request is kept on this machine");
        Object got = null;
        String[] parts = Offline.trimAscii(file == null ? "" : file).split("\\.", -1);
        byte[] raw = parts.length > 1 ? Offline.b64url(parts[1]) : null;
        if (raw != null) {
            try {
                Map<String, Object> p = Json.parseObject(new String(raw, StandardCharsets.UTF_8));
                if (p != null) got = p.get("request_nonce");
            } catch (Json.ParseException e) {
                got = null;
            }
        }
        if (!(got instanceof String) || !MessageDigest.isEqual(((String) got).getBytes(StandardCharsets.UTF_8), nonce.getBytes(StandardCharsets.UTF_8)))
            throw KeywardenException.offline(OfflineReason.WRONG_REQUEST, "not the answer to this machine's latest activation request");
    }

    /** Checks a POOL in the order of airgap.json: malformed, unknown_kid, bad_signature, wrong_app, expired. */
    public static SeatPool verifyPool(String pool, Map<String, PublicKey> keys, String appId, double now) {
        Offline.Opened o = Offline.open(pool, "kwpool1");
        Map<String, Object> p = o.p();
        boolean good = Offline.grantFieldsOk(p) && Offline.text(p, "kid") && Offline.text(p, "app_id") && Offline.text(p, "license_id")
                && Offline.text(p, "relay_id") && p.get("seats") instanceof Long && (Long) p.get("seats") >= 1;
        if (!good) throw KeywardenException.offline(OfflineReason.MALFORMED, "pool payload lacks a field or has one of the wrong type");
        String kid = (String) p.get("kid");
        PublicKey key = keys.get(kid);
        if (key == null) throw KeywardenException.offline(OfflineReason.UNKNOWN_KID, "pool signed under key '" + kid + "', which this SDK does not pin");
        if (!Crypto.ed25519Verify(key, o.signed().getBytes(StandardCharsets.US_ASCII), o.sig()))
            throw KeywardenException.offline(OfflineReason.BAD_SIGNATURE, "the pool's signature does not verify");
        if (!p.get("app_id").equals(appId)) throw KeywardenException.offline(OfflineReason.WRONG_APP, "pool issued for application '" + p.get("app_id") + "'");
        long until = Utc.parseMs(p.get("valid_until"));
        if (now * 1000 >= until) throw KeywardenException.offline(OfflineReason.EXPIRED, "pool valid until " + p.get("valid_until"));
        Long expires = Utc.parseMs(p.get("expires_at"));
        List<String> sorted = new ArrayList<>(new TreeSet<>(Offline.castStrings((List<?>) p.get("entitlements"))));
        return new SeatPool((String) p.get("app_id"), (String) p.get("license_id"), (String) p.get("relay_id"), (Long) p.get("seats"),
                (Long) p.get("level"), List.copyOf(sorted), expires == null ? null : Instant.ofEpochMilli(expires),
                Instant.ofEpochMilli(until), Instant.ofEpochMilli(Utc.parseMs(p.get("issued_at"))), kid);
    }
}
