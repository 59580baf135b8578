package keywarden

// This SDK's copy of the error table (sdk/vectors/errors.json, generated from the server's src/errors.ts
// through sdk/vectors/error-map.ts). vectors_test.go fails when the two differ: update both together.

type errorEntry struct {
	status int
	detail string
	code   ErrorCode
}

var errorEntries = []errorEntry{
	{413, "Payload too large", CodeServer},
	{400, "Malformed JSON body", CodeServer},
	{429, "Rate limit exceeded", CodeRateLimited},
	{404, "Not found", CodeServer},
	{405, "Method not allowed", CodeServer},
	{500, "Internal server error", CodeServer},
	{503, "Service unavailable", CodeServer},
	{404, "Application not found", CodeAppDisabled},
	{401, "Invalid or expired session", CodeSessionExpired},
	{401, "Invalid request signature", CodeClockSkew},
	{403, "Access denied", CodeBanned},
	{403, "Application disabled", CodeAppDisabled},
	{429, "Too many failed attempts, try again later.", CodeLockedOut},
	{426, "A new version is required.", CodeUpdateRequired},
	{400, "Encryption key required", CodeServer},
	{403, "Binary hash mismatch", CodeServer},
	{403, "Invalid binary token", CodeServer},
	{400, "Invalid license key", CodeInvalidKey},
	{400, "License key already used", CodeKeyUsed},
	{400, "Username already taken", CodeServer},
	{403, "License key is banned", CodeBanned},
	{403, "License validation is temporarily paused for this application.", CodeAppDisabled},
	{403, "Access is temporarily paused for this application.", CodeAppDisabled},
	{403, "Heartbeat session required. Call /heartbeat/start first.", CodeServer},
	{409, "License state changed mid-activation, please retry", CodeServer},
	{409, "License activation in progress, retry.", CodeServer},
	// Login: wrong name or password, banned, expired or HWID mismatch all answer this one text.
	{401, "Invalid username or password", CodeInvalidKey},
	{403, "License not valid", CodeInvalidKey},
	{403, "HWID mismatch. Key locked to another device.", CodeHWIDMismatch},
	{403, "License expired", CodeExpired},
	{403, "Session not activated. Call /login, /register or /license first.", CodeSessionExpired},
	{409, "heartbeat session already exists for this nonce", CodeServer},
	{403, "rejected", CodeHeartbeatKilled},
	{401, "Invalid heartbeat token", CodeHeartbeatKilled},
	// docs/protocol.md 12 (licensing models).
	{403, "Trials are not enabled for this application.", CodeTrialDisabled},
	{403, "Trial already used on this device.", CodeTrialUsed},
	{403, "Offline licenses are not enabled for this application.", CodeOfflineDisabled},
	{409, "Concurrent session limit reached", CodeSessionLimit},
	// A download link (update downloads report these as *UpdateError download_failed).
	{403, "Download link expired", CodeServer},
	{416, "Range not satisfiable", CodeServer},
}

// Used when no entry matches: data-driven details (an app's disabled_message, the 426 object, any other 429).
var statusFallbacks = map[int]ErrorCode{403: CodeAppDisabled, 426: CodeUpdateRequired, 429: CodeRateLimited}

const fallbackCode = CodeServer
