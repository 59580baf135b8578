package io.keywarden;

import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;

/**
 * A running heartbeat (docs/protocol.md 6) on a daemon thread, made by {@link Client#startHeartbeat}. With the default
 * transport the beats travel on the realtime channel when the server offers it and over REST whenever it is down:
 * one token chain on both. Events (see {@link HeartbeatEvent}) are delivered on the heartbeat's thread, pushes and
 * channel events on the channel's reader thread; a listener that throws is logged, never fatal.
 *
 * <p>A beat that certainly never reached the server is sent again with the same index and token. A beat whose answer
 * was lost cannot be: the heartbeat reports Degraded and, with {@code reauth}, runs init, the same activation and
 * heartbeat/start again by itself. A beat refused as {@code rejected} right after the service was unreachable is a
 * server that lost the session (a restart without its state): with {@code reauth} it re-authenticates once. While the
 * service cannot be reached and the grace period covers now, the state is {@code offline}; it leaves {@code offline}
 * the moment the grace period ends (GraceExpired). A license that expires while running ends the heartbeat as
 * {@code expired} (docs/protocol.md 12.8), never covered by grace.
 */
public final class Heartbeat {
    /** A listener: SAM-convertible from Kotlin and Java lambdas; runs on an SDK thread and must not block long. */
    @FunctionalInterface
    public interface Listener<T> {
        void on(T event);
    }

    private static final Set<ErrorCode> FINAL = Set.of(ErrorCode.HEARTBEAT_KILLED, ErrorCode.BANNED, ErrorCode.EXPIRED,
            ErrorCode.APP_DISABLED, ErrorCode.INVALID_KEY, ErrorCode.HWID_MISMATCH, ErrorCode.UPDATE_REQUIRED, ErrorCode.KEY_USED);
    /**
     * A beat refused this close to (or after) the license's known expiry is the expiry's kill (docs/protocol.md 12.8):
     * the clock offset is learned to the second and the server ends the session within a second of expires_at.
     */
    private static final double EXPIRY_SLACK_SECONDS = 2;
    /** How long after the known expiry the heartbeat beats at the latest, so a REST client learns the end on time. */
    private static final long EXPIRY_CHECK_MILLIS = 1000;
    private static final Set<ErrorCode> NOT_PROCESSED = Set.of(ErrorCode.RATE_LIMITED, ErrorCode.LOCKED_OUT);

    private record Registered(Class<? extends HeartbeatEvent> type, Listener<HeartbeatEvent> listener) {}

    private final Client client;
    private final String systemId;
    private final String codeHash;
    private final HeartbeatOptions opts;
    private final BooleanSupplier debugger;
    private final Channel.Link link;
    private final Object lock = new Object();
    /** Held while a beat is sent and judged: a revocation waits for it. */
    private final ReentrantLock beatLock = new ReentrantLock();
    private final CountDownLatch finished = new CountDownLatch(1);
    private final List<Registered> listeners = new CopyOnWriteArrayList<>();
    private final Thread thread;

    private String session;
    private String token;
    private long interval;
    private long lastIndex;
    private long count;
    private boolean needsReauth;
    private volatile boolean ended;
    /** A revocation was pushed: it ends the heartbeat, so a beat it cut short is no degradation. */
    private volatile boolean revoking;
    private volatile HeartbeatState state = HeartbeatState.HEALTHY;
    private volatile Instant lastVerified = Instant.now();
    private int verificationFailures;
    private boolean compromised;
    private boolean afterOutage;
    private boolean outageReauthSpent;
    private boolean offlineTold;
    private KeywardenException lastError;

    Heartbeat(Client client, String systemId, String codeHash, HeartbeatStart started, HeartbeatOptions opts, Channel.Link link) {
        this.client = client;
        this.systemId = systemId;
        this.codeHash = codeHash;
        this.opts = opts;
        this.debugger = opts.debuggerDetected != null ? opts.debuggerDetected : Machine::debuggerAttached;
        this.link = link;
        this.session = started.session();
        this.token = started.token();
        this.interval = started.beatInterval();
        for (Listener<HeartbeatEvent> l : opts.listeners) listeners.add(new Registered(HeartbeatEvent.class, l));
        this.thread = new Thread(this::run, "keywarden-heartbeat");
        this.thread.setDaemon(true);
    }

    // --- public --------------------------------------------------------------------------------------

    public Client getClient() {
        return client;
    }

    /** The server's beat_interval (s). */
    public long getBeatInterval() {
        synchronized (lock) {
            return interval;
        }
    }

    public long getBeatCount() {
        synchronized (lock) {
            return count;
        }
    }

    public String getSession() {
        synchronized (lock) {
            return session;
        }
    }

    public boolean isRunning() {
        return !ended;
    }

    /**
     * Where it stands. {@code OFFLINE} holds only while the grace period covers now: read after it ended, the state
     * is already {@code DEGRADED} (or {@code EXPIRED} once the license's expiry has passed).
     */
    public HeartbeatState getState() {
        HeartbeatState s = state;
        if (s == HeartbeatState.OFFLINE && !client.isGraceActive()) return HeartbeatState.DEGRADED;
        return s;
    }

    /** The current token (the tests compare it with the server's checkpoint). */
    String currentToken() {
        synchronized (lock) {
            return token;
        }
    }

    /** When the last beat verified (the verified heartbeat/start before the first beat). */
    public Instant getLastBeatAt() {
        return lastVerified;
    }

    /** True while the beats travel on the realtime channel. */
    public boolean isOnChannel() {
        return link != null && link.ready();
    }

    /** Adds a listener of one kind of event, e.g. {@code on(HeartbeatEvent.Beat.class, b -> ...)}; returns its remover. */
    @SuppressWarnings("unchecked")
    public <T extends HeartbeatEvent> Runnable on(Class<T> type, Listener<? super T> listener) {
        Registered r = new Registered(type, e -> ((Listener<Object>) (Listener<?>) listener).on(e));
        listeners.add(r);
        return () -> listeners.remove(r);
    }

    /** Adds a listener of every event; returns its remover. */
    public Runnable onEvent(Listener<HeartbeatEvent> listener) {
        return on(HeartbeatEvent.class, listener);
    }

    public Runnable onBeat(Listener<HeartbeatEvent.Beat> l) {
        return on(HeartbeatEvent.Beat.class, l);
    }

    public Runnable onDegraded(Listener<HeartbeatEvent.Degraded> l) {
        return on(HeartbeatEvent.Degraded.class, l);
    }

    public Runnable onKilled(Listener<HeartbeatEvent.Killed> l) {
        return on(HeartbeatEvent.Killed.class, l);
    }

    public Runnable onExpired(Listener<HeartbeatEvent.Expired> l) {
        return on(HeartbeatEvent.Expired.class, l);
    }

    public Runnable onRevoked(Listener<HeartbeatEvent.Revoked> l) {
        return on(HeartbeatEvent.Revoked.class, l);
    }

    public Runnable onOffline(Listener<HeartbeatEvent.Offline> l) {
        return on(HeartbeatEvent.Offline.class, l);
    }

    public Runnable onGraceExpired(Listener<HeartbeatEvent.GraceExpired> l) {
        return on(HeartbeatEvent.GraceExpired.class, l);
    }

    public Runnable onStopped(Listener<HeartbeatEvent.Stopped> l) {
        return on(HeartbeatEvent.Stopped.class, l);
    }

    /** Starts the beating thread ({@link Client#startHeartbeat} calls this). */
    public void start() {
        synchronized (lock) {
            if (thread.isAlive() || ended || thread.getState() != Thread.State.NEW) return;
            if (link != null) {
                link.attach(new Channel.Sink() {
                    @Override
                    public void push(Channel.Push p) {
                        onPush(p);
                    }

                    @Override
                    public void state(String s, Integer code, KeywardenException error) {
                        if (!ended) emit(new HeartbeatEvent.ChannelState(s, code, error));
                    }
                });
            }
            thread.start();
        }
    }

    /** Blocks until the heartbeat has ended (stop() or a kill); false on timeout. */
    public boolean await(long timeout, TimeUnit unit) {
        try {
            return finished.await(timeout, unit);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /**
     * Stops beating, waits for a beat in flight and closes the heartbeat session on the server. Never throws; safe
     * to call from a listener and more than once.
     */
    public void stop() {
        synchronized (lock) {
            if (ended) return;
            ended = true;
            state = HeartbeatState.STOPPED;
            lock.notifyAll();
        }
        if (thread.isAlive() && Thread.currentThread() != thread) {
            try {
                thread.join(client.timeoutMillis * 3 + 1000);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
        try {
            String t;
            synchronized (lock) {
                t = token;
            }
            Map<String, Object> body = new LinkedHashMap<>();
            body.put("token", t);
            send("heartbeat/stop", body);
        } catch (RuntimeException e) {
            client.log.log(System.Logger.Level.WARNING, "keywarden.heartbeat.stop_failed: " + e.getMessage());
        }
        if (link != null) link.close();
        emit(new HeartbeatEvent.Stopped("stop"));
        finished.countDown();
    }

    // --- the realtime channel ------------------------------------------------------------------------

    /** On the channel when it is open; over REST when it is not, or went down before the call left. */
    private Map<String, Object> send(String op, Map<String, Object> body) {
        if (link != null && link.ready()) {
            try {
                return link.call(op, body);
            } catch (KeywardenException e) {
                if (!e.isNotSent()) throw e;
            }
        }
        Map<String, Object> full = new LinkedHashMap<>();
        synchronized (lock) {
            full.put("session", session);
        }
        full.putAll(body);
        return client.call(op, full);
    }

    private void onPush(Channel.Push p) {
        if (ended) return;
        switch (p.type()) {
            case "revoked" -> {
                revoking = true; // before the connection's close fails the beat in flight
                Thread t = new Thread(() -> revoked(p), "keywarden-revoked");
                t.setDaemon(true);
                t.start();
            }
            case "update_required" -> emit(new HeartbeatEvent.UpdateRequired(p.message(), p.latestVersion(), p.updateUrl()));
            case "notice" -> emit(new HeartbeatEvent.Notice(p.message(), p.at()));
            default -> { }
        }
    }

    private void revoked(Channel.Push p) {
        beatLock.lock();
        try {
            if (ended) return;
        } finally {
            beatLock.unlock();
        }
        String detail = p.detail() == null ? "" : String.valueOf(p.detail());
        if ("expired".equals(p.reason())) { // docs/protocol.md 12.8: Expired, then Killed with code expired
            kill(new KeywardenException(ErrorCode.EXPIRED, "expired: the license expired while running (" + detail + ")"), HeartbeatState.EXPIRED);
            return;
        }
        emit(new HeartbeatEvent.Revoked(p.reason(), detail));
        kill(new KeywardenException(ErrorCode.HEARTBEAT_KILLED, "heartbeat_killed: revoked (" + p.reason() + "): " + detail), HeartbeatState.REVOKED);
    }

    // --- the loop ------------------------------------------------------------------------------------

    private long nextDelayMillis() {
        long delay = opts.interval != null ? opts.interval.toMillis() : interval * 1000;
        Long until = client.grace.untilMs();
        if (state == HeartbeatState.OFFLINE && until != null) {
            // Wake when the grace period ends, so the state leaves offline and GraceExpired is told on time.
            delay = Math.min(delay, Math.max(0, (long) Math.ceil(until - client.serverNow() * 1000)));
        }
        Instant expiry = client.getExpiresAt();
        if (expiry != null) {
            // The license expires before the next beat: beat just after, so the end is known on time over REST too.
            long toExpiry = expiry.toEpochMilli() - (long) (client.serverNow() * 1000);
            if (toExpiry >= 0) delay = Math.min(delay, toExpiry + EXPIRY_CHECK_MILLIS);
        }
        return delay;
    }

    private void run() {
        while (!ended) {
            synchronized (lock) {
                long wait = nextDelayMillis();
                long end = System.nanoTime() + wait * 1_000_000L;
                while (!ended && wait > 0) {
                    try {
                        lock.wait(wait);
                    } catch (InterruptedException e) {
                        return;
                    }
                    wait = (end - System.nanoTime()) / 1_000_000L;
                }
                if (ended) return;
            }
            try {
                if (graceEnded()) continue; // told at the moment it ended; the next beat at its own time
                if (needsReauth) {
                    recover();
                } else {
                    beatLock.lock();
                    try {
                        beatOnce();
                    } finally {
                        beatLock.unlock();
                    }
                }
            } catch (RuntimeException | Error e) { // the loop must survive anything
                client.log.log(System.Logger.Level.ERROR, "keywarden.heartbeat.unexpected: " + e);
            }
        }
    }

    /** The grace period ran out while offline: leave offline now and tell GraceExpired. True when it did. */
    private boolean graceEnded() {
        Long until = client.grace.untilMs();
        KeywardenException err;
        synchronized (lock) {
            if (state != HeartbeatState.OFFLINE || until == null || client.grace.active(client.serverNow())) return false;
            state = HeartbeatState.DEGRADED;
            offlineTold = false;
            err = lastError;
        }
        if (client.licenseExpired()) {
            kill(new KeywardenException(ErrorCode.EXPIRED, "expired: the license expired while the service could not be reached"), HeartbeatState.EXPIRED);
            return true;
        }
        client.log.log(System.Logger.Level.WARNING, "keywarden.heartbeat.grace_expired: the grace period ended at " + Instant.ofEpochMilli(until));
        emit(new HeartbeatEvent.GraceExpired(Instant.ofEpochMilli(until), err));
        return true;
    }

    private static boolean unreachable(KeywardenException e) {
        return e.getCode() == ErrorCode.NETWORK || e.getCode() == ErrorCode.TIMEOUT || (e.getStatus() != null && e.getStatus() >= 500);
    }

    private static boolean refusedBeat(KeywardenException e) {
        return e.getCode() == ErrorCode.HEARTBEAT_KILLED && e.getStatus() != null && e.getStatus() == 403;
    }

    private static KeywardenException asError(RuntimeException e) {
        return e instanceof KeywardenException k ? k : new KeywardenException(ErrorCode.SERVER, e.getClass().getSimpleName() + ": " + e.getMessage());
    }

    private void beatOnce() {
        long index;
        String previous;
        String sess;
        synchronized (lock) {
            index = lastIndex + 1;
            previous = token;
            sess = session;
        }
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("token", previous);
        body.put("system_id", systemId);
        body.put("beat_index", index);
        body.put("code_hash", codeHash);
        if (opts.codeSize != null) body.put("code_size", opts.codeSize);
        boolean dbg;
        try {
            dbg = debugger.getAsBoolean();
        } catch (RuntimeException e) { // a broken probe must not stop the heartbeat
            dbg = false;
        }
        body.put("debugger_detected", dbg);
        String newToken;
        long newCount;
        try {
            Map<String, Object> r = send("heartbeat", body);
            Object nt = r.get("new_token");
            Long c = Json.integer(r.get("beat_count"));
            if (!(nt instanceof String) || c == null) throw KeywardenException.verification(VerificationReason.MALFORMED, "beat answer lacks new_token");
            if (!Crypto.proofEquals(r.get("proof"), Crypto.beatProof(previous, sess, index, (String) nt, c))) {
                throw KeywardenException.verification(VerificationReason.BAD_PROOF, "beat proof does not verify");
            }
            client.grace.note(r);
            if (client.licenseExpiredWithin(-(EXPIRY_CHECK_MILLIS / 1000.0) - EXPIRY_SLACK_SECONDS)) {
                client.forgetExpiry(); // accepted well after it: the key was extended meanwhile
            }
            newToken = (String) nt;
            newCount = c;
        } catch (RuntimeException err) {
            if (ended || revoking) return; // ended meanwhile (revoked, killed, stopped): no degradation
            KeywardenException e = asError(err);
            if (refusedBeat(e) && client.licenseExpiredWithin(EXPIRY_SLACK_SECONDS)) {
                // docs/protocol.md 12.8: the server ends a session whose key expired; its next beat is refused.
                kill(new KeywardenException(ErrorCode.EXPIRED, "expired: the license expired at " + client.getExpiresAt()), HeartbeatState.EXPIRED);
                return;
            }
            boolean reauthOn = opts.reauth;
            boolean lostSession;
            synchronized (lock) {
                lostSession = refusedBeat(e) && afterOutage && reauthOn && !outageReauthSpent;
            }
            if (FINAL.contains(e.getCode()) && !lostSession) {
                kill(e, HeartbeatState.KILLED);
                return;
            }
            if (unreachable(e) && client.licenseExpired()) {
                kill(new KeywardenException(ErrorCode.EXPIRED, "expired: the license expired at " + client.getExpiresAt() + " (grace never covers an expiry)"), HeartbeatState.EXPIRED);
                return;
            }
            boolean lost = !(e.isNotSent() || NOT_PROCESSED.contains(e.getCode()));
            synchronized (lock) {
                if (lostSession) outageReauthSpent = true;
                if (lost) lastIndex = index; // that index may have been used: never send it again
            }
            if (failed(e, lost, lost && reauthOn)) {
                needsReauth = true;
                recover();
            }
            return;
        }
        synchronized (lock) {
            // While stop() waits for this beat the token still moves on: it closes with the newest.
            token = newToken;
            lastIndex = index;
            count = newCount;
            lastVerified = Instant.now();
            verificationFailures = 0;
            compromised = false;
            afterOutage = false;
            outageReauthSpent = false;
            offlineTold = false;
            if (ended) return;
            state = HeartbeatState.HEALTHY;
        }
        emit(new HeartbeatEvent.Beat(index, newCount));
    }

    /**
     * Books a failure and emits Degraded (Offline when the grace period covers it, Compromised when the streak of
     * verification failures reaches the limit). Returns whether to re-authenticate: never once compromised.
     */
    private boolean failed(KeywardenException e, boolean lost, boolean wantsReauth) {
        client.noteRefusal(e.getStatus()); // a refusal on the channel never went through Client.call
        boolean unreachable = unreachable(e);
        Long until = client.grace.untilMs();
        boolean covered = unreachable && client.isGraceActive();
        boolean newly;
        boolean reauth;
        boolean goingOffline;
        boolean graceOver;
        int failures;
        Instant last;
        synchronized (lock) {
            lastError = e;
            if (e.getCode() == ErrorCode.VERIFICATION) verificationFailures++;
            afterOutage = unreachable;
            newly = !compromised && verificationFailures >= opts.compromisedAfter;
            if (newly) compromised = true;
            reauth = wantsReauth && !compromised;
            if (!reauth) needsReauth = false;
            if (!ended) state = compromised ? HeartbeatState.COMPROMISED : covered ? HeartbeatState.OFFLINE : HeartbeatState.DEGRADED;
            goingOffline = covered && !compromised && !offlineTold;
            graceOver = unreachable && !covered && offlineTold && until != null;
            if (goingOffline) offlineTold = true;
            if (graceOver || until == null) offlineTold = false;
            failures = verificationFailures;
            last = lastVerified;
        }
        emit(new HeartbeatEvent.Degraded(e, lost, reauth, last, failures));
        if (goingOffline && until != null) {
            client.log.log(System.Logger.Level.WARNING, "keywarden.heartbeat.offline: " + e.getMessage() + "; valid until " + Instant.ofEpochMilli(until));
            emit(new HeartbeatEvent.Offline(e, Instant.ofEpochMilli(until)));
        }
        if (graceOver) {
            client.log.log(System.Logger.Level.WARNING, "keywarden.heartbeat.grace_expired: the grace period ended at " + Instant.ofEpochMilli(until));
            emit(new HeartbeatEvent.GraceExpired(Instant.ofEpochMilli(until), e));
        }
        if (newly) {
            client.log.log(System.Logger.Level.WARNING, "keywarden.heartbeat.compromised: " + failures + " verification failures in a row");
            emit(new HeartbeatEvent.Compromised(e, failures, last));
        }
        return reauth;
    }

    /** init + activation + heartbeat/start again; on failure tries again at the next tick. */
    private void recover() {
        try {
            if (opts.reauthWith != null) opts.reauthWith.accept(client);
            else client.reauthenticate();
            HeartbeatStart started = client.openHeartbeat(systemId, link);
            synchronized (lock) {
                if (ended) return;
                session = started.session();
                token = started.token();
                interval = started.beatInterval();
                lastIndex = 0;
                count = 0;
                needsReauth = false;
                afterOutage = false;
            }
            emit(new HeartbeatEvent.Recovered(started.session()));
        } catch (RuntimeException err) {
            KeywardenException e = asError(err);
            if (unreachable(e) && client.licenseExpired()) {
                kill(new KeywardenException(ErrorCode.EXPIRED, "expired: the license expired at " + client.getExpiresAt() + " (grace never covers an expiry)"), HeartbeatState.EXPIRED);
                return;
            }
            if (FINAL.contains(e.getCode())) {
                // The call's own error (e.g. banned: the key was banned meanwhile), not a generic one.
                kill(e, e.getCode() == ErrorCode.EXPIRED ? HeartbeatState.EXPIRED : HeartbeatState.KILLED);
                return;
            }
            failed(e, true, true);
        }
    }

    private void kill(KeywardenException error, HeartbeatState how) {
        client.grace.end(); // every kill is a verified refusal or revocation (or an expiry)
        synchronized (lock) {
            if (ended) return;
            ended = true;
            state = how;
            lock.notifyAll();
        }
        if (link != null) link.close();
        if (how == HeartbeatState.EXPIRED) emit(new HeartbeatEvent.Expired(client.getExpiresAt(), error));
        emit(new HeartbeatEvent.Killed(error));
        emit(new HeartbeatEvent.Stopped("killed"));
        finished.countDown();
    }

    private void emit(HeartbeatEvent event) {
        List<Registered> snapshot = new ArrayList<>(listeners);
        for (Registered r : snapshot) {
            if (!r.type().isInstance(event)) continue;
            try {
                r.listener().on(event);
            } catch (RuntimeException | Error e) { // a listener must not end the loop
                client.log.log(System.Logger.Level.ERROR, "keywarden.heartbeat.listener_raised: " + event.getClass().getSimpleName() + ": " + e);
            }
        }
    }
}
