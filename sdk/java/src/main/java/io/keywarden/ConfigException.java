package io.keywarden;

/** keywarden.json or a client option is unusable: a programming mistake, thrown where the client is built. */
public class ConfigException extends IllegalArgumentException {
    private static final long serialVersionUID = 1L;

    public ConfigException(String message) {
        super(message);
    }

    public ConfigException(String message, Throwable cause) {
        super(message, cause);
    }
}
