package io.keywarden;

/** What a {@link Transport} throws: {@code timeout} or not, and whether any byte may have reached the server. */
public class TransportException extends RuntimeException {
    private static final long serialVersionUID = 1L;
    private final boolean timeout;
    private final boolean sent;

    public TransportException(boolean timeout, boolean sent, String message) {
        super(message);
        this.timeout = timeout;
        this.sent = sent;
    }

    public boolean isTimeout() {
        return timeout;
    }

    /** False: nothing reached the server (connection refused, DNS, a proxy refusing the tunnel). */
    public boolean isSent() {
        return sent;
    }
}
