// What the heartbeat tells the program when it cannot verify, and how it lives through an outage,
// against a real server: every beat answer tampered (KW_TAMPER_URLS.bad_beat_proof) and an outage
// played by KW_OUTAGE_URL (connections refused for a while; meanwhile the server forgets the
// heartbeat session, or the key is banned).
using System;
using System.Collections.Generic;
using System.Linq;
using System.Net.Http;
using System.Text;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal static class ResilienceTests
    {
        private static readonly TimeSpan Wait = TimeSpan.FromSeconds(30);
        private const string HwidA = "sdk-cs-hwid-aaaaaaaa";
        private const string Code = HeartbeatFixture.Code;

        /// <summary>Connections to KW_OUTAGE_URL are refused for `ms`; the server forgets the sessions (and bans `ban`).</summary>
        private static async Task Outage(int ms, string ban = null)
        {
            var body = new Dictionary<string, object> { { "ms", ms } };
            if (ban != null) body["ban"] = ban;
            using (var http = new HttpClient())
            {
                var res = await http.PostAsync(IntegrationTests.Env("KW_OUTAGE_URL") + "/__outage", new StringContent(Json.Serialize(body), Encoding.UTF8, "application/json"));
                Assert.Equal(200, (int)res.StatusCode, "outage");
            }
        }

        public static void Register(Registry r)
        {
            r.Integration("resilience: every beat answer tampered -> Degraded with LastBeatAt, Compromised after 5, no endless re-auth", async () =>
            {
                using (var c = IntegrationTests.Client("PLAIN", o => o.BaseUrl = IntegrationTests.TamperUrl("bad_beat_proof")))
                {
                    await c.InitAsync();
                    await c.ActivateLicenseAsync(IntegrationTests.Key("PLAIN"), HwidA);
                    var hb = c.CreateHeartbeat("sdk-cs-compromised", Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(50), o => o.Reauthenticate = true));
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var started = hb.LastBeatAt;
                    var got = (await ev.Compromised.Wait(1, Wait, "compromised"))[0];
                    Assert.Equal(5, got.Failures);
                    Assert.Verification(got.Error, VerificationReason.BadProof);
                    Assert.Equal(started, got.LastBeatAt);
                    var d = ev.Degraded.Items.Take(5).ToList();
                    Assert.Equal("1,2,3,4,5", string.Join(",", d.Select(x => x.VerificationFailures)));
                    Assert.Equal("True,True,True,True,False", string.Join(",", d.Select(x => x.Reauthenticating)));
                    Assert.True(d.All(x => x.LastBeatAt == started), "no beat verified since the start");
                    // No more re-authentication: the next beat carries the old token and the server refuses it.
                    Assert.Equal(KeywardenErrorCode.HeartbeatKilled, (await ev.Killed.Wait(1, Wait, "killed"))[0].Error.Code);
                    Assert.Equal(4, ev.Recovered.Items.Count);
                    Assert.Equal(HeartbeatState.Killed, hb.State);
                }
            });

            r.Integration("resilience: an outage, then a server that forgot the session -> one re-authentication, and it beats on", async () =>
            {
                using (var c = IntegrationTests.Client("PLAIN", o => o.BaseUrl = IntegrationTests.Env("KW_OUTAGE_URL")))
                {
                    await c.InitAsync();
                    await c.ActivateLicenseAsync(IntegrationTests.Key("PLAIN"), HwidA);
                    var hb = c.CreateHeartbeat("sdk-cs-outage-01", Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(200), o => o.Reauthenticate = true));
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    await ev.Beats.Wait(1, Wait, "beat");
                    var last = hb.LastBeatAt;
                    await Outage(1500);
                    var after = (await ev.Beats.Wait(2, Wait, "beat"))[1];
                    Assert.Equal("1/1", after.Index + "/" + after.Count, "the first beat of a new session");
                    Assert.Equal(1, ev.Recovered.Items.Count);
                    Assert.Equal(0, ev.Killed.Items.Count);
                    var first = ev.Degraded.Items.First();
                    Assert.True(!first.Lost && first.Error.Code == KeywardenErrorCode.Network && first.Error.NotSent, "unreachable, nothing sent: " + first.Error.Message);
                    Assert.Equal(last, first.LastBeatAt);
                    var final = ev.Degraded.Items.Last();
                    Assert.True(final.Lost && final.Error.Code == KeywardenErrorCode.HeartbeatKilled && final.Error.Status == 403, "then rejected: " + final.Error.Message);
                    Assert.Equal(HeartbeatState.Healthy, hb.State);
                    await hb.StopAsync();
                }
            });

            r.Integration("resilience: an outage during which the key was banned -> the re-authentication fails with Banned, once", async () =>
            {
                var k = IntegrationTests.Key("PLAIN");
                using (var c = IntegrationTests.Client("PLAIN", o => o.BaseUrl = IntegrationTests.Env("KW_OUTAGE_URL")))
                {
                    await c.InitAsync();
                    await c.ActivateLicenseAsync(k, HwidA);
                    var hb = c.CreateHeartbeat("sdk-cs-outage-02", Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(200), o => o.Reauthenticate = true));
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    await ev.Beats.Wait(1, Wait, "beat");
                    await Outage(1500, k);
                    var e = (await ev.Killed.Wait(1, Wait, "killed"))[0].Error;
                    Assert.Equal(KeywardenErrorCode.Banned, e.Code, e.Message);
                    Assert.Equal((int?)403, e.Status);
                    Assert.Equal("License key is banned", e.Detail as string);
                    Assert.Equal(0, ev.Recovered.Items.Count);
                    Assert.Equal(HeartbeatState.Killed, hb.State);
                }
            });
        }
    }
}
