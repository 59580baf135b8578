package io.keywarden;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetSocketAddress;
import java.net.Socket;
import java.net.SocketTimeoutException;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;
import javax.net.ssl.SSLParameters;
import javax.net.ssl.SSLSocket;
import javax.net.ssl.SSLSocketFactory;

/**
 * HTTP/1.1 over a fresh connection per call ({@code Connection: close}), on plain sockets because a heartbeat must
 * know whether its request can have reached the server: a connection that was never established means nothing was
 * sent and the same beat may be sent again. The deadline is strict: connect, write and every read share one budget
 * (a server trickling one byte at a time still ends at the timeout). https verifies certificates and host names
 * with the JDK's default trust store.
 */
public final class DefaultTransport implements Transport {
    private final int maxResponseBytes;

    public DefaultTransport() {
        this(1 << 20);
    }

    public DefaultTransport(int maxResponseBytes) {
        this.maxResponseBytes = maxResponseBytes;
    }

    @Override
    public Response send(Request req) {
        URI u;
        try {
            u = URI.create(req.url());
        } catch (IllegalArgumentException e) {
            throw new TransportException(false, false, "bad URL: " + e.getMessage());
        }
        boolean secure = "https".equalsIgnoreCase(u.getScheme());
        String host = u.getHost();
        int port = u.getPort() > 0 ? u.getPort() : secure ? 443 : 80;
        long deadline = System.nanoTime() + req.timeoutMillis() * 1_000_000L;
        Socket sock = null;
        boolean sent = false;
        try {
            sock = open(host, port, secure, (int) Math.max(1, req.timeoutMillis()));
            sent = true;
            sock.setSoTimeout(remaining(deadline));
            String target = u.getRawPath() == null || u.getRawPath().isEmpty() ? "/" : u.getRawPath();
            if (u.getRawQuery() != null) target += "?" + u.getRawQuery();
            StringBuilder head = new StringBuilder();
            head.append(req.method()).append(' ').append(target).append(" HTTP/1.1\r\n");
            head.append("Host: ").append(hostHeader(host, u.getPort())).append("\r\n");
            head.append("Connection: close\r\n");
            head.append("Content-Length: ").append(req.body().length).append("\r\n");
            for (Map.Entry<String, String> h : req.headers().entrySet()) head.append(h.getKey()).append(": ").append(h.getValue()).append("\r\n");
            head.append("\r\n");
            OutputStream out = sock.getOutputStream();
            out.write(head.toString().getBytes(StandardCharsets.UTF_8));
            out.write(req.body());
            out.flush();
            return readResponse(sock, deadline);
        } catch (SocketTimeoutException e) {
            throw new TransportException(true, sent, "no answer within " + req.timeoutMillis() + " ms");
        } catch (TransportException e) {
            throw e;
        } catch (IOException | RuntimeException e) {
            throw new TransportException(false, sent, e.getClass().getSimpleName() + ": " + e.getMessage());
        } finally {
            if (sock != null) {
                try {
                    sock.close();
                } catch (IOException ignored) {
                    // closing a dead socket
                }
            }
        }
    }

    static String hostHeader(String host, int port) {
        String h = host.contains(":") && !host.startsWith("[") ? "[" + host + "]" : host;
        return port > 0 ? h + ":" + port : h;
    }

    /** A connected socket (TLS handshake done for https); failures here mean nothing was sent. */
    static Socket open(String host, int port, boolean secure, int timeoutMillis) throws IOException {
        Socket s = new Socket();
        try {
            s.connect(new InetSocketAddress(host, port), timeoutMillis);
            s.setTcpNoDelay(true);
            if (!secure) return s;
            SSLSocket tls = (SSLSocket) ((SSLSocketFactory) SSLSocketFactory.getDefault()).createSocket(s, host, port, true);
            SSLParameters p = tls.getSSLParameters();
            p.setEndpointIdentificationAlgorithm("HTTPS");
            tls.setSSLParameters(p);
            tls.setSoTimeout(timeoutMillis);
            tls.startHandshake();
            return tls;
        } catch (IOException | RuntimeException e) {
            s.close();
            throw e;
        }
    }

    private static int remaining(long deadline) throws SocketTimeoutException {
        long ms = (deadline - System.nanoTime()) / 1_000_000L;
        if (ms <= 0) throw new SocketTimeoutException("deadline");
        return (int) Math.min(Integer.MAX_VALUE, ms);
    }

    private Response readResponse(Socket sock, long deadline) throws IOException {
        InputStream in = sock.getInputStream();
        Reader r = new Reader(in, sock, deadline);
        String status = r.line();
        String[] parts = status.split(" ", 3);
        if (parts.length < 2 || !parts[0].startsWith("HTTP/")) throw new IOException("not an HTTP answer");
        int code = Integer.parseInt(parts[1]);
        Map<String, String> headers = new LinkedHashMap<>();
        while (true) {
            String line = r.line();
            if (line.isEmpty()) break;
            int c = line.indexOf(':');
            if (c <= 0) continue;
            String k = line.substring(0, c).trim().toLowerCase(Locale.ROOT);
            String v = line.substring(c + 1).trim();
            headers.merge(k, v, (a, b) -> a + ", " + b);
        }
        if (code >= 100 && code < 200) return readResponse(sock, deadline); // 100 Continue and the like
        ByteArrayOutputStream body = new ByteArrayOutputStream();
        String te = headers.getOrDefault("transfer-encoding", "").toLowerCase(Locale.ROOT);
        if (te.contains("chunked")) {
            while (true) {
                String size = r.line();
                int semi = size.indexOf(';');
                int n = Integer.parseInt((semi >= 0 ? size.substring(0, semi) : size).trim(), 16);
                if (n == 0) {
                    while (!r.line().isEmpty()) {
                        // trailers
                    }
                    break;
                }
                if (body.size() + n > maxResponseBytes) throw new IOException("response larger than " + maxResponseBytes + " bytes");
                body.write(r.bytes(n));
                r.line();
            }
        } else if (headers.containsKey("content-length")) {
            long n = Long.parseLong(headers.get("content-length").split(",")[0].trim());
            if (n > maxResponseBytes) throw new IOException("response larger than " + maxResponseBytes + " bytes");
            body.write(r.bytes((int) n));
        } else {
            byte[] b;
            while ((b = r.some()) != null) {
                body.write(b);
                if (body.size() > maxResponseBytes) throw new IOException("response larger than " + maxResponseBytes + " bytes");
            }
        }
        return new Response(code, headers, body.toByteArray());
    }

    /** Buffered reads, each under what is left of the deadline. */
    private static final class Reader {
        private final InputStream in;
        private final Socket sock;
        private final long deadline;
        private final byte[] buf = new byte[16384];
        private int pos;
        private int len;

        Reader(InputStream in, Socket sock, long deadline) {
            this.in = in;
            this.sock = sock;
            this.deadline = deadline;
        }

        private boolean fill() throws IOException {
            sock.setSoTimeout(remaining(deadline));
            int n = in.read(buf);
            if (n < 0) return false;
            pos = 0;
            len = n;
            return true;
        }

        String line() throws IOException {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            while (true) {
                if (pos >= len && !fill()) throw new IOException("connection closed mid-answer");
                byte c = buf[pos++];
                if (c == '\n') break;
                if (c != '\r') b.write(c);
                if (b.size() > 65536) throw new IOException("header line too long");
            }
            return b.toString(StandardCharsets.ISO_8859_1);
        }

        byte[] bytes(int n) throws IOException {
            byte[] out = new byte[n];
            int got = 0;
            while (got < n) {
                if (pos >= len && !fill()) throw new IOException("connection closed mid-answer");
                int k = Math.min(n - got, len - pos);
                System.arraycopy(buf, pos, out, got, k);
                pos += k;
                got += k;
            }
            return out;
        }

        byte[] some() throws IOException {
            if (pos >= len && !fill()) return null;
            byte[] out = java.util.Arrays.copyOfRange(buf, pos, len);
            pos = len;
            return out;
        }
    }
}
