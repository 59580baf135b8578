package io.keywarden;

/** Why an answer was not believed (the reason of a {@code verification} error). */
public enum VerificationReason {
    UNSIGNED("unsigned"),
    UNKNOWN_KID("unknown_kid"),
    BAD_BASE64("bad_base64"),
    STALE("stale"),
    BAD_SIGNATURE("bad_signature"),
    BAD_PROOF("bad_proof"),
    MALFORMED("malformed"),
    /** Realtime channel: a frame whose MAC does not verify (forged, or recorded on another connection). */
    BAD_MAC("bad_mac"),
    /** Realtime channel: a frame whose seq is not the next one (replayed, dropped or reordered). */
    OUT_OF_ORDER("out_of_order");

    private final String wire;

    VerificationReason(String wire) {
        this.wire = wire;
    }

    public String wire() {
        return wire;
    }

    @Override
    public String toString() {
        return wire;
    }
}
