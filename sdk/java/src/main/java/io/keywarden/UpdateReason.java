package io.keywarden;

/** Why an update (an offered artifact or its download) was refused (the same strings in every SDK). */
public enum UpdateReason {
    /** Signed under a key id that is not pinned. */
    UNKNOWN_KID("unknown_kid"),
    /** Not base64 of 64 bytes, or not valid for this app, version, file name and SHA-512. */
    BAD_SIGNATURE("bad_signature"),
    /** The download produced another number of bytes than the offer's size. */
    SIZE_MISMATCH("size_mismatch"),
    /** The downloaded bytes do not hash to the offer's sha512. */
    SHA512_MISMATCH("sha512_mismatch"),
    /** The link answered something other than 200, the connection failed or stalled, or the file could not be written. */
    DOWNLOAD_FAILED("download_failed");

    private final String wire;

    UpdateReason(String wire) {
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
