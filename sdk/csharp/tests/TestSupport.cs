// Test-only helpers: an Ed25519 signer (libsodium), the shared vectors, a scriptable transport and
// a small in-memory fake of the client API that signs its answers like the server (docs/protocol.md 4, 6).
// The fake is reached only through the public Transport option: it exercises the SDK's real
// verification code, it does not replace any of it.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal static class TestSigner
    {
        private static class Plain
        {
            [DllImport("libsodium", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_sign_seed_keypair(byte[] pk, byte[] sk, byte[] seed);
            [DllImport("libsodium", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_sign_detached(byte[] sig, IntPtr siglen, byte[] m, ulong mlen, byte[] sk);
        }

        private static class So23
        {
            [DllImport("libsodium.so.23", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_sign_seed_keypair(byte[] pk, byte[] sk, byte[] seed);
            [DllImport("libsodium.so.23", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_sign_detached(byte[] sig, IntPtr siglen, byte[] m, ulong mlen, byte[] sk);
        }

        private static bool? _plain;

        private static bool UsePlain()
        {
            if (_plain.HasValue) return _plain.Value;
            try { Plain.crypto_sign_seed_keypair(new byte[32], new byte[64], new byte[32]); _plain = true; }
            catch (DllNotFoundException) { _plain = false; }
            return _plain.Value;
        }

        /// <summary>(public key, secret key) of a 32-byte seed.</summary>
        public static byte[][] KeyPair(byte[] seed)
        {
            var pk = new byte[32];
            var sk = new byte[64];
            var rc = UsePlain() ? Plain.crypto_sign_seed_keypair(pk, sk, seed) : So23.crypto_sign_seed_keypair(pk, sk, seed);
            if (rc != 0) throw new InvalidOperationException("crypto_sign_seed_keypair failed");
            return new[] { pk, sk };
        }

        public static byte[] Sign(byte[] secretKey, byte[] message)
        {
            var sig = new byte[64];
            var rc = UsePlain()
                ? Plain.crypto_sign_detached(sig, IntPtr.Zero, message, (ulong)message.Length, secretKey)
                : So23.crypto_sign_detached(sig, IntPtr.Zero, message, (ulong)message.Length, secretKey);
            if (rc != 0) throw new InvalidOperationException("crypto_sign_detached failed");
            return sig;
        }
    }

    internal static class Vectors
    {
        /// <summary>sdk/vectors/{name}.json: KW_VECTORS_DIR, else found upwards from here (the repository layout).</summary>
        public static IDictionary<string, object> Load(string name)
        {
            var dir = Environment.GetEnvironmentVariable("KW_VECTORS_DIR");
            if (string.IsNullOrEmpty(dir))
            {
                foreach (var start in new[] { AppDomain.CurrentDomain.BaseDirectory, Directory.GetCurrentDirectory() })
                {
                    for (var d = new DirectoryInfo(start); d != null && dir == null; d = d.Parent)
                    {
                        var candidate = Path.Combine(Path.Combine(d.FullName, "sdk"), "vectors");
                        if (File.Exists(Path.Combine(candidate, "errors.json"))) dir = candidate;
                    }
                    if (dir != null) break;
                }
            }
            if (dir == null) throw new SkipException("sdk/vectors not found (set KW_VECTORS_DIR)");
            return (IDictionary<string, object>)Json.Parse(File.ReadAllText(Path.Combine(dir, name + ".json"), Encoding.UTF8));
        }

        public static IEnumerable<IDictionary<string, object>> Cases(IDictionary<string, object> file, string member)
        {
            foreach (var c in (IList<object>)file[member]) yield return (IDictionary<string, object>)c;
        }

        public static string S(IDictionary<string, object> o, string name) { return (string)o[name]; }
        public static long L(IDictionary<string, object> o, string name) { return (long)o[name]; }
    }

    /// <summary>A transport whose behaviour a test scripts; records every request.</summary>
    internal sealed class ScriptedTransport : IKeywardenTransport
    {
        private readonly Func<TransportRequest, int, CancellationToken, Task<TransportResponse>> _handler;
        private int _calls;
        public readonly List<TransportRequest> Requests = new List<TransportRequest>();

        public ScriptedTransport(Func<TransportRequest, int, CancellationToken, Task<TransportResponse>> handler)
        {
            _handler = handler;
        }

        public int Calls { get { return Volatile.Read(ref _calls); } }

        public Task<TransportResponse> SendAsync(TransportRequest request, CancellationToken cancellationToken)
        {
            lock (Requests) Requests.Add(request);
            var n = Interlocked.Increment(ref _calls);
            return _handler(request, n, cancellationToken);
        }
    }

    /// <summary>Signs answers the way the server does, with a test key pinned as k1.</summary>
    internal static class Fake
    {
        public static readonly byte[] Seed = Encoding.ASCII.GetBytes("keywarden-csharp-test-seed-00001");
        public static readonly byte[] OtherSeed = Encoding.ASCII.GetBytes("keywarden-csharp-other-seed-0002");
        public const string ApiKey = "0123456789abcdef0123456789abcdef";
        public const string Secret = "test-api-secret";
        private static readonly UTF8Encoding Utf8 = new UTF8Encoding(false);

        public static KeywardenConfig Config(string apiSecret = null)
        {
            var pk = TestSigner.KeyPair(Seed)[0];
            return new KeywardenConfig("http://fake.invalid", ApiKey, new[] { new ResponseKey("k1", Convert.ToBase64String(pk)) }, "1.0", apiSecret, "Fake App");
        }

        public static KeywardenClient Client(ScriptedTransport t, Action<KeywardenOptions> tweak = null, string apiSecret = null)
        {
            var o = new KeywardenOptions { Transport = t, Timeout = TimeSpan.FromSeconds(5) };
            if (tweak != null) tweak(o);
            return KeywardenClient.FromConfig(Config(apiSecret), o);
        }

        public sealed class AnswerOptions
        {
            public string Kid = "k1";
            public byte[] SignSeed;
            public TimeSpan Shift = TimeSpan.Zero;
            public string Nonce;
            public int? SignedStatus;
            public Dictionary<string, string> Headers = new Dictionary<string, string>();
        }

        public static TransportResponse Answer(TransportRequest req, int status, string body, AnswerOptions o = null)
        {
            return AnswerBytes(req, status, Utf8.GetBytes(body), o);
        }

        public static TransportResponse AnswerBytes(TransportRequest req, int status, byte[] body, AnswerOptions o = null)
        {
            o = o ?? new AnswerOptions();
            var ts = (DateTimeOffset.UtcNow + o.Shift).ToUnixTimeSeconds().ToString(CultureInfo.InvariantCulture);
            var nonce = o.Nonce ?? req.Headers["x-nonce"];
            var message = KeywardenCrypto.ResponseMessage(o.Kid, "POST", req.Url.AbsolutePath, o.SignedStatus ?? status, ts, nonce, body);
            var sk = TestSigner.KeyPair(o.SignSeed ?? Seed)[1];
            var headers = new Dictionary<string, string>(o.Headers)
            {
                { "X-Response-Kid", o.Kid },
                { "X-Response-Timestamp", ts },
                { "X-Response-Signature", Convert.ToBase64String(TestSigner.Sign(sk, Utf8.GetBytes(message))) },
            };
            return new TransportResponse(status, headers, body);
        }

        public static Task<TransportResponse> Done(TransportResponse r) { return Task.FromResult(r); }

        public static IDictionary<string, object> Body(TransportRequest req)
        {
            return (IDictionary<string, object>)Json.Parse(Utf8.GetString(req.Body));
        }

        public const string InitOk = "{\"success\":true,\"session\":\"fake-session-0000000000000000000000000000\",\"app\":{\"name\":\"Fake App\",\"version\":\"1.0\",\"hwid_lock\":true}}";
    }

    /// <summary>
    /// An in-memory client API with the server's heartbeat rules that matter to the SDK: tokens and
    /// proofs (docs/protocol.md 6), strictly increasing beat_index, 403 rejected for a wrong token or a
    /// debugger report. Tests script failures around it with `Intercept`.
    /// </summary>
    internal sealed class FakeServer
    {
        private readonly object _gate = new object();
        private readonly Dictionary<string, string[]> _hb = new Dictionary<string, string[]>(); // session -> [token, lastIndex, count, systemId]
        private int _sessions;
        public Func<TransportRequest, string, TransportResponse> Intercept; // (request, endpoint) -> answer or null
        public int Inits, Starts, Stops, Beats;

        public Task<TransportResponse> Handle(TransportRequest req, int n, CancellationToken ct)
        {
            var endpoint = req.Url.AbsolutePath.Substring("/api/client/".Length);
            if (Intercept != null)
            {
                var r = Intercept(req, endpoint);
                if (r != null) return Task.FromResult(r);
            }
            return Task.FromResult(Answer(req, endpoint));
        }

        public TransportResponse Answer(TransportRequest req, string endpoint)
        {
            var b = Fake.Body(req);
            lock (_gate)
            {
                switch (endpoint)
                {
                    case "init":
                        Inits++;
                        var session = "fake-session-" + (++_sessions).ToString("D30", CultureInfo.InvariantCulture);
                        return Fake.Answer(req, 200, "{\"success\":true,\"session\":\"" + session + "\",\"app\":{\"name\":\"Fake App\",\"version\":\"1.0\",\"hwid_lock\":true}}");
                    case "license":
                        return Fake.Answer(req, 200, "{\"success\":true,\"message\":\"ok\",\"level\":2,\"expires_at\":\"2030-01-02T03:04:05.000Z\"}");
                    case "heartbeat/start":
                    {
                        Starts++;
                        var s = (string)b["session"];
                        var sys = (string)b["system_id"];
                        var token = NewToken();
                        _hb[s] = new[] { token, "0", "0", sys };
                        return Fake.Answer(req, 200, "{\"success\":true,\"token\":\"" + token + "\",\"beat_interval\":5,\"proof\":\"" + KeywardenCrypto.StartProof(s, sys, token) + "\"}");
                    }
                    case "heartbeat":
                    {
                        Beats++;
                        var s = (string)b["session"];
                        string[] st;
                        var index = (long)b["beat_index"];
                        if (!_hb.TryGetValue(s, out st) || st[0] != (string)b["token"] || index <= long.Parse(st[1], CultureInfo.InvariantCulture))
                            return Fake.Answer(req, 403, "{\"detail\":\"rejected\"}");
                        if (true.Equals(b["debugger_detected"]))
                        {
                            _hb.Remove(s);
                            return Fake.Answer(req, 403, "{\"detail\":\"rejected\"}");
                        }
                        var previous = st[0];
                        var count = long.Parse(st[2], CultureInfo.InvariantCulture) + 1;
                        var token = NewToken();
                        _hb[s] = new[] { token, index.ToString(CultureInfo.InvariantCulture), count.ToString(CultureInfo.InvariantCulture), st[3] };
                        return Fake.Answer(req, 200, "{\"success\":true,\"new_token\":\"" + token + "\",\"beat_count\":" + count
                            + ",\"proof\":\"" + KeywardenCrypto.BeatProof(previous, s, index, token, count) + "\"}");
                    }
                    case "heartbeat/stop":
                    {
                        Stops++;
                        var s = (string)b["session"];
                        string[] st;
                        if (!_hb.TryGetValue(s, out st) || st[0] != (string)b["token"]) return Fake.Answer(req, 401, "{\"detail\":\"Invalid heartbeat token\"}");
                        _hb.Remove(s);
                        return Fake.Answer(req, 200, "{\"success\":true}");
                    }
                    default:
                        return Fake.Answer(req, 404, "{\"detail\":\"Not found\"}");
                }
            }
        }

        public bool HasSession(string session)
        {
            lock (_gate) return _hb.ContainsKey(session);
        }

        private static string NewToken()
        {
            return "TT" + Guid.NewGuid().ToString("N");
        }
    }
}
