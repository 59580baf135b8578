// sdk/vectors/offline.json: offline license files (docs/protocol.md 12.5) accepted or refused for the reason
// each case names, and what a grace_until value grants (12.6).
using System;
using System.Collections.Generic;
using System.Linq;

namespace Keywarden.Tests
{
    internal static class OfflineVectorTests
    {
        private static DateTimeOffset At(object unixSeconds)
        {
            return DateTimeOffset.FromUnixTimeMilliseconds((long)Math.Round(Convert.ToDouble(unixSeconds, System.Globalization.CultureInfo.InvariantCulture) * 1000));
        }

        public static void Register(Registry r)
        {
            r.Unit("vectors: offline files are accepted or refused for the reason each case names", () =>
            {
                var v = Vectors.Load("offline");
                Assert.Equal((long)OfflineLicenses.MaxFutureSeconds, Vectors.L(v, "max_future_seconds"));
                Assert.Equal((long)OfflineLicenses.MaxRollbackSeconds, Vectors.L(v, "max_rollback_seconds"));
                var keys = Vectors.Cases(v, "pinned_keys").Select(k => new ResponseKey(Vectors.S(k, "kid"), Vectors.S(k, "public_key"))).ToList();
                var reasons = ((IList<object>)v["reasons"]).Cast<string>().OrderBy(x => x, StringComparer.Ordinal).ToList();
                var airgap = Vectors.Load("airgap");
                var every = reasons.Concat(((IList<object>)((IDictionary<string, object>)airgap["responses"])["reasons"]).Cast<string>())
                    .Concat(((IList<object>)((IDictionary<string, object>)airgap["pools"])["reasons"]).Cast<string>())
                    .Distinct().OrderBy(x => x, StringComparer.Ordinal);
                Assert.Equal(string.Join(",", every),
                    string.Join(",", Enum.GetValues(typeof(OfflineReason)).Cast<OfflineReason>().Select(ErrorTable.WireName).OrderBy(x => x, StringComparer.Ordinal)), "reasons");
                var seen = new HashSet<string>();
                foreach (var c in Vectors.Cases(v, "cases"))
                {
                    var name = Vectors.S(c, "name");
                    DateTimeOffset? last = c["last_seen"] == null ? (DateTimeOffset?)null : At(c["last_seen"]);
                    OfflineLicense lic = null;
                    KeywardenException err = null;
                    try { lic = OfflineLicenses.Verify(Vectors.S(c, "file"), keys, Vectors.S(c, "app_id"), Vectors.S(c, "hwid"), At(c["now"]), last); }
                    catch (KeywardenException e) { err = e; }
                    if ((bool)c["valid"])
                    {
                        Assert.True(err == null, name + ": refused: " + (err == null ? "" : err.Message));
                        var p = (IDictionary<string, object>)c["payload"];
                        Assert.Equal(Vectors.S(p, "app_id"), lic.AppId, name);
                        Assert.Equal(Vectors.S(p, "license_id"), lic.LicenseId, name);
                        Assert.Equal(p["user"] as string, lic.User, name);
                        Assert.Equal(Vectors.S(p, "hwid"), lic.Hwid, name);
                        Assert.Equal(Vectors.L(p, "level"), lic.Level, name);
                        Assert.Equal(string.Join(",", ((IList<object>)p["entitlements"]).Cast<string>().OrderBy(x => x, StringComparer.Ordinal)), string.Join(",", lic.Entitlements), name);
                        Assert.Equal(Vectors.S(p, "valid_until"), ModelsServer.Iso(lic.ValidUntil), name);
                        Assert.Equal(p["expires_at"] == null, lic.ExpiresAt == null, name);
                        continue;
                    }
                    Assert.True(err != null, name + ": accepted, but should be refused as " + Vectors.S(c, "reason"));
                    Assert.Equal(KeywardenErrorCode.OfflineInvalid, err.Code, name);
                    Assert.Equal(Vectors.S(c, "reason"), ErrorTable.WireName(err.OfflineReason.Value), name);
                    seen.Add(Vectors.S(c, "reason"));
                }
                Assert.Equal(string.Join(",", reasons), string.Join(",", seen.OrderBy(x => x, StringComparer.Ordinal)), "every reason occurs");
            });

            r.Unit("vectors: what each grace_until grants", () =>
            {
                foreach (var c in Vectors.Cases((IDictionary<string, object>)Vectors.Load("offline")["grace"], "cases"))
                {
                    var name = Vectors.S(c, "name");
                    var answer = new Dictionary<string, object>();
                    if (c.ContainsKey("grace_until")) answer["grace_until"] = c["grace_until"];
                    var until = GracePeriod.UntilOf(answer);
                    if (c["until"] == null) Assert.True(until == null, name + ": grants none");
                    else Assert.Equal(At(c["until"]), until.Value, name);
                    Assert.Equal((bool)c["active"], until.HasValue && At(c["now"]) < until.Value, name);
                }
            });
        }
    }
}
