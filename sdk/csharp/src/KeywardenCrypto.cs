// docs/protocol.md 3-6, one function per rule; each is checked against sdk/vectors in tests/VectorTests.cs.
// Everything here is BCL (System.Security.Cryptography) except Ed25519, which is libsodium.
using System;
using System.Globalization;
using System.Security.Cryptography;
using System.Text;
using System.Text.RegularExpressions;

namespace Keywarden
{
    /// <summary>The wire cryptography of Keywarden (request HMAC, response message, proofs, decryption).</summary>
    public static class KeywardenCrypto
    {
        private static readonly UTF8Encoding Utf8 = new UTF8Encoding(false);
        private static readonly Regex SignatureShape = new Regex("^[A-Za-z0-9+/]{86}==\\z", RegexOptions.CultureInvariant);

        /// <summary>Lower-case hex of SHA-256.</summary>
        public static string Sha256Hex(byte[] data)
        {
            using (var sha = SHA256.Create()) return Hex(sha.ComputeHash(data));
        }

        /// <summary>Lower-case hex.</summary>
        public static string Hex(byte[] data)
        {
            var sb = new StringBuilder(data.Length * 2);
            foreach (var b in data) sb.Append(b.ToString("x2", CultureInfo.InvariantCulture));
            return sb.ToString();
        }

        /// <summary>docs/protocol.md 3: METHOD \n PATH \n X-Timestamp \n X-Nonce \n hex(sha256(body)).</summary>
        public static string CanonicalRequest(string method, string path, string timestamp, string nonce, byte[] body)
        {
            return method.ToUpperInvariant() + "\n" + path + "\n" + timestamp + "\n" + nonce + "\n" + Sha256Hex(body);
        }

        /// <summary>docs/protocol.md 3: X-Signature = hex(HMAC-SHA256(utf8(api_secret), canonical)).</summary>
        public static string RequestSignature(string apiSecret, string canonical)
        {
            using (var h = new HMACSHA256(Utf8.GetBytes(apiSecret))) return Hex(h.ComputeHash(Utf8.GetBytes(canonical)));
        }

        /// <summary>docs/protocol.md 4: kw1 \n KID \n METHOD \n PATH \n STATUS \n TS \n NONCE \n
        /// hex(sha256(body)).</summary>
        public static string ResponseMessage(string kid, string method, string path, int status, string timestamp, string nonce, byte[] body)
        {
            return "kw1\n" + kid + "\n" + method.ToUpperInvariant() + "\n" + path + "\n" + status.ToString(CultureInfo.InvariantCulture)
                + "\n" + timestamp + "\n" + (nonce ?? "") + "\n" + Sha256Hex(body);
        }

        /// <summary>
        /// Strict base64 of exactly 64 bytes, else null. Convert.FromBase64String alone would accept
        /// whitespace inside the value; the shape check keeps "bad_base64" identical across SDKs.
        /// </summary>
        public static byte[] DecodeSignature(string value)
        {
            if (value == null || !SignatureShape.IsMatch(value)) return null;
            try
            {
                var b = Convert.FromBase64String(value);
                return b.Length == 64 ? b : null;
            }
            catch (FormatException)
            {
                return null;
            }
        }

        /// <summary>Ed25519 verification (libsodium crypto_sign_verify_detached).</summary>
        public static bool Ed25519Verify(byte[] publicKey, byte[] message, byte[] signature)
        {
            return Sodium.Verify(signature, message, publicKey);
        }

        /// <summary>docs/protocol.md 6, heartbeat/start: base64(HMAC-SHA256(utf8(session), "kwhs1\n" system_id "\n" token)).</summary>
        public static string StartProof(string session, string systemId, string token)
        {
            return HmacBase64(session, "kwhs1\n" + systemId + "\n" + token);
        }

        /// <summary>docs/protocol.md 6, heartbeat: base64(HMAC-SHA256(utf8(previous token), "kwhb1\n" session "\n" index "\n" new token "\n" count)).</summary>
        public static string BeatProof(string previousToken, string session, long beatIndex, string newToken, long beatCount)
        {
            return HmacBase64(previousToken, "kwhb1\n" + session + "\n" + beatIndex.ToString(CultureInfo.InvariantCulture) + "\n"
                + newToken + "\n" + beatCount.ToString(CultureInfo.InvariantCulture));
        }

        private static string HmacBase64(string key, string message)
        {
            using (var h = new HMACSHA256(Utf8.GetBytes(key))) return Convert.ToBase64String(h.ComputeHash(Utf8.GetBytes(message)));
        }

        /// <summary>Constant-time comparison of a received proof with the expected one (false for a non-string).</summary>
        public static bool ProofEquals(object given, string expected)
        {
            var g = given as string;
            if (g == null || expected == null) return false;
            var a = Utf8.GetBytes(g);
            var b = Utf8.GetBytes(expected);
            if (a.Length != b.Length) return false;
            var diff = 0;
            for (var i = 0; i < a.Length; i++) diff |= a[i] ^ b[i];
            return diff == 0;
        }

        /// <summary>
        /// docs/protocol.md 5: AES-256-CBC-PKCS7 with key = sha256(utf8(enc_key "-" api_secret)) and
        /// iv = sha256(utf8(init_iv))[0..16]. Throws CryptographicException or FormatException on damage.
        /// </summary>
        public static byte[] DecryptResponse(string ciphertextBase64, string encKey, string apiSecret, string initIv)
        {
            byte[] key, iv = new byte[16];
            using (var sha = SHA256.Create())
            {
                key = sha.ComputeHash(Utf8.GetBytes(encKey + "-" + apiSecret));
                Buffer.BlockCopy(sha.ComputeHash(Utf8.GetBytes(initIv)), 0, iv, 0, 16);
            }
            var cipher = Convert.FromBase64String(ciphertextBase64);
            using (var aes = Aes.Create())
            {
                aes.Mode = CipherMode.CBC;
                aes.Padding = PaddingMode.PKCS7;
                aes.Key = key;
                aes.IV = iv;
                using (var d = aes.CreateDecryptor()) return d.TransformFinalBlock(cipher, 0, cipher.Length);
            }
        }

        /// <summary>Random bytes as base64url without padding (nonces, init_iv).</summary>
        public static string RandomBase64Url(int bytes)
        {
            var b = new byte[bytes];
            using (var rng = RandomNumberGenerator.Create()) rng.GetBytes(b);
            return Convert.ToBase64String(b).TrimEnd('=').Replace('+', '-').Replace('/', '_');
        }
    }
}
