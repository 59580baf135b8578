// The realtime channel's wire format (the server's docs/protocol.md, "Realtime channel"), pure functions
// checked against sdk/vectors/channel.json in tests/ChannelVectorTests.cs: the hello's transcript
// and verification, the X25519 + HKDF-SHA256 keys, and the MAC'd, sequenced frames.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Security.Cryptography;
using System.Text;

namespace Keywarden
{
    /// <summary>The channel's MAC keys: server to client and client to server.</summary>
    public sealed class ChannelKeys
    {
        /// <summary>Server-to-client MAC key (32 bytes).</summary>
        public byte[] S2C { get; private set; }
        /// <summary>Client-to-server MAC key (32 bytes).</summary>
        public byte[] C2S { get; private set; }

        internal ChannelKeys(byte[] s2c, byte[] c2s)
        {
            S2C = s2c;
            C2S = c2s;
        }
    }

    /// <summary>Crypto and framing of GET /api/client/ws.</summary>
    public static class ChannelProtocol
    {
        /// <summary>The channel's path.</summary>
        public const string Path = "/api/client/ws";
        private const int MacBytes = 32;
        private static readonly TimeSpan Window = TimeSpan.FromSeconds(300);
        private static readonly UTF8Encoding Utf8 = new UTF8Encoding(false);
        private static readonly UTF8Encoding StrictUtf8 = new UTF8Encoding(false, true);

        /// <summary>"kwc1-hello" \n kid \n ts \n session \n client_key \n server_key \n conn \n beat_interval.</summary>
        public static string Transcript(string kid, long ts, string session, string clientKey, string serverKey, string conn, long beatInterval)
        {
            return "kwc1-hello\n" + kid + "\n" + ts.ToString(CultureInfo.InvariantCulture) + "\n" + session + "\n" + clientKey + "\n"
                + serverKey + "\n" + conn + "\n" + beatInterval.ToString(CultureInfo.InvariantCulture);
        }

        /// <summary>A fresh X25519 secret (32 random bytes).</summary>
        public static byte[] NewSecret()
        {
            var b = new byte[32];
            using (var rng = RandomNumberGenerator.Create()) rng.GetBytes(b);
            return b;
        }

        /// <summary>base64url (no padding) of the X25519 public key of secret: the upgrade's X-Nonce.</summary>
        public static string PublicKey(byte[] secret)
        {
            return Base64Url(Sodium.X25519Public(secret));
        }

        /// <summary>
        /// okm = HKDF-SHA256(ikm = X25519(secret, server key), salt = sha256(transcript), info "kwc1 keys", 64);
        /// s2c = okm[0..32], c2s = okm[32..64]. Null for an unusable server key (not 32 bytes, or of low order).
        /// </summary>
        public static ChannelKeys DeriveKeys(byte[] secret, string serverKey, string transcript)
        {
            var peer = FromBase64Url(serverKey);
            if (peer == null || peer.Length != 32) return null;
            var shared = Sodium.X25519(secret, peer);
            if (shared == null) return null;
            byte[] salt;
            using (var sha = SHA256.Create()) salt = sha.ComputeHash(Utf8.GetBytes(transcript));
            var okm = Hkdf(shared, salt, Utf8.GetBytes("kwc1 keys"), 64);
            var s2c = new byte[32];
            var c2s = new byte[32];
            Buffer.BlockCopy(okm, 0, s2c, 0, 32);
            Buffer.BlockCopy(okm, 32, c2s, 0, 32);
            return new ChannelKeys(s2c, c2s);
        }

        private static byte[] Hkdf(byte[] ikm, byte[] salt, byte[] info, int length)
        {
            byte[] prk;
            using (var h = new HMACSHA256(salt)) prk = h.ComputeHash(ikm);
            var okm = new byte[length];
            var previous = new byte[0];
            var done = 0;
            using (var h = new HMACSHA256(prk))
            {
                for (byte i = 1; done < length; i++)
                {
                    var input = new byte[previous.Length + info.Length + 1];
                    Buffer.BlockCopy(previous, 0, input, 0, previous.Length);
                    Buffer.BlockCopy(info, 0, input, previous.Length, info.Length);
                    input[input.Length - 1] = i;
                    previous = h.ComputeHash(input);
                    var n = Math.Min(previous.Length, length - done);
                    Buffer.BlockCopy(previous, 0, okm, done, n);
                    done += n;
                }
            }
            return okm;
        }

        /// <summary>HMAC-SHA256(key, payload) || payload.</summary>
        public static byte[] SealFrame(byte[] key, byte[] payload)
        {
            byte[] mac;
            using (var h = new HMACSHA256(key)) mac = h.ComputeHash(payload);
            var frame = new byte[MacBytes + payload.Length];
            Buffer.BlockCopy(mac, 0, frame, 0, MacBytes);
            Buffer.BlockCopy(payload, 0, frame, MacBytes, payload.Length);
            return frame;
        }

        /// <summary>The payload when the MAC verifies (constant time), else null (also for 32 bytes or fewer).</summary>
        public static byte[] OpenFrame(byte[] key, byte[] frame)
        {
            if (frame == null || frame.Length <= MacBytes) return null;
            var payload = new byte[frame.Length - MacBytes];
            Buffer.BlockCopy(frame, MacBytes, payload, 0, payload.Length);
            byte[] mac;
            using (var h = new HMACSHA256(key)) mac = h.ComputeHash(payload);
            var diff = 0;
            for (var i = 0; i < MacBytes; i++) diff |= mac[i] ^ frame[i];
            return diff == 0 ? payload : null;
        }

        /// <summary>
        /// Verifies the hello as the client whose session and key made the upgrade and derives the keys.
        /// Checks in order (sdk/vectors/channel.json): malformed, unknown_kid, bad_base64, stale, bad_signature.
        /// Returns the keys and the hello's beat_interval; throws a Verification KeywardenException.
        /// </summary>
        public static ChannelKeys VerifyHello(Func<string, byte[]> pinnedKey, DateTimeOffset now, string session, string clientKey,
            byte[] secret, string hello, out long beatInterval)
        {
            beatInterval = 0;
            IDictionary<string, object> h;
            try
            {
                h = Json.Parse(hello ?? "") as IDictionary<string, object>;
            }
            catch (FormatException)
            {
                throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "channel hello is not JSON");
            }
            var kid = Json.GetString(h, "kid");
            var sig = Json.GetString(h, "sig");
            var serverKey = Json.GetString(h, "server_key");
            var conn = Json.GetString(h, "conn");
            var ts = Json.GetInt(h, "ts");
            var interval = Json.GetInt(h, "beat_interval");
            if (h == null || Json.GetString(h, "type") != "hello" || kid == null || sig == null || serverKey == null || conn == null
                || ts == null || interval == null)
                throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "channel hello lacks fields");
            var key = pinnedKey(kid);
            if (key == null)
                throw KeywardenException.VerificationFailed(VerificationReason.UnknownKid, "channel hello signed by unpinned key " + kid);
            var signature = KeywardenCrypto.DecodeSignature(sig);
            if (signature == null)
                throw KeywardenException.VerificationFailed(VerificationReason.BadBase64, "channel hello signature is not base64 of 64 bytes");
            if (ts.Value < -62135596800L || ts.Value > 253402300799L
                || (DateTimeOffset.FromUnixTimeSeconds(ts.Value) - now).Duration() > Window)
                throw KeywardenException.VerificationFailed(VerificationReason.Stale, "channel hello timestamp " + ts.Value + " is off");
            var transcript = Transcript(kid, ts.Value, session, clientKey, serverKey, conn, interval.Value);
            if (!KeywardenCrypto.Ed25519Verify(key, Utf8.GetBytes(transcript), signature))
                throw KeywardenException.VerificationFailed(VerificationReason.BadSignature, "channel hello does not verify");
            var keys = DeriveKeys(secret, serverKey, transcript);
            if (keys == null)
                throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "channel hello carries an unusable server key");
            beatInterval = interval.Value;
            return keys;
        }

        /// <summary>
        /// One server frame judged alone: MAC (bad_mac), JSON object (malformed), seq (out_of_order).
        /// Returns the message, or null with the reason and a description.
        /// </summary>
        public static IDictionary<string, object> ReadFrame(byte[] s2c, long expectedSeq, byte[] frame, bool binary,
            out VerificationReason? reason, out string what)
        {
            reason = null;
            what = null;
            if (!binary)
            {
                reason = VerificationReason.Malformed;
                what = "text frame after the hello";
                return null;
            }
            var payload = OpenFrame(s2c, frame);
            if (payload == null)
            {
                reason = VerificationReason.BadMac;
                what = "channel frame MAC does not verify";
                return null;
            }
            IDictionary<string, object> m = null;
            try
            {
                m = Json.Parse(StrictUtf8.GetString(payload)) as IDictionary<string, object>;
            }
            catch (FormatException) { }
            catch (ArgumentException) { } // DecoderFallbackException: not UTF-8
            if (m == null)
            {
                reason = VerificationReason.Malformed;
                what = "channel frame is not a JSON object";
                return null;
            }
            var seq = Json.GetInt(m, "seq");
            if (seq != expectedSeq)
            {
                reason = VerificationReason.OutOfOrder;
                what = "channel frame " + (seq.HasValue ? seq.Value.ToString(CultureInfo.InvariantCulture) : "without seq") + " where "
                    + expectedSeq.ToString(CultureInfo.InvariantCulture) + " was due";
                return null;
            }
            return m;
        }

        /// <summary>base64url without padding.</summary>
        public static string Base64Url(byte[] data)
        {
            return Convert.ToBase64String(data).TrimEnd('=').Replace('+', '-').Replace('/', '_');
        }

        /// <summary>base64url (padding optional) to bytes; null when it is not base64url.</summary>
        public static byte[] FromBase64Url(string s)
        {
            if (s == null) return null;
            foreach (var c in s)
                if (!(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_')) return null;
            var b = s.Replace('-', '+').Replace('_', '/');
            switch (b.Length % 4)
            {
                case 1: return null;
                case 2: b += "=="; break;
                case 3: b += "="; break;
            }
            try { return Convert.FromBase64String(b); }
            catch (FormatException) { return null; }
        }
    }
}
