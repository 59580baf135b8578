// Air-gapped machines end to end against the real server and real relay processes prepared by
// test/helpers/airgap-harness.ts: an activation request answered through the dashboard route and
// completed, an answer to an older request refused, and a seat leased from a relay, renewed (by hand
// and by its own timer), released, refused when every seat is taken, and refused when the relay serves
// a pool signed by another key.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Net.Http;
using System.Text;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal static partial class AirgapTests
    {
        private static int _nextKey;

        private static void RequireAirgap()
        {
            var broken = Environment.GetEnvironmentVariable("KW_AIRGAP_ERROR");
            if (!string.IsNullOrEmpty(broken)) throw new InvalidOperationException("the harness could not prepare the relays: " + broken);
            if (string.IsNullOrEmpty(Environment.GetEnvironmentVariable("KW_AIRGAP_RELAY_URL")))
            {
                if (Environment.GetEnvironmentVariable("KW_REQUIRE_AIRGAP") == "1")
                    throw new InvalidOperationException("KW_REQUIRE_AIRGAP=1 but the server has no offline-activations route");
                throw new SkipException("air-gapped pending: the server has no /api/apps/{id}/offline-activations");
            }
        }

        private static async Task<KeyValuePair<int, IDictionary<string, object>>> Http(HttpMethod method, string url, string body = null)
        {
            using (var http = new HttpClient { Timeout = TimeSpan.FromSeconds(60) })
            using (var req = new HttpRequestMessage(method, url))
            {
                if (url.Contains("/api/")) req.Headers.TryAddWithoutValidation("Authorization", "Bearer " + IntegrationTests.Env("KW_OWNER_TOKEN"));
                if (body != null) req.Content = new StringContent(body, Encoding.UTF8, "application/json");
                using (var res = await http.SendAsync(req))
                {
                    var text = await res.Content.ReadAsStringAsync();
                    return new KeyValuePair<int, IDictionary<string, object>>((int)res.StatusCode,
                        string.IsNullOrEmpty(text) ? null : Json.Parse(text) as IDictionary<string, object>);
                }
            }
        }

        /// <summary>The operator's side: the dashboard route answers the request.</summary>
        private static async Task<string> Answer(string request)
        {
            var r = await Http(HttpMethod.Post, IntegrationTests.Env("KW_BASE_URL") + "/api/apps/" + IntegrationTests.Env("KW_AIRGAP_APP_ID") + "/offline-activations",
                "{\"request\":" + Json.Serialize(request) + "}");
            if (r.Key != 200) throw new InvalidOperationException("offline-activations answered " + r.Key + " " + Json.Serialize(r.Value));
            return (string)r.Value["response"];
        }

        private static async Task<long> InUse()
        {
            return (long)(await Http(HttpMethod.Get, IntegrationTests.Env("KW_AIRGAP_RELAY_URL") + "/relay/v1/status")).Value["in_use"];
        }

        private static string Key()
        {
            var all = IntegrationTests.Env("KW_AIRGAP_KEYS").Split(',');
            var i = System.Threading.Interlocked.Increment(ref _nextKey) - 1;
            if (i >= all.Length) throw new InvalidOperationException("out of KW_AIRGAP_KEYS");
            return all[i];
        }

        private static readonly string Dir = Path.Combine(Path.GetTempPath(), "kw-cs-airgap-" + Guid.NewGuid().ToString("N").Substring(0, 12));

        private static KeywardenClient Client(string name, Func<DateTimeOffset> clock = null)
        {
            var o = new KeywardenOptions { StateFile = Path.Combine(Dir, name + ".json") };
            if (clock != null) o.Clock = clock;
            return KeywardenClient.FromConfig(IntegrationTests.Env("KW_AIRGAP_CONFIG"), o);
        }

        private static KeywardenException Refused(Action call)
        {
            return Assert.Throws<KeywardenException>(call);
        }

        static partial void RegisterIntegration(Registry r)
        {
            r.Integration("airgap: a request answered through the dashboard completes; a later start loads the answer", async () =>
            {
                RequireAirgap();
                var c = Client("req-a");
                const string hwid = "cs-airgap-machine-a";
                var req = c.ActivationRequest(Key(), hwid, new Dictionary<string, string> { { "cpu", "c1" }, { "disk", "d1" } });
                Assert.True(req.StartsWith("kwreq1.", StringComparison.Ordinal), "kwreq1.");
                Assert.True(File.Exists(c.RequestFile), "the nonce is kept on disk");
                var response = await Answer(req);
                var lic = c.CompleteActivation(response, hwid);
                Assert.Equal(IntegrationTests.Env("KW_AIRGAP_APP_ID"), lic.AppId);
                Assert.Equal(hwid, lic.Hwid);
                Assert.Equal(3L, lic.Level);
                Assert.Equal(lic.LicenseId, Client("req-a").LoadOffline(response, hwid).LicenseId, "a later start");
            });

            r.Integration("airgap: an answer to an older request is WrongRequest; another machine's is WrongHwid", async () =>
            {
                RequireAirgap();
                var c = Client("req-b");
                const string hwid = "cs-airgap-machine-b";
                var key = Key();
                var old = await Answer(c.ActivationRequest(key, hwid));
                c.ActivationRequest(key, hwid);
                var e = Refused(() => c.CompleteActivation(old, hwid));
                Assert.Equal(KeywardenErrorCode.OfflineInvalid, e.Code);
                Assert.Equal(OfflineReason.WrongRequest, e.OfflineReason.Value);
                var other = Client("req-b-other");
                var foreign = await Answer(other.ActivationRequest(Key(), "cs-airgap-other"));
                Assert.Equal(OfflineReason.WrongHwid, Refused(() => other.CompleteActivation(foreign, hwid)).OfflineReason.Value);
            });

            r.Integration("airgap: a seat is leased, renewed and released at the relay", async () =>
            {
                RequireAirgap();
                var c = Client("relay-a");
                var before = await InUse();
                var lease = await c.LeaseSeatAsync(IntegrationTests.Env("KW_AIRGAP_RELAY_URL"), "cs-relay-a");
                try
                {
                    Assert.True(lease.Active, "active");
                    Assert.Equal(IntegrationTests.Env("KW_AIRGAP_APP_ID"), lease.Pool.AppId);
                    Assert.Equal(long.Parse(IntegrationTests.Env("KW_AIRGAP_SEATS")), lease.Pool.Seats);
                    Assert.Equal(before + 1, await InUse());
                    var first = lease.ExpiresAt;
                    await Task.Delay(1100);
                    await lease.RenewAsync();
                    Assert.True(lease.ExpiresAt > first, "renewed");
                    Assert.Equal(1, lease.Renewals);
                }
                finally
                {
                    lease.Release();
                }
                Assert.True(!lease.Active, "released");
                Assert.Equal(before, await InUse());
            });

            r.Integration("airgap: the lease renews itself before it expires", async () =>
            {
                RequireAirgap();
                // The client's clock runs 14 min 50 s ahead: the 15-minute lease has 10 s left, renewed at half that.
                var c = Client("relay-b", () => DateTimeOffset.UtcNow.AddSeconds(890));
                using (var lease = await c.LeaseSeatAsync(IntegrationTests.Env("KW_AIRGAP_RELAY_URL"), "cs-relay-b"))
                {
                    for (var i = 0; i < 300 && lease.Renewals == 0; i++) await Task.Delay(200);
                    Assert.True(lease.Renewals >= 1, "renewed by its own timer");
                    Assert.True(lease.Lost == null, "not lost");
                }
            });

            r.Integration("airgap: every seat taken is SessionLimit until one is released", async () =>
            {
                RequireAirgap();
                var c = Client("relay-c");
                var url = IntegrationTests.Env("KW_AIRGAP_RELAY_URL");
                var held = new List<SeatLease>();
                try
                {
                    for (var i = 0; i < int.Parse(IntegrationTests.Env("KW_AIRGAP_SEATS")); i++) held.Add(await c.LeaseSeatAsync(url, "cs-relay-seat-" + i));
                    var e = Refused(() => c.LeaseSeat(url, "cs-relay-one-too-many"));
                    Assert.Equal(KeywardenErrorCode.SessionLimit, e.Code);
                    Assert.Equal((int?)409, e.Status);
                    held.Last().Release();
                    held.Add(await c.LeaseSeatAsync(url, "cs-relay-one-too-many"));
                }
                finally
                {
                    foreach (var l in held) l.Release();
                }
            });

            r.Integration("airgap: a relay serving a pool signed by another key is refused (BadSignature)", () =>
            {
                RequireAirgap();
                var c = Client("relay-d");
                var e = Refused(() => c.LeaseSeat(IntegrationTests.Env("KW_AIRGAP_FORGED_RELAY_URL"), "cs-relay-forged"));
                Assert.Equal(KeywardenErrorCode.OfflineInvalid, e.Code);
                Assert.Equal(OfflineReason.BadSignature, e.OfflineReason.Value);
                Assert.Equal(0, c.Entitlements.Count);
                return Task.FromResult(0);
            });
        }
    }
}
