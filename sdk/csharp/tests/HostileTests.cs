// Hostile and broken answers through an injected transport (and, for the default transport, real
// sockets): every failure must be a typed KeywardenException, never a crash or a hang.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Text;
using System.Text.RegularExpressions;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal static class HostileTests
    {
        private static Func<TransportRequest, int, CancellationToken, Task<TransportResponse>> Always(Func<TransportRequest, TransportResponse> answer)
        {
            return (req, n, ct) => Task.FromResult(answer(req));
        }

        private static async Task<KeywardenException> InitFails(Func<TransportRequest, TransportResponse> answer, Action<KeywardenOptions> tweak = null)
        {
            var t = new ScriptedTransport(Always(answer));
            using (var c = Fake.Client(t, tweak))
            {
                var e = await Assert.Fails(() => c.InitAsync(), "init");
                Assert.True(c.Session == null, "no session believed from a refused answer");
                return e;
            }
        }

        /// <summary>A local port with nothing listening.</summary>
        public static int ClosedPort()
        {
            var l = new TcpListener(IPAddress.Loopback, 0);
            l.Start();
            var port = ((IPEndPoint)l.LocalEndpoint).Port;
            l.Stop();
            return port;
        }

        public static void Register(Registry r)
        {
            r.Unit("hostile: a genuine signed init is accepted and teaches the clock offset", async () =>
            {
                var t = new ScriptedTransport(Always(req => Fake.Answer(req, 200, Fake.InitOk, new Fake.AnswerOptions { Shift = TimeSpan.FromSeconds(120) })));
                using (var c = Fake.Client(t))
                {
                    var app = await c.InitAsync();
                    Assert.Equal("Fake App", app.Name);
                    Assert.True(app.HwidLock, "hwid_lock");
                    Assert.Equal(app.Session, c.Session);
                    Assert.True(Math.Abs(c.ClockOffset.Value.TotalSeconds - 120) < 3, "offset ~120 s, got " + c.ClockOffset);
                    var body = Fake.Body(t.Requests[0]);
                    Assert.Equal(Fake.ApiKey, (string)body["api_key"]);
                    Assert.Equal("1.0", (string)body["version"]);
                }
            });

            r.Unit("hostile: unsigned, unknown kid, bad base64, bad signature, foreign nonce and stale answers are refused", async () =>
            {
                Assert.Verification(await InitFails(req => new TransportResponse(200, null, Encoding.UTF8.GetBytes(Fake.InitOk))), VerificationReason.Unsigned);
                Assert.Verification(await InitFails(req => Fake.Answer(req, 200, Fake.InitOk, new Fake.AnswerOptions { Kid = "k9", SignSeed = Fake.OtherSeed })), VerificationReason.UnknownKid);
                Assert.Verification(await InitFails(req =>
                {
                    var a = Fake.Answer(req, 200, Fake.InitOk);
                    a.Headers["X-Response-Signature"] = "!!notbase64!!";
                    return a;
                }), VerificationReason.BadBase64);
                Assert.Verification(await InitFails(req => Fake.Answer(req, 200, Fake.InitOk, new Fake.AnswerOptions { SignSeed = Fake.OtherSeed })), VerificationReason.BadSignature);
                Assert.Verification(await InitFails(req =>
                {
                    var a = Fake.Answer(req, 200, Fake.InitOk);
                    return new TransportResponse(200, a.Headers, Encoding.UTF8.GetBytes(Fake.InitOk.Replace("Fake App", "Fake Apq")));
                }), VerificationReason.BadSignature);
                Assert.Verification(await InitFails(req => Fake.Answer(req, 200, Fake.InitOk, new Fake.AnswerOptions { Nonce = "someone-elses-nonce-000001" })), VerificationReason.BadSignature);
                Assert.Verification(await InitFails(req => Fake.Answer(req, 200, Fake.InitOk, new Fake.AnswerOptions { SignedStatus = 403 })), VerificationReason.BadSignature);
                // 1000 s off is beyond the 600 s a fresh client adopts
                Assert.Verification(await InitFails(req => Fake.Answer(req, 200, Fake.InitOk, new Fake.AnswerOptions { Shift = TimeSpan.FromSeconds(-1000) })), VerificationReason.Stale);
            });

            r.Unit("hostile: after the offset is learned, answers must sit within 300 s of server time", async () =>
            {
                var t = new ScriptedTransport((req, n, ct) => Task.FromResult(n == 1
                    ? Fake.Answer(req, 200, Fake.InitOk, new Fake.AnswerOptions { Shift = TimeSpan.FromSeconds(500) })
                    : Fake.Answer(req, 200, Fake.InitOk)));
                using (var c = Fake.Client(t))
                {
                    await c.InitAsync();
                    Assert.Verification(await Assert.Fails(() => c.InitAsync(), "second init"), VerificationReason.Stale);
                }
            });

            r.Unit("hostile: malformed bodies are Verification/Malformed", async () =>
            {
                var deep = new string('[', 5000);
                foreach (var body in new[] { "not json", "[1,2]", "\"str\"", "{\"success\":true}", "{\"success\":false,\"session\":\"s\",\"app\":{\"name\":\"x\"}}",
                    "{\"success\":true,\"session\":5,\"app\":{\"name\":\"x\"}}", deep, "", "{\"success\":true,\"session\":\"s\",\"app\":{\"name\":\"x\"}} trailing" })
                {
                    var b = body;
                    Assert.Verification(await InitFails(req => Fake.Answer(req, 200, b)), VerificationReason.Malformed);
                }
                // not UTF-8
                Assert.Verification(await InitFails(req => Fake.AnswerBytes(req, 200, new byte[] { 0x7b, 0xff, 0xfe, 0x7d })), VerificationReason.Malformed);
                // an error answer that is not JSON
                Assert.Verification(await InitFails(req => Fake.Answer(req, 502, "<html>Bad Gateway</html>")), VerificationReason.Malformed);
            });

            r.Unit("hostile: signed failures map through the error table", async () =>
            {
                var e = await InitFails(req => Fake.Answer(req, 426,
                    "{\"detail\":{\"message\":\"Version 2.0 is out.\",\"latest_version\":\"2.0\",\"update_url\":\"https://example.com/download/2.0\",\"force_update\":true}}"));
                Assert.Equal(KeywardenErrorCode.UpdateRequired, e.Code);
                Assert.Equal("2.0", e.LatestVersion);
                Assert.Equal("https://example.com/download/2.0", e.UpdateUrl);
                e = await InitFails(req => Fake.Answer(req, 429, "{\"detail\":\"Rate limit exceeded\"}", new Fake.AnswerOptions { Headers = { { "Retry-After", "42" } } }));
                Assert.Equal(KeywardenErrorCode.RateLimited, e.Code);
                Assert.Equal((TimeSpan?)TimeSpan.FromSeconds(42), e.RetryAfter);
                e = await InitFails(req => Fake.Answer(req, 403, "{\"detail\":\"Closed for the holidays\"}"));
                Assert.Equal(KeywardenErrorCode.AppDisabled, e.Code);
                Assert.Equal("Closed for the holidays", (string)e.Detail);
                e = await InitFails(req => Fake.Answer(req, 422, "{\"detail\":[{\"loc\":[\"body\",\"hwid\"],\"msg\":\"short\",\"type\":\"string_too_short\"}]}"));
                Assert.Equal(KeywardenErrorCode.Server, e.Code);
                Assert.Equal((int?)422, e.Status);
            });

            r.Unit("hostile: a hung transport is a Timeout, sent once, within the timeout", async () =>
            {
                var t = new ScriptedTransport((req, n, ct) => Task.Delay(Timeout.Infinite, ct).ContinueWith<TransportResponse>(x => { throw new OperationCanceledException(); }));
                var watch = Stopwatch.StartNew();
                using (var c = Fake.Client(t, o => o.Timeout = TimeSpan.FromMilliseconds(300)))
                {
                    var e = await Assert.Fails(() => c.InitAsync());
                    Assert.Equal(KeywardenErrorCode.Timeout, e.Code, e.Message);
                    Assert.True(!e.NotSent, "a timeout may have reached the server");
                }
                Assert.Equal(1, t.Calls, "a timeout is not retried");
                Assert.True(watch.ElapsedMilliseconds < 3000, "gave up in time (" + watch.ElapsedMilliseconds + " ms)");
            });

            r.Unit("hostile: a transport that ignores cancellation cannot hang the caller", async () =>
            {
                var never = new TaskCompletionSource<TransportResponse>();
                var t = new ScriptedTransport((req, n, ct) => never.Task);
                using (var c = Fake.Client(t, o => o.Timeout = TimeSpan.FromMilliseconds(200)))
                    Assert.Equal(KeywardenErrorCode.Timeout, (await Assert.Fails(() => c.InitAsync())).Code);
                never.SetException(new InvalidOperationException("late failure must stay observed"));
            });

            r.Unit("hostile: a request that never left is retried (same body, fresh nonce), then Network", async () =>
            {
                var t = new ScriptedTransport((req, n, ct) => { throw new TransportException(TransportFailure.Network, false, "connection refused"); });
                using (var c = Fake.Client(t, o => o.Retries = 2))
                {
                    var e = await Assert.Fails(() => c.InitAsync());
                    Assert.Equal(KeywardenErrorCode.Network, e.Code);
                    Assert.True(e.NotSent, "NotSent");
                }
                Assert.Equal(3, t.Calls, "1 + 2 retries");
                Assert.Equal(Encoding.UTF8.GetString(t.Requests[0].Body), Encoding.UTF8.GetString(t.Requests[2].Body), "same body");
                Assert.True(t.Requests[0].Headers["x-nonce"] != t.Requests[1].Headers["x-nonce"], "fresh nonce per attempt");

                var flaky = new ScriptedTransport((req, n, ct) =>
                {
                    if (n < 3) throw new TransportException(TransportFailure.Network, false, "refused");
                    return Task.FromResult(Fake.Answer(req, 200, Fake.InitOk));
                });
                using (var c = Fake.Client(flaky)) Assert.Equal("Fake App", (await c.InitAsync()).Name);
                Assert.Equal(3, flaky.Calls);
            });

            r.Unit("hostile: a failure after sending, or an untyped one, is Network and not retried", async () =>
            {
                var sent = new ScriptedTransport((req, n, ct) => { throw new TransportException(TransportFailure.Network, true, "reset"); });
                using (var c = Fake.Client(sent))
                {
                    var e = await Assert.Fails(() => c.InitAsync());
                    Assert.Equal(KeywardenErrorCode.Network, e.Code);
                    Assert.True(!e.NotSent, "may have been sent");
                }
                Assert.Equal(1, sent.Calls);
                var weird = new ScriptedTransport((req, n, ct) => { throw new NullReferenceException("bug in a custom transport"); });
                using (var c = Fake.Client(weird)) Assert.Equal(KeywardenErrorCode.Network, (await Assert.Fails(() => c.InitAsync())).Code);
                var nullTask = new ScriptedTransport((req, n, ct) => null);
                using (var c = Fake.Client(nullTask)) Assert.Equal(KeywardenErrorCode.Network, (await Assert.Fails(() => c.InitAsync())).Code);
            });

            r.Unit("hostile: caller cancellation is OperationCanceledException, not an error code", async () =>
            {
                var t = new ScriptedTransport((req, n, ct) => Task.Delay(Timeout.Infinite, ct).ContinueWith<TransportResponse>(x => { throw new OperationCanceledException(ct); }));
                using (var c = Fake.Client(t))
                using (var cts = new CancellationTokenSource(100))
                {
                    try
                    {
                        await c.InitAsync(cts.Token);
                        throw new AssertionException("init succeeded");
                    }
                    catch (OperationCanceledException) { }
                }
            });

            r.Unit("hostile: every call carries a fresh X-Nonce; HMAC headers only with api_secret", async () =>
            {
                var t = new ScriptedTransport(Always(req => Fake.Answer(req, 200, Fake.InitOk)));
                using (var c = Fake.Client(t))
                {
                    await c.InitAsync();
                    await c.InitAsync();
                }
                var n1 = t.Requests[0].Headers["x-nonce"];
                var n2 = t.Requests[1].Headers["x-nonce"];
                Assert.True(n1 != n2, "fresh nonce");
                Assert.True(Regex.IsMatch(n1, "^[A-Za-z0-9_-]{16,64}$"), "nonce shape " + n1);
                Assert.True(!t.Requests[0].Headers.ContainsKey("x-signature") && !t.Requests[0].Headers.ContainsKey("x-timestamp"), "unsigned without secret");

                var s = new ScriptedTransport(Always(req => Fake.Answer(req, 200, Fake.InitOk)));
                using (var c = Fake.Client(s, null, Fake.Secret)) await c.InitAsync();
                var q = s.Requests[0];
                var canonical = KeywardenCrypto.CanonicalRequest("POST", "/api/client/init", q.Headers["x-timestamp"], q.Headers["x-nonce"], q.Body);
                Assert.Equal(KeywardenCrypto.RequestSignature(Fake.Secret, canonical), q.Headers["x-signature"], "X-Signature over the exact body");
                var ts = long.Parse(q.Headers["x-timestamp"]);
                Assert.True(Math.Abs(ts - DateTimeOffset.UtcNow.ToUnixTimeSeconds()) < 5, "timestamp is now");
            });

            r.Unit("hostile: a refused signature retries once with the server clock it just learned", async () =>
            {
                // The fake server runs 8 minutes ahead and refuses timestamps more than 300 s off its clock.
                var ahead = TimeSpan.FromMinutes(8);
                var t = new ScriptedTransport(Always(req =>
                {
                    var ts = long.Parse(req.Headers["x-timestamp"]);
                    var serverNow = (DateTimeOffset.UtcNow + ahead).ToUnixTimeSeconds();
                    var o = new Fake.AnswerOptions { Shift = ahead };
                    return Math.Abs(ts - serverNow) > 300
                        ? Fake.Answer(req, 401, "{\"detail\":\"Invalid request signature\"}", o)
                        : Fake.Answer(req, 200, Fake.InitOk, o);
                }));
                using (var c = Fake.Client(t, null, Fake.Secret))
                {
                    Assert.Equal("Fake App", (await c.InitAsync()).Name);
                    Assert.True(Math.Abs(c.ClockOffset.Value.TotalSeconds - 480) < 3, "offset learned");
                }
                Assert.Equal(2, t.Calls, "one refused, one accepted");

                // A server that refuses every signature: ClockSkew after one retry, not a loop.
                var refusing = new ScriptedTransport(Always(req => Fake.Answer(req, 401, "{\"detail\":\"Invalid request signature\"}", new Fake.AnswerOptions { Shift = ahead })));
                using (var c = Fake.Client(refusing, null, Fake.Secret)) Assert.Equal(KeywardenErrorCode.ClockSkew, (await Assert.Fails(() => c.InitAsync())).Code);
                Assert.Equal(2, refusing.Calls);
            });

            r.Unit("hostile: encrypted answers are decrypted; damaged ciphertext is Malformed", async () =>
            {
                var t = new ScriptedTransport(Always(req =>
                {
                    var iv = (string)Fake.Body(req)["init_iv"];
                    return Fake.Answer(req, 200, "{\"enc\":\"" + Encrypt(Fake.InitOk, "enc-key-1", Fake.Secret, iv) + "\"}");
                }));
                using (var c = Fake.Client(t, o => o.EncKey = "enc-key-1", Fake.Secret))
                {
                    Assert.Equal("Fake App", (await c.InitAsync()).Name);
                    Assert.Equal("enc-key-1", (string)Fake.Body(t.Requests[0])["enc_key"]);
                }
                var damaged = new ScriptedTransport(Always(req => Fake.Answer(req, 200, "{\"enc\":\"" + Encrypt(Fake.InitOk, "other", Fake.Secret, "x") + "\"}")));
                using (var c = Fake.Client(damaged, o => o.EncKey = "enc-key-1", Fake.Secret))
                    Assert.Verification(await Assert.Fails(() => c.InitAsync()), VerificationReason.Malformed);
            });

            r.Unit("hostile: register logs in right after and ignores that login's failure", () =>
            {
                var t = new ScriptedTransport(Always(req =>
                {
                    if (req.Url.AbsolutePath.EndsWith("/init")) return Fake.Answer(req, 200, Fake.InitOk);
                    if (req.Url.AbsolutePath.EndsWith("/register"))
                        return Fake.Answer(req, 200, "{\"success\":true,\"message\":\"ok\",\"user\":{\"username\":\"neo\",\"level\":4,\"expires_at\":\"2031-05-06T07:08:09.000Z\"}}");
                    return Fake.Answer(req, 401, "{\"detail\":\"Invalid username or password\"}");
                }));
                using (var c = Fake.Client(t))
                {
                    c.Init();
                    var u = c.Register("neo", "pw-12345678", "KEY-1", "hwid-0123456789");
                    Assert.Equal("neo", u.Username);
                    Assert.Equal(4L, u.Level);
                    Assert.Equal(new DateTimeOffset(2031, 5, 6, 7, 8, 9, TimeSpan.Zero), u.ExpiresAt.Value);
                    Assert.Equal("/api/client/login", t.Requests[2].Url.AbsolutePath, "login followed");
                    Assert.Equal("hwid-0123456789", (string)Fake.Body(t.Requests[2])["hwid"]);
                    Assert.Equal("login", c.LastActivation.Kind);
                    var e = Assert.FailsSync(() => c.Login("neo", "wrong"));
                    Assert.Equal(KeywardenErrorCode.InvalidKey, e.Code);
                    Assert.Equal(64, ((string)Fake.Body(t.Requests[3])["hwid"]).Length, "default hwid is MachineHwid()");
                }
            });

            r.Unit("hostile: calls before init are SessionExpired; a throwing logger changes nothing", async () =>
            {
                var t = new ScriptedTransport(Always(req => Fake.Answer(req, 200, Fake.InitOk, new Fake.AnswerOptions { Shift = TimeSpan.FromSeconds(30) })));
                using (var c = Fake.Client(t, o => o.Logger = (level, msg) => { throw new Exception("logger broke"); }))
                {
                    Assert.Equal(KeywardenErrorCode.SessionExpired, (await Assert.Fails(() => c.ActivateLicenseAsync("KEY"))).Code);
                    await c.InitAsync();
                }
                Assert.Equal(1, t.Calls);
            });

            r.Unit("hostile (default transport): connection refused is Network with NotSent", async () =>
            {
                var cfg = Fake.Config();
                using (var c = KeywardenClient.FromConfig(cfg, new KeywardenOptions { BaseUrl = "http://127.0.0.1:" + ClosedPort(), Retries = 0, Timeout = TimeSpan.FromSeconds(5) }))
                {
                    var e = await Assert.Fails(() => c.InitAsync());
                    Assert.Equal(KeywardenErrorCode.Network, e.Code, e.Message);
                    Assert.True(e.NotSent, "refused connection counts as never sent: " + e.Message);
                }
            });

            r.Unit("hostile (default transport): a server that never answers is a Timeout", async () =>
            {
                await WithRawServer(async (client, stream) => { await Task.Delay(5000); }, async port =>
                {
                    using (var c = KeywardenClient.FromConfig(Fake.Config(), new KeywardenOptions { BaseUrl = "http://127.0.0.1:" + port, Timeout = TimeSpan.FromMilliseconds(400) }))
                    {
                        var watch = Stopwatch.StartNew();
                        var e = await Assert.Fails(() => c.InitAsync());
                        Assert.Equal(KeywardenErrorCode.Timeout, e.Code, e.Message);
                        Assert.True(!e.NotSent, "the request was sent");
                        Assert.True(watch.ElapsedMilliseconds < 3000, "in time");
                    }
                });
            });

            r.Unit("hostile (default transport): a connection closed mid-answer is Network, not retried", async () =>
            {
                var accepted = 0;
                await WithRawServer(async (client, stream) =>
                {
                    Interlocked.Increment(ref accepted);
                    await ReadHeaders(stream);
                    var partial = Encoding.ASCII.GetBytes("HTTP/1.1 200 OK\r\nContent-Length: 500\r\n\r\n{\"succ");
                    await stream.WriteAsync(partial, 0, partial.Length);
                }, async port =>
                {
                    using (var c = KeywardenClient.FromConfig(Fake.Config(), new KeywardenOptions { BaseUrl = "http://127.0.0.1:" + port, Timeout = TimeSpan.FromSeconds(5) }))
                    {
                        var e = await Assert.Fails(() => c.InitAsync());
                        Assert.True(e.Code == KeywardenErrorCode.Network, "Network, got " + e.Code + ": " + e.Message);
                        Assert.True(!e.NotSent, "the request was sent");
                    }
                });
                Assert.Equal(1, accepted, "not retried");
            });

            r.Unit("hostile (default transport): an oversized answer is refused", async () =>
            {
                await WithRawServer(async (client, stream) =>
                {
                    await ReadHeaders(stream);
                    var head = Encoding.ASCII.GetBytes("HTTP/1.1 200 OK\r\nContent-Length: 5000000\r\n\r\n");
                    await stream.WriteAsync(head, 0, head.Length);
                    var junk = new byte[65536];
                    try { for (var i = 0; i < 80; i++) await stream.WriteAsync(junk, 0, junk.Length); } catch (Exception) { }
                }, async port =>
                {
                    using (var c = KeywardenClient.FromConfig(Fake.Config(), new KeywardenOptions { BaseUrl = "http://127.0.0.1:" + port }))
                        Assert.Equal(KeywardenErrorCode.Network, (await Assert.Fails(() => c.InitAsync())).Code);
                });
            });
        }

        private static string Encrypt(string plaintext, string encKey, string secret, string initIv)
        {
            using (var sha = System.Security.Cryptography.SHA256.Create())
            using (var aes = System.Security.Cryptography.Aes.Create())
            {
                aes.Key = sha.ComputeHash(Encoding.UTF8.GetBytes(encKey + "-" + secret));
                var iv = new byte[16];
                Array.Copy(sha.ComputeHash(Encoding.UTF8.GetBytes(initIv)), iv, 16);
                aes.IV = iv;
                var p = Encoding.UTF8.GetBytes(plaintext);
                using (var e = aes.CreateEncryptor()) return Convert.ToBase64String(e.TransformFinalBlock(p, 0, p.Length));
            }
        }

        private static async Task ReadHeaders(NetworkStream stream)
        {
            var buf = new byte[1];
            var seen = new StringBuilder();
            while (!seen.ToString().EndsWith("\r\n\r\n", StringComparison.Ordinal))
            {
                var n = await stream.ReadAsync(buf, 0, 1);
                if (n == 0) return;
                seen.Append((char)buf[0]);
            }
        }

        private static void Forget(Task t) { }

        /// <summary>A raw TCP server on 127.0.0.1:0 whose per-connection behaviour a test scripts.</summary>
        private static async Task WithRawServer(Func<TcpClient, NetworkStream, Task> onClient, Func<int, Task> test)
        {
            var listener = new TcpListener(IPAddress.Loopback, 0);
            listener.Start();
            var port = ((IPEndPoint)listener.LocalEndpoint).Port;
            var running = true;
            var loop = Task.Run(async () =>
            {
                while (running)
                {
                    TcpClient client;
                    try { client = await listener.AcceptTcpClientAsync(); }
                    catch (Exception) { return; }
                    Forget(Task.Run(async () =>
                    {
                        using (client)
                        {
                            try { await onClient(client, client.GetStream()); } catch (Exception) { }
                        }
                    }));
                }
            });
            try
            {
                await test(port);
            }
            finally
            {
                running = false;
                listener.Stop();
                try { await loop; } catch (Exception) { }
            }
        }
    }
}
