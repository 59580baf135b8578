package io.keywarden;

import java.util.Map;

/**
 * The HTTP layer, replaceable through {@link ClientOptions.Builder#transport}. An implementation throws
 * {@link TransportException} for a failure; {@code sent = false} promises that no byte reached the server (the
 * client may send the same request again). Anything else it throws counts as a {@code network} error that may have
 * reached the server.
 */
@FunctionalInterface
public interface Transport {
    Response send(Request request);

    /** One POST: the full URL, headers, body bytes and the whole exchange's timeout in milliseconds. */
    record Request(String method, String url, Map<String, String> headers, byte[] body, long timeoutMillis) {}

    /** The answer; header names lower-cased. */
    record Response(int status, Map<String, String> headers, byte[] body) {}
}
