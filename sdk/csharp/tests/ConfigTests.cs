// keywarden.json parsing: what is accepted, defaulted and refused (sdk/vectors/README.md, format 1).
using System;
using System.IO;

namespace Keywarden.Tests
{
    internal static class ConfigTests
    {
        private const string Key = "Z7P1CneKviCF7Ws179UP02Vmjh+ezX1TCXb5UqUdRcM=";

        private static string Doc(string extra = "", string keys = null)
        {
            return "{\"format\":1,\"base_url\":\"http://127.0.0.1:8080/\",\"app_name\":\"Demo\",\"api_key\":\"abc\"" + extra
                + ",\"response_keys\":" + (keys ?? "[{\"kid\":\"k1\",\"alg\":\"Ed25519\",\"public_key\":\"" + Key + "\"}]") + "}";
        }

        public static void Register(Registry r)
        {
            r.Unit("config: parses format 1, trims the base URL, defaults version, ignores unknown fields", () =>
            {
                var c = KeywardenConfig.Parse(Doc(",\"future_field\":{\"x\":1}"));
                Assert.Equal("http://127.0.0.1:8080", c.BaseUrl);
                Assert.Equal("abc", c.ApiKey);
                Assert.Equal("1.0", c.Version);
                Assert.Equal("Demo", c.AppName);
                Assert.True(c.ApiSecret == null, "no secret");
                Assert.Equal(1, c.ResponseKeys.Count);
                Assert.Equal("k1", c.ResponseKeys[0].Kid);
                Assert.Equal(32, c.ResponseKeys[0].PublicKey.Length);
                Assert.Equal("2.0", KeywardenConfig.Parse(Doc(",\"version\":\"2.0\",\"api_secret\":\"s3\"")).Version);
                Assert.Equal("s3", KeywardenConfig.Parse(Doc(",\"api_secret\":\"s3\"")).ApiSecret);
                Assert.True(KeywardenConfig.Parse(Doc(",\"api_secret\":\"\"")).ApiSecret == null, "an empty secret means none");
            });

            r.Unit("config: a key without kid is pinned as k1 (the C# client's default kid)", () =>
            {
                var c = KeywardenConfig.Parse(Doc("", "[{\"public_key\":\"" + Key + "\"}]"));
                Assert.Equal("k1", c.ResponseKeys[0].Kid);
            });

            r.Unit("config: refuses unusable files with KeywardenConfigException", () =>
            {
                var bad = new[]
                {
                    Doc().Replace("\"format\":1", "\"format\":2"),
                    Doc().Replace("\"format\":1,", ""),
                    Doc().Replace("http://127.0.0.1:8080/", "ftp://x"),
                    Doc().Replace("\"api_key\":\"abc\"", "\"api_key\":\"\""),
                    Doc().Replace("\"api_key\":\"abc\"", "\"api_key\":5"),
                    Doc("", "[]"),
                    Doc("", "[{\"kid\":\"k1\",\"public_key\":\"AAAA\"}]"),
                    Doc("", "[{\"kid\":\"k1\",\"public_key\":\"not base64!\"}]"),
                    Doc("", "[{\"kid\":\"k1\",\"alg\":\"RS256\",\"public_key\":\"" + Key + "\"}]"),
                    Doc("", "[{\"kid\":\"k1\",\"public_key\":\"" + Key + "\"},{\"kid\":\"k1\",\"public_key\":\"" + Key + "\"}]"),
                    "[]", "not json", "",
                };
                foreach (var b in bad) Assert.Throws<KeywardenConfigException>(() => KeywardenConfig.Parse(b), "parse " + b);
                Assert.Throws<KeywardenConfigException>(() => KeywardenConfig.Load("/nonexistent/keywarden.json"), "missing file");
            });

            r.Unit("config: FromConfig(path) loads the file; EncKey without api_secret is refused", () =>
            {
                var path = Path.GetTempFileName();
                try
                {
                    File.WriteAllText(path, Doc());
                    using (var c = KeywardenClient.FromConfig(path, new KeywardenOptions { BaseUrl = "http://override:1/" }))
                    {
                        Assert.Equal("http://override:1", c.BaseUrl);
                        Assert.Equal("abc", c.Config.ApiKey);
                        Assert.True(c.Session == null && c.ClockOffset == null, "nothing learned before init");
                    }
                    Assert.Throws<ArgumentException>(() => KeywardenClient.FromConfig(path, new KeywardenOptions { EncKey = "x" }), "EncKey without secret");
                    Assert.Throws<ArgumentException>(() => KeywardenClient.FromConfig(path, new KeywardenOptions { Timeout = TimeSpan.Zero }), "zero timeout");
                }
                finally
                {
                    File.Delete(path);
                }
            });
        }
    }
}
