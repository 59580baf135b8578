// docs/protocol.md 12 (licensing models) end to end against real servers prepared by test/helpers/sdk-harness.ts
// and test/helpers/models-harness.ts: a trial once per device, an offline license file from the server
// checked without it, and the grace period across a real restart of the server, inside the window and
// past it. Pending server side: while the server answers 404 for /api/client/trial these tests are
// skipped ("licensing models pending"); KW_REQUIRE_MODELS=1 makes that a failure.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Net.Http;
using System.Text;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal static class IntegrationModelsTests
    {
        private static readonly TimeSpan Wait = TimeSpan.FromSeconds(60);
        private const string Code = HeartbeatFixture.Code;
        private static string _pending; // null: not probed yet; "": the server has the models
        private static int _keys;

        /// <summary>Skips while the server has no licensing models (fails with KW_REQUIRE_MODELS=1).</summary>
        private static async Task RequireModels()
        {
            if (_pending == null)
            {
                using (var http = new HttpClient())
                {
                    // From its own address (X-Forwarded-For; the harness trusts 127.0.0.1): trial shares license's rate-limit bucket.
                    var probe = new HttpRequestMessage(HttpMethod.Post, IntegrationTests.Env("KW_BASE_URL") + "/api/client/trial")
                    {
                        Content = new StringContent("{}", Encoding.UTF8, "application/json"),
                    };
                    probe.Headers.Add("X-Forwarded-For", Environment.GetEnvironmentVariable("KW_MODELS_PROBE_ADDRESS") ?? "198.51.100.212");
                    var res = await http.SendAsync(probe);
                    _pending = (int)res.StatusCode == 404 ? "licensing models pending: the server answers 404 for /api/client/trial" : "";
                }
            }
            if (_pending.Length > 0)
            {
                if (Environment.GetEnvironmentVariable("KW_REQUIRE_MODELS") == "1") throw new AssertionException("KW_REQUIRE_MODELS=1 but " + _pending);
                throw new SkipException(_pending);
            }
            var broken = Environment.GetEnvironmentVariable("KW_MODELS_ERROR");
            if (!string.IsNullOrEmpty(broken)) throw new AssertionException("the harness could not prepare app MODELS: " + broken);
        }

        private static string ModelsKey()
        {
            var keys = IntegrationTests.Env("KW_KEYS_MODELS").Split(',');
            return keys[System.Threading.Interlocked.Increment(ref _keys) - 1];
        }

        private static long Setting(string name)
        {
            return (long)((IDictionary<string, object>)Json.Parse(IntegrationTests.Env("KW_MODELS_SETTINGS")))[name];
        }

        private static string Hwid(string what)
        {
            return "sdk-cs-" + what + "-" + Guid.NewGuid().ToString("N").Substring(0, 12);
        }

        private static KeywardenClient Models(string dir, Action<KeywardenOptions> tweak = null)
        {
            var o = new KeywardenOptions { Timeout = TimeSpan.FromSeconds(10), StateFile = Path.Combine(dir, "state-" + Guid.NewGuid().ToString("N") + ".json") };
            if (tweak != null) tweak(o);
            return KeywardenClient.FromConfig(IntegrationTests.Env("KW_CONFIG_MODELS"), o);
        }

        private static async Task Control(string action, string body = "{}")
        {
            using (var http = new HttpClient { Timeout = TimeSpan.FromSeconds(120) })
            {
                var res = await http.PostAsync(IntegrationTests.Env("KW_MODELS_CONTROL_URL") + "/" + action, new StringContent(body, Encoding.UTF8, "application/json"));
                Assert.Equal(200, (int)res.StatusCode, "models control " + action + ": " + await res.Content.ReadAsStringAsync());
            }
        }

        private static async Task InDir(Func<string, Task> body)
        {
            await RequireModels();
            var d = Path.Combine(Path.GetTempPath(), "kw-cs-models-it-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(d);
            try { await body(d); }
            finally { Directory.Delete(d, true); }
        }

        public static void Register(Registry r)
        {
            r.Integration("models: a trial once per device; MODELS OFF offers none", () => InDir(async dir =>
            {
                var id = Hwid("trial");
                using (var c = Models(dir))
                {
                    await c.InitAsync();
                    var t = await c.TrialAsync(id);
                    Assert.True(System.Text.RegularExpressions.Regex.IsMatch(t.Key, "^TRIAL-[^-]{4}-[^-]{4}-[^-]{4}$"), "trial key " + t.Key);
                    Assert.Equal(Setting("trial_level"), t.Level);
                    Assert.True(Math.Abs((t.ExpiresAt.Value - c.ServerNow()).TotalHours - Setting("trial_hours")) < 0.05, "trial_hours");
                    Assert.Equal(0, t.Entitlements.Count);
                    var hb = c.CreateHeartbeat(id, Code, HeartbeatFixture.Options(TimeSpan.FromSeconds(1), o => o.Channel = HeartbeatChannelMode.Off));
                    await hb.StartAsync();
                    Assert.Equal(HeartbeatState.Healthy, hb.State);
                    await hb.StopAsync();
                }
                using (var again = Models(dir))
                {
                    await again.InitAsync();
                    var e = await Assert.Fails(() => again.TrialAsync(id.ToUpperInvariant()));
                    Assert.Equal(KeywardenErrorCode.TrialUsed, e.Code);
                    Assert.Equal(403, e.Status);
                    Assert.True((await again.TrialAsync(id + "-b")).Key.StartsWith("TRIAL-", StringComparison.Ordinal), "another device");
                }
                using (var off = IntegrationTests.Client("MODELS_OFF"))
                {
                    await off.InitAsync();
                    Assert.Equal(KeywardenErrorCode.TrialDisabled, (await Assert.Fails(() => off.TrialAsync(id))).Code);
                }
            }));

            r.Integration("models: an offline license file round trip, checked without the server", () => InDir(async dir =>
            {
                var id = Hwid("offline");
                using (var c = Models(dir))
                {
                    await c.InitAsync();
                    var lic = await c.ActivateLicenseAsync(ModelsKey(), id);
                    Assert.Equal("export,pro", string.Join(",", lic.Entitlements));
                    Assert.True(c.HasEntitlement("pro"), "pro");
                    var file = await c.OfflineFileAsync(id);
                    var offline = Models(dir, o => o.Transport = new ScriptedTransport((q, n, ct) => { throw new Exception("no call expected"); }));
                    var ol = offline.LoadOffline(file, id);
                    Assert.Equal(IntegrationTests.Env("KW_MODELS_APP_ID"), ol.AppId);
                    Assert.Equal(id, ol.Hwid);
                    Assert.Equal(3L, ol.Level);
                    Assert.Equal("export,pro", string.Join(",", ol.Entitlements));
                    Assert.True(Math.Abs((ol.ValidUntil - ol.IssuedAt).TotalDays - Setting("offline_days")) < 0.001, "offline_days");
                    Assert.True(offline.HasEntitlement("export"), "the file's entitlements");
                    Assert.Equal(OfflineReason.WrongHwid, Assert.FailsSync(() => offline.LoadOffline(file, id + "-other")).OfflineReason.Value);
                    var late = Models(dir, o => o.Clock = () => DateTimeOffset.UtcNow.AddDays(8));
                    Assert.Equal(OfflineReason.Expired, Assert.FailsSync(() => late.LoadOffline(file, id)).OfflineReason.Value);
                    Assert.Equal(KeywardenErrorCode.HwidMismatch, (await Assert.Fails(() => c.OfflineFileAsync(id + "-other"))).Code);
                }
                // MODELS OFF issues none (docs/protocol.md 12.5 lists "off" before "session not activated").
                using (var off = IntegrationTests.Client("MODELS_OFF"))
                {
                    await off.InitAsync();
                    Assert.Equal(KeywardenErrorCode.OfflineDisabled, (await Assert.Fails(() => off.OfflineFileAsync(id))).Code);
                }
            }));

            r.Integration("models: grace across a real server restart, inside the window and past it; a ban ends it", () => InDir(async dir =>
            {
                var id = Hwid("grace");
                var shift = TimeSpan.Zero;
                var key = ModelsKey();
                using (var c = Models(dir, o => o.Clock = () => DateTimeOffset.UtcNow + shift))
                {
                    await c.InitAsync();
                    await c.ActivateLicenseAsync(key, id);
                    var grace = TimeSpan.FromHours(Setting("grace_hours"));
                    Assert.True(Math.Abs((c.GraceUntil.Value - c.ServerNow() - grace).TotalSeconds) < 120, "grace_until = now + grace_hours");
                    var hb = c.CreateHeartbeat(id, Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(500), o => o.Reauthenticate = true));
                    var ev = new HeartbeatEvents(hb);
                    var offline = new EventLog<HeartbeatOfflineEventArgs>();
                    var expired = new EventLog<HeartbeatGraceExpiredEventArgs>();
                    hb.Offline += (x, e) => offline.Add(e);
                    hb.GraceExpired += (x, e) => expired.Add(e);
                    await hb.StartAsync();
                    try
                    {
                        await ev.Beats.Wait(1, Wait, "beat");
                        // Inside the window: down and back; the license stays valid throughout.
                        await Control("down");
                        await offline.Wait(1, Wait, "offline");
                        Assert.Equal(HeartbeatState.Offline, hb.State);
                        Assert.True(c.GraceActive(), "valid while down");
                        var n = ev.Beats.Items.Count;
                        await Control("up");
                        await ev.Beats.Wait(n + 1, Wait, "beat after the restart");
                        Assert.Equal(HeartbeatState.Healthy, hb.State);
                        Assert.True(c.GraceActive(), "valid after");
                        // Past the window: down again, and the clock passes grace_until before the server is back.
                        await Control("down");
                        await offline.Wait(2, Wait, "offline again");
                        shift = grace + TimeSpan.FromHours(1);
                        var g = (await expired.Wait(1, Wait, "grace_expired"))[0];
                        Assert.Equal(c.GraceUntil.Value, g.GraceUntil);
                        Assert.True(!c.GraceActive(), "over");
                        Assert.Equal(HeartbeatState.Degraded, hb.State);
                        shift = TimeSpan.Zero;
                        n = ev.Beats.Items.Count;
                        await Control("up");
                        await ev.Beats.Wait(n + 1, Wait, "beat after the second restart");
                        Assert.True(c.GraceActive(), "the first verified beat grants a new grace period");
                        // A verified refusal ends the grace at once.
                        await Control("ban", "{\"key\":\"" + key + "\"}");
                        await ev.Killed.Wait(1, Wait, "killed");
                        Assert.True(c.GraceUntil == null, "ended");
                    }
                    finally
                    {
                        shift = TimeSpan.Zero;
                        await Control("up");
                        await hb.StopAsync();
                    }
                }
            }));
        }
    }
}
