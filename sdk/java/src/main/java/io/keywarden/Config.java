package io.keywarden;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Objects;

/**
 * keywarden.json, format 1 (sdk/vectors/README.md): what the dashboard's SDK zip carries. A bad configuration is a
 * programming mistake, not a runtime outcome: it throws {@link ConfigException}. Unknown fields are ignored.
 */
public final class Config {
    /** A pinned Ed25519 response-signing key (docs/protocol.md 4); {@code publicKey} is base64 of its 32 bytes. */
    public record ResponseKey(String kid, String publicKey) {}

    private final String baseUrl;
    private final String apiKey;
    private final List<ResponseKey> responseKeys;
    private final String appName;
    private final String version;
    private final String appId;
    private final String apiSecret;

    private Config(String baseUrl, String apiKey, List<ResponseKey> keys, String appName, String version, String appId,
            String apiSecret) {
        this.baseUrl = baseUrl;
        this.apiKey = apiKey;
        this.responseKeys = List.copyOf(keys);
        this.appName = appName;
        this.version = version;
        this.appId = appId;
        this.apiSecret = apiSecret;
    }

    public int getFormat() {
        return 1;
    }

    public String getBaseUrl() {
        return baseUrl;
    }

    public String getApiKey() {
        return apiKey;
    }

    public List<ResponseKey> getResponseKeys() {
        return responseKeys;
    }

    /** May be null. */
    public String getAppName() {
        return appName;
    }

    /** Sent on init; null means "1.0". */
    public String getVersion() {
        return version;
    }

    /** The application's id (offline license files must name it); may be null. */
    public String getAppId() {
        return appId;
    }

    /** Present only when the application requires signed requests; may be null. */
    public String getApiSecret() {
        return apiSecret;
    }

    @Override
    public String toString() { // never the secret
        return "Config(base_url=" + baseUrl + ", app_name=" + appName + ", version=" + version + ", app_id=" + appId
                + ", keys=" + responseKeys.size() + (apiSecret != null ? ", api_secret=***" : "") + ")";
    }

    private static ConfigException fail(String msg) {
        return new ConfigException("keywarden config: " + msg);
    }

    /** Reads and checks a keywarden.json file. */
    public static Config load(Path path) {
        Objects.requireNonNull(path, "path");
        String text;
        try {
            text = new String(Files.readAllBytes(path), StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new ConfigException("keywarden config: cannot read " + path + ": " + e.getMessage(), e);
        }
        if (text.startsWith("\uFEFF")) text = text.substring(1);
        return parse(text);
    }

    /** Checks keywarden.json's text. */
    public static Config parse(String json) {
        Object raw;
        try {
            raw = Json.parse(json);
        } catch (Json.ParseException e) {
            throw fail("not JSON: " + e.getMessage());
        }
        return fromMap(Json.obj(raw));
    }

    /** Checks a parsed keywarden.json. */
    public static Config fromMap(Map<String, Object> raw) {
        if (raw == null) throw fail("not a JSON object");
        Object fmt = raw.get("format");
        if (!(fmt instanceof Long) || (Long) fmt != 1) throw fail("unsupported format " + Json.write(fmt) + " (this SDK reads format 1)");
        Object baseUrl = raw.get("base_url");
        if (!(baseUrl instanceof String) || !((String) baseUrl).matches("^https?://[^/\\s].*")) throw fail("base_url must be an http(s) URL");
        Object apiKey = raw.get("api_key");
        if (!(apiKey instanceof String) || ((String) apiKey).isEmpty()) throw fail("api_key missing");
        Object version = raw.get("version");
        if (version != null && !(version instanceof String)) throw fail("version must be a string");
        Object secret = raw.get("api_secret");
        if (secret != null && !(secret instanceof String)) throw fail("api_secret must be a string");
        Object appId = raw.get("app_id");
        if (appId != null && (!(appId instanceof String) || ((String) appId).isEmpty())) throw fail("app_id must be a non-empty string");
        Object keysRaw = raw.get("response_keys");
        if (!(keysRaw instanceof List) || ((List<?>) keysRaw).isEmpty()) throw fail("response_keys must list at least one key");
        List<ResponseKey> keys = new ArrayList<>();
        for (Object item : (List<?>) keysRaw) {
            Map<String, Object> k = Json.obj(item);
            if (k == null) throw fail("a response key is not an object");
            Object kid = k.get("kid");
            if (!(kid instanceof String) || ((String) kid).isEmpty()) throw fail("a response key has no kid");
            Object alg = k.get("alg");
            if (alg != null && !"Ed25519".equals(alg)) throw fail("key " + kid + ": unsupported alg " + Json.write(alg));
            Object pk = k.get("public_key");
            byte[] decoded = null;
            if (pk instanceof String) {
                try {
                    decoded = Base64.getDecoder().decode((String) pk);
                } catch (IllegalArgumentException e) {
                    decoded = null;
                }
            }
            if (decoded == null || decoded.length != 32) throw fail("key " + kid + ": public_key must be base64 of 32 bytes");
            keys.add(new ResponseKey((String) kid, (String) pk));
        }
        Object appName = raw.get("app_name");
        String s = (String) secret;
        return new Config((String) baseUrl, (String) apiKey, keys, appName instanceof String ? (String) appName : null,
                (String) version, (String) appId, s == null || s.isEmpty() ? null : s);
    }
}
