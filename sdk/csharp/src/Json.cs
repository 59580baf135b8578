// A small, strict JSON reader and writer, so the library needs no package (no NuGet where some
// vendors build) and behaves the same on .NET Framework 4.8, .NET 8 and Mono.
// DataContractJsonSerializer was considered: it needs a contract type per answer and cannot read
// a `detail` that is a string on one answer and an object or array on another.
// Values: Dictionary<string, object> (ordinal keys), List<object>, string, long (integers that fit),
// double (any other number), bool, null. Hostile input (deep nesting, junk, lone surrogates in
// escapes, trailing data) is refused with a FormatException, never a stack overflow.
using System;
using System.Collections;
using System.Collections.Generic;
using System.Globalization;
using System.Text;

namespace Keywarden
{
    /// <summary>Strict JSON (RFC 8259) reader and writer used by the SDK.</summary>
    public static class Json
    {
        /// <summary>Nesting deeper than this is refused (a hostile answer must not exhaust the stack).</summary>
        public const int MaxDepth = 64;

        /// <summary>Parses one JSON value; throws FormatException on anything that is not exactly one value.</summary>
        public static object Parse(string text)
        {
            if (text == null) throw new ArgumentNullException("text");
            var r = new Reader(text);
            r.SkipWhitespace();
            var value = r.ReadValue(0);
            r.SkipWhitespace();
            if (!r.AtEnd) throw r.Error("trailing characters after the value");
            return value;
        }

        /// <summary>Serializes dictionaries, lists, strings, numbers, booleans and null.</summary>
        public static string Serialize(object value)
        {
            var sb = new StringBuilder();
            Write(sb, value, 0);
            return sb.ToString();
        }

        private static void Write(StringBuilder sb, object value, int depth)
        {
            if (depth > MaxDepth) throw new ArgumentException("value nests deeper than " + MaxDepth);
            if (value == null) { sb.Append("null"); return; }
            var s = value as string;
            if (s != null) { WriteString(sb, s); return; }
            if (value is bool) { sb.Append((bool)value ? "true" : "false"); return; }
            if (value is int || value is long || value is short || value is byte || value is uint || value is ushort || value is sbyte)
            {
                sb.Append(Convert.ToInt64(value, CultureInfo.InvariantCulture).ToString(CultureInfo.InvariantCulture));
                return;
            }
            if (value is ulong) { sb.Append(((ulong)value).ToString(CultureInfo.InvariantCulture)); return; }
            if (value is double || value is float || value is decimal)
            {
                var d = Convert.ToDouble(value, CultureInfo.InvariantCulture);
                if (double.IsNaN(d) || double.IsInfinity(d)) throw new ArgumentException("JSON has no NaN or Infinity");
                sb.Append(d.ToString("R", CultureInfo.InvariantCulture));
                return;
            }
            var dict = value as IDictionary;
            if (dict != null)
            {
                sb.Append('{');
                var first = true;
                foreach (DictionaryEntry e in dict)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    WriteString(sb, Convert.ToString(e.Key, CultureInfo.InvariantCulture));
                    sb.Append(':');
                    Write(sb, e.Value, depth + 1);
                }
                sb.Append('}');
                return;
            }
            var list = value as IEnumerable;
            if (list != null)
            {
                sb.Append('[');
                var first = true;
                foreach (var item in list)
                {
                    if (!first) sb.Append(',');
                    first = false;
                    Write(sb, item, depth + 1);
                }
                sb.Append(']');
                return;
            }
            throw new ArgumentException("cannot serialize " + value.GetType().FullName + " as JSON");
        }

        private static void WriteString(StringBuilder sb, string s)
        {
            sb.Append('"');
            foreach (var c in s)
            {
                switch (c)
                {
                    case '"': sb.Append("\\\""); break;
                    case '\\': sb.Append("\\\\"); break;
                    case '\n': sb.Append("\\n"); break;
                    case '\r': sb.Append("\\r"); break;
                    case '\t': sb.Append("\\t"); break;
                    case '\b': sb.Append("\\b"); break;
                    case '\f': sb.Append("\\f"); break;
                    default:
                        if (c < 0x20) sb.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture));
                        else sb.Append(c);
                        break;
                }
            }
            sb.Append('"');
        }

        private sealed class Reader
        {
            private readonly string _s;
            private int _i;

            public Reader(string s) { _s = s; }

            public bool AtEnd { get { return _i >= _s.Length; } }

            public FormatException Error(string what)
            {
                return new FormatException("invalid JSON at offset " + _i + ": " + what);
            }

            public void SkipWhitespace()
            {
                while (_i < _s.Length)
                {
                    var c = _s[_i];
                    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') _i++;
                    else break;
                }
            }

            public object ReadValue(int depth)
            {
                if (depth > MaxDepth) throw Error("nesting deeper than " + MaxDepth);
                if (AtEnd) throw Error("unexpected end");
                var c = _s[_i];
                switch (c)
                {
                    case '{': return ReadObject(depth);
                    case '[': return ReadArray(depth);
                    case '"': return ReadString();
                    case 't': Expect("true"); return true;
                    case 'f': Expect("false"); return false;
                    case 'n': Expect("null"); return null;
                    default:
                        if (c == '-' || (c >= '0' && c <= '9')) return ReadNumber();
                        throw Error("unexpected character '" + c + "'");
                }
            }

            private void Expect(string word)
            {
                if (string.CompareOrdinal(_s, _i, word, 0, word.Length) != 0) throw Error("expected " + word);
                _i += word.Length;
            }

            private Dictionary<string, object> ReadObject(int depth)
            {
                var o = new Dictionary<string, object>(StringComparer.Ordinal);
                _i++; // {
                SkipWhitespace();
                if (!AtEnd && _s[_i] == '}') { _i++; return o; }
                while (true)
                {
                    SkipWhitespace();
                    if (AtEnd || _s[_i] != '"') throw Error("expected a member name");
                    var name = ReadString();
                    SkipWhitespace();
                    if (AtEnd || _s[_i] != ':') throw Error("expected ':'");
                    _i++;
                    SkipWhitespace();
                    // Last duplicate wins, as in JavaScript's JSON.parse (the server and the other SDKs agree).
                    o[name] = ReadValue(depth + 1);
                    SkipWhitespace();
                    if (AtEnd) throw Error("unterminated object");
                    if (_s[_i] == ',') { _i++; continue; }
                    if (_s[_i] == '}') { _i++; return o; }
                    throw Error("expected ',' or '}'");
                }
            }

            private List<object> ReadArray(int depth)
            {
                var a = new List<object>();
                _i++; // [
                SkipWhitespace();
                if (!AtEnd && _s[_i] == ']') { _i++; return a; }
                while (true)
                {
                    SkipWhitespace();
                    a.Add(ReadValue(depth + 1));
                    SkipWhitespace();
                    if (AtEnd) throw Error("unterminated array");
                    if (_s[_i] == ',') { _i++; continue; }
                    if (_s[_i] == ']') { _i++; return a; }
                    throw Error("expected ',' or ']'");
                }
            }

            private string ReadString()
            {
                _i++; // opening quote
                var sb = new StringBuilder();
                while (true)
                {
                    if (AtEnd) throw Error("unterminated string");
                    var c = _s[_i++];
                    if (c == '"') return sb.ToString();
                    if (c < 0x20) throw Error("control character in string");
                    if (c != '\\') { sb.Append(c); continue; }
                    if (AtEnd) throw Error("unterminated escape");
                    var e = _s[_i++];
                    switch (e)
                    {
                        case '"': sb.Append('"'); break;
                        case '\\': sb.Append('\\'); break;
                        case '/': sb.Append('/'); break;
                        case 'b': sb.Append('\b'); break;
                        case 'f': sb.Append('\f'); break;
                        case 'n': sb.Append('\n'); break;
                        case 'r': sb.Append('\r'); break;
                        case 't': sb.Append('\t'); break;
                        case 'u': sb.Append(ReadHex4()); break;
                        default: throw Error("bad escape \\" + e);
                    }
                }
            }

            private char ReadHex4()
            {
                if (_i + 4 > _s.Length) throw Error("short \\u escape");
                int v;
                if (!int.TryParse(_s.Substring(_i, 4), NumberStyles.AllowHexSpecifier, CultureInfo.InvariantCulture, out v)) throw Error("bad \\u escape");
                _i += 4;
                return (char)v;
            }

            private object ReadNumber()
            {
                var start = _i;
                if (_s[_i] == '-') _i++;
                if (AtEnd) throw Error("bad number");
                if (_s[_i] == '0') _i++;
                else if (_s[_i] >= '1' && _s[_i] <= '9') SkipDigits();
                else throw Error("bad number");
                var integral = true;
                if (!AtEnd && _s[_i] == '.')
                {
                    integral = false;
                    _i++;
                    if (AtEnd || _s[_i] < '0' || _s[_i] > '9') throw Error("bad fraction");
                    SkipDigits();
                }
                if (!AtEnd && (_s[_i] == 'e' || _s[_i] == 'E'))
                {
                    integral = false;
                    _i++;
                    if (!AtEnd && (_s[_i] == '+' || _s[_i] == '-')) _i++;
                    if (AtEnd || _s[_i] < '0' || _s[_i] > '9') throw Error("bad exponent");
                    SkipDigits();
                }
                var text = _s.Substring(start, _i - start);
                long l;
                if (integral && long.TryParse(text, NumberStyles.AllowLeadingSign, CultureInfo.InvariantCulture, out l)) return l;
                double d;
                if (!double.TryParse(text, NumberStyles.Float, CultureInfo.InvariantCulture, out d) || double.IsInfinity(d)) throw Error("number out of range");
                return d;
            }

            private void SkipDigits()
            {
                while (!AtEnd && _s[_i] >= '0' && _s[_i] <= '9') _i++;
            }
        }

        // Typed accessors for answers (a missing or mistyped field reads as absent).

        /// <summary>The member as a string, or null.</summary>
        public static string GetString(IDictionary<string, object> o, string name)
        {
            object v;
            return o != null && o.TryGetValue(name, out v) ? v as string : null;
        }

        /// <summary>The member as an integer, or null (a fractional number is not an integer).</summary>
        public static long? GetInt(IDictionary<string, object> o, string name)
        {
            object v;
            if (o == null || !o.TryGetValue(name, out v)) return null;
            if (v is long) return (long)v;
            return null;
        }

        /// <summary>The member as a boolean, or null.</summary>
        public static bool? GetBool(IDictionary<string, object> o, string name)
        {
            object v;
            if (o == null || !o.TryGetValue(name, out v) || !(v is bool)) return null;
            return (bool)v;
        }

        /// <summary>The member as an object, or null.</summary>
        public static IDictionary<string, object> GetObject(IDictionary<string, object> o, string name)
        {
            object v;
            return o != null && o.TryGetValue(name, out v) ? v as IDictionary<string, object> : null;
        }
    }
}
