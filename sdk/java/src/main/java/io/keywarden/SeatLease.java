package io.keywarden;

import java.net.URLEncoder;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

/**
 * A floating seat leased from a relay, renewed by a daemon thread at half its remaining time until
 * {@link #release()} (also {@link #close()}). A lease the relay forgot (404) is taken again; one that cannot be
 * kept sets {@link #lost()}.
 */
public final class SeatLease implements AutoCloseable {
    private final Client client;
    private final String base;
    private final String hwid;
    private final Object lock = new Object();
    private String leaseId;
    private SeatPool pool;
    private long expiresMs;
    private int renewals;
    private KeywardenException lost;
    private boolean released;
    private Thread thread;

    SeatLease(Client client, String relayUrl, String hwid) {
        this.client = client;
        this.base = relayUrl.replaceAll("/+$", "");
        this.hwid = hwid;
    }

    private Map.Entry<Integer, Map<String, Object>> send(String method, String path, Map<String, Object> body) {
        Map<String, String> headers = new LinkedHashMap<>();
        if (body != null) headers.put("Content-Type", "application/json");
        byte[] raw = body == null ? new byte[0] : Json.write(body).getBytes(StandardCharsets.UTF_8);
        Transport.Response res;
        try {
            res = client.transport().send(new Transport.Request(method, base + path, headers, raw, client.timeoutMillis));
        } catch (TransportException e) {
            ErrorCode kind = e.isTimeout() ? ErrorCode.TIMEOUT : ErrorCode.NETWORK;
            throw KeywardenException.network(kind, kind + ": relay " + base + ": " + e.getMessage(), !e.isSent());
        } catch (RuntimeException e) {
            throw KeywardenException.network(ErrorCode.NETWORK, "network: relay " + base + ": " + e, false);
        }
        Map<String, Object> parsed = null;
        try {
            if (res.body().length > 0) parsed = Json.parseObject(new String(res.body(), StandardCharsets.UTF_8));
        } catch (Json.ParseException e) {
            parsed = null;
        }
        return Map.entry(res.status(), parsed == null ? Map.of() : parsed);
    }

    private static KeywardenException refused(int status, Map<String, Object> body) {
        Object detail = body.get("detail");
        ErrorCode code = status == 409 && Airgap.NO_SEATS.equals(detail) ? ErrorCode.SESSION_LIMIT : ErrorCode.SERVER;
        return new KeywardenException(code, code + ": relay answered " + status + " " + detail, status, detail, null, null, null, null,
                false, null);
    }

    private void accept(Map.Entry<Integer, Map<String, Object>> r, int expect) {
        if (r.getKey() != expect) throw refused(r.getKey(), r.getValue());
        Map<String, Object> p = r.getValue();
        Object poolText = p.get("pool");
        SeatPool verified = Airgap.verifyPool(poolText instanceof String ? (String) poolText : null, client.keys,
                client.getConfig().getAppId(), client.localNow());
        Object id = p.get("lease_id");
        Long expires = Utc.parseMs(p.get("expires_at"));
        if (!(id instanceof String) || ((String) id).isEmpty() || expires == null || !hwid.toLowerCase(Locale.ROOT).equals(p.get("hwid")))
            throw KeywardenException.offline(OfflineReason.MALFORMED, "relay lease lacks lease_id or expires_at, or names another hwid");
        synchronized (lock) {
            leaseId = (String) id;
            pool = verified;
            expiresMs = expires;
        }
    }

    void take() {
        Map<String, Object> body = new LinkedHashMap<>();
        body.put("hwid", hwid);
        accept(send("POST", "/relay/v1/leases", body), 201);
    }

    private String path() {
        return "/relay/v1/leases/" + URLEncoder.encode(leaseId(), StandardCharsets.UTF_8);
    }

    /** Renews now; a lease the relay forgot is taken again. Throws like the first lease. */
    public void renew() {
        Map.Entry<Integer, Map<String, Object>> r = send("PUT", path(), null);
        if (r.getKey() == 404) {
            client.log.log(System.Logger.Level.INFO, "keywarden.relay.lease_gone: leasing again");
            take();
        } else {
            accept(r, 200);
        }
        synchronized (lock) {
            renewals++;
        }
    }

    void start() {
        thread = new Thread(this::run, "keywarden-relay-lease");
        thread.setDaemon(true);
        thread.start();
    }

    private void run() {
        while (true) {
            long wait;
            synchronized (lock) {
                wait = Math.max(1000, (expiresMs - (long) (client.localNow() * 1000)) / 2);
                try {
                    if (!released) lock.wait(wait);
                } catch (InterruptedException e) {
                    return;
                }
                if (released) return;
            }
            try {
                renew();
            } catch (KeywardenException e) {
                boolean retry = (e.getCode() == ErrorCode.NETWORK || e.getCode() == ErrorCode.TIMEOUT || e.getCode() == ErrorCode.SERVER)
                        && client.localNow() * 1000 < expiresAt().toEpochMilli();
                if (retry) {
                    client.log.log(System.Logger.Level.WARNING, "keywarden.relay.renew_failed: " + e.getMessage());
                    continue;
                }
                synchronized (lock) {
                    lost = e;
                }
                client.log.log(System.Logger.Level.WARNING, "keywarden.relay.lease_lost: " + e.getMessage());
                return;
            }
        }
    }

    /** Gives the seat back (DELETE); failures are only logged (an unreachable relay lets the lease expire). */
    public void release() {
        synchronized (lock) {
            if (released) return;
            released = true;
            lock.notifyAll();
        }
        try {
            if (thread != null) thread.join();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        try {
            Map.Entry<Integer, Map<String, Object>> r = send("DELETE", path(), null);
            if (r.getKey() != 204 && r.getKey() != 404) throw refused(r.getKey(), r.getValue());
        } catch (KeywardenException e) {
            client.log.log(System.Logger.Level.WARNING, "keywarden.relay.release_failed: " + e.getMessage());
        }
    }

    /** {@link #release()}. */
    @Override
    public void close() {
        release();
    }

    public String leaseId() {
        synchronized (lock) {
            return leaseId;
        }
    }

    public String hwid() {
        return hwid;
    }

    public SeatPool pool() {
        synchronized (lock) {
            return pool;
        }
    }

    public Instant expiresAt() {
        synchronized (lock) {
            return Instant.ofEpochMilli(expiresMs);
        }
    }

    public int renewals() {
        synchronized (lock) {
            return renewals;
        }
    }

    /** Why the seat was lost, null while held. */
    public KeywardenException lost() {
        synchronized (lock) {
            return lost;
        }
    }

    /** True while held and not past its expiry. */
    public boolean active() {
        synchronized (lock) {
            return !released && lost == null && client.localNow() * 1000 < expiresMs;
        }
    }
}
