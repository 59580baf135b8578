// sdk/vectors/airgap.json: activation requests this SDK writes, answers accepted only for the latest
// request's nonce, and seat pools accepted or refused for the reason each case names.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;

namespace Keywarden.Tests
{
    internal static partial class AirgapTests
    {
        private static DateTimeOffset At(object unixSeconds)
        {
            return DateTimeOffset.FromUnixTimeMilliseconds(Convert.ToInt64(unixSeconds, System.Globalization.CultureInfo.InvariantCulture) * 1000);
        }

        private static string Decode(string request)
        {
            Assert.True(request.StartsWith("kwreq1.", StringComparison.Ordinal) && request.IndexOf('=') < 0, "kwreq1. and no padding");
            var b = request.Substring(7).Replace('-', '+').Replace('_', '/');
            b += new string('=', (4 - b.Length % 4) % 4);
            return Canonical(Json.Parse(Encoding.UTF8.GetString(Convert.FromBase64String(b))));
        }

        /// <summary>JSON with object members sorted, so two serializations of one object compare equal.</summary>
        private static string Canonical(object v)
        {
            var o = v as IDictionary<string, object>;
            if (o == null) return Json.Serialize(v);
            return "{" + string.Join(",", o.OrderBy(kv => kv.Key, StringComparer.Ordinal).Select(kv => Json.Serialize(kv.Key) + ":" + Canonical(kv.Value))) + "}";
        }

        private static string Refusal(Action run)
        {
            try { run(); }
            catch (KeywardenException e)
            {
                Assert.Equal(KeywardenErrorCode.OfflineInvalid, e.Code);
                return ErrorTable.WireName(e.OfflineReason.Value);
            }
            return "ok";
        }

        private static void Reasons(IDictionary<string, object> part, HashSet<string> seen)
        {
            Assert.Equal(string.Join(",", ((IList<object>)part["reasons"]).Cast<string>().OrderBy(x => x, StringComparer.Ordinal)),
                string.Join(",", seen.OrderBy(x => x, StringComparer.Ordinal)), "every reason occurs");
        }

        public static void Register(Registry r)
        {
            r.Unit("vectors: activation requests carry exactly the fields of each case", () =>
            {
                foreach (var c in Vectors.Cases((IDictionary<string, object>)Vectors.Load("airgap")["requests"], "cases"))
                {
                    object comp;
                    c.TryGetValue("components", out comp);
                    var components = comp == null ? null : ((IDictionary<string, object>)comp).ToDictionary(kv => kv.Key, kv => (string)kv.Value);
                    var mine = Airgap.BuildRequest(Vectors.S(c, "app_id"), Vectors.S(c, "key"), Vectors.S(c, "hwid"), Vectors.S(c, "nonce"), Vectors.S(c, "created_at"), components);
                    Assert.Equal(Decode(Vectors.S(c, "request")), Decode(mine), Vectors.S(c, "name"));
                }
            });

            r.Unit("vectors: activation answers are accepted only for the latest request's nonce", () =>
            {
                var v = Vectors.Load("airgap");
                var keys = Vectors.Cases(v, "pinned_keys").Select(k => new ResponseKey(Vectors.S(k, "kid"), Vectors.S(k, "public_key"))).ToList();
                var part = (IDictionary<string, object>)v["responses"];
                var seen = new HashSet<string>();
                foreach (var c in Vectors.Cases(part, "cases"))
                {
                    var got = Refusal(() =>
                    {
                        OfflineLicenses.Verify(Vectors.S(c, "file"), keys, Vectors.S(c, "app_id"), Vectors.S(c, "hwid"), At(c["now"]),
                            c["last_seen"] == null ? (DateTimeOffset?)null : At(c["last_seen"]));
                        Airgap.CheckRequestNonce(Vectors.S(c, "file"), c["nonce"] as string);
                    });
                    Assert.Equal((bool)c["valid"] ? "ok" : Vectors.S(c, "reason"), got, Vectors.S(c, "name"));
                    if (!(bool)c["valid"]) seen.Add(got);
                }
                Reasons(part, seen);
            });

            r.Unit("vectors: seat pools are accepted or refused for the reason each case names", () =>
            {
                var v = Vectors.Load("airgap");
                var keys = Vectors.Cases(v, "pinned_keys").Select(k => new ResponseKey(Vectors.S(k, "kid"), Vectors.S(k, "public_key"))).ToList();
                var part = (IDictionary<string, object>)v["pools"];
                var seen = new HashSet<string>();
                foreach (var c in Vectors.Cases(part, "cases"))
                {
                    var name = Vectors.S(c, "name");
                    var got = Refusal(() =>
                    {
                        var pool = Airgap.VerifyPool(Vectors.S(c, "pool"), keys, Vectors.S(c, "app_id"), At(c["now"]));
                        var p = (IDictionary<string, object>)c["payload"];
                        Assert.Equal(Vectors.S(p, "license_id"), pool.LicenseId, name);
                        Assert.Equal(Vectors.S(p, "relay_id"), pool.RelayId, name);
                        Assert.Equal(Vectors.L(p, "seats"), pool.Seats, name);
                        Assert.Equal(Vectors.L(p, "level"), pool.Level, name);
                        Assert.Equal(string.Join(",", ((IList<object>)p["entitlements"]).Cast<string>().OrderBy(x => x, StringComparer.Ordinal)), string.Join(",", pool.Entitlements), name);
                        Assert.Equal(p["expires_at"] == null, pool.ExpiresAt == null, name);
                    });
                    Assert.Equal((bool)c["valid"] ? "ok" : Vectors.S(c, "reason"), got, name);
                    if (!(bool)c["valid"]) seen.Add(got);
                }
                Reasons(part, seen);
            });

            RegisterIntegration(r);
        }

        static partial void RegisterIntegration(Registry r);
    }
}
