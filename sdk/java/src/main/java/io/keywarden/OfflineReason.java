package io.keywarden;

/**
 * Why an offline license file was refused (sdk/vectors/offline.json). Checked in this order, so a file wrong in two
 * ways names the first.
 */
public enum OfflineReason {
    MALFORMED("malformed"),
    UNKNOWN_KID("unknown_kid"),
    BAD_SIGNATURE("bad_signature"),
    WRONG_APP("wrong_app"),
    WRONG_HWID("wrong_hwid"),
    /** The clock reads more than 300 s before the latest time this SDK has seen (its state file). */
    CLOCK_ROLLED_BACK("clock_rolled_back"),
    /** issued_at is more than 300 s ahead of the clock. */
    ISSUED_IN_FUTURE("issued_in_future"),
    /** The clock has reached valid_until. */
    EXPIRED("expired"),
    /** An activation answer without the nonce of this machine's latest activation request (checked last). */
    WRONG_REQUEST("wrong_request");

    private final String wire;

    OfflineReason(String wire) {
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
