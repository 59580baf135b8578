package keywarden

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// ErrorCode is the kind of a failure; the same strings in every Keywarden SDK (sdk/vectors/errors.json).
type ErrorCode string

const (
	CodeInvalidKey      ErrorCode = "invalid_key"
	CodeKeyUsed         ErrorCode = "key_used"
	CodeBanned          ErrorCode = "banned"
	CodeExpired         ErrorCode = "expired"
	CodeHWIDMismatch    ErrorCode = "hwid_mismatch"
	CodeAppDisabled     ErrorCode = "app_disabled"
	CodeUpdateRequired  ErrorCode = "update_required"
	CodeRateLimited     ErrorCode = "rate_limited"
	CodeLockedOut       ErrorCode = "locked_out"
	CodeSessionExpired  ErrorCode = "session_expired"
	CodeHeartbeatKilled ErrorCode = "heartbeat_killed"
	CodeVerification    ErrorCode = "verification"
	CodeClockSkew       ErrorCode = "clock_skew"
	CodeNetwork         ErrorCode = "network"
	CodeTimeout         ErrorCode = "timeout"
	// CodeServer is the fallback: an answer that matches nothing else (status and detail stay on the error).
	CodeServer          ErrorCode = "server"
	CodeTrialDisabled   ErrorCode = "trial_disabled"
	CodeTrialUsed       ErrorCode = "trial_used"
	CodeOfflineDisabled ErrorCode = "offline_disabled"
	// CodeOfflineInvalid: an offline license file this SDK refuses; Reason is an OfflineReason.
	CodeOfflineInvalid ErrorCode = "offline_invalid"
	CodeSessionLimit   ErrorCode = "session_limit"
)

// AllCodes lists every code in the order of sdk/vectors/errors.json.
var AllCodes = []ErrorCode{
	CodeInvalidKey, CodeKeyUsed, CodeBanned, CodeExpired, CodeHWIDMismatch, CodeAppDisabled, CodeUpdateRequired,
	CodeRateLimited, CodeLockedOut, CodeSessionExpired, CodeHeartbeatKilled, CodeVerification, CodeClockSkew,
	CodeNetwork, CodeTimeout, CodeServer, CodeTrialDisabled, CodeTrialUsed, CodeOfflineDisabled, CodeOfflineInvalid,
	CodeSessionLimit,
}

// Why a response was not believed (Error.Reason of a CodeVerification error).
const (
	ReasonUnsigned     = "unsigned"
	ReasonUnknownKid   = "unknown_kid"
	ReasonBadBase64    = "bad_base64"
	ReasonStale        = "stale"
	ReasonBadSignature = "bad_signature"
	ReasonBadProof     = "bad_proof"
	ReasonMalformed    = "malformed"
	ReasonBadMAC       = "bad_mac"      // realtime channel: a frame whose MAC does not verify
	ReasonOutOfOrder   = "out_of_order" // realtime channel: a frame whose seq is not the next one
)

// Why an offline license file was refused (Error.Reason of a CodeOfflineInvalid error), checked in this order.
const (
	OfflineMalformed       = "malformed"
	OfflineUnknownKid      = "unknown_kid"
	OfflineBadSignature    = "bad_signature"
	OfflineWrongApp        = "wrong_app"
	OfflineWrongHWID       = "wrong_hwid"
	OfflineClockRolledBack = "clock_rolled_back"
	OfflineIssuedInFuture  = "issued_in_future"
	OfflineExpired         = "expired"
	// OfflineWrongRequest: an activation answer without the nonce of this machine's latest request (checked last).
	OfflineWrongRequest = "wrong_request"
)

// Error is every failure of this SDK: use errors.As(err, &kwErr) and look at Code.
type Error struct {
	Code    ErrorCode
	Message string
	// Status is the HTTP status of a (verified) server answer, else 0.
	Status int
	// Detail is the answer's `detail` exactly as sent (a string, the 426 object, the 422 list).
	Detail any
	// Reason: a verification reason for CodeVerification, an offline reason for CodeOfflineInvalid.
	Reason string
	// RetryAfter in seconds for rate_limited and locked_out (from Retry-After); negative when absent.
	RetryAfter float64
	// LatestVersion and UpdateURL for update_required.
	LatestVersion string
	UpdateURL     string
	// NotSent: the request certainly never reached the server (safe to send again).
	NotSent bool
}

func (e *Error) Error() string { return e.Message }

// Is lets errors.Is(err, &keywarden.Error{Code: keywarden.CodeBanned}) match by code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && (t.Reason == "" || t.Reason == e.Reason)
}

func newError(code ErrorCode, format string, a ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, a...), RetryAfter: -1}
}

func verificationError(reason, what string) *Error {
	e := newError(CodeVerification, "response refused (%s): %s", reason, what)
	e.Reason = reason
	return e
}

func offlineError(reason, what string) *Error {
	e := newError(CodeOfflineInvalid, "offline license refused (%s): %s", reason, what)
	e.Reason = reason
	return e
}

// CodeFor maps a failure answer: the exact (status, detail) entry, else the status fallback, else server.
func CodeFor(status int, detail any) ErrorCode {
	if s, ok := detail.(string); ok {
		for _, e := range errorEntries {
			if e.status == status && e.detail == s {
				return e.code
			}
		}
	}
	if c, ok := statusFallbacks[status]; ok {
		return c
	}
	return fallbackCode
}

func parseRetryAfter(v string) float64 {
	n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if v == "" || err != nil || math.IsNaN(n) || math.IsInf(n, 0) || n < 0 {
		return -1
	}
	return n
}

// errorFromAnswer builds the error for a verified non-200 answer.
func errorFromAnswer(status int, detail any, retryAfter string) *Error {
	code := CodeFor(status, detail)
	text, ok := detail.(string)
	if !ok {
		b, _ := json.Marshal(detail)
		text = string(b)
	}
	e := &Error{Code: code, Status: status, Detail: detail, RetryAfter: parseRetryAfter(retryAfter)}
	if d, ok := detail.(map[string]any); ok && code == CodeUpdateRequired {
		e.LatestVersion, _ = d["latest_version"].(string)
		e.UpdateURL, _ = d["update_url"].(string)
		if m, ok := d["message"].(string); ok {
			text = m
		}
	}
	e.Message = fmt.Sprintf("%s: %d %s", code, status, text)
	return e
}
