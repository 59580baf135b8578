// Strict ISO 8601 UTC times as docs/protocol.md 1 writes them (2026-11-21T22:00:00.000Z): the form in which
// offline license files and grace_until carry their times. Same rule in every SDK: date, T, time, an
// optional fraction of 1-9 digits (cut to milliseconds), then Z; nothing else (DateTimeOffset.TryParse
// would take far more).
using System;
using System.Globalization;
using System.Text.RegularExpressions;

namespace Keywarden
{
    internal static class Utc
    {
        private static readonly Regex Iso = new Regex(@"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,9}))?Z$", RegexOptions.CultureInvariant);

        /// <summary>Unix milliseconds of a strict ISO 8601 UTC string, else null (also for any non-string).</summary>
        public static long? ParseMs(object value)
        {
            var s = value as string;
            if (s == null) return null;
            var m = Iso.Match(s);
            if (!m.Success) return null;
            Func<int, int> n = i => int.Parse(m.Groups[i].Value, CultureInfo.InvariantCulture);
            int y = n(1), mo = n(2), d = n(3), h = n(4), mi = n(5), sec = n(6);
            if (y < 1 || mo < 1 || mo > 12 || d < 1 || d > DateTime.DaysInMonth(y, mo) || h > 23 || mi > 59 || sec > 59) return null;
            var frac = m.Groups[7].Success ? m.Groups[7].Value : "";
            var ms = int.Parse((frac + "000").Substring(0, 3), CultureInfo.InvariantCulture);
            return new DateTimeOffset(y, mo, d, h, mi, sec, ms, TimeSpan.Zero).ToUnixTimeMilliseconds();
        }

        public static DateTimeOffset FromMs(long ms)
        {
            return DateTimeOffset.FromUnixTimeMilliseconds(ms);
        }
    }
}
