package io.keywarden;

import static io.keywarden.TestRunner.check;
import static io.keywarden.TestRunner.eq;
import static io.keywarden.TestRunner.throwsKw;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;

/** Every shared vector (sdk/vectors) plus the SDK's own rules, without a server. */
final class UnitTests {
    private UnitTests() {}

    static Path vectorsDir() {
        String env = System.getenv("KW_VECTORS_DIR");
        if (env != null && !env.isEmpty()) return Paths.get(env);
        for (Path p : List.of(Paths.get("../vectors"), Paths.get("sdk/vectors"), Paths.get("../../sdk/vectors"))) {
            if (Files.isDirectory(p)) return p;
        }
        return null;
    }

    static Map<String, Object> vector(String name) throws Exception {
        Path dir = vectorsDir();
        if (dir == null || !Files.isRegularFile(dir.resolve(name))) {
            if ("1".equals(System.getenv("KW_REQUIRE_VECTORS"))) throw new AssertionError("KW_REQUIRE_VECTORS=1 but " + name + " is not found");
            throw new TestRunner.Skip("sdk/vectors not found (set KW_VECTORS_DIR)");
        }
        return Json.parseObject(new String(Files.readAllBytes(dir.resolve(name)), StandardCharsets.UTF_8));
    }

    @SuppressWarnings("unchecked")
    static Map<String, Object> decodeRequest(String r) {
        check(r.startsWith("kwreq1.") && !r.contains("="), "kwreq1. without padding");
        return Json.parseObject(new String(java.util.Base64.getUrlDecoder().decode(r.substring(7)), java.nio.charset.StandardCharsets.UTF_8));
    }

    static List<Map<String, Object>> list(Object o) {
        return (List<Map<String, Object>>) o;
    }

    static Map<String, PublicKey> pinned(Object keys) {
        Map<String, PublicKey> m = new LinkedHashMap<>();
        for (Map<String, Object> k : list(keys)) m.put((String) k.get("kid"), Crypto.ed25519PublicKey((String) k.get("public_key")));
        return m;
    }

    static String s(Map<String, Object> m, String k) {
        return (String) m.get(k);
    }

    static long l(Map<String, Object> m, String k) {
        return ((Number) m.get(k)).longValue();
    }

    static void run(TestRunner t) {
        t.test("unit/vectors: request signatures (canonical and X-Signature)", () -> {
            for (Map<String, Object> c : list(vector("request-signatures.json").get("cases"))) {
                String canonical = Crypto.canonicalRequest(s(c, "method"), s(c, "path"), s(c, "timestamp"), s(c, "nonce"), Crypto.utf8(s(c, "body")));
                eq(s(c, "canonical"), canonical, "canonical");
                eq(s(c, "signature"), Crypto.requestSignature(s(c, "api_secret"), canonical), "signature");
            }
        });
        t.test("unit/vectors: response signatures, every case accepted or refused for its reason", () -> {
            Map<String, Object> v = vector("response-signatures.json");
            Map<String, PublicKey> keys = pinned(v.get("pinned_keys"));
            int n = 0;
            for (Map<String, Object> c : list(v.get("cases"))) {
                byte[] body = Crypto.utf8(s(c, "body"));
                eq(s(c, "message"), Crypto.responseMessage(s(c, "kid"), s(c, "method"), s(c, "path"), (int) l(c, "status"), s(c, "timestamp"), s(c, "nonce"), body), "message of " + c.get("name"));
                Map<String, String> h = Map.of("x-response-kid", s(c, "kid"), "x-response-timestamp", s(c, "timestamp"), "x-response-signature", s(c, "signature"));
                Runnable verify = () -> Client.verifyResponse(keys, s(c, "method"), s(c, "path"), (int) l(c, "status"), h, body, s(c, "nonce"), l(c, "now"), l(v, "max_skew_seconds"));
                if (Boolean.TRUE.equals(c.get("valid"))) {
                    verify.run();
                } else {
                    KeywardenException e = throwsKw(verify::run);
                    eq(ErrorCode.VERIFICATION, e.getCode(), "code of " + c.get("name"));
                    eq(c.get("verification_reason"), e.getReasonName(), "reason of " + c.get("name"));
                }
                n++;
            }
            check(n >= 15, "cases");
            // A missing header is unsigned.
            KeywardenException e = throwsKw(() -> Client.verifyResponse(keys, "POST", "/x", 200, Map.of(), new byte[0], "n", 0, 300));
            eq("unsigned", e.getReasonName(), "no headers");
        });
        t.test("unit/vectors: heartbeat proofs (start and beat, beat_index 2^31)", () -> {
            Map<String, Object> v = vector("proofs.json");
            for (Map<String, Object> c : list(v.get("start"))) {
                String p = Crypto.startProof(s(c, "session"), s(c, "system_id"), s(c, "token"));
                eq(s(c, "proof"), p, "start proof");
                check(Crypto.proofEquals(s(c, "proof"), p), "proofEquals");
            }
            for (Map<String, Object> c : list(v.get("beat"))) {
                eq(s(c, "proof"), Crypto.beatProof(s(c, "previous_token"), s(c, "session"), l(c, "beat_index"), s(c, "new_token"), l(c, "beat_count")), "beat proof");
            }
            check(!Crypto.proofEquals(null, "x") && !Crypto.proofEquals(5L, "x") && !Crypto.proofEquals("y", "x"), "wrong proofs refused");
        });
        t.test("unit/vectors: encryption (AES-256-CBC keys, IVs, plaintexts)", () -> {
            for (Map<String, Object> c : list(vector("encryption.json").get("cases"))) {
                eq(s(c, "key_hex"), Crypto.toHex(Crypto.sha256(Crypto.utf8(s(c, "enc_key") + "-" + s(c, "api_secret")))), "key");
                eq(s(c, "iv_hex"), Crypto.toHex(java.util.Arrays.copyOf(Crypto.sha256(Crypto.utf8(s(c, "init_iv"))), 16)), "iv");
                eq(s(c, "plaintext"), new String(Crypto.decryptResponse(s(c, "ciphertext"), s(c, "enc_key"), s(c, "api_secret"), s(c, "init_iv")), StandardCharsets.UTF_8), "plaintext");
            }
        });
        t.test("unit/vectors: the error table equals errors.json (entries, fallbacks, extra cases)", () -> {
            Map<String, Object> v = vector("errors.json");
            List<String> codes = new ArrayList<>();
            for (ErrorCode c : ErrorCode.values()) codes.add(c.wire());
            eq(v.get("codes"), codes, "codes in order");
            eq(v.get("fallback"), ErrorTable.FALLBACK.wire(), "fallback");
            Map<String, Object> fb = Json.obj(v.get("status_fallbacks"));
            eq(fb.size(), ErrorTable.STATUS_FALLBACKS.size(), "status fallbacks");
            for (Map.Entry<String, Object> e : fb.entrySet()) eq(e.getValue(), ErrorTable.STATUS_FALLBACKS.get(Integer.parseInt(e.getKey())).wire(), "fallback " + e.getKey());
            List<Map<String, Object>> entries = list(v.get("entries"));
            eq(entries.size(), ErrorTable.ENTRIES.size(), "entries");
            for (int i = 0; i < entries.size(); i++) {
                Map<String, Object> e = entries.get(i);
                ErrorTable.Entry mine = ErrorTable.ENTRIES.get(i);
                eq(l(e, "status"), (long) mine.status(), "status of " + e.get("name"));
                eq(e.get("detail"), mine.detail(), "detail of " + e.get("name"));
                eq(e.get("sdk_code"), mine.code().wire(), "code of " + e.get("name"));
                eq(e.get("sdk_code"), ErrorTable.codeFor((int) l(e, "status"), e.get("detail")).wire(), "lookup of " + e.get("name"));
            }
            for (Map<String, Object> e : list(v.get("extra_cases"))) {
                KeywardenException k = KeywardenException.fromAnswer((int) l(e, "status"), e.get("detail"), "7");
                eq(e.get("sdk_code"), k.getCode().wire(), "extra " + e.get("why"));
                eq(7.0, k.getRetryAfter(), "retry_after");
                if (k.getCode() == ErrorCode.UPDATE_REQUIRED) {
                    eq("2.0", k.getLatestVersion(), "latest_version");
                    eq("https://example.com/dl", k.getUpdateUrl(), "update_url");
                }
            }
        });
        t.test("unit/vectors: offline files are accepted or refused for the reason each case names", () -> {
            Map<String, Object> v = vector("offline.json");
            Map<String, PublicKey> keys = pinned(v.get("pinned_keys"));
            List<String> reasons = new ArrayList<>();
            for (OfflineReason r : OfflineReason.values()) reasons.add(r.wire());
            // wrong_request (airgap.json) comes after the eight of offline.json.
            eq(List.of("wrong_request"), reasons.subList(reasons.size() - 1, reasons.size()), "the air-gapped reason last");
            reasons = new ArrayList<>(reasons.subList(0, reasons.size() - 1));
            eq(v.get("reasons"), reasons, "reasons in order");
            Set<String> seen = new TreeSet<>();
            for (Map<String, Object> c : list(v.get("cases"))) {
                Double last = c.get("last_seen") == null ? null : ((Number) c.get("last_seen")).doubleValue();
                double now = ((Number) c.get("now")).doubleValue();
                if (Boolean.TRUE.equals(c.get("valid"))) {
                    OfflineLicense lic = Offline.verify(s(c, "file"), keys, s(c, "app_id"), s(c, "hwid"), now, last);
                    Map<String, Object> p = Json.obj(c.get("payload"));
                    eq(p.get("app_id"), lic.appId(), "app_id");
                    eq(p.get("license_id"), lic.licenseId(), "license_id");
                    eq(p.get("user"), lic.user(), "user");
                    eq(p.get("hwid"), lic.hwid(), "hwid");
                    eq(p.get("level"), lic.level(), "level");
                    eq(new ArrayList<>(new TreeSet<>(castList(p.get("entitlements")))), lic.entitlements(), "entitlements");
                    eq(Utc.parseMs(p.get("valid_until")), lic.validUntil().toEpochMilli(), "valid_until");
                    eq(Utc.parseMs(p.get("issued_at")), lic.issuedAt().toEpochMilli(), "issued_at");
                    eq(p.get("expires_at") == null ? null : Utc.parseMs(p.get("expires_at")), lic.expiresAt() == null ? null : lic.expiresAt().toEpochMilli(), "expires_at");
                    eq(p.get("kid"), lic.kid(), "kid");
                } else {
                    KeywardenException e = throwsKw(() -> Offline.verify(s(c, "file"), keys, s(c, "app_id"), s(c, "hwid"), now, last));
                    eq(ErrorCode.OFFLINE_INVALID, e.getCode(), "code of " + c.get("name"));
                    eq(c.get("reason"), e.getReasonName(), "reason of " + c.get("name"));
                    seen.add((String) c.get("reason"));
                }
            }
            eq(new TreeSet<>(reasons), seen, "every reason has a case");
        });
        t.test("unit/vectors: activation requests carry exactly the fields of each case (airgap.json)", () -> {
            for (Map<String, Object> c : list(Json.obj(vector("airgap.json").get("requests")).get("cases"))) {
                Map<String, String> comps = null;
                if (c.get("components") != null) {
                    comps = new java.util.LinkedHashMap<>();
                    for (Map.Entry<String, Object> e : Json.obj(c.get("components")).entrySet()) comps.put(e.getKey(), (String) e.getValue());
                }
                String mine = Airgap.buildRequest(s(c, "app_id"), s(c, "key"), s(c, "hwid"), s(c, "nonce"), s(c, "created_at"), comps);
                eq(decodeRequest(s(c, "request")), decodeRequest(mine), "request of " + c.get("name"));
            }
        });
        t.test("unit/vectors: activation answers are accepted only for the latest request's nonce (airgap.json)", () -> {
            Map<String, Object> v = vector("airgap.json");
            Map<String, PublicKey> keys = pinned(v.get("pinned_keys"));
            Map<String, Object> part = Json.obj(v.get("responses"));
            Set<String> seen = new TreeSet<>();
            for (Map<String, Object> c : list(part.get("cases"))) {
                Double last = c.get("last_seen") == null ? null : ((Number) c.get("last_seen")).doubleValue();
                double now = ((Number) c.get("now")).doubleValue();
                Runnable run = () -> {
                    Offline.verify(s(c, "file"), keys, s(c, "app_id"), s(c, "hwid"), now, last);
                    Airgap.checkRequestNonce(s(c, "file"), (String) c.get("nonce"));
                };
                if (Boolean.TRUE.equals(c.get("valid"))) {
                    run.run();
                } else {
                    KeywardenException e = throwsKw(run::run);
                    eq(ErrorCode.OFFLINE_INVALID, e.getCode(), "code of " + c.get("name"));
                    eq(c.get("reason"), e.getReasonName(), "reason of " + c.get("name"));
                    seen.add((String) c.get("reason"));
                }
            }
            eq(new TreeSet<>(castList(part.get("reasons"))), seen, "every reason has a case");
        });
        t.test("unit/vectors: seat pools are accepted or refused for the reason each case names (airgap.json)", () -> {
            Map<String, Object> v = vector("airgap.json");
            Map<String, PublicKey> keys = pinned(v.get("pinned_keys"));
            Map<String, Object> part = Json.obj(v.get("pools"));
            Set<String> seen = new TreeSet<>();
            for (Map<String, Object> c : list(part.get("cases"))) {
                double now = ((Number) c.get("now")).doubleValue();
                if (Boolean.TRUE.equals(c.get("valid"))) {
                    SeatPool pool = Airgap.verifyPool(s(c, "pool"), keys, s(c, "app_id"), now);
                    Map<String, Object> p = Json.obj(c.get("payload"));
                    eq(p.get("license_id"), pool.licenseId(), "license_id");
                    eq(p.get("relay_id"), pool.relayId(), "relay_id");
                    eq(p.get("seats"), pool.seats(), "seats");
                    eq(p.get("level"), pool.level(), "level");
                    eq(new ArrayList<>(new TreeSet<>(castList(p.get("entitlements")))), pool.entitlements(), "entitlements");
                    eq(p.get("expires_at") == null, pool.expiresAt() == null, "expires_at");
                } else {
                    KeywardenException e = throwsKw(() -> Airgap.verifyPool(s(c, "pool"), keys, s(c, "app_id"), now));
                    eq(ErrorCode.OFFLINE_INVALID, e.getCode(), "code of " + c.get("name"));
                    eq(c.get("reason"), e.getReasonName(), "reason of " + c.get("name"));
                    seen.add((String) c.get("reason"));
                }
            }
            eq(new TreeSet<>(castList(part.get("reasons"))), seen, "every reason has a case");
        });
        t.test("unit/vectors: what each grace_until grants", () -> {
            Map<String, Object> v = Json.obj(vector("offline.json").get("grace"));
            for (Map<String, Object> c : list(v.get("cases"))) {
                Long until = Grace.untilOf(c);
                Object want = c.get("until");
                if (want == null) eq(null, until, "until of " + c.get("name"));
                else eq(Math.round(((Number) want).doubleValue() * 1000), until, "until of " + c.get("name"));
                Grace g = new Grace();
                g.note(c);
                eq(c.get("active"), g.active(((Number) c.get("now")).doubleValue()), "active of " + c.get("name"));
            }
        });
        t.test("unit/channel vectors: the handshake's keys (X25519, HKDF-SHA256)", () -> {
            Map<String, Object> h = Json.obj(vector("channel.json").get("handshake"));
            PrivateKey client = Crypto.x25519PrivateKey(Crypto.hex(s(h, "client_secret_hex")));
            PrivateKey server = Crypto.x25519PrivateKey(Crypto.hex(s(h, "server_secret_hex")));
            eq(s(h, "client_key"), Crypto.b64url(Crypto.x25519PublicOf(client)), "client_key");
            eq(s(h, "server_key"), Crypto.b64url(Crypto.x25519PublicOf(server)), "server_key");
            String transcript = Crypto.channelTranscript(s(h, "kid"), l(h, "ts"), s(h, "session"), s(h, "client_key"), s(h, "server_key"), s(h, "conn"), l(h, "beat_interval"));
            eq(s(h, "transcript"), transcript, "transcript");
            eq(s(h, "shared_hex"), Crypto.toHex(Crypto.x25519(client, Crypto.b64urlDecode(s(h, "server_key")))), "shared");
            eq(s(h, "transcript_sha256_hex"), Crypto.sha256Hex(Crypto.utf8(transcript)), "transcript sha256");
            byte[][] k = Crypto.channelKeys(client, s(h, "server_key"), transcript);
            eq(s(h, "s2c_hex"), Crypto.toHex(k[0]), "s2c");
            eq(s(h, "c2s_hex"), Crypto.toHex(k[1]), "c2s");
            // A generated key's raw bytes round-trip through the JDK's representation.
            java.security.KeyPair kp = Crypto.x25519KeyPair();
            eq(Crypto.toHex(Crypto.x25519Raw(kp.getPublic())), Crypto.toHex(Crypto.x25519PublicOf(kp.getPrivate())), "raw public key");
            // A low-order server key is refused.
            boolean refused = false;
            try {
                Crypto.x25519(client, new byte[32]);
            } catch (IllegalArgumentException e) {
                refused = true;
            }
            check(refused, "all-zero key refused");
        });
        t.test("unit/channel vectors: every hello case (malformed, unknown_kid, bad_base64, stale, bad_signature)", () -> {
            Map<String, Object> v = vector("channel.json");
            Map<String, Object> h = Json.obj(v.get("handshake"));
            Map<String, PublicKey> keys = pinned(v.get("pinned_keys"));
            PrivateKey client = Crypto.x25519PrivateKey(Crypto.hex(s(h, "client_secret_hex")));
            byte[][] k = Channel.verifyHello(keys, l(v, "now"), s(h, "session"), s(h, "client_key"), client, s(h, "hello"));
            eq(s(h, "s2c_hex"), Crypto.toHex(k[0]), "s2c of the hello");
            Set<String> reasons = new TreeSet<>();
            for (Map<String, Object> c : list(v.get("hello_cases"))) {
                Runnable r = () -> Channel.verifyHello(keys, l(v, "now"), s(c, "session"), s(c, "client_key"), client, s(c, "hello"));
                if (Boolean.TRUE.equals(c.get("valid"))) {
                    r.run();
                } else {
                    KeywardenException e = throwsKw(r::run);
                    eq(c.get("reason"), e.getReasonName(), "reason of " + c.get("name"));
                    reasons.add(e.getReasonName());
                }
            }
            eq(new TreeSet<>(List.of("malformed", "unknown_kid", "bad_base64", "stale", "bad_signature")), reasons, "every reason");
        });
        t.test("unit/channel vectors: every server frame (bad_mac, malformed, out_of_order) and client frames byte for byte", () -> {
            Map<String, Object> v = vector("channel.json");
            Map<String, Object> h = Json.obj(v.get("handshake"));
            byte[] s2c = Crypto.hex(s(h, "s2c_hex"));
            byte[] c2s = Crypto.hex(s(h, "c2s_hex"));
            Set<String> reasons = new TreeSet<>();
            for (Map<String, Object> c : list(v.get("server_frames"))) {
                Object r = Channel.readFrame(s2c, l(c, "expected_seq"), Base64.getDecoder().decode(s(c, "frame")), true);
                if (Boolean.TRUE.equals(c.get("valid"))) {
                    eq(Json.parse(s(c, "payload")), r, "payload of " + c.get("name"));
                } else {
                    check(r instanceof Channel.Refusal, "refused: " + c.get("name"));
                    eq(c.get("reason"), ((Channel.Refusal) r).reason().wire(), "reason of " + c.get("name"));
                    reasons.add(((Channel.Refusal) r).reason().wire());
                }
            }
            eq(new TreeSet<>(List.of("bad_mac", "malformed", "out_of_order")), reasons, "every reason");
            check(Channel.readFrame(s2c, 1, new byte[40], false) instanceof Channel.Refusal, "a text frame is refused");
            for (Map<String, Object> c : list(v.get("client_frames"))) {
                eq(s(c, "frame"), Base64.getEncoder().encodeToString(Crypto.sealFrame(c2s, Crypto.utf8(s(c, "payload")))), "client frame");
                // What this SDK writes for the same message is byte for byte the same payload.
                eq(s(c, "payload"), Json.write(Json.parse(s(c, "payload"))), "JSON writer");
            }
        });
        t.test("unit/json: strict reader and writer", () -> {
            Object v = Json.parse("{\"a\":[1,-2,3.5,true,false,null,\"\\u00e9\\n\\ud83d\\ude00\"],\"b\":{}}");
            eq("{\"a\":[1,-2,3.5,true,false,null,\"é\\n😀\"],\"b\":{}}", Json.write(v), "round trip");
            for (String bad : List.of("", "{", "[1,]", "{\"a\" 1}", "01", "1.", "\"\\x\"", "tru", "[1] 2", "{\"a\":1,}", "\"a\u0001\"")) {
                boolean refused = false;
                try {
                    Json.parse(bad);
                } catch (Json.ParseException e) {
                    refused = true;
                }
                check(refused, "refused: " + bad);
            }
            boolean deep = false;
            try {
                Json.parse("[".repeat(10000));
            } catch (Json.ParseException e) {
                deep = true;
            }
            check(deep, "deep nesting refused without a StackOverflowError");
            eq(Long.valueOf(9007199254740993L), Json.parse("9007199254740993"), "a big integer stays exact");
        });
        t.test("unit/config: keywarden.json is checked; bad input is a ConfigException", () -> {
            String key = Base64.getEncoder().encodeToString(new byte[32]);
            Config c = Config.parse("{\"format\":1,\"base_url\":\"http://h:1\",\"api_key\":\"k\",\"response_keys\":[{\"kid\":\"k1\",\"alg\":\"Ed25519\",\"public_key\":\"" + key + "\"}],\"app_id\":\"a\",\"future\":1}");
            eq("a", c.getAppId(), "app_id");
            eq(null, c.getApiSecret(), "no secret");
            for (String bad : List.of("[]", "{\"format\":2}", "{\"format\":1,\"base_url\":\"ftp://x\"}",
                    "{\"format\":1,\"base_url\":\"http://h\",\"api_key\":\"k\",\"response_keys\":[]}",
                    "{\"format\":1,\"base_url\":\"http://h\",\"api_key\":\"k\",\"response_keys\":[{\"kid\":\"k1\",\"public_key\":\"AAAA\"}]}",
                    "not json")) {
                boolean refused = false;
                try {
                    Config.parse(bad);
                } catch (ConfigException e) {
                    refused = e.getMessage().startsWith("keywarden config:");
                }
                check(refused, "refused: " + bad);
            }
            boolean missingFile = false;
            try {
                Config.load(Paths.get("/nonexistent/keywarden.json"));
            } catch (ConfigException e) {
                missingFile = true;
            }
            check(missingFile, "a missing file is a ConfigException");
            boolean noSecret = false;
            try {
                new Client(c, ClientOptions.builder().encKey("x").build());
            } catch (ConfigException e) {
                noSecret = true;
            }
            check(noSecret, "encKey without api_secret");
        });
        t.test("unit/utc: strict ISO 8601 UTC", () -> {
            eq(1767229200000L, Utc.parseMs("2026-01-01T01:00:00.000Z"), "ms");
            eq(1767229199999L, Utc.parseMs("2026-01-01T00:59:59.999999Z"), "cut");
            eq(null, Utc.parseMs("2026-02-30T00:00:00Z"), "30 February");
            eq(null, Utc.parseMs("2026-01-01T00:00:60Z"), "second 60");
            eq(null, Utc.parseMs("2026-01-01T00:00:00+00:00"), "offset");
        });
        t.test("unit/client: answers are verified; a forged one is refused and grants nothing", () -> {
            Fake f = new Fake();
            Client c = f.client(null);
            c.init();
            eq("fake", c.getSession(), "session");
            f.flip = true;
            KeywardenException e = throwsKw(() -> c.activateLicense("KEY", "hw"));
            eq("bad_signature", e.getReasonName(), "flipped body");
            eq(null, c.getGraceUntil(), "no grace from an unverified answer");
            f.flip = false;
            LicenseInfo lic = c.activateLicense("KEY", "hw");
            eq(3L, lic.level(), "level");
            eq(List.of("export", "pro"), lic.entitlements(), "sorted entitlements");
            check(c.isGraceActive(), "grace from a verified answer");
            f.status = 403;
            f.detail = "License key is banned";
            e = throwsKw(() -> c.activateLicense("KEY", "hw"));
            eq(ErrorCode.BANNED, e.getCode(), "banned");
            eq(403, e.getStatus(), "status");
            check(!c.isGraceActive(), "a verified refusal ends the grace");
            f.status = 200;
            f.unsentFailures = 2;
            c.activateLicense("KEY", "hw");
            eq(0, f.unsentFailures, "unsent calls are retried");
            f.unsentFailures = 5;
            e = throwsKw(() -> c.activateLicense("KEY", "hw"));
            eq(ErrorCode.NETWORK, e.getCode(), "retries spent");
            check(e.isNotSent(), "not sent");
        });
        t.test("unit/client: a signed 502 of a gateway is a server error; an unsigned 200 is refused", () -> {
            Fake f = new Fake();
            Client c = f.client(null);
            f.unsigned = true;
            f.status = 502;
            KeywardenException e = throwsKw(c::init);
            eq(ErrorCode.SERVER, e.getCode(), "gateway");
            f.status = 200;
            e = throwsKw(c::init);
            eq("unsigned", e.getReasonName(), "unsigned 200");
        });
        t.test("unit/client: the route hint is dropped after a connection error, a timeout or a 502-504 (docs/multi-host.md)", () -> {
            Fake f = new Fake();
            Client c = f.client(null);
            f.routeName = "a-0";
            c.init();
            // One failing call per step: {status, route named, unsigned?, failure}.
            Object[][] steps = {
                {503, "a-0", false, null},
                {401, "b-1", false, null},
                {502, null, true, null},
                {401, "b-1", false, null},
                {504, "b-1", false, null},
                {401, "b-0", false, null},
                {0, null, false, new TransportException(true, true, "timeout")},
                {401, "b-1", false, null},
                {0, null, false, new TransportException(false, true, "reset after sending")},
                {401, "b-0", false, null},
                {401, null, false, null},
            };
            for (Object[] st : steps) {
                f.status = (Integer) st[0] == 0 ? 200 : (Integer) st[0];
                f.detail = "Invalid license key";
                f.routeName = (String) st[1];
                f.unsigned = (Boolean) st[2];
                f.failNext = (TransportException) st[3];
                throwsKw(() -> c.activateLicense("KEY", "hw"));
            }
            java.util.ArrayList<String> sent = new java.util.ArrayList<>(f.routesSent);
            eq(java.util.Arrays.asList(null, "a-0", null, "b-1", null, "b-1", null, "b-0", null, "b-1", null, "b-0"), sent, "routes carried");
        });
        t.test("unit/transport: refused connection is not sent; a silent server times out on time; an oversized answer is refused", () -> {
            java.net.ServerSocket closed = new java.net.ServerSocket(0, 1, java.net.InetAddress.getLoopbackAddress());
            int port = closed.getLocalPort();
            closed.close();
            DefaultTransport tr = new DefaultTransport(1024);
            Transport.Request req = new Transport.Request("POST", "http://127.0.0.1:" + port + "/api/client/init", Map.of(), new byte[0], 2000);
            try {
                tr.send(req);
                throw new AssertionError("a closed port answered");
            } catch (TransportException e) {
                check(!e.isSent(), "nothing was sent: " + e.getMessage());
            }
            com.sun.net.httpserver.HttpServer srv = com.sun.net.httpserver.HttpServer.create(new java.net.InetSocketAddress(java.net.InetAddress.getLoopbackAddress(), 0), 8);
            java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
            srv.createContext("/slow", x -> {
                try {
                    release.await(10, java.util.concurrent.TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                x.close();
            });
            srv.createContext("/big", x -> {
                x.sendResponseHeaders(200, 4096);
                x.getResponseBody().write(new byte[4096]);
                x.close();
            });
            srv.createContext("/chunked", x -> {
                x.getResponseHeaders().add("X-Response-Kid", "k1");
                x.sendResponseHeaders(200, 0);
                x.getResponseBody().write("{\"a\":1}".getBytes(StandardCharsets.UTF_8));
                x.close();
            });
            srv.setExecutor(java.util.concurrent.Executors.newCachedThreadPool(r -> {
                Thread th = new Thread(r);
                th.setDaemon(true);
                return th;
            }));
            srv.start();
            try {
                String base = "http://127.0.0.1:" + srv.getAddress().getPort();
                long t0 = System.nanoTime();
                try {
                    tr.send(new Transport.Request("POST", base + "/slow", Map.of(), new byte[] {1}, 700));
                    throw new AssertionError("a silent server answered");
                } catch (TransportException e) {
                    long ms = (System.nanoTime() - t0) / 1_000_000;
                    check(e.isTimeout() && e.isSent(), "a timeout after sending: " + e.getMessage());
                    check(ms >= 650 && ms < 2500, "ended at the deadline: " + ms + " ms");
                }
                try {
                    tr.send(new Transport.Request("POST", base + "/big", Map.of(), new byte[0], 2000));
                    throw new AssertionError("4096 bytes passed a 1024 byte limit");
                } catch (TransportException e) {
                    check(e.getMessage().contains("larger than 1024"), e.getMessage());
                }
                Transport.Response r = tr.send(new Transport.Request("POST", base + "/chunked", Map.of(), new byte[0], 2000));
                eq("{\"a\":1}", new String(r.body(), StandardCharsets.UTF_8), "a chunked body");
                eq("k1", r.headers().get("x-response-kid"), "headers lower-cased");
                // Through the client: a timeout is a typed error, never anything else.
                Client c = new Client(Config.parse("{\"format\":1,\"base_url\":\"" + base + "/slow\",\"api_key\":\"k\",\"response_keys\":[{\"kid\":\"k1\",\"public_key\":\"" + Base64.getEncoder().encodeToString(new byte[32]) + "\"}]}"),
                        ClientOptions.builder().timeout(java.time.Duration.ofMillis(500)).build());
                eq(ErrorCode.TIMEOUT, throwsKw(c::init).getCode(), "timeout");
            } finally {
                release.countDown();
                srv.stop(0);
            }
        });
        t.test("unit/client: hostile answers are verification errors (malformed), never anything else", () -> {
            Fake f = new Fake();
            Client c = f.client(null);
            for (String body : List.of("not json", "[1,2]", "{\"success\":false}", "{\"success\":true}", "{\"success\":true,\"session\":5,\"app\":{}}",
                    "[".repeat(5000), "{\"success\":true,\"session\":\"s\",\"app\":{\"name\":\"x\"},\"\u0000\":1")) {
                f.raw = body;
                KeywardenException e = throwsKw(c::init);
                eq("malformed", e.getReasonName(), "reason for " + body.substring(0, Math.min(30, body.length())));
            }
            f.raw = null;
            c.init();
            f.raw = "{\"success\":true,\"level\":\"3\"}";
            eq("malformed", throwsKw(() -> c.activateLicense("K", "h")).getReasonName(), "level as a string");
            f.raw = "{\"success\":true,\"level\":3,\"entitlements\":[1]}";
            eq("malformed", throwsKw(() -> c.activateLicense("K", "h")).getReasonName(), "entitlements not strings");
        });
        t.test("unit/client: loadOffline records the clock and refuses a clock rolled back", () -> {
            Map<String, Object> v = vector("offline.json");
            Map<String, Object> valid = list(v.get("cases")).get(0);
            Path dir = Files.createTempDirectory("kw-java-state");
            Path state = dir.resolve("state.json");
            AtomicReference<Long> now = new AtomicReference<>(l(valid, "now") * 1000);
            StringBuilder keys = new StringBuilder();
            for (Map<String, Object> k : list(v.get("pinned_keys"))) {
                if (keys.length() > 0) keys.append(',');
                keys.append(Json.write(k));
            }
            Config cfg = Config.parse("{\"format\":1,\"base_url\":\"http://127.0.0.1:1\",\"api_key\":\"k\",\"app_id\":\"" + s(valid, "app_id") + "\",\"response_keys\":[" + keys + "]}");
            Client c = new Client(cfg, ClientOptions.builder().clock(now::get).stateFile(state).transport(r -> {
                throw new AssertionError("no call expected");
            }).build());
            OfflineLicense lic = c.loadOffline(s(valid, "file") + "\n", s(valid, "hwid"));
            eq(List.of("export", "pro"), c.getEntitlements(), "entitlements of the file");
            check(lic.hasEntitlement("pro"), "hasEntitlement");
            check(Files.readString(state).contains("\"last_seen\":" + l(valid, "now")), "state file written");
            now.set(now.get() - 301_000);
            eq("clock_rolled_back", throwsKw(() -> c.loadOffline(s(valid, "file"), s(valid, "hwid"))).getReasonName(), "rolled back");
            check(Files.readString(state).contains("\"last_seen\":" + l(valid, "now")), "never lowered");
            Files.writeString(state, "garbage");
            c.loadOffline(s(valid, "file"), s(valid, "hwid")); // a damaged record is no record
            Config noApp = Config.parse("{\"format\":1,\"base_url\":\"http://h\",\"api_key\":\"k\",\"response_keys\":[" + keys + "]}");
            boolean cfgErr = false;
            try {
                new Client(noApp).loadOffline(s(valid, "file"));
            } catch (ConfigException e) {
                cfgErr = true;
            }
            check(cfgErr, "no app_id: ConfigException");
        });
        t.test("unit/machine: the hwid formula", () -> {
            eq(Crypto.sha256Hex(Crypto.utf8("kwhwid1\nsalt\nabc")), Machine.hwidFor("salt", "  ABC \n"), "formula");
            check(Machine.machineHwid("x").matches("^[0-9a-f]{64}$"), "machine hwid");
            check(Machine.selfHash().matches("^[0-9a-f]{64}$"), "self hash");
            check(!Machine.debuggerAttached(), "no debugger here");
        });
        t.test("unit/heartbeat: a listener that throws is logged; the state leaves offline the moment grace ends", () -> {
            Fake f = new Fake();
            AtomicReference<Long> clock = new AtomicReference<>(System.currentTimeMillis());
            Client c = f.client(clock::get);
            c.init();
            c.activateLicense("KEY", "hw");
            AtomicInteger beats = new AtomicInteger();
            java.util.concurrent.LinkedBlockingQueue<HeartbeatEvent> events = new java.util.concurrent.LinkedBlockingQueue<>();
            Heartbeat hb = c.startHeartbeat(HeartbeatOptions.builder().systemId("sys").codeHash("ab").interval(java.time.Duration.ofMillis(50))
                    .debuggerDetected(() -> false).channel(false).listener(e -> {
                        if (e instanceof HeartbeatEvent.Beat) {
                            beats.incrementAndGet();
                            throw new IllegalStateException("a listener's own bug");
                        }
                    }).listener(events::add).build());
            try {
                waitFor(events, HeartbeatEvent.Beat.class, 5000);
                waitFor(events, HeartbeatEvent.Beat.class, 5000);
                check(beats.get() >= 2, "beats go on after a listener threw");
                f.down = true;
                HeartbeatEvent.Offline off = waitFor(events, HeartbeatEvent.Offline.class, 5000);
                eq(c.getGraceUntil(), off.graceUntil(), "grace_until");
                eq(HeartbeatState.OFFLINE, hb.getState(), "offline");
                // The clock passes grace_until: the state is degraded at once, before any beat could fail.
                clock.set(c.getGraceUntil().toEpochMilli() + 1000 - Math.round(c.getClockOffset() * 1000));
                eq(HeartbeatState.DEGRADED, hb.getState(), "degraded the moment grace ended");
                waitFor(events, HeartbeatEvent.GraceExpired.class, 5000);
            } finally {
                f.down = false;
                hb.stop();
            }
            eq(HeartbeatState.STOPPED, hb.getState(), "stopped");
        });
        t.test("unit/heartbeat: a beat right after the known expiry tells a REST client on time; a beat accepted well after it means an extension", () -> {
            Fake f = new Fake();
            Client c = f.client(null);
            c.init();
            long expiry = System.currentTimeMillis() + 1500;
            f.expiresAt = java.time.Instant.ofEpochMilli(expiry).toString();
            f.rejectFrom = expiry;
            c.activateLicense("KEY", "hw");
            java.util.concurrent.LinkedBlockingQueue<HeartbeatEvent> events = new java.util.concurrent.LinkedBlockingQueue<>();
            long t0 = System.currentTimeMillis();
            Heartbeat hb = c.startHeartbeat(HeartbeatOptions.builder().systemId("sys").codeHash("ab").interval(java.time.Duration.ofSeconds(60))
                    .debuggerDetected(() -> false).channel(false).listener(events::add).build());
            HeartbeatEvent.Expired ex = waitFor(events, HeartbeatEvent.Expired.class, 10_000);
            check(System.currentTimeMillis() - t0 < 6000, "told within seconds of the expiry, not at the next 60 s beat");
            eq(java.time.Instant.ofEpochMilli(expiry), ex.expiresAt(), "the known expiry");
            eq(HeartbeatState.EXPIRED, hb.getState(), "expired");
            // The same, but the server goes on accepting (the key was extended): the heartbeat goes on.
            Fake g = new Fake();
            Client d = g.client(null);
            d.init();
            g.expiresAt = java.time.Instant.ofEpochMilli(System.currentTimeMillis() + 500).toString();
            d.activateLicense("KEY", "hw");
            java.util.concurrent.LinkedBlockingQueue<HeartbeatEvent> ev2 = new java.util.concurrent.LinkedBlockingQueue<>();
            Heartbeat hb2 = d.startHeartbeat(HeartbeatOptions.builder().systemId("sys").codeHash("ab").interval(java.time.Duration.ofMillis(400))
                    .debuggerDetected(() -> false).channel(false).listener(ev2::add).build());
            long end = System.currentTimeMillis() + 15_000;
            while (d.getExpiresAt() != null && System.currentTimeMillis() < end) waitFor(ev2, HeartbeatEvent.Beat.class, 5000);
            eq(null, d.getExpiresAt(), "forgotten: extended");
            eq(HeartbeatState.HEALTHY, hb2.getState(), "beats on");
            hb2.stop();
        });
        t.test("unit/heartbeat: expiry while running is reported as expired, never covered by grace (docs/protocol.md 12.8)", () -> {
            Fake f = new Fake();
            AtomicReference<Long> clock = new AtomicReference<>(System.currentTimeMillis());
            Client c = f.client(clock::get);
            c.init();
            f.expiresAt = "2020-01-01T00:00:00.000Z"; // seen through the clock below
            c.activateLicense("KEY", "hw");
            java.util.concurrent.LinkedBlockingQueue<HeartbeatEvent> events = new java.util.concurrent.LinkedBlockingQueue<>();
            Heartbeat hb = c.startHeartbeat(HeartbeatOptions.builder().systemId("sys").codeHash("ab").interval(java.time.Duration.ofMillis(50))
                    .debuggerDetected(() -> false).channel(false).reauth(true).listener(events::add).build());
            f.status = 403;
            f.detail = "rejected";
            HeartbeatEvent.Expired ex = waitFor(events, HeartbeatEvent.Expired.class, 5000);
            eq(ErrorCode.EXPIRED, ex.error().getCode(), "code");
            eq(ErrorCode.EXPIRED, waitFor(events, HeartbeatEvent.Killed.class, 5000).error().getCode(), "killed as expired");
            eq(HeartbeatState.EXPIRED, hb.getState(), "state");
            eq(null, c.getGraceUntil(), "no grace after an expiry");
            check(hb.await(1, java.util.concurrent.TimeUnit.SECONDS), "ended");
            // Unreachable after the expiry: not offline, expired.
            Fake g = new Fake();
            Client d = g.client(null);
            d.init();
            g.expiresAt = "2020-01-01T00:00:00.000Z";
            d.activateLicense("KEY", "hw");
            check(!d.isGraceActive(), "grace never covers an expired license");
            java.util.concurrent.LinkedBlockingQueue<HeartbeatEvent> ev2 = new java.util.concurrent.LinkedBlockingQueue<>();
            Heartbeat hb2 = d.startHeartbeat(HeartbeatOptions.builder().systemId("sys").codeHash("ab").interval(java.time.Duration.ofMillis(50))
                    .debuggerDetected(() -> false).channel(false).listener(ev2::add).build());
            g.down = true;
            waitFor(ev2, HeartbeatEvent.Expired.class, 5000);
            eq(HeartbeatState.EXPIRED, hb2.getState(), "expired while unreachable");
            check(ev2.stream().noneMatch(e -> e instanceof HeartbeatEvent.Offline), "never offline");
        });
    }

    @SuppressWarnings("unchecked")
    static List<String> castList(Object o) {
        return (List<String>) o;
    }

    static <T extends HeartbeatEvent> T waitFor(java.util.concurrent.BlockingQueue<HeartbeatEvent> q, Class<T> type, long ms) throws InterruptedException {
        long end = System.currentTimeMillis() + ms;
        while (true) {
            long left = end - System.currentTimeMillis();
            if (left <= 0) throw new AssertionError("no " + type.getSimpleName() + " within " + ms + " ms");
            HeartbeatEvent e = q.poll(left, java.util.concurrent.TimeUnit.MILLISECONDS);
            if (type.isInstance(e)) return type.cast(e);
        }
    }

    /** A server of its own: signs with a test key, answers what the test sets. */
    static final class Fake {
        final java.security.KeyPair kp;
        volatile boolean flip;
        volatile boolean unsigned;
        volatile boolean down;
        /** The route the next answers name (x-keywarden-route); null: none. */
        volatile String routeName;
        /** A transport failure for the next call: after sending it (a connection error) or a timeout. */
        volatile TransportException failNext;
        /** The routes the calls carried, in order (null: none). */
        final List<String> routesSent = new java.util.concurrent.CopyOnWriteArrayList<>();
        volatile int status = 200;
        volatile String detail = "";
        volatile int unsentFailures;
        volatile String expiresAt = "2099-01-01T00:00:00.000Z";
        /** Beats from this moment (epoch ms) are refused as rejected (the server's kill at the expiry). */
        volatile long rejectFrom = Long.MAX_VALUE;
        /** A body sent instead of the usual answer (signed all the same). */
        volatile String raw;

        Fake() throws Exception {
            kp = java.security.KeyPairGenerator.getInstance("Ed25519").generateKeyPair();
        }

        Client client(java.util.function.LongSupplier clock) {
            byte[] spki = kp.getPublic().getEncoded();
            String pub = Base64.getEncoder().encodeToString(java.util.Arrays.copyOfRange(spki, spki.length - 32, spki.length));
            Config cfg = Config.parse("{\"format\":1,\"base_url\":\"http://127.0.0.1:9\",\"api_key\":\"k\",\"response_keys\":[{\"kid\":\"k1\",\"public_key\":\"" + pub + "\"}]}");
            ClientOptions.Builder b = ClientOptions.builder().transport(this::answer).retries(2);
            if (clock != null) b.clock(clock);
            return new Client(cfg, b.build());
        }

        Transport.Response answer(Transport.Request req) {
            if (unsentFailures > 0) {
                unsentFailures--;
                throw new TransportException(false, false, "refused");
            }
            if (down) throw new TransportException(false, false, "refused");
            routesSent.add(req.headers().get("X-Keywarden-Route"));
            TransportException fail = failNext;
            if (fail != null) {
                failNext = null;
                throw fail;
            }
            String path = java.net.URI.create(req.url()).getPath();
            Map<String, Object> in = Json.parseObject(new String(req.body(), StandardCharsets.UTF_8));
            Map<String, Object> out = new LinkedHashMap<>();
            String grace = java.time.Instant.now().plusSeconds(3600).toString();
            int status = this.status;
            String detail = this.detail;
            if (path.endsWith("/heartbeat") && System.currentTimeMillis() >= rejectFrom) {
                status = 403;
                detail = "rejected";
            }
            if (status != 200) {
                out.put("detail", detail);
            } else if (path.endsWith("/init")) {
                out.put("success", true);
                out.put("session", "fake");
                out.put("app", Map.of("name", "Fake", "version", "1.0", "hwid_lock", true));
            } else if (path.endsWith("/license")) {
                out.put("success", true);
                out.put("level", 3L);
                out.put("expires_at", expiresAt);
                out.put("entitlements", List.of("pro", "export"));
                out.put("grace_until", grace);
            } else if (path.endsWith("/heartbeat/start")) {
                out.put("success", true);
                out.put("token", "TT0");
                out.put("beat_interval", 5L);
                out.put("proof", Crypto.startProof((String) in.get("session"), (String) in.get("system_id"), "TT0"));
                out.put("grace_until", grace);
            } else if (path.endsWith("/heartbeat")) {
                long idx = (Long) in.get("beat_index");
                String nt = "TT" + idx;
                out.put("success", true);
                out.put("new_token", nt);
                out.put("beat_count", idx);
                out.put("proof", Crypto.beatProof((String) in.get("token"), (String) in.get("session"), idx, nt, idx));
                out.put("grace_until", grace);
            } else {
                out.put("success", true);
            }
            byte[] body = (raw != null ? raw : Json.write(out)).getBytes(StandardCharsets.UTF_8);
            String ts = Long.toString(System.currentTimeMillis() / 1000);
            String msg = Crypto.responseMessage("k1", "POST", path, status, ts, req.headers().get("X-Nonce"), body);
            String sig;
            try {
                java.security.Signature s = java.security.Signature.getInstance("Ed25519");
                s.initSign(kp.getPrivate());
                s.update(Crypto.utf8(msg));
                sig = Base64.getEncoder().encodeToString(s.sign());
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
            if (flip) body[body.length - 2] ^= 1;
            Map<String, String> h = new LinkedHashMap<>();
            if (routeName != null) h.put("x-keywarden-route", routeName);
            if (!unsigned) {
                h.put("x-response-kid", "k1");
                h.put("x-response-timestamp", ts);
                h.put("x-response-signature", sig);
            }
            return new Transport.Response(status, h, body);
        }
    }
}
