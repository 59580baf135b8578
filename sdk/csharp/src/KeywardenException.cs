// One exception type for every failure the host program can see: a code, never a process exit
// and never an untyped throw. Server answers are mapped by ErrorTable (checked against
// sdk/vectors/errors.json); the SDK raises Network, Timeout, Verification, ClockSkew and
// OfflineInvalid itself.
using System;

namespace Keywarden
{
    /// <summary>What went wrong, in the words every Keywarden SDK uses (see WireName).</summary>
    public enum KeywardenErrorCode
    {
        /// <summary>Unknown or invalid license key, or wrong username/password (the server does not say which).</summary>
        InvalidKey,
        /// <summary>The license key is already used.</summary>
        KeyUsed,
        /// <summary>The key is banned, or this IP/HWID is blacklisted.</summary>
        Banned,
        /// <summary>The license has expired.</summary>
        Expired,
        /// <summary>The key is locked to another device.</summary>
        HwidMismatch,
        /// <summary>The application is disabled or paused (Message carries the vendor's text), or unknown.</summary>
        AppDisabled,
        /// <summary>This client version is refused; see LatestVersion and UpdateUrl.</summary>
        UpdateRequired,
        /// <summary>Too many calls from this IP; see RetryAfter.</summary>
        RateLimited,
        /// <summary>Too many failed attempts for this username or IP; see RetryAfter.</summary>
        LockedOut,
        /// <summary>The session is unknown, expired or not activated: call Init (and log in) again.</summary>
        SessionExpired,
        /// <summary>The server ended the heartbeat session (debugger, integrity, revoked key...).</summary>
        HeartbeatKilled,
        /// <summary>An answer or heartbeat proof did not verify; see Reason. Treat as an attack.</summary>
        Verification,
        /// <summary>The server refused our request signature, also after the SDK corrected its clock.</summary>
        ClockSkew,
        /// <summary>The server could not be reached, or the connection broke.</summary>
        Network,
        /// <summary>No answer within the configured timeout.</summary>
        Timeout,
        /// <summary>Any other answer (validation errors, 5xx, texts this SDK version does not know).</summary>
        Server,
        /// <summary>The application offers no trials.</summary>
        TrialDisabled,
        /// <summary>This device already had its trial of this application.</summary>
        TrialUsed,
        /// <summary>The application issues no offline license files.</summary>
        OfflineDisabled,
        /// <summary>An offline license file this SDK refuses; see OfflineReason.</summary>
        OfflineInvalid,
        /// <summary>heartbeat/start while the key's concurrent sessions are all taken.</summary>
        SessionLimit,
    }

    /// <summary>
    /// Why an offline license file was refused (code OfflineInvalid), checked in this order, so a file
    /// wrong in two ways names the first (sdk/vectors/offline.json).
    /// </summary>
    public enum OfflineReason
    {
        /// <summary>Not "kwlic1." base64url "." base64url, a signature that is not 64 bytes, or a payload that is not docs/protocol.md 12.5's JSON object.</summary>
        Malformed,
        /// <summary>Signed under a key id that is not pinned.</summary>
        UnknownKid,
        /// <summary>The Ed25519 signature does not verify (edited, or signed by someone else).</summary>
        BadSignature,
        /// <summary>Issued for another application.</summary>
        WrongApp,
        /// <summary>Issued for another machine.</summary>
        WrongHwid,
        /// <summary>The clock reads more than 300 s before the latest time this SDK has seen (its state file).</summary>
        ClockRolledBack,
        /// <summary>issued_at is more than 300 s ahead of the clock.</summary>
        IssuedInFuture,
        /// <summary>The clock has reached valid_until.</summary>
        Expired,
        /// <summary>An activation answer without the nonce of this machine's latest activation request (checked last).</summary>
        WrongRequest,
    }

    /// <summary>Why an answer was not believed (code Verification).</summary>
    public enum VerificationReason
    {
        /// <summary>No X-Response-* signature headers.</summary>
        Unsigned,
        /// <summary>Signed under a key id that is not pinned in keywarden.json.</summary>
        UnknownKid,
        /// <summary>The signature is not base64 of 64 bytes.</summary>
        BadBase64,
        /// <summary>The answer's timestamp is more than 300 s from the (server-corrected) clock.</summary>
        Stale,
        /// <summary>Ed25519 verification failed (forged body, foreign nonce, replayed answer...).</summary>
        BadSignature,
        /// <summary>A heartbeat proof does not verify: the new token is not trusted.</summary>
        BadProof,
        /// <summary>Not JSON, missing fields, or a body that does not decrypt.</summary>
        Malformed,
        /// <summary>C# only: the TLS certificate's public key is not one of the pinned SPKI hashes.</summary>
        TlsPin,
        /// <summary>Realtime channel: a frame whose MAC does not verify (forged, or recorded on another connection).</summary>
        BadMac,
        /// <summary>Realtime channel: a frame whose seq is not the next one (replayed, dropped or reordered).</summary>
        OutOfOrder,
    }

    /// <summary>The only exception type the SDK's calls throw (apart from cancellation by the caller).</summary>
    [Serializable]
    public class KeywardenException : Exception
    {
        /// <summary>The error code.</summary>
        public KeywardenErrorCode Code { get; private set; }
        /// <summary>HTTP status of a (verified) server answer; null for errors raised by the SDK.</summary>
        public int? Status { get; private set; }
        /// <summary>The answer's parsed `detail` as sent: a string, the 426 object, or the 422 array.</summary>
        public object Detail { get; private set; }
        /// <summary>For code Verification.</summary>
        public VerificationReason? Reason { get; private set; }
        /// <summary>For code OfflineInvalid.</summary>
        public OfflineReason? OfflineReason { get; private set; }
        /// <summary>For RateLimited and LockedOut: the Retry-After header.</summary>
        public TimeSpan? RetryAfter { get; private set; }
        /// <summary>For UpdateRequired.</summary>
        public string LatestVersion { get; private set; }
        /// <summary>For UpdateRequired.</summary>
        public string UpdateUrl { get; private set; }
        /// <summary>True when the request certainly never reached the server (sending it again is safe).</summary>
        public bool NotSent { get; private set; }

        /// <summary>Creates an error; SDK code uses the factory methods below.</summary>
        public KeywardenException(KeywardenErrorCode code, string message, Exception inner = null)
            : base(message, inner)
        {
            Code = code;
        }

        /// <summary>Keeps a refusing answer's status and detail on an error of a subclass.</summary>
        internal void SetAnswer(int status, object detail)
        {
            Status = status;
            Detail = detail;
        }

        /// <summary>The snake_case name shared by every SDK and sdk/vectors/errors.json (`invalid_key`...).</summary>
        public string WireCode { get { return ErrorTable.WireName(Code); } }

        /// <summary>A verification failure with its reason.</summary>
        public static KeywardenException VerificationFailed(VerificationReason reason, string message, Exception inner = null)
        {
            var e = new KeywardenException(KeywardenErrorCode.Verification,
                "response refused (" + ErrorTable.WireName(reason) + "): " + message, inner);
            e.Reason = reason;
            return e;
        }

        /// <summary>An offline license file refused for a reason.</summary>
        public static KeywardenException OfflineRefused(OfflineReason reason, string message)
        {
            var e = new KeywardenException(KeywardenErrorCode.OfflineInvalid, "offline license refused (" + ErrorTable.WireName(reason) + "): " + message);
            e.OfflineReason = reason;
            return e;
        }

        /// <summary>A relay's refusal: SessionLimit for 409 "No seats available", else Server (with status and detail).</summary>
        public static KeywardenException RelayRefused(KeywardenErrorCode code, int status, string detail)
        {
            var e = new KeywardenException(code, ErrorTable.WireName(code) + ": relay answered " + status + " " + detail);
            e.Status = status;
            e.Detail = detail;
            return e;
        }

        /// <summary>An unsigned 502/503/504 of a proxy in front of the service: code Server with the status, nothing believed.</summary>
        public static KeywardenException GatewayUnreachable(int status, string message)
        {
            var e = new KeywardenException(KeywardenErrorCode.Server, message);
            e.Status = status;
            return e;
        }

        /// <summary>A network or timeout failure of the transport.</summary>
        public static KeywardenException TransportFailed(KeywardenErrorCode code, string message, bool notSent, Exception inner)
        {
            var e = new KeywardenException(code, message, inner);
            e.NotSent = notSent;
            return e;
        }

        /// <summary>The error for a verified non-200 answer (status, parsed detail, Retry-After header or null).</summary>
        public static KeywardenException FromAnswer(int status, object detail, string retryAfterHeader)
        {
            var code = ErrorTable.CodeFor(status, detail);
            var text = detail as string ?? SafeJson(detail);
            string latest = null, url = null;
            var obj = detail as System.Collections.Generic.IDictionary<string, object>;
            if (code == KeywardenErrorCode.UpdateRequired && obj != null)
            {
                latest = Json.GetString(obj, "latest_version");
                url = Json.GetString(obj, "update_url");
                var m = Json.GetString(obj, "message");
                if (m != null) text = m;
            }
            var e = new KeywardenException(code, ErrorTable.WireName(code) + ": " + status + " " + text);
            e.Status = status;
            e.Detail = detail;
            e.LatestVersion = latest;
            e.UpdateUrl = url;
            double seconds;
            if (retryAfterHeader != null
                && double.TryParse(retryAfterHeader.Trim(), System.Globalization.NumberStyles.Float, System.Globalization.CultureInfo.InvariantCulture, out seconds)
                && seconds >= 0 && seconds < 1e7)
            {
                e.RetryAfter = TimeSpan.FromSeconds(seconds);
            }
            return e;
        }

        private static string SafeJson(object v)
        {
            try { return Json.Serialize(v); } catch (ArgumentException) { return Convert.ToString(v); }
        }
    }

    /// <summary>A keywarden.json that cannot be used (thrown by FromConfig, never by a call).</summary>
    [Serializable]
    public class KeywardenConfigException : ArgumentException
    {
        /// <summary>Creates the error.</summary>
        public KeywardenConfigException(string message, Exception inner = null) : base("keywarden config: " + message, inner) { }
    }
}
