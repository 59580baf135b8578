// sdk/vectors (generated from the server's own code): request signatures, response signatures with
// their refusal reasons, heartbeat proofs and response decryption.
using System;
using System.Collections.Generic;
using System.Text;

namespace Keywarden.Tests
{
    internal static class VectorTests
    {
        private static readonly UTF8Encoding Utf8 = new UTF8Encoding(false);

        public static void Register(Registry r)
        {
            r.Unit("vectors: request signatures (docs/protocol.md 3)", () =>
            {
                var n = 0;
                foreach (var c in Vectors.Cases(Vectors.Load("request-signatures"), "cases"))
                {
                    var canonical = KeywardenCrypto.CanonicalRequest(Vectors.S(c, "method"), Vectors.S(c, "path"), Vectors.S(c, "timestamp"),
                        Vectors.S(c, "nonce"), Utf8.GetBytes(Vectors.S(c, "body")));
                    Assert.Equal(Vectors.S(c, "canonical"), canonical, "canonical");
                    Assert.Equal(Vectors.S(c, "signature"), KeywardenCrypto.RequestSignature(Vectors.S(c, "api_secret"), canonical), "signature");
                    n++;
                }
                Assert.True(n > 0, "cases present");
            });

            r.Unit("vectors: response signatures, in the shared order of checks (docs/protocol.md 4)", () =>
            {
                var file = Vectors.Load("response-signatures");
                var keys = new List<ResponseKey>();
                foreach (var k in Vectors.Cases(file, "pinned_keys")) keys.Add(new ResponseKey(Vectors.S(k, "kid"), Vectors.S(k, "public_key")));
                var verifier = new ResponseVerifier(keys);
                var skew = TimeSpan.FromSeconds(Vectors.L(file, "max_skew_seconds"));
                int valid = 0, invalid = 0;
                foreach (var c in Vectors.Cases(file, "cases"))
                {
                    var name = Vectors.S(c, "name");
                    var body = Utf8.GetBytes(Vectors.S(c, "body"));
                    var status = (int)Vectors.L(c, "status");
                    var message = KeywardenCrypto.ResponseMessage(Vectors.S(c, "kid"), Vectors.S(c, "method"), Vectors.S(c, "path"), status,
                        Vectors.S(c, "timestamp"), Vectors.S(c, "nonce"), body);
                    Assert.Equal(Vectors.S(c, "message"), message, name + ": message");
                    var headers = new Dictionary<string, string>
                    {
                        { "x-response-kid", Vectors.S(c, "kid") }, { "x-response-timestamp", Vectors.S(c, "timestamp") }, { "x-response-signature", Vectors.S(c, "signature") },
                    };
                    var now = DateTimeOffset.FromUnixTimeSeconds(Vectors.L(c, "now"));
                    try
                    {
                        verifier.Verify(Vectors.S(c, "method"), Vectors.S(c, "path"), status, headers, body, Vectors.S(c, "nonce"), now, skew);
                        Assert.True((bool)c["valid"], name + ": accepted but the vector says invalid");
                        valid++;
                    }
                    catch (KeywardenException e)
                    {
                        Assert.True(!(bool)c["valid"], name + ": refused (" + e.Message + ") but the vector says valid");
                        Assert.Equal(Vectors.S(c, "verification_reason"), ErrorTable.WireName(e.Reason.Value), name + ": reason");
                        invalid++;
                    }
                }
                Assert.True(valid > 0 && invalid > 0, "both kinds of cases present");
                // A missing header is `unsigned` (the vectors cannot carry that case).
                var unsigned = Assert.Throws<KeywardenException>(() => verifier.Verify("POST", "/api/client/init", 200,
                    new Dictionary<string, string> { { "x-response-kid", "k1" } }, new byte[0], "n", DateTimeOffset.UtcNow, skew), "no headers");
                Assert.Verification(unsigned, VerificationReason.Unsigned);
            });

            r.Unit("vectors: heartbeat proofs (docs/protocol.md 6)", () =>
            {
                var file = Vectors.Load("proofs");
                foreach (var c in Vectors.Cases(file, "start"))
                {
                    var p = KeywardenCrypto.StartProof(Vectors.S(c, "session"), Vectors.S(c, "system_id"), Vectors.S(c, "token"));
                    Assert.Equal(Vectors.S(c, "proof"), p, "start proof");
                    Assert.True(KeywardenCrypto.ProofEquals(Vectors.S(c, "proof"), p), "ProofEquals on equal proofs");
                }
                foreach (var c in Vectors.Cases(file, "beat"))
                {
                    var p = KeywardenCrypto.BeatProof(Vectors.S(c, "previous_token"), Vectors.S(c, "session"), Vectors.L(c, "beat_index"),
                        Vectors.S(c, "new_token"), Vectors.L(c, "beat_count"));
                    Assert.Equal(Vectors.S(c, "proof"), p, "beat proof index " + Vectors.L(c, "beat_index"));
                    Assert.True(!KeywardenCrypto.ProofEquals(p.Substring(1) + "A", p), "a different proof is refused");
                    Assert.True(!KeywardenCrypto.ProofEquals(123L, p), "a non-string proof is refused");
                }
            });

            r.Unit("vectors: response decryption (docs/protocol.md 5)", () =>
            {
                foreach (var c in Vectors.Cases(Vectors.Load("encryption"), "cases"))
                {
                    var plain = KeywardenCrypto.DecryptResponse(Vectors.S(c, "ciphertext"), Vectors.S(c, "enc_key"), Vectors.S(c, "api_secret"), Vectors.S(c, "init_iv"));
                    Assert.Equal(Vectors.S(c, "plaintext"), Utf8.GetString(plain), "plaintext");
                    Assert.Throws<System.Security.Cryptography.CryptographicException>(
                        () => KeywardenCrypto.DecryptResponse(Vectors.S(c, "ciphertext"), Vectors.S(c, "enc_key") + "x", Vectors.S(c, "api_secret"), Vectors.S(c, "init_iv")),
                        "wrong key");
                }
            });

            r.Unit("crypto: signature decoding is strict", () =>
            {
                var ok = Convert.ToBase64String(new byte[64]);
                Assert.Equal(64, KeywardenCrypto.DecodeSignature(ok).Length);
                foreach (var bad in new[] { ok + "\n", " " + ok, ok.Substring(0, 84) + "==", Convert.ToBase64String(new byte[63]), Convert.ToBase64String(new byte[65]), "!!notbase64!!", "" })
                    Assert.True(KeywardenCrypto.DecodeSignature(bad) == null, "refuses <" + bad + ">");
            });
        }
    }
}
