package io.keywarden;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.security.PublicKey;
import java.security.SecureRandom;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Base64;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.TreeSet;
import java.util.function.LongSupplier;
import java.util.regex.Pattern;

/**
 * A Keywarden client for one application. Every call carries a fresh nonce (and an HMAC when the config holds a
 * secret), and every answer is verified against the pinned keys before a byte of it is believed (docs/protocol.md 3-5).
 * Failures are {@link KeywardenException}s (unchecked); nothing here exits the process. Thread-safe for one host
 * thread plus the heartbeat's threads; one session at a time ({@link #init} replaces it).
 */
public final class Client {
    static final int WINDOW_SECONDS = 300;
    static final String CLIENT_PATH = "/api/client/";
    private static final int RETRYABLE_OFFSET_SECONDS = 60;
    private static final Pattern TS_RE = Pattern.compile("^[0-9]{1,12}$");
    private static final SecureRandom RANDOM = new SecureRandom();

    private final Config config;
    private final ClientOptions options;
    final String baseUrl;
    final long timeoutMillis;
    final int retries;
    final System.Logger log;
    private final LongSupplier clock;
    private final Transport transport;
    private final boolean defaultTransport;
    private final String encKey;
    private final double maxOffset;
    final Map<String, PublicKey> keys;
    private final Object lock = new Object();

    private volatile Double offset;
    private volatile String session;
    private volatile String route;
    private String[] initArgs = new String[3];
    private volatile Activation lastActivation;
    private volatile Instant licenseExpiresAt;
    final Grace grace = new Grace();
    private volatile List<String> entitlements = List.of();
    private Offline.ClockRecord clockRecord;

    /** What a heartbeat's re-authentication repeats: a login or a license activation. */
    sealed interface Activation permits LoginActivation, LicenseActivation {}

    record LoginActivation(String username, String password, String hwid) implements Activation {
        @Override
        public String toString() { // never the password
            return "LoginActivation(" + username + ", " + hwid + ")";
        }
    }

    record LicenseActivation(String key, String hwid) implements Activation {}

    public Client(Config config) {
        this(config, null);
    }

    /** A client of a checked config; {@code options} may be null (defaults). Throws ConfigException. */
    public Client(Config config, ClientOptions options) {
        this.config = Objects.requireNonNull(config, "config");
        ClientOptions o = options != null ? options : ClientOptions.defaults();
        this.options = o;
        String base = o.baseUrl != null ? o.baseUrl : config.getBaseUrl();
        while (base.endsWith("/")) base = base.substring(0, base.length() - 1);
        this.baseUrl = base;
        this.timeoutMillis = o.timeout.toMillis();
        this.retries = o.retries;
        this.log = o.logger != null ? o.logger : System.getLogger("io.keywarden");
        this.clock = o.clock != null ? o.clock : System::currentTimeMillis;
        this.defaultTransport = o.transport == null;
        this.transport = o.transport != null ? o.transport : new DefaultTransport(o.maxResponseBytes);
        this.encKey = o.encKey;
        if (encKey != null && config.getApiSecret() == null) throw new ConfigException("encKey needs the api_secret of the config (docs/protocol.md 5 keys the cipher with it)");
        this.maxOffset = o.maxClockOffset.toMillis() / 1000.0;
        Map<String, PublicKey> k = new LinkedHashMap<>();
        for (Config.ResponseKey rk : config.getResponseKeys()) {
            try {
                k.put(rk.kid(), Crypto.ed25519PublicKey(rk.publicKey()));
            } catch (IllegalArgumentException e) {
                throw new ConfigException("keywarden config: key " + rk.kid() + " is not a valid Ed25519 key: " + e.getMessage(), e);
            }
        }
        this.keys = Collections.unmodifiableMap(k);
    }

    /** A client from keywarden.json. */
    public static Client fromConfig(Path path) {
        return new Client(Config.load(path), null);
    }

    public static Client fromConfig(Path path, ClientOptions options) {
        return new Client(Config.load(path), options);
    }

    /** A client from keywarden.json's path as a string. */
    public static Client fromConfig(String path) {
        return fromConfig(Path.of(path));
    }

    public static Client fromConfig(String path, ClientOptions options) {
        return fromConfig(Path.of(path), options);
    }

    // --- state ---------------------------------------------------------------------------------------

    public Config getConfig() {
        return config;
    }

    /** The session from init, or null. */
    public String getSession() {
        return session;
    }

    /** Server time minus local time in seconds, once learned from the first verified answer; else null. */
    public Double getClockOffset() {
        return offset;
    }

    /** The local clock corrected by the learned offset, in unix seconds. */
    public double serverNow() {
        Double o = offset;
        return clock.getAsLong() / 1000.0 + (o != null ? o : 0.0);
    }

    double localNow() {
        return clock.getAsLong() / 1000.0;
    }

    /** Salted machine id for this application (the api_key is the salt). */
    public String machineHwid() {
        return Machine.machineHwid(config.getApiKey());
    }

    /** SHA-256 hex of the running program (the jar this SDK was loaded from). */
    public static String selfHash() {
        return Machine.selfHash();
    }

    /**
     * When the license (an end user's: the user) expires, from the last verified license, login, register or trial
     * answer; null for a lifetime key or before any activation. A running heartbeat reports the license expired once
     * the server ends its session then (docs/protocol.md 12.8).
     */
    public Instant getExpiresAt() {
        return licenseExpiresAt;
    }

    /** A beat was accepted well after the known expiry: the key was extended (its new date unknown). */
    void forgetExpiry() {
        licenseExpiresAt = null;
    }

    boolean usesDefaultTransport() {
        return defaultTransport;
    }

    String route() {
        return route;
    }

    // --- the client API ------------------------------------------------------------------------------

    /** Opens a session; returns the application's info. */
    public AppInfo init() {
        return init(null, null, null);
    }

    /** init with a binary hash and/or a binary token (each may be null). */
    public AppInfo init(String binaryHash, String binaryToken, String binaryTokenHash) {
        synchronized (lock) {
            initArgs = new String[] {binaryHash, binaryToken, binaryTokenHash};
        }
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("api_key", config.getApiKey());
        body.put("version", config.getVersion() != null ? config.getVersion() : "1.0");
        if (encKey != null) body.put("enc_key", encKey);
        if (binaryHash != null && !binaryHash.isEmpty()) body.put("binary_hash", binaryHash);
        if (binaryToken != null) {
            body.put("binary_token", binaryToken);
            if (binaryTokenHash != null) body.put("binary_token_hash", binaryTokenHash);
        }
        route = null; // a new session lives wherever init lands
        Map<String, Object> r = call("init", body);
        Map<String, Object> app = Json.obj(r.get("app"));
        Object s = r.get("session");
        if (!(s instanceof String) || ((String) s).isEmpty() || app == null || !(app.get("name") instanceof String)) {
            throw KeywardenException.verification(VerificationReason.MALFORMED, "init answer lacks session or app");
        }
        session = (String) s;
        Object version = app.get("version");
        return new AppInfo((String) app.get("name"), version != null ? String.valueOf(version) : "", Boolean.TRUE.equals(app.get("hwid_lock")), (String) s);
    }

    /** Registers, then logs in at once and ignores that login's failure (as the reference clients do since 1.1). */
    public UserInfo register(String username, String password, String license) {
        return register(username, password, license, null);
    }

    public UserInfo register(String username, String password, String license, String hwid) {
        String h = hwid != null ? hwid : machineHwid();
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("session", requireSession());
        body.put("username", username);
        body.put("password", password);
        body.put("license", license);
        body.put("hwid", h);
        Map<String, Object> r = call("register", body);
        UserInfo user = user(r);
        activated(r, user.expiresAt());
        try {
            login(username, password, h);
        } catch (KeywardenException e) {
            log.log(System.Logger.Level.WARNING, "keywarden.register.login_failed: " + e.getMessage());
        }
        lastActivation = new LoginActivation(username, password, h);
        return user;
    }

    public UserInfo login(String username, String password) {
        return login(username, password, null);
    }

    public UserInfo login(String username, String password, String hwid) {
        String h = hwid != null ? hwid : machineHwid();
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("session", requireSession());
        body.put("username", username);
        body.put("password", password);
        body.put("hwid", h);
        Map<String, Object> r = call("login", body);
        UserInfo user = user(r);
        activated(r, user.expiresAt());
        lastActivation = new LoginActivation(username, password, h);
        return user;
    }

    /** License-only activation; the hwid defaults to {@link #machineHwid()}. */
    public LicenseInfo activateLicense(String key) {
        return activateLicense(key, null);
    }

    public LicenseInfo activateLicense(String key, String hwid) {
        String h = hwid != null ? hwid : machineHwid();
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("session", requireSession());
        body.put("license", key);
        body.put("hwid", h);
        Map<String, Object> r = call("license", body);
        Long level = Json.integer(r.get("level"));
        if (level == null) throw KeywardenException.verification(VerificationReason.MALFORMED, "license answer lacks level");
        Instant expires = Utc.lenient(r.get("expires_at"));
        List<String> ents = activated(r, expires);
        lastActivation = new LicenseActivation(key, h);
        return new LicenseInfo(level, expires, messageOf(r), ents);
    }

    /**
     * Creates this device's trial key and activates it (POST /api/client/trial). Once per device and application:
     * again answers {@code trial_used}; {@code trial_disabled} when the application offers none. The key is
     * remembered for re-authentication.
     */
    public TrialInfo trial() {
        return trial(null);
    }

    public TrialInfo trial(String hwid) {
        String h = hwid != null ? hwid : machineHwid();
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("session", requireSession());
        body.put("hwid", h);
        Map<String, Object> r = call("trial", body);
        Object key = r.get("key");
        Long level = Json.integer(r.get("level"));
        if (!(key instanceof String) || ((String) key).isEmpty() || level == null) {
            throw KeywardenException.verification(VerificationReason.MALFORMED, "trial answer lacks key or level");
        }
        Instant expires = Utc.instant(r.get("expires_at"));
        List<String> ents = activated(r, expires);
        lastActivation = new LicenseActivation((String) key, h);
        return new TrialInfo((String) key, level, expires, messageOf(r), ents);
    }

    /**
     * An offline license file for this machine (POST /api/client/offline), after a successful activation on this
     * session. Save it; {@link #loadOffline} checks it without the service.
     */
    public String offlineFile() {
        return offlineFile(null);
    }

    public String offlineFile(String hwid) {
        String h = hwid != null ? hwid : machineHwid();
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("session", requireSession());
        body.put("hwid", h);
        Map<String, Object> r = call("offline", body);
        Object f = r.get("license_file");
        if (!(f instanceof String) || !((String) f).startsWith("kwlic1.")) throw KeywardenException.verification(VerificationReason.MALFORMED, "offline answer lacks license_file");
        return (String) f;
    }

    /** Where {@link #loadOffline} keeps the latest time seen. */
    public Path getStateFile() {
        return record().path;
    }

    private Offline.ClockRecord record() {
        synchronized (lock) {
            if (clockRecord == null) {
                Path p = options.stateFile != null ? options.stateFile : Offline.defaultStateFile(config.getApiKey());
                clockRecord = new Offline.ClockRecord(p, log);
            }
            return clockRecord;
        }
    }

    /**
     * Checks an offline license file without the service (docs/protocol.md 12.5; the order of the checks is in
     * {@link Offline}). Throws {@code offline_invalid} with an {@link OfflineReason}; ConfigException when the
     * config has no app_id. Every check records the clock in the state file. On success {@link #getEntitlements()}
     * are the file's.
     */
    public OfflineLicense loadOffline(String file) {
        return loadOffline(file, null);
    }

    public OfflineLicense loadOffline(String file, String hwid) {
        if (config.getAppId() == null) throw new ConfigException("keywarden config: app_id missing (offline license files are checked against it)");
        Offline.ClockRecord rec = record();
        double now = localNow();
        try {
            OfflineLicense lic = Offline.verify(file, keys, config.getAppId(), hwid != null ? hwid : machineHwid(), now, rec.lastSeen());
            entitlements = lic.entitlements();
            return lic;
        } catch (KeywardenException e) {
            log.log(System.Logger.Level.WARNING, "keywarden.offline.refused: " + e.getMessage());
            throw e;
        } finally {
            rec.record(now);
        }
    }

    // --- updates (the server's docs/releases.md) --------------------------------------------------

    /** {@link #checkUpdate(String, String, String, String)} on channel stable, platform and arch "any". */
    public UpdateOffer checkUpdate(String version) {
        return checkUpdate(version, "stable", "any", "any");
    }

    /**
     * The newest release above {@code version} this activated key may install on platform/arch (channels stable &lt;
     * rc &lt; beta &lt; alpha &lt; dev: a channel is offered itself and everything more stable): null, or the offer
     * whose every artifact's signature verified under the pinned keys (else {@link UpdateException}). A
     * {@link ConfigException} when the config has no app_id.
     */
    public UpdateOffer checkUpdate(String version, String channel, String platform, String arch) {
        String appId = config.getAppId();
        if (appId == null || appId.isEmpty()) throw new ConfigException("app_id missing (release artifacts are signed for it)");
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("session", requireSession());
        body.put("version", version);
        body.put("channel", channel);
        body.put("platform", platform);
        body.put("arch", arch);
        Map<String, Object> r = call("releases/upgrade", body);
        Object upgrade = r.get("upgrade");
        if (upgrade == null) return null;
        if (!(upgrade instanceof Map)) throw KeywardenException.verification(VerificationReason.MALFORMED, "upgrade answer is not an object");
        @SuppressWarnings("unchecked")
        Map<String, Object> u = (Map<String, Object>) upgrade;
        return Updates.parse(u, appId, keys);
    }

    /**
     * Downloads {@code artifact} to {@code target}: streamed into a temporary file in the same folder ({@code progress},
     * when not null, after each chunk), checked for size, SHA-512 and signature, then moved over the target. Any
     * failure deletes the temporary file, leaves the target untouched and throws {@link UpdateException}. The client's
     * timeout bounds the connect and the answer's head, not the whole download. Returns the target's absolute path.
     */
    public Path downloadUpdate(Artifact artifact, Path target, DownloadProgress progress) {
        return Updates.download(keys, artifact, target, progress, timeoutMillis);
    }

    /** Where {@link #activationRequest} keeps its nonce (ClientOptions.requestFile). */
    public Path getRequestFile() {
        if (options.requestFile != null) return options.requestFile;
        String state = getStateFile().toString();
        return Path.of((state.endsWith(".json") ? state.substring(0, state.length() - 5) : state) + ".request.json");
    }

    Transport transport() {
        return transport;
    }

    private String requireAppId() {
        if (config.getAppId() == null) throw new ConfigException("keywarden config: app_id missing (offline files and pools are checked against it)");
        return config.getAppId();
    }

    /**
     * A "kwreq1" activation request for {@code key} on this machine, written with no network. Carry it to a connected
     * machine (dashboard or customer portal); pass its answer to {@link #completeActivation}. A new request replaces
     * the kept nonce: answers to older ones are refused. hwid null: {@link #machineHwid()}; components may be null.
     */
    public String activationRequest(String key, String hwid, Map<String, String> components) {
        String appId = requireAppId();
        byte[] b = new byte[16];
        new java.security.SecureRandom().nextBytes(b);
        String nonce = java.util.Base64.getUrlEncoder().withoutPadding().encodeToString(b);
        String created = Instant.ofEpochMilli((long) (localNow() * 1000)).truncatedTo(java.time.temporal.ChronoUnit.MILLIS).toString();
        if (!created.contains(".")) created = created.replace("Z", ".000Z");
        Path file = getRequestFile();
        try {
            if (file.getParent() != null) java.nio.file.Files.createDirectories(file.getParent());
            Path tmp = java.nio.file.Files.createTempFile(file.getParent() != null ? file.getParent() : Path.of("."), ".kwreq-", "");
            Map<String, Object> kept = new LinkedHashMap<>();
            kept.put("v", 1L);
            kept.put("nonce", nonce);
            kept.put("created_at", created);
            java.nio.file.Files.writeString(tmp, Json.write(kept));
            java.nio.file.Files.move(tmp, file, java.nio.file.StandardCopyOption.REPLACE_EXISTING, java.nio.file.StandardCopyOption.ATOMIC_MOVE);
        } catch (java.io.IOException e) {
            throw new java.io.UncheckedIOException("keywarden: cannot write " + file, e);
        }
        return Airgap.buildRequest(appId, key, hwid != null ? hwid : machineHwid(), nonce, created, components);
    }

    private String keptNonce() {
        try {
            Map<String, Object> v = Json.parseObject(java.nio.file.Files.readString(getRequestFile()));
            Object n = v == null ? null : v.get("nonce");
            return n instanceof String && !((String) n).isEmpty() ? (String) n : null;
        } catch (java.io.IOException | RuntimeException e) {
            return null;
        }
    }

    /**
     * Checks the answer to this machine's latest activation request: every check of {@link #loadOffline}, then its
     * request_nonce ({@code offline_invalid} / {@code wrong_request} for an answer to an older request, or when no
     * request is kept here). Save the answer; later starts check it with {@link #loadOffline}.
     */
    public OfflineLicense completeActivation(String response, String hwid) {
        OfflineLicense lic = loadOffline(response, hwid);
        try {
            Airgap.checkRequestNonce(response, keptNonce());
        } catch (KeywardenException e) {
            entitlements = List.of();
            log.log(System.Logger.Level.WARNING, "keywarden.offline.refused: " + e.getMessage());
            throw e;
        }
        return lic;
    }

    /**
     * Leases a floating seat from a relay on the local network (instead of the service) and keeps it renewed until
     * {@link SeatLease#release()}. Believed only with a pool that verifies under the pinned keys and names this
     * application (else {@code offline_invalid}); every seat taken: {@code session_limit}. {@link #getEntitlements()}
     * become the pool's. hwid null: {@link #machineHwid()}.
     */
    public SeatLease leaseSeat(String relayUrl, String hwid) {
        requireAppId();
        SeatLease lease = new SeatLease(this, relayUrl, hwid != null ? hwid : machineHwid());
        lease.take();
        entitlements = lease.pool().entitlements();
        lease.start();
        return lease;
    }

    /**
     * The codes of the last verified license, login, register or trial answer, or of the last offline file accepted
     * by {@link #loadOffline} (sorted).
     */
    public List<String> getEntitlements() {
        return entitlements;
    }

    public boolean hasEntitlement(String code) {
        return entitlements.contains(code);
    }

    /**
     * Until when the license stays valid while the service cannot be reached, from the latest verified answer; null
     * when it grants none or a verified refusal ended it.
     */
    public Instant getGraceUntil() {
        Long ms = grace.untilMs();
        return ms == null ? null : Instant.ofEpochMilli(ms);
    }

    /** True while the (server-corrected) clock is before {@link #getGraceUntil()} and the license has not expired. */
    public boolean isGraceActive() {
        return grace.active(serverNow()) && !licenseExpired();
    }

    /** True once the (server-corrected) clock has reached the last activation's expires_at. */
    boolean licenseExpired() {
        Instant e = licenseExpiresAt;
        return e != null && serverNow() * 1000 >= e.toEpochMilli();
    }

    /**
     * True when the last activation's expiry is at most {@code slackSeconds} ahead of the server-corrected clock: the
     * offset is learned from whole-second timestamps, so the clock may lag the server's by a second or more.
     */
    boolean licenseExpiredWithin(double slackSeconds) {
        Instant e = licenseExpiresAt;
        return e != null && (serverNow() + slackSeconds) * 1000 >= e.toEpochMilli();
    }

    void noteRefusal(Integer status) {
        if (Grace.isRefusal(status) && grace.untilMs() != null) {
            log.log(System.Logger.Level.INFO, "keywarden.grace.ended: a verified " + status + " refusal");
            grace.end();
        }
    }

    /** Starts a heartbeat with the default options; see {@link #startHeartbeat(HeartbeatOptions)}. */
    public Heartbeat startHeartbeat() {
        return startHeartbeat(HeartbeatOptions.defaults());
    }

    /**
     * Opens a heartbeat session (its proof checked) and beats on a daemon thread until stopped or killed. Listeners
     * given in the options are attached before the first beat.
     */
    public Heartbeat startHeartbeat(HeartbeatOptions options) {
        Heartbeat hb = prepareHeartbeat(options);
        hb.start();
        return hb;
    }

    /** Like {@link #startHeartbeat(HeartbeatOptions)} but the beating thread is not started: attach listeners, then {@code start()}. */
    public Heartbeat prepareHeartbeat(HeartbeatOptions options) {
        HeartbeatOptions o = options != null ? options : HeartbeatOptions.defaults();
        String sysId = o.systemId != null ? o.systemId : machineHwid();
        String code = o.codeHash != null ? o.codeHash : selfHash();
        boolean useChannel = o.channel && defaultTransport;
        Channel.Link link = useChannel ? new Channel.Link(this, requireSession()) : null;
        HeartbeatStart started;
        try {
            started = openHeartbeat(sysId, link);
        } catch (RuntimeException e) {
            if (link != null) link.close();
            throw e;
        }
        return new Heartbeat(this, sysId, code, started, o, link);
    }

    /** heartbeat/start (on the channel when it opens, else REST) with the proof checked before the token is trusted. */
    HeartbeatStart openHeartbeat(String systemId, Channel.Link link) {
        String s = requireSession();
        Map<String, Object> r = null;
        if (link != null && link.rebind(s)) {
            try {
                r = link.call("heartbeat/start", Map.of("system_id", systemId));
            } catch (KeywardenException e) {
                if (!e.isNotSent()) throw e;
            }
        }
        if (r == null) {
            Map<String, Object> body = new LinkedHashMap<>();
            body.put("session", s);
            body.put("system_id", systemId);
            r = call("heartbeat/start", body);
        }
        Object token = r.get("token");
        Long interval = Json.integer(r.get("beat_interval"));
        if (!(token instanceof String) || interval == null) throw KeywardenException.verification(VerificationReason.MALFORMED, "heartbeat/start answer lacks token");
        if (!Crypto.proofEquals(r.get("proof"), Crypto.startProof(s, systemId, (String) token))) {
            throw KeywardenException.verification(VerificationReason.BAD_PROOF, "heartbeat/start proof does not verify");
        }
        grace.note(r);
        return new HeartbeatStart(s, (String) token, interval);
    }

    /** init + the remembered activation, for a heartbeat whose state was lost. */
    void reauthenticate() {
        Activation a = lastActivation;
        if (a == null) throw new KeywardenException(ErrorCode.SESSION_EXPIRED, "nothing to re-authenticate with: no login or license succeeded on this client");
        String[] args;
        synchronized (lock) {
            args = initArgs.clone();
        }
        init(args[0], args[1], args[2]);
        if (a instanceof LoginActivation l) login(l.username(), l.password(), l.hwid());
        else if (a instanceof LicenseActivation l) activateLicense(l.key(), l.hwid());
    }

    // --- the wire ------------------------------------------------------------------------------------

    String requireSession() {
        String s = session;
        if (s == null || s.isEmpty()) throw new KeywardenException(ErrorCode.SESSION_EXPIRED, "call init() first");
        return s;
    }

    private static String messageOf(Map<String, Object> r) {
        Object m = r.get("message");
        return m instanceof String ? (String) m : "";
    }

    /** The sorted codes of an answer (absent: none); anything but a list of strings is malformed. */
    static List<String> entitlementsOf(Map<String, Object> answer) {
        Object v = answer.get("entitlements");
        if (v == null) return List.of();
        if (!(v instanceof List)) throw KeywardenException.verification(VerificationReason.MALFORMED, "entitlements is not a list of codes");
        TreeSet<String> out = new TreeSet<>();
        for (Object o : (List<?>) v) {
            if (!(o instanceof String)) throw KeywardenException.verification(VerificationReason.MALFORMED, "entitlements is not a list of codes");
            out.add((String) o);
        }
        return List.copyOf(new ArrayList<>(out));
    }

    /** Books a verified activation answer: its entitlements, its grace and its expiry. */
    private List<String> activated(Map<String, Object> answer, Instant expiresAt) {
        List<String> ents = entitlementsOf(answer);
        entitlements = ents;
        grace.note(answer);
        licenseExpiresAt = expiresAt;
        return ents;
    }

    private UserInfo user(Map<String, Object> r) {
        Map<String, Object> u = Json.obj(r.get("user"));
        Long level = u != null ? Json.integer(u.get("level")) : null;
        if (u == null || !(u.get("username") instanceof String) || level == null) throw KeywardenException.verification(VerificationReason.MALFORMED, "answer lacks user");
        return new UserInfo((String) u.get("username"), level, Utc.lenient(u.get("expires_at")), messageOf(r), entitlementsOf(r));
    }

    static String nonce() {
        byte[] b = new byte[18];
        RANDOM.nextBytes(b);
        return Base64.getUrlEncoder().withoutPadding().encodeToString(b); // 24 characters of [A-Za-z0-9_-]
    }

    /** A clock_skew refusal that taught an offset worth one retry (internal). */
    private static final class ClockSkew extends RuntimeException {
        private static final long serialVersionUID = 1L;
        final transient KeywardenException error;

        ClockSkew(KeywardenException error) {
            super(error.getMessage(), null, false, false);
            this.error = error;
        }
    }

    /**
     * One verified client call ({@code endpoint} like {@code "license"}); returns the answer object. Sends again
     * (fresh nonce, same body) only when the request certainly never reached the server, or once after the server
     * refused our request signature while our clock was off (learned from that same signed answer).
     */
    public Map<String, Object> call(String endpoint, Map<String, Object> body) {
        int attempt = 0;
        boolean clockRetried = false;
        while (true) {
            try {
                return once(endpoint, body);
            } catch (ClockSkew e) {
                if (clockRetried) throw e.error;
                clockRetried = true;
                log.log(System.Logger.Level.INFO, "keywarden.call.clock_retry: " + endpoint);
            } catch (KeywardenException e) {
                if (e.isNotSent() && attempt < retries) {
                    attempt++;
                    log.log(System.Logger.Level.DEBUG, "keywarden.call.retry: " + endpoint + " attempt " + attempt + ": " + e.getMessage());
                    try {
                        Thread.sleep((long) Math.min(2000, 100 * Math.pow(2, attempt)));
                    } catch (InterruptedException ie) {
                        Thread.currentThread().interrupt();
                        throw e;
                    }
                    continue;
                }
                throw e;
            }
        }
    }

    private Map<String, Object> once(String endpoint, Map<String, Object> body) {
        String path = CLIENT_PATH + endpoint;
        String initIv = encKey != null ? nonce() : null;
        Map<String, Object> payload = new LinkedHashMap<>(body);
        if (initIv != null) payload.put("init_iv", initIv);
        byte[] raw = Json.write(payload).getBytes(StandardCharsets.UTF_8);
        String n = nonce();
        Map<String, String> headers = new LinkedHashMap<>();
        headers.put("Content-Type", "application/json");
        headers.put("Accept", "application/json");
        headers.put("X-Nonce", n);
        String r = route;
        if (r != null && !r.isEmpty()) headers.put("X-Keywarden-Route", r);
        String secret = config.getApiSecret();
        if (secret != null) {
            String ts = Long.toString((long) Math.floor(serverNow()));
            headers.put("X-Timestamp", ts);
            headers.put("X-Signature", Crypto.requestSignature(secret, Crypto.canonicalRequest("POST", path, ts, n, raw)));
        }
        Transport.Response res;
        try {
            res = transport.send(new Transport.Request("POST", baseUrl + path, headers, raw, timeoutMillis));
        } catch (TransportException e) {
            // The route named a worker that may be gone: the next call lets the balancer choose (docs/multi-host.md).
            route = null;
            ErrorCode kind = e.isTimeout() ? ErrorCode.TIMEOUT : ErrorCode.NETWORK;
            throw KeywardenException.network(kind, kind + " on " + path + ": " + e.getMessage(), !e.isSent());
        } catch (RuntimeException e) { // a custom transport's own failure
            route = null;
            throw KeywardenException.network(ErrorCode.NETWORK, "network on " + path + ": " + e, false);
        }
        Map<String, String> resHeaders = new LinkedHashMap<>();
        if (res.headers() != null) res.headers().forEach((k, v) -> resHeaders.put(k.toLowerCase(java.util.Locale.ROOT), v));
        byte[] resBody = res.body() != null ? res.body() : new byte[0];
        int status = res.status();
        boolean signed = resHeaders.containsKey("x-response-kid") || resHeaders.containsKey("x-response-timestamp") || resHeaders.containsKey("x-response-signature");
        boolean gateway = status == 502 || status == 503 || status == 504;
        // A 502-504 (signed or not) names no worker to come back to: the hint is dropped, any route it names ignored.
        if (gateway) route = null;
        if (gateway && !signed) {
            // A proxy in front saying the service is unreachable: believed for nothing, but no attack either.
            throw new KeywardenException(ErrorCode.SERVER, "server: " + status + " from a gateway (unsigned) on " + path, status, null, null, null, null, null, false, null);
        }
        boolean hadOffset = offset != null;
        verify(path, status, resHeaders, resBody, n);
        String newRoute = resHeaders.get("x-keywarden-route");
        if (!gateway && newRoute != null && !newRoute.isEmpty()) route = newRoute;
        Map<String, Object> parsed = parseAnswer(resBody, path, status);
        if (status != 200) {
            noteRefusal(status);
            KeywardenException err = KeywardenException.fromAnswer(status, parsed.get("detail"), resHeaders.get("retry-after"));
            Double o = offset;
            if (err.getCode() == ErrorCode.CLOCK_SKEW && secret != null && !hadOffset && o != null && Math.abs(o) > RETRYABLE_OFFSET_SECONDS) {
                throw new ClockSkew(err);
            }
            throw err;
        }
        if (parsed.get("enc") instanceof String && initIv != null) {
            byte[] plain;
            try {
                plain = Crypto.decryptResponse((String) parsed.get("enc"), encKey, secret != null ? secret : "", initIv);
            } catch (IllegalArgumentException e) {
                throw KeywardenException.verification(VerificationReason.MALFORMED, "encrypted answer of " + path + " does not decrypt");
            }
            parsed = parseAnswer(plain, path, status);
        }
        if (!Boolean.TRUE.equals(parsed.get("success"))) throw KeywardenException.verification(VerificationReason.MALFORMED, "answer of " + path + " lacks success: true");
        return parsed;
    }

    static Map<String, Object> parseAnswer(byte[] raw, String path, int status) {
        Map<String, Object> obj;
        try {
            obj = Json.parseObject(StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(raw)).toString());
        } catch (Json.ParseException | java.nio.charset.CharacterCodingException e) {
            throw KeywardenException.verification(VerificationReason.MALFORMED, "answer of " + path + " (" + status + ") is not JSON");
        }
        if (obj == null) throw KeywardenException.verification(VerificationReason.MALFORMED, "answer of " + path + " (" + status + ") is not a JSON object");
        return obj;
    }

    private void verify(String path, int status, Map<String, String> headers, byte[] body, String nonce) {
        // Before the offset is known a larger distance is allowed: the answer is bound to this request's fresh
        // nonce, so it cannot be an old one replayed. Afterwards: 300 s around server time.
        double limit = offset == null ? maxOffset : WINDOW_SECONDS;
        long serverTs = verifyResponse(keys, "POST", path, status, headers, body, nonce, serverNow(), limit);
        synchronized (lock) {
            if (offset == null) {
                double o = serverTs - localNow();
                offset = o;
                if (Math.abs(o) > 5) log.log(System.Logger.Level.INFO, String.format("keywarden.clock.offset: %.1f s", o));
            }
        }
    }

    /**
     * docs/protocol.md 4 response verification in the order sdk/vectors/response-signatures.json fixes: headers
     * present, kid pinned, signature encoding, freshness, Ed25519 over this request's nonce. Returns the answer's
     * timestamp. Header names lower-cased.
     */
    public static long verifyResponse(Map<String, PublicKey> keys, String method, String path, int status,
            Map<String, String> headers, byte[] body, String nonce, double now, double maxSkewSeconds) {
        String kid = headers.get("x-response-kid");
        String ts = headers.get("x-response-timestamp");
        String sig = headers.get("x-response-signature");
        if (kid == null || kid.isEmpty() || ts == null || ts.isEmpty() || sig == null || sig.isEmpty()) {
            throw KeywardenException.verification(VerificationReason.UNSIGNED, "answer " + status + " of " + path + " carries no signature");
        }
        PublicKey key = keys.get(kid);
        if (key == null) throw KeywardenException.verification(VerificationReason.UNKNOWN_KID, "answer of " + path + " is signed by unpinned key '" + kid + "'");
        byte[] signature = Crypto.decodeSignature(sig);
        if (signature == null) throw KeywardenException.verification(VerificationReason.BAD_BASE64, "signature of " + path + " is not base64 of 64 bytes");
        if (!TS_RE.matcher(ts).matches()) throw KeywardenException.verification(VerificationReason.STALE, "timestamp is not unix seconds");
        long serverTs = Long.parseLong(ts);
        if (Math.abs(serverTs - now) > maxSkewSeconds) throw KeywardenException.verification(VerificationReason.STALE, "timestamp " + ts + " is " + Math.round(serverTs - now) + " s off");
        String message = Crypto.responseMessage(kid, method, path, status, ts, nonce, body);
        if (!Crypto.ed25519Verify(key, Crypto.utf8(message), signature)) throw KeywardenException.verification(VerificationReason.BAD_SIGNATURE, "signature of " + path + " (" + status + ") does not verify");
        return serverTs;
    }
}
