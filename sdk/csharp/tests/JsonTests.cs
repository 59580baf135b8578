// The self-contained JSON reader/writer: exact values, strictness, hostile input.
using System;
using System.Collections.Generic;
using System.Text;

namespace Keywarden.Tests
{
    internal static class JsonTests
    {
        public static void Register(Registry r)
        {
            r.Unit("json: parses every value kind", () =>
            {
                var o = (IDictionary<string, object>)Json.Parse(" {\"s\":\"a\\\"b\\\\c\\u00e9\\n\",\"i\":-42,\"big\":12345678901234567890,\"f\":1.5e2,\"t\":true,\"n\":null,\"a\":[1,[2],{}]} ");
                Assert.Equal("a\"b\\c\u00e9\n", (string)o["s"]);
                Assert.Equal(-42L, (long)o["i"]);
                Assert.Equal(12345678901234567890d, (double)o["big"], "a number beyond long is a double");
                Assert.Equal(150d, (double)o["f"]);
                Assert.Equal(true, (bool)o["t"]);
                Assert.True(o.ContainsKey("n") && o["n"] == null, "null member kept");
                Assert.Equal(3, ((IList<object>)o["a"]).Count);
                Assert.Equal("\ud83d\ude00", (string)Json.Parse("\"\\ud83d\\ude00\""), "surrogate pair escape");
            });

            r.Unit("json: refuses what is not exactly one JSON value", () =>
            {
                foreach (var bad in new[] { "", "{", "{\"a\":1,}", "[1,]", "01", "1.", "-", "+1", "'x'", "{a:1}", "tru", "nul", "\"\\x\"",
                    "\"\u0001\"", "{\"a\":1} x", "[1] [2]", "NaN", "Infinity", "1e999", "\"abc" })
                {
                    Assert.Throws<FormatException>(() => Json.Parse(bad), "parse " + bad);
                }
            });

            r.Unit("json: deep nesting is refused, not a stack overflow", () =>
            {
                var deep = new StringBuilder();
                for (var i = 0; i < 100000; i++) deep.Append('[');
                Assert.Throws<FormatException>(() => Json.Parse(deep.ToString()), "100000 brackets");
                var ok = new string('[', Json.MaxDepth) + new string(']', Json.MaxDepth);
                Json.Parse(ok);
            });

            r.Unit("json: serializes with escapes and round-trips", () =>
            {
                var v = new Dictionary<string, object>
                {
                    { "s", "q\"\\\n\u0001\u00e9" }, { "i", 7 }, { "l", 1L << 40 }, { "b", false }, { "n", null }, { "a", new List<object> { 1, "x" } }, { "d", 0.25 },
                };
                var text = Json.Serialize(v);
                Assert.Equal("{\"s\":\"q\\\"\\\\\\n\\u0001\u00e9\",\"i\":7,\"l\":1099511627776,\"b\":false,\"n\":null,\"a\":[1,\"x\"],\"d\":0.25}", text);
                var back = (IDictionary<string, object>)Json.Parse(text);
                Assert.Equal("q\"\\\n\u0001\u00e9", (string)back["s"]);
                Assert.Throws<ArgumentException>(() => Json.Serialize(double.NaN), "NaN");
            });

            r.Unit("json: typed accessors read mistyped members as absent", () =>
            {
                var o = (IDictionary<string, object>)Json.Parse("{\"level\":2.5,\"n\":3,\"s\":1,\"b\":\"true\",\"o\":[]}");
                Assert.Equal((long?)null, Json.GetInt(o, "level"));
                Assert.Equal((long?)3, Json.GetInt(o, "n"));
                Assert.Equal((string)null, Json.GetString(o, "s"));
                Assert.Equal((bool?)null, Json.GetBool(o, "b"));
                Assert.True(Json.GetObject(o, "o") == null, "array is not an object");
            });
        }
    }
}
