package io.keywarden;

/**
 * An update refused: a {@link KeywardenException} whose reason is an {@link UpdateReason}. The code is
 * {@code verification} for UNKNOWN_KID, BAD_SIGNATURE, SIZE_MISMATCH and SHA512_MISMATCH; for DOWNLOAD_FAILED it is
 * {@code server} (status and detail of the link's answer kept, e.g. 403 "Download link expired"), {@code network} or
 * {@code timeout}.
 */
public class UpdateException extends KeywardenException {
    private static final long serialVersionUID = 1L;

    UpdateException(ErrorCode code, UpdateReason reason, String message, Integer status, Object detail, Throwable cause) {
        super(code, "update refused (" + reason + "): " + message, status, detail, reason, null, null, null, false, cause);
    }

    UpdateException(UpdateReason reason, String message) {
        this(ErrorCode.VERIFICATION, reason, message, null, null, null);
    }

    /** Why the update was refused. */
    public UpdateReason getUpdateReason() {
        return (UpdateReason) getReason();
    }
}
