package io.keywarden;

import java.nio.file.Path;
import java.time.Duration;
import java.util.function.LongSupplier;

/**
 * Client options, made with {@link #builder()}; every field is optional.
 *
 * <pre>{@code
 * ClientOptions o = ClientOptions.builder().timeout(Duration.ofSeconds(5)).retries(1).build();
 * }</pre>
 */
public final class ClientOptions {
    final String baseUrl;
    final Duration timeout;
    final int retries;
    final System.Logger logger;
    final LongSupplier clock;
    final Transport transport;
    final String encKey;
    final Duration maxClockOffset;
    final int maxResponseBytes;
    final Path stateFile;
    final Path requestFile;

    private ClientOptions(Builder b) {
        this.baseUrl = b.baseUrl;
        this.timeout = b.timeout;
        this.retries = b.retries;
        this.logger = b.logger;
        this.clock = b.clock;
        this.transport = b.transport;
        this.encKey = b.encKey;
        this.maxClockOffset = b.maxClockOffset;
        this.maxResponseBytes = b.maxResponseBytes;
        this.stateFile = b.stateFile;
        this.requestFile = b.requestFile;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** The defaults. */
    public static ClientOptions defaults() {
        return new Builder().build();
    }

    public static final class Builder {
        private String baseUrl;
        private Duration timeout = Duration.ofSeconds(10);
        private int retries = 2;
        private System.Logger logger;
        private LongSupplier clock;
        private Transport transport;
        private String encKey;
        private Duration maxClockOffset = Duration.ofSeconds(600);
        private int maxResponseBytes = 1 << 20;
        private Path stateFile;
        private Path requestFile;

        private Builder() {}

        /** Overrides the config's base_url. */
        public Builder baseUrl(String v) {
            this.baseUrl = v;
            return this;
        }

        /** Each call's deadline (connect + answer), strictly enforced. Default 10 s. */
        public Builder timeout(Duration v) {
            this.timeout = v;
            return this;
        }

        /** Extra attempts for a call that certainly never reached the server. Default 2. */
        public Builder retries(int v) {
            this.retries = v;
            return this;
        }

        /** Where log records go; default {@code System.getLogger("io.keywarden")}. */
        public Builder logger(System.Logger v) {
            this.logger = v;
            return this;
        }

        /** The local clock in unix milliseconds (default {@code System::currentTimeMillis}); the server's offset is learned on top. */
        public Builder clock(LongSupplier v) {
            this.clock = v;
            return this;
        }

        /** Your own HTTP layer (no realtime channel then: beats go over REST). */
        public Builder transport(Transport v) {
            this.transport = v;
            return this;
        }

        /** Asks for encrypted answers (docs/protocol.md 5); needs the config's api_secret. */
        public Builder encKey(String v) {
            this.encKey = v;
            return this;
        }

        /** The largest server clock offset adopted from the first verified answer. Default 600 s. */
        public Builder maxClockOffset(Duration v) {
            this.maxClockOffset = v;
            return this;
        }

        /** Bigger answers are a network error (default transport). Default 1 MiB. */
        public Builder maxResponseBytes(int v) {
            this.maxResponseBytes = v;
            return this;
        }

        /** Where offline license checks keep the latest time seen; default {@link Offline#defaultStateFile}. */
        public Builder stateFile(Path v) {
            this.stateFile = v;
            return this;
        }

        /**
         * Where {@link Client#activationRequest} keeps the nonce of this machine's latest activation request
         * (default: the state file's path with ".request.json" instead of ".json").
         */
        public Builder requestFile(Path v) {
            this.requestFile = v;
            return this;
        }

        public ClientOptions build() {
            if (timeout == null || timeout.isNegative() || timeout.isZero()) throw new ConfigException("timeout must be positive");
            if (retries < 0) throw new ConfigException("retries must be >= 0");
            if (maxClockOffset == null || maxClockOffset.isNegative()) throw new ConfigException("maxClockOffset must be >= 0");
            if (maxResponseBytes <= 0) throw new ConfigException("maxResponseBytes must be positive");
            if (baseUrl != null && !baseUrl.matches("^https?://[^/\\s].*")) throw new ConfigException("baseUrl must be an http(s) URL");
            return new ClientOptions(this);
        }
    }
}
