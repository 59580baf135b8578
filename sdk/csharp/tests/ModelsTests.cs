// The licensing models of docs/protocol.md 12 against an in-memory fake that answers and signs like the server
// (reached only through the public Transport option): trials, entitlements, offline license files with
// their state file, and the grace period of the calls and of a running heartbeat.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    /// <summary>FakeServer plus docs/protocol.md 12: entitlements, trials, offline files and grace_until.</summary>
    internal sealed class ModelsServer
    {
        public const string AppId = "fake-app-0001";
        public readonly FakeServer Inner = new FakeServer();
        public readonly object Gate = new object();
        public int? GraceSeconds;
        public int TrialHours, OfflineDays;
        public bool Outage; // heartbeat calls fail like a connection reset
        /// <summary>The keys' expires_at; past it (EnforceExpiry) beats are refused as the server's expiry kill does.</summary>
        public string ExpiresAt = "2030-01-02T03:04:05.000Z";
        public bool EnforceExpiry;
        public Func<TransportRequest, string, TransportResponse> Intercept;
        private readonly Dictionary<string, string> _trials = new Dictionary<string, string>(); // hwid -> key
        private readonly Dictionary<string, string> _sessionKey = new Dictionary<string, string>();
        private readonly Dictionary<string, string> _keyHwid = new Dictionary<string, string>();
        private readonly Dictionary<string, string[]> _ents = new Dictionary<string, string[]>
        {
            { "KEY-GOOD-0001", new[] { "pro", "export" } }, { "KEY-GOOD-0002", new string[0] },
        };

        public static KeywardenConfig Config(string appId = AppId)
        {
            var c = Fake.Config();
            return new KeywardenConfig(c.BaseUrl, c.ApiKey, c.ResponseKeys, c.Version, null, c.AppName, appId);
        }

        public static string Iso(DateTimeOffset t)
        {
            return t.UtcDateTime.ToString("yyyy-MM-dd'T'HH:mm:ss.fff'Z'", CultureInfo.InvariantCulture);
        }

        public static string B64Url(byte[] b)
        {
            return Convert.ToBase64String(b).TrimEnd('=').Replace('+', '-').Replace('/', '_');
        }

        public static string File(string payloadJson, byte[] seed = null)
        {
            var head = "kwlic1." + B64Url(Encoding.UTF8.GetBytes(payloadJson));
            return head + "." + B64Url(TestSigner.Sign(TestSigner.KeyPair(seed ?? Fake.Seed)[1], Encoding.ASCII.GetBytes(head)));
        }

        private TransportResponse Ok(TransportRequest req, Dictionary<string, object> body, bool grant = true)
        {
            body["success"] = true;
            if (grant && GraceSeconds.HasValue) body["grace_until"] = Iso(DateTimeOffset.UtcNow.AddSeconds(GraceSeconds.Value));
            return Fake.Answer(req, 200, Json.Serialize(body));
        }

        private static TransportResponse Fail(TransportRequest req, int status, string detail)
        {
            return Fake.Answer(req, status, Json.Serialize(new Dictionary<string, object> { { "detail", detail } }));
        }

        public Task<TransportResponse> Handle(TransportRequest req, int n, CancellationToken ct)
        {
            var endpoint = req.Url.AbsolutePath.Substring("/api/client/".Length);
            if (Intercept != null)
            {
                var r = Intercept(req, endpoint);
                if (r != null) return Task.FromResult(r);
            }
            if (Outage && endpoint.StartsWith("heartbeat", StringComparison.Ordinal))
                throw new TransportException(TransportFailure.Network, true, "connection reset");
            var b = Fake.Body(req);
            lock (Gate)
            {
                switch (endpoint)
                {
                    case "license":
                    {
                        var key = (string)b["license"];
                        string[] ents;
                        if (!_ents.TryGetValue(key, out ents)) return Task.FromResult(Fail(req, 400, "Invalid license key"));
                        _sessionKey[(string)b["session"]] = key;
                        _keyHwid[key] = ((string)b["hwid"]).ToLowerInvariant();
                        return Task.FromResult(Ok(req, new Dictionary<string, object>
                        {
                            { "message", "ok" }, { "level", 3L }, { "expires_at", ExpiresAt },
                            { "entitlements", ents.OrderBy(e => e, StringComparer.Ordinal).Cast<object>().ToList() },
                        }));
                    }
                    case "trial":
                    {
                        if (TrialHours == 0) return Task.FromResult(Fail(req, 403, "Trials are not enabled for this application."));
                        var hwid = ((string)b["hwid"]).ToLowerInvariant();
                        if (_trials.ContainsKey(hwid)) return Task.FromResult(Fail(req, 403, "Trial already used on this device."));
                        var key = "TRIAL-" + Guid.NewGuid().ToString("N").Substring(0, 12).ToUpperInvariant();
                        _trials[hwid] = key;
                        _ents[key] = new string[0];
                        _keyHwid[key] = hwid;
                        _sessionKey[(string)b["session"]] = key;
                        return Task.FromResult(Ok(req, new Dictionary<string, object>
                        {
                            { "message", "Trial started" }, { "level", 1L }, { "expires_at", Iso(DateTimeOffset.UtcNow.AddHours(TrialHours)) },
                            { "entitlements", new List<object>() }, { "key", key },
                        }));
                    }
                    case "offline":
                    {
                        if (OfflineDays == 0) return Task.FromResult(Fail(req, 403, "Offline licenses are not enabled for this application."));
                        string key;
                        if (!_sessionKey.TryGetValue((string)b["session"], out key))
                            return Task.FromResult(Fail(req, 403, "Session not activated. Call /login, /register or /license first."));
                        if (_keyHwid[key] != ((string)b["hwid"]).ToLowerInvariant())
                            return Task.FromResult(Fail(req, 403, "HWID mismatch. Key locked to another device."));
                        var now = DateTimeOffset.UtcNow;
                        var payload = Json.Serialize(new Dictionary<string, object>
                        {
                            { "v", 1L }, { "kid", "k1" }, { "app_id", AppId }, { "license_id", "lic-" + key }, { "user", null }, { "hwid", _keyHwid[key] },
                            { "level", 3L }, { "entitlements", _ents[key].OrderBy(e => e, StringComparer.Ordinal).Cast<object>().ToList() },
                            { "expires_at", null }, { "issued_at", Iso(now) }, { "valid_until", Iso(now.AddDays(OfflineDays)) },
                        });
                        return Task.FromResult(Ok(req, new Dictionary<string, object> { { "license_file", File(payload) } }, false));
                    }
                    case "heartbeat/start":
                    case "heartbeat":
                    {
                        if (endpoint == "heartbeat" && EnforceExpiry
                            && DateTimeOffset.UtcNow >= DateTimeOffset.Parse(ExpiresAt, CultureInfo.InvariantCulture, DateTimeStyles.AssumeUniversal))
                            return Task.FromResult(Fail(req, 403, "rejected"));
                        var res = Inner.Answer(req, endpoint);
                        if (res.Status != 200) return Task.FromResult(res);
                        var body = (Dictionary<string, object>)Json.Parse(Encoding.UTF8.GetString(res.Body));
                        return Task.FromResult(Ok(req, body));
                    }
                    default:
                        return Task.FromResult(Inner.Answer(req, endpoint));
                }
            }
        }
    }

    internal static class ModelsTests
    {
        private static readonly TimeSpan Wait = TimeSpan.FromSeconds(10);
        private const string Hwid = "hwid-aaaaaaaa";

        /// <summary>Runs body with a fresh temporary directory (state files), removed afterwards.</summary>
        private static async Task InDir(Func<string, Task> body)
        {
            var d = Path.Combine(Path.GetTempPath(), "kw-cs-models-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(d);
            try { await body(d); }
            finally { Directory.Delete(d, true); }
        }

        private static KeywardenClient Client(ModelsServer s, string dir, Action<KeywardenOptions> tweak = null, KeywardenConfig config = null)
        {
            var o = new KeywardenOptions { Transport = new ScriptedTransport(s.Handle), Timeout = TimeSpan.FromSeconds(5), Retries = 0, StateFile = Path.Combine(dir, "state.json") };
            if (tweak != null) tweak(o);
            return KeywardenClient.FromConfig(config ?? ModelsServer.Config(), o);
        }

        private static async Task<KeywardenClient> Activated(ModelsServer s, string dir, Action<KeywardenOptions> tweak = null)
        {
            var c = Client(s, dir, tweak);
            await c.InitAsync();
            await c.ActivateLicenseAsync("KEY-GOOD-0001", Hwid);
            return c;
        }

        public static void Register(Registry r)
        {
            r.Unit("models: a trial activates a key once per device, remembered for re-authentication", () => InDir(async dir =>
            {
                var s = new ModelsServer { TrialHours = 72 };
                var c = Client(s, dir);
                await c.InitAsync();
                var t = await c.TrialAsync(Hwid);
                Assert.True(t.Key.StartsWith("TRIAL-", StringComparison.Ordinal), "trial key");
                Assert.Equal(1L, t.Level);
                Assert.Equal(0, t.Entitlements.Count);
                Assert.True(t.ExpiresAt.Value > DateTimeOffset.UtcNow.AddHours(71), "expires in 72 h");
                Assert.Equal("license", c.LastActivation.Kind);
                var again = Client(s, dir);
                await again.InitAsync();
                var e = await Assert.Fails(() => again.TrialAsync(Hwid.ToUpperInvariant()));
                Assert.Equal(KeywardenErrorCode.TrialUsed, e.Code);
                Assert.Equal(403, e.Status);
                var off = Client(new ModelsServer(), dir);
                await off.InitAsync();
                Assert.Equal(KeywardenErrorCode.TrialDisabled, (await Assert.Fails(() => off.TrialAsync(Hwid))).Code);
            }));

            r.Unit("models: entitlements come sorted on the result and the client; anything but a list of codes is malformed", () => InDir(async dir =>
            {
                var s = new ModelsServer();
                var c = Client(s, dir);
                Assert.Equal(0, c.Entitlements.Count);
                await c.InitAsync();
                var lic = await c.ActivateLicenseAsync("KEY-GOOD-0001", Hwid);
                Assert.Equal("export,pro", string.Join(",", lic.Entitlements));
                Assert.True(lic.HasEntitlement("pro") && c.HasEntitlement("export") && !c.HasEntitlement("enterprise"), "HasEntitlement");
                await c.ActivateLicenseAsync("KEY-GOOD-0002", Hwid);
                Assert.Equal(0, c.Entitlements.Count);
                s.Intercept = (req, ep) => ep == "license" ? Fake.Answer(req, 200, "{\"success\":true,\"level\":3,\"entitlements\":\"pro\"}") : null;
                Assert.Verification(await Assert.Fails(() => c.ActivateLicenseAsync("KEY-GOOD-0001", Hwid)), VerificationReason.Malformed);
            }));

            r.Unit("models: an offline file round trip, checked with no service at all", () => InDir(async dir =>
            {
                var s = new ModelsServer { OfflineDays = 7 };
                var c = await Activated(s, dir);
                var file = await c.OfflineFileAsync(Hwid);
                var offline = Client(new ModelsServer(), dir, o => o.Transport = new ScriptedTransport((q, n, ct) => { throw new Exception("no call expected"); }));
                var lic = offline.LoadOffline(file + "\n", Hwid);
                Assert.Equal(ModelsServer.AppId, lic.AppId);
                Assert.Equal(3L, lic.Level);
                Assert.Equal("export,pro", string.Join(",", lic.Entitlements));
                Assert.True(lic.User == null && lic.ExpiresAt == null, "license-only, lifetime");
                Assert.Equal(TimeSpan.FromDays(7), lic.ValidUntil - lic.IssuedAt);
                Assert.True(offline.HasEntitlement("pro"), "the file's entitlements");
                var e = Assert.FailsSync(() => offline.LoadOffline(file, "hwid-bbbbbbbb"));
                Assert.Equal(KeywardenErrorCode.OfflineInvalid, e.Code);
                Assert.Equal(OfflineReason.WrongHwid, e.OfflineReason.Value);
                Assert.Equal(KeywardenErrorCode.HwidMismatch, (await Assert.Fails(() => c.OfflineFileAsync("hwid-bbbbbbbb"))).Code);
                var other = Client(s, dir, o => o.StateFile = Path.Combine(dir, "s2"), ModelsServer.Config("another-app"));
                Assert.Equal(OfflineReason.WrongApp, Assert.FailsSync(() => other.LoadOffline(file, Hwid)).OfflineReason.Value);
                Assert.Throws<KeywardenConfigException>(() => KeywardenClient.FromConfig(Fake.Config(), new KeywardenOptions()).LoadOffline(file, Hwid));
                var foreign = ModelsServer.File("{}", Fake.OtherSeed);
                Assert.Equal(OfflineReason.Malformed, Assert.FailsSync(() => offline.LoadOffline(foreign, Hwid)).OfflineReason.Value);
                s.OfflineDays = 0;
                Assert.Equal(KeywardenErrorCode.OfflineDisabled, (await Assert.Fails(() => c.OfflineFileAsync(Hwid))).Code);
            }));

            r.Unit("models: the state file catches a clock set back and is never lowered", () => InDir(async dir =>
            {
                var shift = TimeSpan.Zero;
                var s = new ModelsServer { OfflineDays = 7 };
                var c = await Activated(s, dir, o => o.Clock = () => DateTimeOffset.UtcNow + shift);
                var file = await c.OfflineFileAsync(Hwid);
                c.LoadOffline(file, Hwid);
                var state = Path.Combine(dir, "state.json");
                Assert.Equal(state, c.StateFile);
                var first = (IDictionary<string, object>)Json.Parse(File.ReadAllText(state));
                Assert.Equal(1L, (long)first["v"]);
                Assert.True(Math.Abs((long)first["last_seen"] - DateTimeOffset.UtcNow.ToUnixTimeSeconds()) < 5, "last_seen is now");
                shift = TimeSpan.FromDays(3);
                c.LoadOffline(file, Hwid);
                shift = TimeSpan.FromDays(1);
                Assert.Equal(OfflineReason.ClockRolledBack, Assert.FailsSync(() => c.LoadOffline(file, Hwid)).OfflineReason.Value);
                var seen = (long)((IDictionary<string, object>)Json.Parse(File.ReadAllText(state)))["last_seen"];
                Assert.True(seen > DateTimeOffset.UtcNow.AddDays(2.9).ToUnixTimeSeconds(), "never lowered");
                shift = TimeSpan.FromDays(8);
                Assert.Equal(OfflineReason.Expired, Assert.FailsSync(() => c.LoadOffline(file, Hwid)).OfflineReason.Value);
            }));

            r.Unit("models: a damaged state file counts as no record and is rewritten; an unwritable one does not stop the check", () => InDir(async dir =>
            {
                var s = new ModelsServer { OfflineDays = 7 };
                var c = await Activated(s, dir);
                var file = await c.OfflineFileAsync(Hwid);
                var state = Path.Combine(dir, "state.json");
                foreach (var junk in new[] { new byte[0], Encoding.UTF8.GetBytes("not json"), Encoding.UTF8.GetBytes("{\"last_seen\":\"yesterday\"}"), new byte[] { 0xff, 0xfe }, Encoding.UTF8.GetBytes("[1]") })
                {
                    File.WriteAllBytes(state, junk);
                    Assert.Equal(3L, c.LoadOffline(file, Hwid).Level);
                    Assert.True(((IDictionary<string, object>)Json.Parse(File.ReadAllText(state)))["last_seen"] is long, "rewritten");
                }
                File.WriteAllText(Path.Combine(dir, "a-file"), "x");
                var blocked = Client(s, dir, o => o.StateFile = Path.Combine(Path.Combine(dir, "a-file"), "state.json"));
                Assert.Equal(3L, blocked.LoadOffline(file, Hwid).Level);
            }));

            r.Unit("models: the default state file is per user and application", () =>
            {
                var saved = Environment.GetEnvironmentVariable("XDG_STATE_HOME");
                try
                {
                    Environment.SetEnvironmentVariable("XDG_STATE_HOME", "/tmp/xdg-state");
                    var p = OfflineLicenses.DefaultStateFile("kwpk_app_one");
                    Assert.Equal("/tmp/xdg-state/keywarden", Path.GetDirectoryName(p));
                    Assert.True(System.Text.RegularExpressions.Regex.IsMatch(Path.GetFileName(p), "^[0-9a-f]{16}\\.json$"), "name");
                    Assert.True(p != OfflineLicenses.DefaultStateFile("kwpk_app_two"), "per application");
                }
                finally
                {
                    Environment.SetEnvironmentVariable("XDG_STATE_HOME", saved);
                }
            });

            r.Unit("models: verified answers set the grace; a verified refusal ends it; 429 and unverified answers change nothing", () => InDir(async dir =>
            {
                var s = new ModelsServer { GraceSeconds = 3600 };
                var c = Client(s, dir);
                await c.InitAsync();
                Assert.True(c.GraceUntil == null, "none before");
                await c.ActivateLicenseAsync("KEY-GOOD-0001", Hwid);
                Assert.True(Math.Abs((c.GraceUntil.Value - DateTimeOffset.UtcNow.AddHours(1)).TotalSeconds) < 5, "an hour");
                Assert.True(c.GraceActive(), "active");
                var before = c.GraceUntil;
                s.GraceSeconds = 30 * 86400;
                s.Intercept = (req, ep) => ep == "license" ? Fake.Answer(req, 200, "{\"success\":true,\"level\":3,\"grace_until\":\"2099-01-01T00:00:00.000Z\"}",
                    new Fake.AnswerOptions { SignSeed = Fake.OtherSeed }) : null;
                Assert.Verification(await Assert.Fails(() => c.ActivateLicenseAsync("KEY-GOOD-0001", Hwid)), VerificationReason.BadSignature);
                Assert.Equal(before, c.GraceUntil, "unverified: nothing");
                s.Intercept = (req, ep) => ep == "license" ? Fake.Answer(req, 429, "{\"detail\":\"Rate limit exceeded\"}") : null;
                Assert.Equal(KeywardenErrorCode.RateLimited, (await Assert.Fails(() => c.ActivateLicenseAsync("KEY-GOOD-0001", Hwid))).Code);
                Assert.True(c.GraceActive(), "429 says 'not now', not 'no'");
                s.Intercept = null;
                Assert.Equal(KeywardenErrorCode.InvalidKey, (await Assert.Fails(() => c.ActivateLicenseAsync("KEY-UNKNOWN", Hwid))).Code);
                Assert.True(c.GraceUntil == null && !c.GraceActive(), "a refusal ends it");
                s.GraceSeconds = null;
                await c.ActivateLicenseAsync("KEY-GOOD-0001", Hwid);
                Assert.True(c.GraceUntil == null, "an answer without grace_until grants none");
            }));

            r.Unit("models: an unsigned gateway 502/503/504 is the service unreachable, an unsigned 500 an attack", () => InDir(async dir =>
            {
                var s = new ModelsServer();
                var c = Client(s, dir);
                await c.InitAsync();
                foreach (var status in new[] { 502, 503, 504 })
                {
                    s.Intercept = (req, ep) => new TransportResponse(status, new Dictionary<string, string> { { "Content-Type", "text/html" } }, Encoding.UTF8.GetBytes("<html>bad gateway</html>"));
                    var e = await Assert.Fails(() => c.ActivateLicenseAsync("KEY-GOOD-0001", Hwid));
                    Assert.Equal(KeywardenErrorCode.Server, e.Code);
                    Assert.Equal(status, e.Status.Value);
                }
                s.Intercept = (req, ep) => new TransportResponse(500, new Dictionary<string, string>(), Encoding.UTF8.GetBytes("oops"));
                Assert.Verification(await Assert.Fails(() => c.ActivateLicenseAsync("KEY-GOOD-0001", Hwid)), VerificationReason.Unsigned);
            }));

            r.Unit("models heartbeat: unreachable within the grace is Offline until a beat verifies", () => InDir(async dir =>
            {
                var s = new ModelsServer { GraceSeconds = 3600 };
                var c = await Activated(s, dir);
                var hb = c.CreateHeartbeat("system-0001", HeartbeatFixture.Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(20), o => o.Channel = HeartbeatChannelMode.Off));
                var ev = new HeartbeatEvents(hb);
                var offline = new EventLog<HeartbeatOfflineEventArgs>();
                hb.Offline += (x, e) => offline.Add(e);
                await hb.StartAsync();
                await ev.Beats.Wait(1, Wait, "beat");
                s.Outage = true;
                var o1 = (await offline.Wait(1, Wait, "offline"))[0];
                Assert.Equal(KeywardenErrorCode.Network, o1.Error.Code);
                Assert.True(Math.Abs((o1.GraceUntil - DateTimeOffset.UtcNow.AddHours(1)).TotalSeconds) < 10, "an hour");
                Assert.Equal(HeartbeatState.Offline, hb.State);
                Assert.True(c.GraceActive(), "valid");
                var n = (await ev.Degraded.Wait(3, Wait, "degraded")).Count;
                Assert.Equal(1, offline.Items.Count, "told once per outage");
                var beats = ev.Beats.Items.Count;
                s.Outage = false;
                await ev.Beats.Wait(beats + 1, Wait, "beat");
                Assert.Equal(HeartbeatState.Healthy, hb.State);
                await hb.StopAsync();
            }));

            r.Unit("models heartbeat: the grace runs out while unreachable: GraceExpired once, state Degraded", () => InDir(async dir =>
            {
                var shift = TimeSpan.Zero;
                var s = new ModelsServer { GraceSeconds = 60 };
                var c = await Activated(s, dir, o => o.Clock = () => DateTimeOffset.UtcNow + shift);
                var hb = c.CreateHeartbeat("system-0001", HeartbeatFixture.Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(20), o => o.Channel = HeartbeatChannelMode.Off));
                var ev = new HeartbeatEvents(hb);
                var offline = new EventLog<HeartbeatOfflineEventArgs>();
                var expired = new EventLog<HeartbeatGraceExpiredEventArgs>();
                hb.Offline += (x, e) => offline.Add(e);
                hb.GraceExpired += (x, e) => expired.Add(e);
                await hb.StartAsync();
                s.Outage = true;
                await offline.Wait(1, Wait, "offline");
                shift = TimeSpan.FromSeconds(120);
                var g = (await expired.Wait(1, Wait, "grace_expired"))[0];
                Assert.Equal(c.GraceUntil.Value, g.GraceUntil);
                var seen = ev.Degraded.Items.Count;
                await ev.Degraded.Wait(seen + 3, Wait, "degraded");
                Assert.Equal(1, expired.Items.Count, "told once");
                Assert.True(!c.GraceActive(), "over");
                Assert.Equal(HeartbeatState.Degraded, hb.State);
                await hb.StopAsync();
            }));

            r.Unit("models heartbeat: State leaves Offline the moment GraceUntil passes, before any beat fails", () => InDir(async dir =>
            {
                var shift = TimeSpan.Zero;
                var s = new ModelsServer { GraceSeconds = 60 };
                var c = await Activated(s, dir, o => o.Clock = () => DateTimeOffset.UtcNow + shift);
                var hb = c.CreateHeartbeat("system-0001", HeartbeatFixture.Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(20), o => o.Channel = HeartbeatChannelMode.Off));
                var seen = new List<HeartbeatState>();
                var offline = new EventLog<HeartbeatOfflineEventArgs>();
                hb.Offline += (x, e) =>
                {
                    // On the loop, inside the failed beat: no other beat can run meanwhile.
                    seen.Add(hb.State);
                    shift = TimeSpan.FromSeconds(61);
                    seen.Add(hb.State);
                };
                hb.Offline += (x, e) => offline.Add(e);
                await hb.StartAsync();
                s.Outage = true;
                await offline.Wait(1, Wait, "offline");
                Assert.Equal("Offline,Degraded", string.Join(",", seen));
                Assert.True(!c.GraceActive(), "over");
                await hb.StopAsync();
            }));

            r.Unit("models expiry: a beat refused after the known expiry is Expired (Killed with code Expired), on time over REST, no grace", () => InDir(async dir =>
            {
                var s = new ModelsServer { GraceSeconds = 3600, EnforceExpiry = true };
                s.ExpiresAt = ModelsServer.Iso(DateTimeOffset.UtcNow.AddMilliseconds(300));
                var c = await Activated(s, dir);
                Assert.Equal(s.ExpiresAt, ModelsServer.Iso(c.ExpiresAt.Value));
                // A beat a minute: only the beat just after the expiry can tell it within seconds.
                var hb = c.CreateHeartbeat("system-0001", HeartbeatFixture.Code, HeartbeatFixture.Options(TimeSpan.FromSeconds(60), o => o.Channel = HeartbeatChannelMode.Off));
                var ev = new HeartbeatEvents(hb);
                await hb.StartAsync();
                var x = (await ev.Expired.Wait(1, Wait, "expired"))[0];
                var late = DateTimeOffset.UtcNow - c.ExpiresAt.Value;
                Assert.Equal(c.ExpiresAt, x.ExpiresAt);
                Assert.True(late >= TimeSpan.Zero && late < TimeSpan.FromMilliseconds(2500), "told " + late.TotalMilliseconds + " ms after the expiry");
                Assert.Equal(KeywardenErrorCode.Expired, (await ev.Killed.Wait(1, Wait, "killed"))[0].Error.Code);
                Assert.Equal(HeartbeatState.Expired, hb.State);
                Assert.True(!hb.Running, "ended");
                Assert.True(c.GraceUntil == null, "no grace after an expiry");
                Assert.Equal(0, ev.Beats.Items.Count);
                Assert.Equal(0, ev.Revoked.Items.Count);
            }));

            r.Unit("models expiry: no answer after the known expiry is Expired too (the grace never covers an expiry)", () => InDir(async dir =>
            {
                var s = new ModelsServer { GraceSeconds = 3600 };
                s.ExpiresAt = ModelsServer.Iso(DateTimeOffset.UtcNow.AddMilliseconds(300));
                var c = await Activated(s, dir);
                var hb = c.CreateHeartbeat("system-0001", HeartbeatFixture.Code, HeartbeatFixture.Options(TimeSpan.FromSeconds(60), o => o.Channel = HeartbeatChannelMode.Off));
                var ev = new HeartbeatEvents(hb);
                await hb.StartAsync();
                s.Outage = true;
                Assert.Equal(KeywardenErrorCode.Expired, (await ev.Killed.Wait(1, Wait, "killed"))[0].Error.Code);
                Assert.Equal(HeartbeatState.Expired, hb.State);
                Assert.True(!c.GraceActive(), "no grace");
            }));

            r.Unit("models expiry: a refusal long before the known expiry is a plain kill; beats accepted well after it go on", () => InDir(async dir =>
            {
                var s = new ModelsServer();
                var c = await Activated(s, dir);
                var hb = c.CreateHeartbeat("system-0001", HeartbeatFixture.Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(20), o => o.Channel = HeartbeatChannelMode.Off));
                var ev = new HeartbeatEvents(hb);
                await hb.StartAsync();
                await ev.Beats.Wait(1, Wait, "beat");
                s.Intercept = (req, ep) => ep == "heartbeat" ? Fake.Answer(req, 403, "{\"detail\":\"rejected\"}") : null;
                Assert.Equal(KeywardenErrorCode.HeartbeatKilled, (await ev.Killed.Wait(1, Wait, "killed"))[0].Error.Code);
                Assert.Equal(HeartbeatState.Killed, hb.State);
                Assert.Equal(0, ev.Expired.Items.Count);

                var e = new ModelsServer();
                e.ExpiresAt = ModelsServer.Iso(DateTimeOffset.UtcNow.AddMilliseconds(200));
                var c2 = await Activated(e, dir);
                var hb2 = c2.CreateHeartbeat("system-0002", HeartbeatFixture.Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(400), o => o.Channel = HeartbeatChannelMode.Off));
                var ev2 = new HeartbeatEvents(hb2);
                await hb2.StartAsync();
                var deadline = DateTimeOffset.UtcNow.AddSeconds(10);
                while (c2.ExpiresAt != null && DateTimeOffset.UtcNow < deadline)
                    await ev2.Beats.Wait(ev2.Beats.Items.Count + 1, Wait, "beat");
                Assert.True(c2.ExpiresAt == null, "the known expiry is forgotten once beats are accepted well after it");
                await ev2.Beats.Wait(ev2.Beats.Items.Count + 1, Wait, "beat");
                Assert.Equal(HeartbeatState.Healthy, hb2.State);
                Assert.Equal(0, ev2.Expired.Items.Count);
                await hb2.StopAsync();
            }));

            r.Unit("models heartbeat: without grace unreachable is only Degraded; a bad proof extends nothing; a refusal ends the grace", () => InDir(async dir =>
            {
                var s = new ModelsServer();
                var c = await Activated(s, dir);
                var hb = c.CreateHeartbeat("system-0001", HeartbeatFixture.Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(20), o => o.Channel = HeartbeatChannelMode.Off));
                var ev = new HeartbeatEvents(hb);
                var offline = new EventLog<HeartbeatOfflineEventArgs>();
                hb.Offline += (x, e) => offline.Add(e);
                await hb.StartAsync();
                s.Outage = true;
                await ev.Degraded.Wait(3, Wait, "degraded");
                Assert.Equal(HeartbeatState.Degraded, hb.State);
                Assert.Equal(0, offline.Items.Count, "no grace, no offline");
                await hb.StopAsync();

                var g = new ModelsServer { GraceSeconds = 60 };
                var c2 = await Activated(g, dir);
                var hb2 = c2.CreateHeartbeat("system-0002", HeartbeatFixture.Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(20), o => o.Channel = HeartbeatChannelMode.Off));
                var ev2 = new HeartbeatEvents(hb2);
                await hb2.StartAsync();
                var started = c2.GraceUntil;
                g.GraceSeconds = 30 * 86400;
                g.Intercept = (req, ep) => ep == "heartbeat"
                    ? Fake.Answer(req, 200, "{\"success\":true,\"new_token\":\"TT" + new string('e', 32) + "\",\"beat_count\":1,\"proof\":\"bm9wZQ==\",\"grace_until\":\"2099-01-01T00:00:00.000Z\"}")
                    : null;
                var d = await ev2.Degraded.Wait(2, Wait, "degraded");
                Assert.Verification(d[1].Error, VerificationReason.BadProof);
                Assert.Equal(started, c2.GraceUntil, "only verified answers move it");
                g.Intercept = (req, ep) => ep == "heartbeat" ? Fake.Answer(req, 403, "{\"detail\":\"rejected\"}") : null;
                await ev2.Killed.Wait(1, Wait, "killed");
                Assert.True(c2.GraceUntil == null, "a verified refusal ends it");
            }));
        }
    }
}
