// This SDK's copy of the error table (sdk/vectors/errors.json, generated from the server's
// src/errors.ts by scripts/gen-vectors.ts). tests/ErrorTableTests.cs fails when the two differ:
// update both together. Lookup: exact (status, detail string) entry, else the status fallback
// (data-driven details: an app's disabled_message, the 426 object, any other 429), else Server.
using System;
using System.Collections.Generic;

namespace Keywarden
{
    /// <summary>Maps failure answers to error codes, and codes to the names every SDK shares.</summary>
    public static class ErrorTable
    {
        /// <summary>One row: an answer with exactly this status and detail string maps to Code.</summary>
        public sealed class Entry
        {
            /// <summary>HTTP status.</summary>
            public int Status { get; private set; }
            /// <summary>The `detail` string, compared exactly.</summary>
            public string Detail { get; private set; }
            /// <summary>The SDK code.</summary>
            public KeywardenErrorCode Code { get; private set; }
            internal Entry(int status, string detail, KeywardenErrorCode code) { Status = status; Detail = detail; Code = code; }
        }

        private static readonly Entry[] EntryList =
        {
            new Entry(413, "Payload too large", KeywardenErrorCode.Server),
            new Entry(400, "Malformed JSON body", KeywardenErrorCode.Server),
            new Entry(429, "Rate limit exceeded", KeywardenErrorCode.RateLimited),
            new Entry(404, "Not found", KeywardenErrorCode.Server),
            new Entry(405, "Method not allowed", KeywardenErrorCode.Server),
            new Entry(500, "Internal server error", KeywardenErrorCode.Server),
            new Entry(503, "Service unavailable", KeywardenErrorCode.Server),
            new Entry(404, "Application not found", KeywardenErrorCode.AppDisabled),
            new Entry(401, "Invalid or expired session", KeywardenErrorCode.SessionExpired),
            new Entry(401, "Invalid request signature", KeywardenErrorCode.ClockSkew),
            new Entry(403, "Access denied", KeywardenErrorCode.Banned),
            new Entry(403, "Application disabled", KeywardenErrorCode.AppDisabled),
            new Entry(429, "Too many failed attempts, try again later.", KeywardenErrorCode.LockedOut),
            new Entry(426, "A new version is required.", KeywardenErrorCode.UpdateRequired),
            new Entry(400, "Encryption key required", KeywardenErrorCode.Server),
            new Entry(403, "Binary hash mismatch", KeywardenErrorCode.Server),
            new Entry(403, "Invalid binary token", KeywardenErrorCode.Server),
            new Entry(400, "Invalid license key", KeywardenErrorCode.InvalidKey),
            new Entry(400, "License key already used", KeywardenErrorCode.KeyUsed),
            new Entry(400, "Username already taken", KeywardenErrorCode.Server),
            new Entry(403, "License key is banned", KeywardenErrorCode.Banned),
            new Entry(403, "License validation is temporarily paused for this application.", KeywardenErrorCode.AppDisabled),
            new Entry(403, "Access is temporarily paused for this application.", KeywardenErrorCode.AppDisabled),
            new Entry(403, "Heartbeat session required. Call /heartbeat/start first.", KeywardenErrorCode.Server),
            new Entry(409, "License state changed mid-activation, please retry", KeywardenErrorCode.Server),
            new Entry(409, "License activation in progress, retry.", KeywardenErrorCode.Server),
            new Entry(401, "Invalid username or password", KeywardenErrorCode.InvalidKey),
            new Entry(403, "License not valid", KeywardenErrorCode.InvalidKey),
            new Entry(403, "HWID mismatch. Key locked to another device.", KeywardenErrorCode.HwidMismatch),
            new Entry(403, "License expired", KeywardenErrorCode.Expired),
            new Entry(403, "Session not activated. Call /login, /register or /license first.", KeywardenErrorCode.SessionExpired),
            new Entry(409, "heartbeat session already exists for this nonce", KeywardenErrorCode.Server),
            new Entry(403, "rejected", KeywardenErrorCode.HeartbeatKilled),
            new Entry(401, "Invalid heartbeat token", KeywardenErrorCode.HeartbeatKilled),
            // docs/protocol.md 12 (licensing models).
            new Entry(403, "Trials are not enabled for this application.", KeywardenErrorCode.TrialDisabled),
            new Entry(403, "Trial already used on this device.", KeywardenErrorCode.TrialUsed),
            new Entry(403, "Offline licenses are not enabled for this application.", KeywardenErrorCode.OfflineDisabled),
            new Entry(409, "Concurrent session limit reached", KeywardenErrorCode.SessionLimit),
            // A download link (update downloads report these as UpdateException DownloadFailed).
            new Entry(403, "Download link expired", KeywardenErrorCode.Server),
            new Entry(416, "Range not satisfiable", KeywardenErrorCode.Server),
        };

        private static readonly Dictionary<int, KeywardenErrorCode> Fallbacks = new Dictionary<int, KeywardenErrorCode>
        {
            { 403, KeywardenErrorCode.AppDisabled },
            { 426, KeywardenErrorCode.UpdateRequired },
            { 429, KeywardenErrorCode.RateLimited },
        };

        /// <summary>The exact (status, detail) rows.</summary>
        public static IList<Entry> Entries { get { return Array.AsReadOnly(EntryList); } }

        /// <summary>Status -> code when no row matches.</summary>
        public static IDictionary<int, KeywardenErrorCode> StatusFallbacks { get { return new Dictionary<int, KeywardenErrorCode>(Fallbacks); } }

        /// <summary>The code when nothing else matches.</summary>
        public const KeywardenErrorCode Fallback = KeywardenErrorCode.Server;

        /// <summary>The code for a failure answer (detail: the parsed JSON `detail`).</summary>
        public static KeywardenErrorCode CodeFor(int status, object detail)
        {
            var text = detail as string;
            if (text != null)
            {
                foreach (var e in EntryList)
                    if (e.Status == status && string.Equals(e.Detail, text, StringComparison.Ordinal)) return e.Code;
            }
            KeywardenErrorCode code;
            return Fallbacks.TryGetValue(status, out code) ? code : Fallback;
        }

        /// <summary>`invalid_key`, `update_required`...: the names in sdk/vectors/errors.json.</summary>
        public static string WireName(KeywardenErrorCode code)
        {
            switch (code)
            {
                case KeywardenErrorCode.InvalidKey: return "invalid_key";
                case KeywardenErrorCode.KeyUsed: return "key_used";
                case KeywardenErrorCode.Banned: return "banned";
                case KeywardenErrorCode.Expired: return "expired";
                case KeywardenErrorCode.HwidMismatch: return "hwid_mismatch";
                case KeywardenErrorCode.AppDisabled: return "app_disabled";
                case KeywardenErrorCode.UpdateRequired: return "update_required";
                case KeywardenErrorCode.RateLimited: return "rate_limited";
                case KeywardenErrorCode.LockedOut: return "locked_out";
                case KeywardenErrorCode.SessionExpired: return "session_expired";
                case KeywardenErrorCode.HeartbeatKilled: return "heartbeat_killed";
                case KeywardenErrorCode.Verification: return "verification";
                case KeywardenErrorCode.ClockSkew: return "clock_skew";
                case KeywardenErrorCode.Network: return "network";
                case KeywardenErrorCode.Timeout: return "timeout";
                case KeywardenErrorCode.Server: return "server";
                case KeywardenErrorCode.TrialDisabled: return "trial_disabled";
                case KeywardenErrorCode.TrialUsed: return "trial_used";
                case KeywardenErrorCode.OfflineDisabled: return "offline_disabled";
                case KeywardenErrorCode.OfflineInvalid: return "offline_invalid";
                case KeywardenErrorCode.SessionLimit: return "session_limit";
                default: throw new ArgumentOutOfRangeException("code");
            }
        }

        /// <summary>`unsigned`, `unknown_kid`...: the reason strings shared by every SDK (`tls_pin` is C# only).</summary>
        public static string WireName(VerificationReason reason)
        {
            switch (reason)
            {
                case VerificationReason.Unsigned: return "unsigned";
                case VerificationReason.UnknownKid: return "unknown_kid";
                case VerificationReason.BadBase64: return "bad_base64";
                case VerificationReason.Stale: return "stale";
                case VerificationReason.BadSignature: return "bad_signature";
                case VerificationReason.BadProof: return "bad_proof";
                case VerificationReason.Malformed: return "malformed";
                case VerificationReason.TlsPin: return "tls_pin";
                case VerificationReason.BadMac: return "bad_mac";
                case VerificationReason.OutOfOrder: return "out_of_order";
                default: throw new ArgumentOutOfRangeException("reason");
            }
        }

        /// <summary>`malformed`, `wrong_hwid`...: the offline refusal reasons shared by every SDK (sdk/vectors/offline.json).</summary>
        public static string WireName(OfflineReason reason)
        {
            switch (reason)
            {
                case OfflineReason.Malformed: return "malformed";
                case OfflineReason.UnknownKid: return "unknown_kid";
                case OfflineReason.BadSignature: return "bad_signature";
                case OfflineReason.WrongApp: return "wrong_app";
                case OfflineReason.WrongHwid: return "wrong_hwid";
                case OfflineReason.ClockRolledBack: return "clock_rolled_back";
                case OfflineReason.IssuedInFuture: return "issued_in_future";
                case OfflineReason.Expired: return "expired";
                case OfflineReason.WrongRequest: return "wrong_request";
                default: throw new ArgumentOutOfRangeException("reason");
            }
        }
    }
}
