package io.keywarden;

import java.io.BufferedInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.security.KeyPair;
import java.security.MessageDigest;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.security.SecureRandom;
import java.util.ArrayList;
import java.util.Base64;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.BiConsumer;

/**
 * The realtime channel (the server's docs/protocol.md, "Realtime channel"): heartbeat calls over one WebSocket and
 * pushes (revoked, update_required, notice). Nothing is believed unverified: the hello must be signed by a pinned key
 * over THIS client's session and fresh X25519 key; every later frame must carry this connection's MAC and the next
 * sequence number. A frame that fails is refused: the connection is dropped, the message ignored. The WebSocket
 * client is minimal (RFC 6455: masked client frames, fragments, ping/pong, close) with one daemon reader thread per
 * connection.
 */
public final class Channel {
    private Channel() {}

    static final String PATH = "/api/client/ws";
    private static final String GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    private static final int MAX_MESSAGE = 1 << 20;
    /** Close codes after which the channel is not reopened for this session (stop, superseded, revoked, idle). */
    private static final Set<Integer> FINAL_CLOSE = Set.of(1000, 4001, 4003, 4008);
    private static final SecureRandom RANDOM = new SecureRandom();

    /** A pushed message: {@code type} is "revoked", "update_required" or "notice". */
    record Push(String type, String reason, Object detail, String message, String latestVersion, String updateUrl, String at) {}

    /** A server frame refused: why. */
    public record Refusal(VerificationReason reason, String what) {}

    // --- crypto checks (sdk/vectors/channel.json) ---------------------------------------------------

    /**
     * Verifies the hello as the client whose session and key made the upgrade; returns {s2c, c2s}. Checks in order:
     * malformed, unknown_kid, bad_base64, stale, bad_signature.
     */
    public static byte[][] verifyHello(Map<String, PublicKey> keys, double now, String session, String clientKey,
            PrivateKey priv, String raw) {
        Map<String, Object> h;
        try {
            h = Json.parseObject(raw);
        } catch (Json.ParseException e) {
            throw KeywardenException.verification(VerificationReason.MALFORMED, "channel hello is not JSON");
        }
        if (h == null || !"hello".equals(h.get("type")) || !(h.get("kid") instanceof String) || !(h.get("sig") instanceof String)
                || !(h.get("server_key") instanceof String) || !(h.get("conn") instanceof String)
                || !(h.get("ts") instanceof Long) || !(h.get("beat_interval") instanceof Long)) {
            throw KeywardenException.verification(VerificationReason.MALFORMED, "channel hello lacks fields");
        }
        String kid = (String) h.get("kid");
        PublicKey key = keys.get(kid);
        if (key == null) throw KeywardenException.verification(VerificationReason.UNKNOWN_KID, "channel hello signed by unpinned key '" + kid + "'");
        byte[] sig = Crypto.decodeSignature(h.get("sig"));
        if (sig == null) throw KeywardenException.verification(VerificationReason.BAD_BASE64, "channel hello signature is not base64 of 64 bytes");
        long ts = (Long) h.get("ts");
        if (Math.abs(ts - now) > Client.WINDOW_SECONDS) throw KeywardenException.verification(VerificationReason.STALE, "channel hello timestamp " + ts + " is off");
        String transcript = Crypto.channelTranscript(kid, ts, session, clientKey, (String) h.get("server_key"), (String) h.get("conn"), (Long) h.get("beat_interval"));
        if (!Crypto.ed25519Verify(key, Crypto.utf8(transcript), sig)) throw KeywardenException.verification(VerificationReason.BAD_SIGNATURE, "channel hello does not verify");
        try {
            return Crypto.channelKeys(priv, (String) h.get("server_key"), transcript);
        } catch (IllegalArgumentException e) {
            throw KeywardenException.verification(VerificationReason.MALFORMED, "channel hello carries an unusable server key");
        }
    }

    /** One server frame: the message (a Map), or a {@link Refusal}: bad_mac, malformed, out_of_order. */
    public static Object readFrame(byte[] s2c, long expectedSeq, byte[] frame, boolean binary) {
        if (!binary) return new Refusal(VerificationReason.MALFORMED, "text frame after the hello");
        byte[] payload = Crypto.openFrame(s2c, frame);
        if (payload == null) return new Refusal(VerificationReason.BAD_MAC, "channel frame MAC does not verify");
        Map<String, Object> m;
        try {
            m = Json.parseObject(StandardCharsets.UTF_8.newDecoder().decode(java.nio.ByteBuffer.wrap(payload)).toString());
        } catch (Json.ParseException | java.nio.charset.CharacterCodingException e) {
            return new Refusal(VerificationReason.MALFORMED, "channel frame is not JSON");
        }
        if (m == null) return new Refusal(VerificationReason.MALFORMED, "channel frame is not a JSON object");
        Object seq = m.get("seq");
        if (!(seq instanceof Long) || (Long) seq != expectedSeq) return new Refusal(VerificationReason.OUT_OF_ORDER, "channel frame " + seq + " where " + expectedSeq + " was due");
        return m;
    }

    // --- a minimal WebSocket client ------------------------------------------------------------------

    /** A received message. */
    private record Message(byte[] data, boolean binary) {}

    private static final class WebSocket {
        final Socket sock;
        final DataInputStream in;
        final OutputStream out;
        private final Object sendLock = new Object();
        volatile boolean closed;
        int closeCode = 1006;

        WebSocket(Socket sock, InputStream in) throws IOException {
            this.sock = sock;
            this.in = new DataInputStream(in);
            this.out = sock.getOutputStream();
        }

        boolean send(byte[] data, int opcode) {
            byte[] mask = new byte[4];
            RANDOM.nextBytes(mask);
            ByteArrayOutputStream b = new ByteArrayOutputStream(data.length + 14);
            b.write(0x80 | opcode);
            int n = data.length;
            if (n < 126) {
                b.write(0x80 | n);
            } else if (n < 65536) {
                b.write(0x80 | 126);
                b.write(n >>> 8);
                b.write(n & 0xff);
            } else {
                b.write(0x80 | 127);
                for (int i = 7; i >= 0; i--) b.write(i >= 4 ? 0 : (n >>> (8 * i)) & 0xff);
            }
            b.write(mask, 0, 4);
            for (int i = 0; i < n; i++) b.write(data[i] ^ mask[i & 3]);
            try {
                synchronized (sendLock) {
                    out.write(b.toByteArray());
                    out.flush();
                }
                return true;
            } catch (IOException e) {
                return false;
            }
        }

        /** The next complete data message, or null once the connection closed (closeCode set). */
        Message read() throws IOException {
            ByteArrayOutputStream frags = null;
            boolean binary = false;
            while (true) {
                int b0 = in.readUnsignedByte();
                int b1 = in.readUnsignedByte();
                if ((b1 & 0x80) != 0) throw new IOException("a server must not mask");
                long n = b1 & 0x7f;
                if (n == 126) n = in.readUnsignedShort();
                else if (n == 127) n = in.readLong();
                if (n < 0 || n > MAX_MESSAGE) throw new IOException("message too large");
                byte[] payload = new byte[(int) n];
                in.readFully(payload);
                int opcode = b0 & 0x0f;
                if (opcode <= 2) {
                    if (opcode != 0) {
                        frags = new ByteArrayOutputStream();
                        binary = opcode == 2;
                    }
                    if (frags == null) throw new IOException("continuation without a start");
                    frags.write(payload);
                    if (frags.size() > MAX_MESSAGE) throw new IOException("message too large");
                    if ((b0 & 0x80) != 0) return new Message(frags.toByteArray(), binary);
                } else if (opcode == 8) {
                    closeCode = payload.length >= 2 ? ((payload[0] & 0xff) << 8) | (payload[1] & 0xff) : 1005;
                    send(payload.length >= 2 ? new byte[] {payload[0], payload[1]} : new byte[0], 8);
                    return null;
                } else if (opcode == 9) {
                    send(payload, 10);
                }
            }
        }

        void close(int code) {
            if (!closed) send(new byte[] {(byte) (code >>> 8), (byte) code}, 8);
            terminate();
        }

        void terminate() {
            closed = true;
            try {
                sock.close();
            } catch (IOException ignored) {
                // already gone
            }
        }
    }

    /** An upgrade the server refused: status, lower-cased headers, body. */
    private record Refused(int status, Map<String, String> headers, byte[] body) {}

    private static Object openWebSocket(String url, Map<String, String> headers, int timeoutMillis) throws IOException {
        URI u = URI.create(url);
        boolean secure = "https".equalsIgnoreCase(u.getScheme());
        int port = u.getPort() > 0 ? u.getPort() : secure ? 443 : 80;
        Socket sock = DefaultTransport.open(u.getHost(), port, secure, timeoutMillis);
        try {
            sock.setSoTimeout(timeoutMillis);
            byte[] k = new byte[16];
            RANDOM.nextBytes(k);
            String key = Base64.getEncoder().encodeToString(k);
            StringBuilder req = new StringBuilder();
            req.append("GET ").append(u.getRawPath() == null || u.getRawPath().isEmpty() ? "/" : u.getRawPath()).append(" HTTP/1.1\r\n");
            req.append("Host: ").append(DefaultTransport.hostHeader(u.getHost(), u.getPort())).append("\r\n");
            req.append("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n");
            req.append("Sec-WebSocket-Key: ").append(key).append("\r\n");
            for (Map.Entry<String, String> h : headers.entrySet()) req.append(h.getKey()).append(": ").append(h.getValue()).append("\r\n");
            req.append("\r\n");
            sock.getOutputStream().write(req.toString().getBytes(StandardCharsets.UTF_8));
            sock.getOutputStream().flush();
            BufferedInputStream in = new BufferedInputStream(sock.getInputStream());
            String status = line(in);
            String[] parts = status.split(" ", 3);
            if (parts.length < 2) throw new IOException("not an HTTP answer");
            int code = Integer.parseInt(parts[1]);
            Map<String, String> got = new LinkedHashMap<>();
            while (true) {
                String l = line(in);
                if (l.isEmpty()) break;
                int c = l.indexOf(':');
                if (c > 0) got.put(l.substring(0, c).trim().toLowerCase(Locale.ROOT), l.substring(c + 1).trim());
            }
            if (code != 101) {
                int length = 0;
                try {
                    length = Math.min(65536, Integer.parseInt(got.getOrDefault("content-length", "0").trim()));
                } catch (NumberFormatException e) {
                    length = 0;
                }
                byte[] body = in.readNBytes(length);
                sock.close();
                return new Refused(code, got, body);
            }
            String accept = Base64.getEncoder().encodeToString(MessageDigest.getInstance("SHA-1").digest((key + GUID).getBytes(StandardCharsets.US_ASCII)));
            if (!accept.equals(got.get("sec-websocket-accept"))) throw new IOException("the server did not accept the WebSocket handshake");
            return new WebSocket(sock, in);
        } catch (IOException | RuntimeException | java.security.NoSuchAlgorithmException e) {
            sock.close();
            if (e instanceof IOException io) throw io;
            throw new IOException(e.toString(), e);
        }
    }

    private static String line(InputStream in) throws IOException {
        ByteArrayOutputStream b = new ByteArrayOutputStream();
        while (true) {
            int c = in.read();
            if (c < 0) throw new IOException("closed during the upgrade");
            if (c == '\n') break;
            if (c != '\r') b.write(c);
            if (b.size() > 65536) throw new IOException("upgrade answer too large");
        }
        return b.toString(StandardCharsets.ISO_8859_1);
    }

    // --- one verified connection ---------------------------------------------------------------------

    /** The outcome of {@link Connection#connect}: a connection, or an error and whether the server offers a channel. */
    record Opened(Connection conn, KeywardenException error, boolean offered) {}

    static final class Connection {
        private final Client client;
        private final WebSocket ws;
        private final byte[] s2c;
        private final byte[] c2s;
        private final Object lock = new Object();
        private long out;
        private long in;
        private final Map<Long, CompletableFuture<Object>> pending = new ConcurrentHashMap<>();
        private volatile boolean closed;
        volatile int closeCode;
        volatile KeywardenException closeError;
        volatile java.util.function.Consumer<Push> onPush = p -> {};
        volatile BiConsumer<Integer, KeywardenException> onClose = (c, e) -> {};

        private Connection(Client client, WebSocket ws, byte[] s2c, byte[] c2s) {
            this.client = client;
            this.ws = ws;
            this.s2c = s2c;
            this.c2s = c2s;
        }

        boolean open() {
            return !closed;
        }

        static Opened connect(Client client, String session) {
            KeyPair kp = Crypto.x25519KeyPair();
            String clientKey = Crypto.b64url(Crypto.x25519Raw(kp.getPublic()));
            Map<String, String> headers = new LinkedHashMap<>();
            headers.put("X-Session", session);
            headers.put("X-Nonce", clientKey);
            headers.put("X-Client-Version", client.getConfig().getVersion() != null ? client.getConfig().getVersion() : "1.0");
            String route = client.route();
            if (route != null && !route.isEmpty()) headers.put("X-Keywarden-Route", route);
            String secret = client.getConfig().getApiSecret();
            if (secret != null) {
                String ts = Long.toString((long) Math.floor(client.serverNow()));
                headers.put("X-Timestamp", ts);
                headers.put("X-Signature", Crypto.requestSignature(secret, Crypto.canonicalRequest("GET", PATH, ts, clientKey, new byte[0])));
            }
            int openTimeout = (int) Math.min(client.timeoutMillis, 5000);
            Object up;
            try {
                up = openWebSocket(client.baseUrl + PATH, headers, openTimeout);
            } catch (IOException | RuntimeException e) {
                return new Opened(null, KeywardenException.network(ErrorCode.NETWORK, "channel: " + e.getMessage(), true), true);
            }
            if (up instanceof Refused r) return new Opened(null, refusal(client, clientKey, r), r.status() != 404 && r.status() != 405);
            WebSocket ws = (WebSocket) up;
            Message hello;
            try {
                hello = ws.read(); // the socket still carries the open timeout
            } catch (IOException e) {
                ws.terminate();
                return new Opened(null, KeywardenException.network(ErrorCode.NETWORK, "channel: no hello (" + e.getMessage() + ")", false), true);
            }
            if (hello == null) {
                ws.terminate();
                return new Opened(null, KeywardenException.network(ErrorCode.NETWORK, "channel: closed before the hello", false), true);
            }
            byte[][] k;
            try {
                if (hello.binary()) throw KeywardenException.verification(VerificationReason.MALFORMED, "channel hello is not a text frame");
                k = verifyHello(client.keys, client.serverNow(), session, clientKey, kp.getPrivate(), new String(hello.data(), StandardCharsets.UTF_8));
            } catch (KeywardenException e) {
                ws.terminate();
                return new Opened(null, e, true);
            }
            Connection conn = new Connection(client, ws, k[0], k[1]);
            // Frames that came with the hello are judged before the connection is used: one that does not verify
            // (a frame injected from another connection) refuses the connection before any call is sent on it.
            try {
                while (!conn.closed && ws.in.available() > 0) {
                    Message m = ws.read();
                    if (m == null) {
                        ws.terminate();
                        conn.finish(ws.closeCode, null);
                    } else {
                        conn.receive(m);
                    }
                }
            } catch (IOException e) {
                ws.terminate();
                conn.finish(1006, null);
            }
            if (!conn.closed) {
                try {
                    ws.sock.setSoTimeout(0); // from here the reader thread waits as long as the connection lives
                } catch (IOException e) {
                    ws.terminate();
                    conn.finish(1006, null);
                }
            }
            if (conn.closed) {
                KeywardenException why = conn.closeError != null ? conn.closeError : KeywardenException.network(ErrorCode.NETWORK, "channel: closed right after the hello", false);
                return new Opened(null, why, true);
            }
            return new Opened(conn, null, true);
        }

        /** Starts the reader thread (after the owner set onPush and onClose). */
        void start() {
            Thread t = new Thread(this::readLoop, "keywarden-channel");
            t.setDaemon(true);
            t.start();
        }

        private static KeywardenException refusal(Client client, String nonce, Refused r) {
            try {
                Client.verifyResponse(client.keys, "GET", PATH, r.status(), r.headers(), r.body(), nonce, client.serverNow(), Client.WINDOW_SECONDS);
            } catch (KeywardenException e) {
                return e; // unsigned (a proxy that does not pass WebSockets): nothing in it is believed
            }
            Map<String, Object> body;
            try {
                body = Client.parseAnswer(r.body(), PATH, r.status());
            } catch (KeywardenException e) {
                return e;
            }
            return KeywardenException.fromAnswer(r.status(), body.get("detail"), r.headers().get("retry-after"));
        }

        private void readLoop() {
            int code = 1006;
            try {
                while (!closed) {
                    Message m = ws.read();
                    if (m == null) {
                        code = ws.closeCode;
                        break;
                    }
                    if (!receive(m)) return;
                }
            } catch (IOException | RuntimeException e) {
                // the connection broke
            }
            ws.terminate();
            finish(code, null);
        }

        /** False when the frame was refused (the connection is then finished). */
        private boolean receive(Message msg) {
            Object r = readFrame(s2c, in + 1, msg.data(), msg.binary());
            if (r instanceof Refusal f) {
                client.log.log(System.Logger.Level.WARNING, "keywarden.channel.refused: " + f.reason());
                finish(1006, KeywardenException.verification(f.reason(), f.what()));
                ws.terminate();
                return false;
            }
            in++;
            @SuppressWarnings("unchecked")
            Map<String, Object> m = (Map<String, Object>) r;
            Object kind = m.get("type");
            if ("reply".equals(kind)) {
                Long re = Json.integer(m.get("re"));
                CompletableFuture<Object> f = re == null ? null : pending.remove(re);
                if (f == null) return true;
                Map<String, Object> body = Json.obj(m.get("body"));
                if (body == null) body = Map.of();
                Long status = Json.integer(m.get("status"));
                if (status != null && status == 200) {
                    f.complete(Boolean.TRUE.equals(body.get("success")) ? body : KeywardenException.verification(VerificationReason.MALFORMED, "channel reply lacks success: true"));
                } else {
                    Object retry = m.get("retry_after");
                    f.complete(KeywardenException.fromAnswer(status == null ? 0 : status.intValue(), body.get("detail"), retry != null ? String.valueOf(retry) : null));
                }
            } else if ("revoked".equals(kind)) {
                onPush.accept(new Push("revoked", str(m.get("reason")), str(m.get("detail")), "", null, null, null));
            } else if ("update_required".equals(kind)) {
                Map<String, Object> d = Json.obj(m.get("detail"));
                if (d == null) d = Map.of();
                String message = d.get("message") instanceof String s ? s : "A new version is required.";
                onPush.accept(new Push("update_required", "", m.get("detail"), message, Json.str(d.get("latest_version")), Json.str(d.get("update_url")), null));
            } else if ("notice".equals(kind)) {
                onPush.accept(new Push("notice", "", null, str(m.get("message")), null, null, Json.str(m.get("at"))));
            }
            // pong, or a type of a newer server: verified, harmless to skip
            return true;
        }

        private static String str(Object o) {
            return o == null ? "" : String.valueOf(o);
        }

        /**
         * One call; the success body, or the server's coded error; {@code network} with notSent when the channel was
         * already down (send it over REST instead).
         */
        Map<String, Object> call(String op, Map<String, Object> body) {
            Map<String, Object> rest = new LinkedHashMap<>(body);
            rest.remove("session");
            CompletableFuture<Object> f = new CompletableFuture<>();
            long seq;
            boolean sent;
            synchronized (lock) {
                if (closed) throw KeywardenException.network(ErrorCode.NETWORK, "channel closed", true);
                seq = ++out;
                pending.put(seq, f);
                Map<String, Object> frame = new LinkedHashMap<>();
                frame.put("seq", seq);
                frame.put("type", "call");
                frame.put("op", op);
                frame.put("body", rest);
                sent = ws.send(Crypto.sealFrame(c2s, Json.write(frame).getBytes(StandardCharsets.UTF_8)), 2);
            }
            if (!sent) {
                pending.remove(seq);
                throw KeywardenException.network(ErrorCode.NETWORK, "channel closed", true);
            }
            Object result;
            try {
                result = f.get(client.timeoutMillis, TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                pending.remove(seq);
                throw KeywardenException.network(ErrorCode.TIMEOUT, "no answer to " + op + " on the channel within " + client.timeoutMillis + " ms", false);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                pending.remove(seq);
                throw KeywardenException.network(ErrorCode.NETWORK, "interrupted", false);
            } catch (ExecutionException e) {
                throw KeywardenException.network(ErrorCode.NETWORK, String.valueOf(e.getCause()), false);
            }
            if (result instanceof KeywardenException e) throw e;
            @SuppressWarnings("unchecked")
            Map<String, Object> ok = (Map<String, Object>) result;
            return ok;
        }

        void close(int code) {
            ws.close(code);
            finish(code, null);
        }

        private void finish(int code, KeywardenException error) {
            List<CompletableFuture<Object>> waiting;
            synchronized (lock) {
                if (closed) return;
                closed = true;
                closeCode = code;
                closeError = error;
                waiting = new ArrayList<>(pending.values());
                pending.clear();
            }
            for (CompletableFuture<Object> f : waiting) {
                // Sent, unanswered: the server may have acted on it (like a REST answer lost on the way).
                f.complete(error != null ? error : KeywardenException.network(ErrorCode.NETWORK, "channel closed (" + code + ") before the answer", false));
            }
            onClose.accept(code, error);
        }
    }

    // --- the heartbeat's link: opens, reopens, gives up ----------------------------------------------

    private static final ScheduledExecutorService TIMERS = timers();

    private static ScheduledExecutorService timers() {
        ScheduledThreadPoolExecutor t = new ScheduledThreadPoolExecutor(1, r -> {
            Thread th = new Thread(r, "keywarden-channel-timer");
            th.setDaemon(true);
            return th;
        });
        t.setRemoveOnCancelPolicy(true);
        return t;
    }

    /** What the link tells its heartbeat. */
    interface Sink {
        void push(Push p);

        void state(String state, Integer code, KeywardenException error);
    }

    /**
     * The heartbeat's channel: opens it, reopens it after a drop (0.5 s doubling up to 30 s), gives up when the
     * server has none. Pushes and state changes that come before {@link #attach} are delivered then.
     */
    static final class Link {
        private final Client client;
        private String session;
        private volatile Connection conn;
        private ScheduledFuture<?> timer;
        private int attempts;
        private boolean off;
        private final Object lock = new Object();
        private Sink sink;
        private final List<Runnable> backlog = new ArrayList<>();

        Link(Client client, String session) {
            this.client = client;
            this.session = session;
        }

        void attach(Sink s) {
            List<Runnable> todo;
            synchronized (lock) {
                sink = s;
                todo = new ArrayList<>(backlog);
                backlog.clear();
            }
            for (Runnable r : todo) r.run();
        }

        private void deliver(java.util.function.Consumer<Sink> what) {
            Sink s;
            synchronized (lock) {
                s = sink;
                if (s == null) {
                    backlog.add(() -> what.accept(sink));
                    return;
                }
            }
            what.accept(s);
        }

        boolean ready() {
            Connection c = conn;
            return c != null && c.open();
        }

        boolean connect() {
            String s;
            synchronized (lock) {
                if (off) return false;
                if (ready()) return true;
                s = session;
            }
            Opened o = Connection.connect(client, s);
            KeywardenException refused = null;
            synchronized (lock) {
                if (off || !s.equals(session)) {
                    if (o.conn() != null) o.conn().close(1000);
                    return false;
                }
                if (o.conn() == null) {
                    refused = o.error();
                    client.log.log(System.Logger.Level.DEBUG, "keywarden.channel.unavailable: " + refused.getMessage());
                    ErrorCode c = refused.getCode();
                    boolean transient_ = c == ErrorCode.NETWORK || c == ErrorCode.TIMEOUT || c == ErrorCode.VERIFICATION || c == ErrorCode.RATE_LIMITED || c == ErrorCode.SERVER;
                    if (!o.offered() || !transient_) off = true;
                    else retry(refused.getRetryAfter());
                } else {
                    attempts = 0;
                    conn = o.conn();
                }
            }
            if (refused != null) { // told outside the lock: a listener may call back into the link
                KeywardenException err = refused;
                deliver(k -> k.state("closed", null, err));
                return false;
            }
            Connection c = o.conn();
            c.onPush = p -> deliver(k -> k.push(p));
            c.onClose = (code, e) -> closed(c, code, e);
            deliver(k -> k.state("open", null, null));
            c.start();
            return ready();
        }

        private void closed(Connection c, int code, KeywardenException error) {
            synchronized (lock) {
                if (conn != c) return; // an old connection this link already let go of
                conn = null;
                if (FINAL_CLOSE.contains(code)) off = true;
                else retry(null);
            }
            deliver(k -> k.state("closed", code, error));
        }

        Map<String, Object> call(String op, Map<String, Object> body) {
            Connection c = conn;
            if (c == null) throw KeywardenException.network(ErrorCode.NETWORK, "channel closed", true);
            return c.call(op, body);
        }

        boolean rebind(String newSession) {
            Connection old;
            synchronized (lock) {
                session = newSession;
                old = conn;
                conn = null;
                attempts = 0;
                off = false;
            }
            if (old != null) old.close(1000);
            return connect();
        }

        void close() {
            Connection old;
            synchronized (lock) {
                off = true;
                if (timer != null) timer.cancel(false);
                old = conn;
                conn = null;
            }
            if (old != null) old.close(1000);
        }

        /** Called with the lock held. */
        private void retry(Double hint) {
            if (off) return;
            double base = Math.min(30.0, 0.5 * Math.pow(2, attempts));
            attempts++;
            double delay = Math.max(hint != null ? hint : 0.0, base * (0.8 + RANDOM.nextDouble() * 0.4));
            if (timer != null) timer.cancel(false);
            timer = TIMERS.schedule(() -> {
                try {
                    connect();
                } catch (RuntimeException e) {
                    client.log.log(System.Logger.Level.WARNING, "keywarden.channel.reconnect_failed: " + e);
                }
            }, (long) (delay * 1000), TimeUnit.MILLISECONDS);
        }
    }
}
