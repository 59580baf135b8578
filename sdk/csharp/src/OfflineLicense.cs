// Offline license files (docs/protocol.md 12.5) and the clock record that guards them.
//
// FILE = "kwlic1." base64url(PAYLOAD) "." base64url(Ed25519("kwlic1." base64url(PAYLOAD))), signed by
// one of the response-signing keys this SDK pins. Accepted only when, in this order (shared by every
// SDK and fixed by sdk/vectors/offline.json):
//   1. it has that shape and PAYLOAD is the JSON object 12.5 describes   (else Malformed)
//   2. its kid is pinned                                                 (UnknownKid)
//   3. the signature verifies                                            (BadSignature)
//   4. app_id is this application's                                     (WrongApp)
//   5. hwid is this machine's (compared lower-cased)                     (WrongHwid)
//   6. the clock is not more than 300 s below the latest time seen       (ClockRolledBack)
//   7. issued_at is at most 300 s ahead of the clock                     (IssuedInFuture)
//   8. the clock is before valid_until                                   (Expired)
// The latest time seen lives in a small JSON state file, {"v": 1, "last_seen": <unix seconds>}; every
// check records its clock reading there (never lowering it). Deleting the file forgets the record:
// like anything on an end user's machine it is a speed bump, which is why files carry a bounded
// valid_until.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Linq;
using System.Runtime.InteropServices;
using System.Security.Cryptography;
using System.Text;
using System.Text.RegularExpressions;

namespace Keywarden
{
    /// <summary>A verified offline license file: what it grants and until when.</summary>
    public sealed class OfflineLicense
    {
        /// <summary>The application it was issued for.</summary>
        public string AppId { get; internal set; }
        /// <summary>The license key's id.</summary>
        public string LicenseId { get; internal set; }
        /// <summary>The username of a user license, null for a license-only key.</summary>
        public string User { get; internal set; }
        /// <summary>The machine it was issued for.</summary>
        public string Hwid { get; internal set; }
        /// <summary>Access level.</summary>
        public long Level { get; internal set; }
        /// <summary>Entitlement codes, sorted.</summary>
        public IList<string> Entitlements { get; internal set; }
        /// <summary>The key's own expiry, null for a lifetime key.</summary>
        public DateTimeOffset? ExpiresAt { get; internal set; }
        /// <summary>When the server issued the file.</summary>
        public DateTimeOffset IssuedAt { get; internal set; }
        /// <summary>The file is accepted until this moment.</summary>
        public DateTimeOffset ValidUntil { get; internal set; }
        /// <summary>The signing key's id.</summary>
        public string Kid { get; internal set; }
        /// <summary>Whether Entitlements holds code.</summary>
        public bool HasEntitlement(string code) { return Entitlements.Contains(code); }
    }

    /// <summary>Checks offline license files (docs/protocol.md 12.5).</summary>
    public static class OfflineLicenses
    {
        /// <summary>How far issued_at may be ahead of the clock.</summary>
        public const int MaxFutureSeconds = 300;
        /// <summary>How far the clock may read below the latest time seen.</summary>
        public const int MaxRollbackSeconds = 300;
        private static readonly Regex B64Url = new Regex("^[A-Za-z0-9_-]+$", RegexOptions.CultureInvariant);
        private static readonly UTF8Encoding StrictUtf8 = new UTF8Encoding(false, true);

        /// <summary>
        /// Checks file against the pinned keys for application appId on machine hwid, with now as the clock
        /// and lastSeen as the state file's record (null: none). Throws KeywardenException OfflineInvalid.
        /// </summary>
        public static OfflineLicense Verify(string file, IEnumerable<ResponseKey> keys, string appId, string hwid, DateTimeOffset now, DateTimeOffset? lastSeen)
        {
            string signed;
            byte[] sig;
            var p = Parse(file, out signed, out sig);
            var kid = (string)p["kid"];
            var key = keys.FirstOrDefault(k => k.Kid == kid);
            if (key == null) throw KeywardenException.OfflineRefused(OfflineReason.UnknownKid, "signed under key " + kid + ", which this SDK does not pin");
            if (!Sodium.Verify(sig, Encoding.ASCII.GetBytes(signed), key.Raw))
                throw KeywardenException.OfflineRefused(OfflineReason.BadSignature, "the signature does not verify");
            if ((string)p["app_id"] != appId) throw KeywardenException.OfflineRefused(OfflineReason.WrongApp, "issued for application " + p["app_id"]);
            if ((string)p["hwid"] != (hwid ?? "").ToLowerInvariant()) throw KeywardenException.OfflineRefused(OfflineReason.WrongHwid, "issued for another machine");
            var nowMs = now.ToUnixTimeMilliseconds();
            if (lastSeen.HasValue && nowMs < lastSeen.Value.ToUnixTimeMilliseconds() - MaxRollbackSeconds * 1000L)
                throw KeywardenException.OfflineRefused(OfflineReason.ClockRolledBack,
                    "the clock reads " + Math.Round((lastSeen.Value - now).TotalSeconds).ToString(CultureInfo.InvariantCulture) + " s before a time already seen");
            var issued = Utc.ParseMs(p["issued_at"]).Value;
            var until = Utc.ParseMs(p["valid_until"]).Value;
            if (issued > nowMs + MaxFutureSeconds * 1000L)
                throw KeywardenException.OfflineRefused(OfflineReason.IssuedInFuture, "issued " + ((issued - nowMs) / 1000).ToString(CultureInfo.InvariantCulture) + " s ahead of the clock");
            if (nowMs >= until) throw KeywardenException.OfflineRefused(OfflineReason.Expired, "valid until " + p["valid_until"]);
            object exp;
            p.TryGetValue("expires_at", out exp);
            var expires = Utc.ParseMs(exp);
            var ents = ((IList<object>)p["entitlements"]).Cast<string>().Distinct().OrderBy(e => e, StringComparer.Ordinal).ToList();
            object user;
            p.TryGetValue("user", out user);
            return new OfflineLicense
            {
                AppId = (string)p["app_id"], LicenseId = (string)p["license_id"], User = user as string, Hwid = (string)p["hwid"], Level = (long)p["level"],
                Entitlements = ents.AsReadOnly(), ExpiresAt = expires.HasValue ? Utc.FromMs(expires.Value) : (DateTimeOffset?)null,
                IssuedAt = Utc.FromMs(issued), ValidUntil = Utc.FromMs(until), Kid = kid,
            };
        }

        internal static byte[] FromB64Url(string part)
        {
            if (!B64Url.IsMatch(part) || part.Length % 4 == 1) return null;
            var s = part.Replace('-', '+').Replace('_', '/');
            s += new string('=', (4 - s.Length % 4) % 4);
            try { return Convert.FromBase64String(s); }
            catch (FormatException) { return null; }
        }

        internal static bool Text(IDictionary<string, object> p, string name)
        {
            object v;
            return p.TryGetValue(name, out v) && v is string && ((string)v).Length > 0;
        }

        /// <summary>
        /// The payload object of "tag.payload.signature" with the signed text and the 64-byte signature, or
        /// OfflineInvalid Malformed. Shared by license files (kwlic1) and seat pools (kwpool1).
        /// </summary>
        internal static IDictionary<string, object> Open(string text, string tag, out string signed, out byte[] sig)
        {
            if (text == null) throw KeywardenException.OfflineRefused(OfflineReason.Malformed, "a " + tag + " text is a string");
            var parts = text.Trim(' ', '\t', '\r', '\n').Split('.');
            if (parts.Length != 3 || parts[0] != tag) throw KeywardenException.OfflineRefused(OfflineReason.Malformed, "not \"" + tag + ".<payload>.<signature>\"");
            var raw = FromB64Url(parts[1]);
            sig = FromB64Url(parts[2]);
            if (raw == null || sig == null || sig.Length != 64)
                throw KeywardenException.OfflineRefused(OfflineReason.Malformed, "payload or signature is not base64url (a signature is 64 bytes)");
            IDictionary<string, object> p;
            try { p = Json.Parse(StrictUtf8.GetString(raw)) as IDictionary<string, object>; }
            catch (FormatException) { p = null; }
            catch (ArgumentException) { p = null; } // DecoderFallbackException: not UTF-8
            if (p == null) throw KeywardenException.OfflineRefused(OfflineReason.Malformed, "payload is not a UTF-8 JSON object");
            signed = tag + "." + parts[1];
            return p;
        }

        /// <summary>What files and pools both grant: v 1, an integer level, entitlement codes, the times.</summary>
        internal static bool GrantFieldsOk(IDictionary<string, object> p)
        {
            object v, level, ents, exp;
            return p.TryGetValue("v", out v) && v is long && (long)v == 1
                && p.TryGetValue("level", out level) && level is long
                && p.TryGetValue("entitlements", out ents) && ents is IList<object> && ((IList<object>)ents).All(e => e is string)
                && p.TryGetValue("expires_at", out exp) && (exp == null || Utc.ParseMs(exp).HasValue)
                && Utc.ParseMs(Get(p, "issued_at")).HasValue && Utc.ParseMs(Get(p, "valid_until")).HasValue;
        }

        private static IDictionary<string, object> Parse(string file, out string signed, out byte[] sig)
        {
            var p = Open(file, "kwlic1", out signed, out sig);
            object user;
            var good = GrantFieldsOk(p) && Text(p, "kid") && Text(p, "app_id") && Text(p, "license_id") && Text(p, "hwid")
                && p.TryGetValue("user", out user) && (user == null || user is string);
            if (!good) throw KeywardenException.OfflineRefused(OfflineReason.Malformed, "payload lacks a field of docs/protocol.md 12.5 or has one of the wrong type");
            return p;
        }

        internal static object Get(IDictionary<string, object> p, string name)
        {
            object v;
            return p.TryGetValue(name, out v) ? v : null;
        }

        /// <summary>
        /// Per user and application: &lt;state dir&gt;/keywarden/&lt;first 16 hex of sha256(api_key)&gt;.json, the state dir
        /// being %LOCALAPPDATA% (Windows, folder "Keywarden"), ~/Library/Application Support (macOS, "Keywarden"),
        /// else $XDG_STATE_HOME or ~/.local/state.
        /// </summary>
        public static string DefaultStateFile(string apiKey)
        {
            string hex;
            using (var sha = SHA256.Create()) hex = KeywardenCrypto.Hex(sha.ComputeHash(Encoding.UTF8.GetBytes(apiKey ?? "")));
            var name = hex.Substring(0, 16) + ".json";
            var home = Environment.GetEnvironmentVariable("HOME") ?? Environment.GetFolderPath(Environment.SpecialFolder.UserProfile);
            if (RuntimeInformation.IsOSPlatform(OSPlatform.Windows))
                return Path.Combine(Path.Combine(Environment.GetFolderPath(Environment.SpecialFolder.LocalApplicationData), "Keywarden"), name);
            if (RuntimeInformation.IsOSPlatform(OSPlatform.OSX))
                return Path.Combine(Path.Combine(Path.Combine(Path.Combine(home, "Library"), "Application Support"), "Keywarden"), name);
            var state = Environment.GetEnvironmentVariable("XDG_STATE_HOME");
            if (string.IsNullOrEmpty(state)) state = Path.Combine(Path.Combine(home, ".local"), "state");
            return Path.Combine(Path.Combine(state, "keywarden"), name);
        }
    }

    /// <summary>
    /// The latest clock reading seen, kept in a JSON file. An unreadable or damaged file counts as no
    /// record; a file that cannot be written is logged and the check goes on (both are things the end
    /// user can do anyway by deleting it).
    /// </summary>
    internal sealed class ClockRecord
    {
        private readonly object _gate = new object();
        private readonly Action<KeywardenLogLevel, string> _log;
        public string File { get; private set; }

        public ClockRecord(string file, Action<KeywardenLogLevel, string> log)
        {
            File = file;
            _log = log;
        }

        public DateTimeOffset? LastSeen()
        {
            object v;
            try
            {
                v = Json.Parse(new UTF8Encoding(false, true).GetString(System.IO.File.ReadAllBytes(File)));
            }
            catch (Exception e) when (e is FileNotFoundException || e is DirectoryNotFoundException)
            {
                return null;
            }
            catch (Exception e) when (e is IOException || e is UnauthorizedAccessException || e is FormatException || e is ArgumentException)
            {
                _log(KeywardenLogLevel.Warn, "keywarden.offline.state_unreadable " + File + ": " + e.Message);
                return null;
            }
            var o = v as IDictionary<string, object>;
            object seen = null;
            if (o != null) o.TryGetValue("last_seen", out seen);
            double seconds;
            if (seen is long) seconds = (long)seen;
            else if (seen is double && !double.IsNaN((double)seen) && !double.IsInfinity((double)seen)) seconds = (double)seen;
            else
            {
                _log(KeywardenLogLevel.Warn, "keywarden.offline.state_unreadable " + File + ": no last_seen");
                return null;
            }
            if (seconds < -62135596800.0 || seconds > 253402300799.0) return null;
            return DateTimeOffset.FromUnixTimeMilliseconds((long)(seconds * 1000));
        }

        /// <summary>last_seen = max(last_seen, now), written atomically (a temporary file, then a rename).</summary>
        public void Record(DateTimeOffset now)
        {
            lock (_gate)
            {
                var seen = LastSeen();
                if (seen.HasValue && seen.Value >= now) return;
                string tmp = null;
                try
                {
                    var dir = Path.GetDirectoryName(Path.GetFullPath(File));
                    Directory.CreateDirectory(dir);
                    tmp = Path.Combine(dir, ".kwstate-" + Guid.NewGuid().ToString("N"));
                    System.IO.File.WriteAllText(tmp, "{\"v\":1,\"last_seen\":" + now.ToUnixTimeSeconds().ToString(CultureInfo.InvariantCulture) + "}");
                    if (System.IO.File.Exists(File)) System.IO.File.Replace(tmp, File, null);
                    else System.IO.File.Move(tmp, File);
                }
                catch (Exception e) when (e is IOException || e is UnauthorizedAccessException || e is ArgumentException || e is NotSupportedException)
                {
                    try { if (tmp != null) System.IO.File.Delete(tmp); } catch (Exception) { /* nothing more to undo */ }
                    _log(KeywardenLogLevel.Warn, "keywarden.offline.state_unwritable " + File + ": " + e.Message);
                }
            }
        }
    }
}
