// docs/protocol.md 4 response verification, in the order sdk/vectors/response-signatures.json fixes so
// the reasons agree across SDKs: headers present, kid pinned, signature encoding, freshness,
// Ed25519 over this request's own nonce (which is what makes a replayed or foreign answer fail).
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Keywarden
{
    /// <summary>Verifies signed answers against the pinned keys.</summary>
    public sealed class ResponseVerifier
    {
        private static readonly UTF8Encoding Utf8 = new UTF8Encoding(false);
        private readonly Dictionary<string, byte[]> _keys = new Dictionary<string, byte[]>(StringComparer.Ordinal);

        /// <summary>Pins the given keys (and loads libsodium, so a missing library is reported at once).</summary>
        public ResponseVerifier(IEnumerable<ResponseKey> keys)
        {
            foreach (var k in keys) _keys[k.Kid] = k.Raw;
            Sodium.EnsureLoaded();
        }

        /// <summary>
        /// Throws a Verification KeywardenException, else returns the answer's timestamp.
        /// nonce: the X-Nonce this client sent; now: the verifier's (server-corrected) clock.
        /// </summary>
        public DateTimeOffset Verify(string method, string path, int status, IDictionary<string, string> headers, byte[] body,
            string nonce, DateTimeOffset now, TimeSpan maxSkew)
        {
            var kid = Get(headers, "X-Response-Kid");
            var ts = Get(headers, "X-Response-Timestamp");
            var sig = Get(headers, "X-Response-Signature");
            if (string.IsNullOrEmpty(kid) || string.IsNullOrEmpty(ts) || string.IsNullOrEmpty(sig))
                throw KeywardenException.VerificationFailed(VerificationReason.Unsigned, "answer " + status + " of " + path + " carries no signature");
            byte[] key;
            if (!_keys.TryGetValue(kid, out key))
                throw KeywardenException.VerificationFailed(VerificationReason.UnknownKid, "answer of " + path + " is signed by unpinned key " + kid);
            var signature = KeywardenCrypto.DecodeSignature(sig);
            if (signature == null)
                throw KeywardenException.VerificationFailed(VerificationReason.BadBase64, "signature of " + path + " is not base64 of 64 bytes");
            long seconds;
            if (ts.Length > 12 || !IsDigits(ts) || !long.TryParse(ts, NumberStyles.None, CultureInfo.InvariantCulture, out seconds)
                || seconds > 253402300799L /* year 9999: DateTimeOffset's limit */)
                throw KeywardenException.VerificationFailed(VerificationReason.Stale, "timestamp " + ts + " is not unix seconds");
            var stamped = DateTimeOffset.FromUnixTimeSeconds(seconds);
            var off = stamped - now;
            if (off.Duration() > maxSkew)
                throw KeywardenException.VerificationFailed(VerificationReason.Stale,
                    "timestamp " + ts + " is " + Math.Round(off.TotalSeconds).ToString(CultureInfo.InvariantCulture) + " s off");
            var message = KeywardenCrypto.ResponseMessage(kid, method, path, status, ts, nonce, body);
            if (!KeywardenCrypto.Ed25519Verify(key, Utf8.GetBytes(message), signature))
                throw KeywardenException.VerificationFailed(VerificationReason.BadSignature, "signature of " + path + " (" + status + ") does not verify");
            return stamped;
        }

        /// <summary>The pinned Ed25519 key of kid, or null (the realtime channel's hello is signed by the same keys).</summary>
        internal byte[] KeyFor(string kid)
        {
            byte[] key;
            return kid != null && _keys.TryGetValue(kid, out key) ? key : null;
        }

        private static bool IsDigits(string s)
        {
            foreach (var c in s) if (c < '0' || c > '9') return false;
            return s.Length > 0;
        }

        private static string Get(IDictionary<string, string> headers, string name)
        {
            string v;
            if (headers.TryGetValue(name, out v)) return v;
            foreach (var h in headers) if (string.Equals(h.Key, name, StringComparison.OrdinalIgnoreCase)) return h.Value;
            return null;
        }
    }
}
