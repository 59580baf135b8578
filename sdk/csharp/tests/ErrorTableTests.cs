// The SDK's error table against sdk/vectors/errors.json (generated from the server's src/errors.ts):
// same rows both ways, same fallbacks, same code names, and the extra cases resolve as listed.
using System;
using System.Collections.Generic;
using System.Globalization;

namespace Keywarden.Tests
{
    internal static class ErrorTableTests
    {
        public static void Register(Registry r)
        {
            r.Unit("errors: every code name matches errors.json `codes`", () =>
            {
                var file = Vectors.Load("errors");
                var expected = new List<string>();
                foreach (var c in (IList<object>)file["codes"]) expected.Add((string)c);
                var ours = new List<string>();
                foreach (KeywardenErrorCode c in Enum.GetValues(typeof(KeywardenErrorCode))) ours.Add(ErrorTable.WireName(c));
                Assert.Equal(string.Join(",", expected), string.Join(",", ours), "codes in order");
                Assert.Equal(Vectors.S(file, "fallback"), ErrorTable.WireName(ErrorTable.Fallback), "fallback");
            });

            r.Unit("errors: the table has exactly the rows of errors.json `entries`", () =>
            {
                var file = Vectors.Load("errors");
                var theirs = new HashSet<string>();
                foreach (var e in Vectors.Cases(file, "entries"))
                {
                    var status = (int)Vectors.L(e, "status");
                    var detail = Vectors.S(e, "detail");
                    theirs.Add(status + " " + detail + " -> " + Vectors.S(e, "sdk_code"));
                    Assert.Equal(Vectors.S(e, "sdk_code"), ErrorTable.WireName(ErrorTable.CodeFor(status, detail)), Vectors.S(e, "name"));
                }
                var ours = new HashSet<string>();
                foreach (var row in ErrorTable.Entries) ours.Add(row.Status + " " + row.Detail + " -> " + ErrorTable.WireName(row.Code));
                foreach (var x in ours) Assert.True(theirs.Contains(x), "row not in errors.json (remove it or regenerate the vectors): " + x);
                foreach (var x in theirs) Assert.True(ours.Contains(x), "errors.json row missing from ErrorTable.cs: " + x);
            });

            r.Unit("errors: status fallbacks and extra cases", () =>
            {
                var file = Vectors.Load("errors");
                var fallbacks = (IDictionary<string, object>)file["status_fallbacks"];
                var ours = ErrorTable.StatusFallbacks;
                Assert.Equal(fallbacks.Count, ours.Count, "fallback count");
                foreach (var f in fallbacks)
                {
                    var status = int.Parse(f.Key, CultureInfo.InvariantCulture);
                    Assert.Equal((string)f.Value, ErrorTable.WireName(ours[status]), "fallback " + f.Key);
                }
                foreach (var c in Vectors.Cases(file, "extra_cases"))
                {
                    var status = (int)Vectors.L(c, "status");
                    Assert.Equal(Vectors.S(c, "sdk_code"), ErrorTable.WireName(ErrorTable.CodeFor(status, c["detail"])), Vectors.S(c, "why"));
                }
            });

            r.Unit("errors: FromAnswer carries 426 fields and Retry-After", () =>
            {
                var detail = Json.Parse("{\"message\":\"Please update\",\"latest_version\":\"2.0\",\"update_url\":\"https://example.com/dl\",\"force_update\":true}");
                var e = KeywardenException.FromAnswer(426, detail, null);
                Assert.Equal(KeywardenErrorCode.UpdateRequired, e.Code);
                Assert.Equal("2.0", e.LatestVersion);
                Assert.Equal("https://example.com/dl", e.UpdateUrl);
                Assert.True(e.Message.Contains("Please update"), "message carries the vendor's text");
                var limited = KeywardenException.FromAnswer(429, "Rate limit exceeded", "17");
                Assert.Equal(KeywardenErrorCode.RateLimited, limited.Code);
                Assert.Equal((TimeSpan?)TimeSpan.FromSeconds(17), limited.RetryAfter);
                Assert.Equal("rate_limited", limited.WireCode);
                Assert.Equal((TimeSpan?)null, KeywardenException.FromAnswer(429, "Slow down", "soon").RetryAfter, "non-numeric Retry-After");
                var locked = KeywardenException.FromAnswer(429, "Too many failed attempts, try again later.", "900");
                Assert.Equal(KeywardenErrorCode.LockedOut, locked.Code);
                Assert.Equal((int?)429, locked.Status);
            });
        }
    }
}
