// Against a real Keywarden server prepared by test/helpers/sdk-harness.ts (env contract at the top
// of that file): KW_BASE_URL, KW_CONFIG_PLAIN/_SIGNED/_OUTDATED, KW_KEYS_PLAIN/_SIGNED,
// KW_TAMPER_URLS, KW_OWNER_TOKEN, KW_APP_IDS; optional KW_TLS_URL + KW_TLS_PIN (a TLS proxy with a
// self-signed certificate in front of the server, started by test/sdk/csharp.test.ts).
// Direct calls all come from 127.0.0.1: init 30/min, register/login/license 20/min each.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Net;
using System.Net.Http;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal static class IntegrationTests
    {
        private static readonly TimeSpan Wait = TimeSpan.FromSeconds(20);
        private const string HwidA = "sdk-cs-hwid-aaaaaaaa";
        private const string HwidB = "sdk-cs-hwid-bbbbbbbb";
        private const string Code = HeartbeatFixture.Code;
        private static readonly object KeyGate = new object();
        private static readonly Dictionary<string, Queue<string>> Keys = new Dictionary<string, Queue<string>>();

        internal static string Env(string name)
        {
            var v = Environment.GetEnvironmentVariable(name);
            if (string.IsNullOrEmpty(v)) throw new SkipException(name + " not set");
            return v;
        }

        internal static string Key(string app)
        {
            lock (KeyGate)
            {
                Queue<string> q;
                if (!Keys.TryGetValue(app, out q)) Keys[app] = q = new Queue<string>(Env("KW_KEYS_" + app).Split(','));
                if (q.Count == 0) throw new InvalidOperationException("out of " + app + " keys");
                return q.Dequeue();
            }
        }

        internal static KeywardenClient Client(string app, Action<KeywardenOptions> tweak = null)
        {
            var o = new KeywardenOptions { Timeout = TimeSpan.FromSeconds(10) };
            if (tweak != null) tweak(o);
            return KeywardenClient.FromConfig(Env("KW_CONFIG_" + app), o);
        }

        internal static string TamperUrl(string mode)
        {
            var urls = (IDictionary<string, object>)Json.Parse(Env("KW_TAMPER_URLS"));
            object u;
            if (!urls.TryGetValue(mode, out u)) throw new AssertionException("no tamper URL for " + mode);
            return (string)u;
        }

        internal static HeartbeatOptions Fast(Action<HeartbeatOptions> tweak = null)
        {
            return HeartbeatFixture.Options(TimeSpan.FromMilliseconds(150), tweak);
        }

        private static async Task<IList<object>> OwnerGet(string path)
        {
            using (var http = new HttpClient())
            {
                var req = new HttpRequestMessage(HttpMethod.Get, Env("KW_BASE_URL") + path);
                req.Headers.TryAddWithoutValidation("Authorization", "Bearer " + Env("KW_OWNER_TOKEN"));
                var res = await http.SendAsync(req);
                var text = await res.Content.ReadAsStringAsync();
                Assert.Equal(200, (int)res.StatusCode, "GET " + path + ": " + text);
                return (IList<object>)Json.Parse(text);
            }
        }

        /// <summary>Wraps the default transport; `plan(n)` decides per heartbeat call: refuse before sending, lose the answer, or pass.</summary>
        private sealed class Scripted : IKeywardenTransport
        {
            private readonly HttpClientTransport _real = new HttpClientTransport();
            private readonly Func<int, string> _plan;
            private readonly int _closedPort;
            private int _n;

            public Scripted(Func<int, string> plan, int closedPort)
            {
                _plan = plan;
                _closedPort = closedPort;
            }

            public async Task<TransportResponse> SendAsync(TransportRequest request, CancellationToken ct)
            {
                if (!request.Url.AbsolutePath.EndsWith("/api/client/heartbeat")) return await _real.SendAsync(request, ct);
                var what = _plan(Interlocked.Increment(ref _n));
                if (what == "refuse")
                {
                    // a genuine ECONNREFUSED from the default transport
                    var b = new UriBuilder(request.Url) { Port = _closedPort };
                    return await _real.SendAsync(request.WithUrl(b.Uri), ct);
                }
                var res = await _real.SendAsync(request, ct);
                if (what == "lose") throw new TransportException(TransportFailure.Network, true, "connection reset after the server answered");
                return res;
            }
        }

        public static void Register(Registry r)
        {
            r.Integration("init returns the app info", async () =>
            {
                using (var c = Client("PLAIN"))
                {
                    var app = await c.InitAsync();
                    Assert.Equal("SDK PLAIN", app.Name);
                    Assert.Equal("1.0", app.Version);
                    Assert.True(app.HwidLock, "hwid_lock on");
                    Assert.Equal(43, app.Session.Length, "session length");
                    Assert.True(c.ClockOffset.HasValue && c.ClockOffset.Value.Duration() < TimeSpan.FromSeconds(5), "offset learned, near zero");
                }
            });

            r.Integration("signed requests with the SIGNED config, encrypted answers; without the secret: ClockSkew", async () =>
            {
                var wire = new List<string>();
                var real = new HttpClientTransport();
                var spy = new ScriptedTransport(async (req, n, ct) =>
                {
                    var res = await real.SendAsync(req, ct);
                    lock (wire) wire.Add(Encoding.UTF8.GetString(res.Body));
                    return res;
                });
                using (var c = Client("SIGNED", o => { o.Transport = spy; o.EncKey = "sdk-cs-enc"; }))
                {
                    Assert.True(c.Config.ApiSecret != null, "the SIGNED config carries the secret");
                    Assert.Equal("SDK SIGNED", (await c.InitAsync()).Name);
                    Assert.Equal(3L, (await c.ActivateLicenseAsync(Key("SIGNED"), HwidA)).Level);
                    Assert.True(spy.Requests.All(q => q.Headers.ContainsKey("x-signature") && q.Headers.ContainsKey("x-timestamp")), "every request signed");
                }
                Assert.Equal(2, wire.Count);
                foreach (var w in wire) Assert.True(w.StartsWith("{\"enc\":", StringComparison.Ordinal), "encrypted on the wire: " + w);
                real.Dispose();
                // The same app without the secret: the server refuses the unsigned request.
                var cfg = KeywardenConfig.Load(Env("KW_CONFIG_SIGNED"));
                var unsigned = new KeywardenConfig(cfg.BaseUrl, cfg.ApiKey, cfg.ResponseKeys, cfg.Version);
                using (var c = KeywardenClient.FromConfig(unsigned))
                {
                    var e = await Assert.Fails(() => c.InitAsync());
                    Assert.Equal(KeywardenErrorCode.ClockSkew, e.Code, e.Message);
                    Assert.Equal((int?)401, e.Status);
                }
            });

            r.Integration("register logs in at once (last_login set); login; wrong password is InvalidKey", async () =>
            {
                var name = "cs-user-" + Guid.NewGuid().ToString("N").Substring(0, 8);
                using (var c = Client("PLAIN"))
                {
                    await c.InitAsync();
                    var u = await c.RegisterAsync(name, "cs-pass-123", Key("PLAIN"), HwidA);
                    Assert.Equal(name, u.Username);
                    Assert.Equal(3L, u.Level);
                    Assert.True(u.ExpiresAt.HasValue && u.ExpiresAt.Value > DateTimeOffset.UtcNow.AddDays(29), "expiry ~30 days");
                    var appId = (string)((IDictionary<string, object>)Json.Parse(Env("KW_APP_IDS")))["PLAIN"];
                    var users = await OwnerGet("/api/apps/" + appId + "/users");
                    var row = users.Cast<IDictionary<string, object>>().FirstOrDefault(x => (string)x["username"] == name);
                    Assert.NotNull(row, "user listed");
                    Assert.True(row["last_login"] is string, "register's follow-up login set last_login");
                    var e = await Assert.Fails(() => c.LoginAsync(name, "wrong-pass", HwidA));
                    Assert.Equal(KeywardenErrorCode.InvalidKey, e.Code);
                    Assert.Equal((int?)401, e.Status);
                }
                using (var again = Client("PLAIN"))
                {
                    await again.InitAsync();
                    Assert.Equal(3L, (await again.LoginAsync(name, "cs-pass-123", HwidA)).Level);
                    var bad = await Assert.Fails(() => again.RegisterAsync(name + "x", "cs-pass-123", "NOT-A-KEY", HwidA));
                    Assert.Equal(KeywardenErrorCode.InvalidKey, bad.Code);
                    Assert.Equal((int?)400, bad.Status);
                }
            });

            r.Integration("license: level and DateTimeOffset expiry; hwid lock refuses another device", async () =>
            {
                var k = Key("PLAIN");
                using (var c = Client("PLAIN"))
                {
                    c.Init();
                    var lic = c.ActivateLicense(k, HwidA);
                    Assert.Equal(3L, lic.Level);
                    var days = (lic.ExpiresAt.Value - DateTimeOffset.UtcNow).TotalDays;
                    Assert.True(days > 29 && days <= 30.01, "30 days, got " + days);
                }
                using (var other = Client("PLAIN"))
                {
                    await other.InitAsync();
                    var e = await Assert.Fails(() => other.ActivateLicenseAsync(k, HwidB));
                    Assert.Equal(KeywardenErrorCode.HwidMismatch, e.Code, e.Message);
                    Assert.Equal((int?)403, e.Status);
                    var wrong = k.Substring(0, k.Length - 1) + (k.EndsWith("A") ? "B" : "A");
                    Assert.Equal(KeywardenErrorCode.InvalidKey, (await Assert.Fails(() => other.ActivateLicenseAsync(wrong, HwidB))).Code);
                }
            });

            r.Integration("heartbeat: three beats with verified proofs, then stop closes it on the server", async () =>
            {
                using (var c = Client("PLAIN"))
                {
                    await c.InitAsync();
                    await c.ActivateLicenseAsync(Key("PLAIN"), HwidA);
                    var hb = c.CreateHeartbeat("sdk-cs-system-01", Code, Fast());
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    Assert.Equal(5, hb.BeatInterval);
                    var beats = await ev.Beats.Wait(3, Wait, "beat");
                    Assert.Equal("1/1,2/2,3/3", string.Join(",", beats.Take(3).Select(b => b.Index + "/" + b.Count)));
                    Assert.True(await hb.StopAsync(), "heartbeat/stop answered success");
                    Assert.Equal(HeartbeatStopReason.Stop, (await ev.Stopped.Wait(1, Wait, "stopped"))[0].Reason);
                    Assert.Equal(0, ev.Degraded.Items.Count, "no degraded beat");
                }
            });

            r.Integration("heartbeat: a debugger report is killed: HeartbeatKilled (403 rejected)", async () =>
            {
                using (var c = Client("PLAIN"))
                {
                    await c.InitAsync();
                    await c.ActivateLicenseAsync(Key("PLAIN"), HwidA);
                    var hb = c.CreateHeartbeat("sdk-cs-system-02", Code, Fast(o => { o.DebuggerDetected = () => true; o.Reauthenticate = true; }));
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var k = (await ev.Killed.Wait(1, Wait, "killed"))[0];
                    Assert.Equal(KeywardenErrorCode.HeartbeatKilled, k.Error.Code);
                    Assert.Equal((int?)403, k.Error.Status);
                    Assert.Equal("rejected", k.Error.Detail as string);
                    Assert.Equal(HeartbeatStopReason.Killed, (await ev.Stopped.Wait(1, Wait, "stopped"))[0].Reason);
                    Assert.True(!hb.Running, "not running");
                }
            });

            r.Integration("an outdated client gets UpdateRequired with LatestVersion and UpdateUrl", async () =>
            {
                using (var c = Client("OUTDATED"))
                {
                    var e = await Assert.Fails(() => c.InitAsync());
                    Assert.Equal(KeywardenErrorCode.UpdateRequired, e.Code, e.Message);
                    Assert.Equal((int?)426, e.Status);
                    Assert.Equal("2.0", e.LatestVersion);
                    Assert.Equal("https://example.com/download/2.0", e.UpdateUrl);
                    Assert.True(e.Message.Contains("Version 2.0 is out."), "the vendor's message: " + e.Message);
                }
            });

            r.Integration("a rate-limited call is RateLimited with RetryAfter", async () =>
            {
                using (var c = Client("PLAIN", o => o.BaseUrl = TamperUrl("rate_limited")))
                {
                    var e = await Assert.Fails(() => c.InitAsync());
                    Assert.Equal(KeywardenErrorCode.RateLimited, e.Code, e.Message);
                    Assert.True(e.RetryAfter.HasValue && e.RetryAfter.Value > TimeSpan.Zero, "RetryAfter > 0");
                }
            });

            r.Integration("works with a clock 8 minutes off, signing with the server time it learned", async () =>
            {
                using (var c = Client("SIGNED", o => o.Clock = () => DateTimeOffset.UtcNow.AddMinutes(-8)))
                {
                    await c.InitAsync();
                    Assert.True(Math.Abs(c.ClockOffset.Value.TotalSeconds - 480) < 3, "offset ~480 s: " + c.ClockOffset);
                    Assert.Equal(3L, (await c.ActivateLicenseAsync(Key("SIGNED"), HwidA)).Level);
                }
            });

            foreach (var pair in new[]
            {
                new[] { "forged", "bad_signature" }, new[] { "unsigned", "unsigned" }, new[] { "replayed", "" }, new[] { "foreign_nonce", "bad_signature" },
                new[] { "unknown_kid", "unknown_kid" }, new[] { "stale", "stale" }, new[] { "bad_base64", "bad_base64" },
            })
            {
                var mode = pair[0];
                var reason = pair[1];
                r.Integration("tamper: " + mode + " is refused", async () =>
                {
                    using (var c = Client("PLAIN", o => { o.BaseUrl = TamperUrl(mode); o.Retries = 0; }))
                    {
                        var e = await Assert.Fails(() => c.InitAsync());
                        Assert.Equal(KeywardenErrorCode.Verification, e.Code, e.Message);
                        var got = ErrorTable.WireName(e.Reason.Value);
                        // a replayed answer fails on its signature, or first on its age when it was recorded long ago
                        if (reason.Length > 0) Assert.Equal(reason, got);
                        else Assert.True(got == "bad_signature" || got == "stale", "replayed: " + got);
                        Assert.True(c.Session == null, "nothing believed");
                    }
                });
            }

            r.Integration("tamper: bad_proof: the heartbeat token is not trusted", async () =>
            {
                using (var c = Client("PLAIN", o => o.BaseUrl = TamperUrl("bad_proof")))
                {
                    await c.InitAsync();
                    await c.ActivateLicenseAsync(Key("PLAIN"), HwidA);
                    Assert.Verification(await Assert.Fails(() => c.StartHeartbeatAsync("sdk-cs-system-03", Code)), VerificationReason.BadProof);
                }
            });

            r.Integration("robust heartbeat: a beat that never reached the server is sent again (same index and token)", async () =>
            {
                using (var c = Client("PLAIN", o => { o.Transport = new Scripted(n => n == 2 || n == 3 ? "refuse" : "pass", HostileTests.ClosedPort()); o.Retries = 2; }))
                {
                    await c.InitAsync();
                    await c.ActivateLicenseAsync(Key("PLAIN"), HwidA);
                    var hb = c.CreateHeartbeat("sdk-cs-system-04", Code, Fast());
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var beats = await ev.Beats.Wait(3, Wait, "beat");
                    Assert.Equal("1,2,3", string.Join(",", beats.Take(3).Select(b => b.Index)));
                    Assert.Equal(0, ev.Degraded.Items.Count, "no degraded event");
                    await hb.StopAsync();
                }
            });

            r.Integration("robust heartbeat: retries exhausted -> Degraded (not lost), then goes on with the same index", async () =>
            {
                using (var c = Client("PLAIN", o => { o.Transport = new Scripted(n => n == 2 ? "refuse" : "pass", HostileTests.ClosedPort()); o.Retries = 0; }))
                {
                    await c.InitAsync();
                    await c.ActivateLicenseAsync(Key("PLAIN"), HwidA);
                    var hb = c.CreateHeartbeat("sdk-cs-system-05", Code, Fast());
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var beats = await ev.Beats.Wait(3, Wait, "beat");
                    var d = ev.Degraded.Items[0];
                    Assert.True(!d.Lost && d.Error.Code == KeywardenErrorCode.Network && d.Error.NotSent, "degraded, not lost: " + d.Error.Message);
                    Assert.Equal("1,2,3", string.Join(",", beats.Take(3).Select(b => b.Index)));
                    await hb.StopAsync();
                }
            });

            r.Integration("robust heartbeat: a lost answer with reauth re-authenticates and starts again by itself", async () =>
            {
                using (var c = Client("PLAIN", o => o.Transport = new Scripted(n => n == 2 ? "lose" : "pass", 1)))
                {
                    await c.InitAsync();
                    await c.ActivateLicenseAsync(Key("PLAIN"), HwidA);
                    var first = c.Session;
                    var hb = c.CreateHeartbeat("sdk-cs-system-06", Code, Fast(o => o.Reauthenticate = true));
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var beats = await ev.Beats.Wait(3, Wait, "beat");
                    var d = ev.Degraded.Items[0];
                    Assert.True(d.Lost && d.Reauthenticating, "lost + reauthenticating");
                    Assert.True(ev.Recovered.Items[0].Session != first, "new session");
                    Assert.Equal("1,1,2", string.Join(",", beats.Take(3).Select(b => b.Count)));
                    await hb.StopAsync();
                }
            });

            r.Integration("robust heartbeat: without reauth a lost answer ends in HeartbeatKilled", async () =>
            {
                using (var c = Client("PLAIN", o => o.Transport = new Scripted(n => n == 2 ? "lose" : "pass", 1)))
                {
                    await c.InitAsync();
                    await c.ActivateLicenseAsync(Key("PLAIN"), HwidA);
                    var hb = c.CreateHeartbeat("sdk-cs-system-07", Code, Fast());
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var k = (await ev.Killed.Wait(1, Wait, "killed"))[0];
                    Assert.True(ev.Degraded.Items[0].Lost, "lost");
                    Assert.Equal(KeywardenErrorCode.HeartbeatKilled, k.Error.Code);
                }
            });

            r.Integration("TLS pinning: the pinned key passes, a wrong pin is TlsPin, an unpinned self-signed host fails", async () =>
            {
                var url = Environment.GetEnvironmentVariable("KW_TLS_URL");
                var pin = Environment.GetEnvironmentVariable("KW_TLS_PIN");
                if (string.IsNullOrEmpty(url) || string.IsNullOrEmpty(pin)) throw new SkipException("KW_TLS_URL / KW_TLS_PIN not set");
                using (var c = Client("PLAIN", o => { o.BaseUrl = url; o.TlsPins = new[] { pin }; o.AllowUntrustedPinnedCertificate = true; }))
                    Assert.Equal("SDK PLAIN", (await c.InitAsync()).Name);
                using (var c = Client("PLAIN", o => { o.BaseUrl = url; o.TlsPins = new[] { Convert.ToBase64String(new byte[32]) }; o.AllowUntrustedPinnedCertificate = true; }))
                {
                    var e = await Assert.Fails(() => c.InitAsync());
                    Assert.Verification(e, VerificationReason.TlsPin);
                }
                using (var c = Client("PLAIN", o => { o.BaseUrl = url; o.TlsPins = new[] { pin }; }))
                    Assert.Equal(KeywardenErrorCode.Network, (await Assert.Fails(() => c.InitAsync())).Code, "pinned but untrusted chain, not allowed");
                using (var c = Client("PLAIN", o => { o.BaseUrl = url; o.Retries = 0; }))
                    Assert.Equal(KeywardenErrorCode.Network, (await Assert.Fails(() => c.InitAsync())).Code, "self-signed without pins");
            });
        }
    }
}
