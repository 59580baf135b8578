// The realtime channel against a real server (test/sdk/csharp.test.ts runs these with the SDK
// harness): beats on the channel, a dashboard ban pushed to the running heartbeat, and every refusal
// of test/helpers/channel-tamper-proxy.ts (KW_CHANNEL_TAMPER_URLS: forged hello, forged, reordered
// and injected frames, no channel, a dropped connection), each answered by beating on over REST.
// Each proxy has its own client address at the server, so these spend none of 127.0.0.1's budget.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Net.Http;
using System.Text;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    /// <summary>The dashboard API as the harness's owner.</summary>
    internal static class Owner
    {
        public static async Task<object> Call(string method, string path, object body = null)
        {
            using (var http = new HttpClient())
            {
                var req = new HttpRequestMessage(new HttpMethod(method), IntegrationTests.Env("KW_BASE_URL") + path);
                req.Headers.TryAddWithoutValidation("Authorization", "Bearer " + IntegrationTests.Env("KW_OWNER_TOKEN"));
                if (body != null) req.Content = new StringContent(Json.Serialize(body), Encoding.UTF8, "application/json");
                var res = await http.SendAsync(req);
                var text = await res.Content.ReadAsStringAsync();
                Assert.True((int)res.StatusCode == 200, method + " " + path + ": " + (int)res.StatusCode + " " + text);
                return text.Length > 0 ? Json.Parse(text) : null;
            }
        }

        public static string AppId(string label)
        {
            return (string)((IDictionary<string, object>)Json.Parse(IntegrationTests.Env("KW_APP_IDS")))[label];
        }

        public static async Task Ban(string label, string key)
        {
            var found = (IDictionary<string, object>)await Call("GET", "/api/apps/" + AppId(label) + "/licenses?q=" + Uri.EscapeDataString(key.Substring(key.Length - 4)));
            var preview = key.Substring(0, 4) + "****" + key.Substring(key.Length - 4);
            var row = ((IList<object>)found["items"]).Cast<IDictionary<string, object>>().First(l => (string)l["key_preview"] == preview);
            await Call("PATCH", "/api/licenses/" + (string)row["id"] + "/ban", new Dictionary<string, object> { { "banned", true } });
        }

        public static Task Notice(string label, string message)
        {
            return Call("POST", "/api/apps/" + AppId(label) + "/notice", new Dictionary<string, object> { { "message", message } });
        }
    }

    internal static class ChannelIntegrationTests
    {
        private static readonly TimeSpan Wait = TimeSpan.FromSeconds(20);
        private const string HwidA = "sdk-cs-hwid-aaaaaaaa";
        private const string HwidB = "sdk-cs-hwid-bbbbbbbb";
        private const string Code = HeartbeatFixture.Code;

        private static string ProxyUrl(string mode)
        {
            var urls = (IDictionary<string, object>)Json.Parse(IntegrationTests.Env("KW_CHANNEL_TAMPER_URLS"));
            return (string)urls[mode];
        }

        /// <summary>An activated PLAIN client through the channel proxy of `mode`.</summary>
        private static async Task<KeywardenClient> Through(string mode, string key, string hwid = HwidA)
        {
            var c = IntegrationTests.Client("PLAIN", o => o.BaseUrl = ProxyUrl(mode));
            await c.InitAsync();
            await c.ActivateLicenseAsync(key, hwid);
            return c;
        }

        private static HeartbeatOptions Slow()
        {
            // Nothing but pushes and refusals happen on the channel meanwhile.
            return HeartbeatFixture.Options(TimeSpan.FromSeconds(60));
        }

        /// <summary>The nth channel event in `state`, awaited.</summary>
        private static async Task<HeartbeatChannelEventArgs> ChannelState(HeartbeatEvents ev, string state, int nth = 1)
        {
            while (true)
            {
                var all = ev.Channel.Items;
                var hits = all.Where(e => e.State == state).ToList();
                if (hits.Count >= nth) return hits[nth - 1];
                await ev.Channel.Wait(all.Count + 1, Wait, "channel " + state);
            }
        }

        public static void Register(Registry r)
        {
            r.Integration("channel: beats on the channel; a dashboard ban reaches the running heartbeat as Revoked within a second, then Killed", async () =>
            {
                var k = IntegrationTests.Key("PLAIN");
                using (var c = await Through("pass", k))
                {
                    var hb = c.CreateHeartbeat("sdk-cs-channel-01", Code, IntegrationTests.Fast());
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    Assert.True(hb.OnChannel, "on the channel");
                    Assert.Equal("open", (await ev.Channel.Wait(1, Wait, "channel"))[0].State);
                    Assert.Equal("1,2", string.Join(",", (await ev.Beats.Wait(2, Wait, "beat")).Take(2).Select(b => b.Index)));
                    var watch = Stopwatch.StartNew();
                    await Owner.Ban("PLAIN", k);
                    var revoked = (await ev.Revoked.Wait(1, Wait, "revoked"))[0];
                    var ms = watch.ElapsedMilliseconds;
                    Assert.Equal("license_banned", revoked.Reason);
                    Assert.True(ms < 1000, "revoked " + ms + " ms after the ban");
                    Assert.Equal(KeywardenErrorCode.HeartbeatKilled, (await ev.Killed.Wait(1, Wait, "killed"))[0].Error.Code);
                    Assert.Equal(HeartbeatState.Revoked, hb.State);
                    Assert.True(!hb.Running, "ended");
                    Assert.Equal(0, ev.Degraded.Items.Count, "no degraded beat");
                }
            });

            r.Integration("channel: a hello with a forged signature is refused (bad_signature); the beats go on over REST", async () =>
            {
                using (var c = await Through("hello", IntegrationTests.Key("PLAIN")))
                {
                    var hb = c.CreateHeartbeat("sdk-cs-channel-02", Code, IntegrationTests.Fast());
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var closed = await ChannelState(ev, "closed");
                    Assert.Verification(closed.Error, VerificationReason.BadSignature);
                    Assert.Equal("1,2", string.Join(",", (await ev.Beats.Wait(2, Wait, "beat")).Take(2).Select(b => b.Index)));
                    await hb.StopAsync();
                }
            });

            foreach (var pair in new[] { new[] { "forge", "bad_mac", "1" }, new[] { "swap", "out_of_order", "2" } })
            {
                var mode = pair[0];
                var reason = pair[1];
                var notices = int.Parse(pair[2]);
                r.Integration("channel: " + mode + ": a pushed frame that does not verify is refused (" + reason + "), never acted on", async () =>
                {
                    using (var c = await Through(mode, IntegrationTests.Key("PLAIN")))
                    {
                        var hb = c.CreateHeartbeat("sdk-cs-channel-03", Code, Slow());
                        var ev = new HeartbeatEvents(hb);
                        await hb.StartAsync();
                        Assert.True(hb.OnChannel, "on the channel");
                        for (var i = 0; i < notices; i++) await Owner.Notice("PLAIN", "tampered " + i);
                        var closed = await ChannelState(ev, "closed");
                        Assert.Verification(closed.Error, reason == "bad_mac" ? VerificationReason.BadMac : VerificationReason.OutOfOrder);
                        await ChannelState(ev, "open", 2); // reopened: a new connection, not tampered
                        Assert.Equal(0, ev.Notices.Items.Count, "nothing acted on");
                        await hb.StopAsync();
                    }
                });
            }

            r.Integration("channel: inject: a frame recorded on another connection is refused (bad_mac)", async () =>
            {
                using (var first = await Through("inject", IntegrationTests.Key("PLAIN")))
                using (var other = await Through("inject", IntegrationTests.Key("PLAIN"), HwidB))
                {
                    var a = first.CreateHeartbeat("sdk-cs-channel-04", Code, Slow());
                    var aev = new HeartbeatEvents(a);
                    await a.StartAsync();
                    await Owner.Notice("PLAIN", "recorded");
                    Assert.Equal("recorded", (await aev.Notices.Wait(1, Wait, "notice"))[0].Message);
                    var hb = other.CreateHeartbeat("sdk-cs-channel-05", Code, IntegrationTests.Fast());
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    await ev.Beats.Wait(2, Wait, "beat"); // started and beating over REST meanwhile
                    var refused = ev.Channel.Items.First(e => e.Error != null);
                    Assert.Verification(refused.Error, VerificationReason.BadMac);
                    Assert.Equal(0, ev.Notices.Items.Count, "the injected notice was not acted on");
                    await hb.StopAsync();
                    await a.StopAsync();
                }
            });

            r.Integration("channel: absent (404): beats over REST and does not ask again", async () =>
            {
                using (var c = await Through("absent", IntegrationTests.Key("PLAIN")))
                {
                    var hb = c.CreateHeartbeat("sdk-cs-channel-06", Code, IntegrationTests.Fast());
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    Assert.True(!hb.OnChannel, "REST");
                    // Six beats at 150 ms outlast the first reconnection delay (0.5 s +- 20%): none was made.
                    Assert.Equal("1,2,3,4,5,6", string.Join(",", (await ev.Beats.Wait(6, Wait, "beat")).Take(6).Select(b => b.Index)));
                    var states = ev.Channel.Items;
                    Assert.Equal("closed", string.Join(",", states.Select(e => e.State)), "one refused attempt, never opened");
                    Assert.NotNull(states[0].Error, "why it closed");
                    Assert.Equal(0, ev.Degraded.Items.Count, "no degraded beat");
                    await hb.StopAsync();
                }
            });

            r.Integration("channel: dropped: the beats go on over REST, then the channel comes back (same session)", async () =>
            {
                using (var c = await Through("drop", IntegrationTests.Key("PLAIN")))
                {
                    var hb = c.CreateHeartbeat("sdk-cs-channel-07", Code, IntegrationTests.Fast());
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var closed = await ChannelState(ev, "closed");
                    Assert.Equal((int?)1006, closed.CloseCode);
                    await ChannelState(ev, "open", 2); // reconnected: same session, no re-authentication
                    var n = ev.Beats.Items.Count;
                    var beats = await ev.Beats.Wait(n + 2, Wait, "beat");
                    Assert.True(beats.All(b => b.Count == b.Index), "one token chain on both transports");
                    Assert.Equal(0, ev.Degraded.Items.Count, "no degraded beat");
                    Assert.Equal(0, ev.Recovered.Items.Count, "no re-authentication");
                    await hb.StopAsync();
                }
            });
        }
    }
}
