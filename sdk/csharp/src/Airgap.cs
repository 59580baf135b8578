// Air-gapped machines (the server's docs/air-gapped.md; vectors: sdk/vectors/airgap.json).
//
// Activation request: "kwreq1." base64url(UTF-8 JSON {"v": 1, "app_id", "key", "hwid", "components"?,
// "nonce", "created_at"}), written with no network. The nonce (16 random bytes) stays in a small JSON
// file; the answer is an offline license file whose payload carries request_nonce, accepted only when
// every offline-file check passes and that nonce is the one of this machine's latest request
// (else OfflineInvalid / WrongRequest).
//
// Seat pool: "kwpool1." base64url(PAYLOAD) "." base64url(Ed25519 over the part before the second dot),
// signed by a pinned response key. A relay hands it out with every lease; a lease is believed only
// when its pool verifies, names this application and is still valid.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden
{
    /// <summary>A verified seat pool: what the relay's license grants and until when.</summary>
    public sealed class SeatPool
    {
        /// <summary>The application it was issued for.</summary>
        public string AppId { get; internal set; }
        /// <summary>The license key's id.</summary>
        public string LicenseId { get; internal set; }
        /// <summary>The relay machine it is bound to.</summary>
        public string RelayId { get; internal set; }
        /// <summary>How many machines may hold a lease at once.</summary>
        public long Seats { get; internal set; }
        /// <summary>Access level.</summary>
        public long Level { get; internal set; }
        /// <summary>Entitlement codes, sorted.</summary>
        public IList<string> Entitlements { get; internal set; }
        /// <summary>The key's own expiry, null for a lifetime key.</summary>
        public DateTimeOffset? ExpiresAt { get; internal set; }
        /// <summary>The pool is accepted until this moment.</summary>
        public DateTimeOffset ValidUntil { get; internal set; }
        /// <summary>When the server issued it.</summary>
        public DateTimeOffset IssuedAt { get; internal set; }
        /// <summary>The signing key's id.</summary>
        public string Kid { get; internal set; }
    }

    /// <summary>Activation requests and seat pools (the formats of sdk/vectors/airgap.json).</summary>
    public static class Airgap
    {
        /// <summary>The relay's detail when every seat of its pool is leased (mapped to SessionLimit).</summary>
        public const string NoSeats = "No seats available";
        private static readonly UTF8Encoding StrictUtf8 = new UTF8Encoding(false, true);

        internal static string B64Url(byte[] raw)
        {
            return Convert.ToBase64String(raw).TrimEnd('=').Replace('+', '-').Replace('/', '_');
        }

        /// <summary>The request text for these values (nonce and time are the caller's).</summary>
        public static string BuildRequest(string appId, string key, string hwid, string nonce, string createdAt, IDictionary<string, string> components = null)
        {
            var sb = new StringBuilder("{\"v\":1,\"app_id\":").Append(Json.Serialize(appId))
                .Append(",\"key\":").Append(Json.Serialize(key)).Append(",\"hwid\":").Append(Json.Serialize(hwid));
            if (components != null && components.Count > 0)
                sb.Append(",\"components\":").Append(Json.Serialize(components.ToDictionary(kv => kv.Key, kv => (object)kv.Value)));
            sb.Append(",\"nonce\":").Append(Json.Serialize(nonce)).Append(",\"created_at\":").Append(Json.Serialize(createdAt)).Append('}');
            return "kwreq1." + B64Url(Encoding.UTF8.GetBytes(sb.ToString()));
        }

        /// <summary>After the offline-file checks passed: request_nonce must be nonce (else OfflineInvalid WrongRequest).</summary>
        public static void CheckRequestNonce(string file, string nonce)
        {
            if (nonce == null) throw KeywardenException.OfflineRefused(OfflineReason.WrongRequest, "no activation request is kept on this machine");
            object got = null;
            var parts = (file ?? "").Trim(' ', '\t', '\r', '\n').Split('.');
            var raw = parts.Length > 1 ? OfflineLicenses.FromB64Url(parts[1]) : null;
            try
            {
                var p = raw == null ? null : Json.Parse(StrictUtf8.GetString(raw)) as IDictionary<string, object>;
                if (p != null) p.TryGetValue("request_nonce", out got);
            }
            catch (Exception e) when (e is FormatException || e is ArgumentException) { got = null; }
            var a = Encoding.UTF8.GetBytes(got as string ?? "");
            var b = Encoding.UTF8.GetBytes(nonce);
            var diff = a.Length ^ b.Length;
            for (var i = 0; i < Math.Min(a.Length, b.Length); i++) diff |= a[i] ^ b[i];
            if (!(got is string) || diff != 0)
                throw KeywardenException.OfflineRefused(OfflineReason.WrongRequest, "not the answer to this machine's latest activation request");
        }

        /// <summary>
        /// Checks a POOL in the order of airgap.json: Malformed, UnknownKid, BadSignature, WrongApp, Expired
        /// (KeywardenException OfflineInvalid with that OfflineReason).
        /// </summary>
        public static SeatPool VerifyPool(string pool, IEnumerable<ResponseKey> keys, string appId, DateTimeOffset now)
        {
            string signed;
            byte[] sig;
            var p = OfflineLicenses.Open(pool, "kwpool1", out signed, out sig);
            object seats;
            var good = OfflineLicenses.GrantFieldsOk(p) && OfflineLicenses.Text(p, "kid") && OfflineLicenses.Text(p, "app_id")
                && OfflineLicenses.Text(p, "license_id") && OfflineLicenses.Text(p, "relay_id")
                && p.TryGetValue("seats", out seats) && seats is long && (long)seats >= 1;
            if (!good) throw KeywardenException.OfflineRefused(OfflineReason.Malformed, "pool payload lacks a field or has one of the wrong type");
            var kid = (string)p["kid"];
            var key = keys.FirstOrDefault(k => k.Kid == kid);
            if (key == null) throw KeywardenException.OfflineRefused(OfflineReason.UnknownKid, "pool signed under key " + kid + ", which this SDK does not pin");
            if (!Sodium.Verify(sig, Encoding.ASCII.GetBytes(signed), key.Raw))
                throw KeywardenException.OfflineRefused(OfflineReason.BadSignature, "the pool's signature does not verify");
            if ((string)p["app_id"] != appId) throw KeywardenException.OfflineRefused(OfflineReason.WrongApp, "pool issued for application " + p["app_id"]);
            var until = Utc.ParseMs(p["valid_until"]).Value;
            if (now.ToUnixTimeMilliseconds() >= until) throw KeywardenException.OfflineRefused(OfflineReason.Expired, "pool valid until " + p["valid_until"]);
            var expires = Utc.ParseMs(p["expires_at"]);
            return new SeatPool
            {
                AppId = (string)p["app_id"], LicenseId = (string)p["license_id"], RelayId = (string)p["relay_id"], Seats = (long)p["seats"],
                Level = (long)p["level"],
                Entitlements = ((IList<object>)p["entitlements"]).Cast<string>().Distinct().OrderBy(e => e, StringComparer.Ordinal).ToList().AsReadOnly(),
                ExpiresAt = expires.HasValue ? Utc.FromMs(expires.Value) : (DateTimeOffset?)null,
                ValidUntil = Utc.FromMs(until), IssuedAt = Utc.FromMs(Utc.ParseMs(p["issued_at"]).Value), Kid = kid,
            };
        }
    }

    /// <summary>
    /// The nonce of this machine's latest activation request, kept in {"v": 1, "nonce", "created_at"}
    /// (written atomically). A new request replaces it, so an answer to an older one is refused.
    /// </summary>
    internal sealed class RequestStore
    {
        public string File { get; private set; }
        public RequestStore(string file) { File = file; }

        public string NewRequest(string appId, string key, string hwid, DateTimeOffset now, IDictionary<string, string> components)
        {
            var nonce = KeywardenCrypto.RandomBase64Url(16);
            var created = now.UtcDateTime.ToString("yyyy-MM-dd'T'HH:mm:ss.fff'Z'", System.Globalization.CultureInfo.InvariantCulture);
            var dir = Path.GetDirectoryName(Path.GetFullPath(File));
            Directory.CreateDirectory(dir);
            var tmp = Path.Combine(dir, ".kwreq-" + Guid.NewGuid().ToString("N"));
            try
            {
                System.IO.File.WriteAllText(tmp, "{\"v\":1,\"nonce\":" + Json.Serialize(nonce) + ",\"created_at\":" + Json.Serialize(created) + "}");
                if (System.IO.File.Exists(File)) System.IO.File.Replace(tmp, File, null);
                else System.IO.File.Move(tmp, File);
            }
            catch (Exception)
            {
                try { System.IO.File.Delete(tmp); } catch (Exception) { /* nothing more to undo */ }
                throw;
            }
            return Airgap.BuildRequest(appId, key, hwid, nonce, created, components);
        }

        /// <summary>The kept nonce, null when there is none (or the file is damaged).</summary>
        public string Nonce()
        {
            try
            {
                var o = Json.Parse(System.IO.File.ReadAllText(File, Encoding.UTF8)) as IDictionary<string, object>;
                var n = o == null ? null : Json.GetString(o, "nonce");
                return string.IsNullOrEmpty(n) ? null : n;
            }
            catch (Exception e) when (e is IOException || e is UnauthorizedAccessException || e is FormatException || e is ArgumentException)
            {
                return null;
            }
        }
    }

    /// <summary>
    /// A seat leased from a relay, renewed in the background at half its remaining time until Release
    /// (or Dispose). OnLost runs once when the seat can no longer be kept (the relay forgot it and has
    /// none free, or the lease ran out while the relay was unreachable).
    /// </summary>
    public sealed class SeatLease : IDisposable
    {
        private readonly Func<string, string, byte[], Task<KeyValuePair<int, IDictionary<string, object>>>> _send;
        private readonly IEnumerable<ResponseKey> _keys;
        private readonly string _appId;
        private readonly Func<DateTimeOffset> _clock;
        private readonly Action<KeywardenLogLevel, string> _log;
        private readonly CancellationTokenSource _stop = new CancellationTokenSource();
        private readonly object _gate = new object();
        private long _expiresMs;
        private int _released;

        /// <summary>The relay's id of this lease (it changes when a forgotten lease is taken again).</summary>
        public string LeaseId { get; private set; }
        /// <summary>The machine holding the seat.</summary>
        public string Hwid { get; private set; }
        /// <summary>The verified pool the relay serves.</summary>
        public SeatPool Pool { get; private set; }
        /// <summary>Renewals so far.</summary>
        public int Renewals { get; private set; }
        /// <summary>Why the seat was lost, null while held.</summary>
        public KeywardenException Lost { get; private set; }
        /// <summary>Called once when the seat is lost.</summary>
        public event Action<KeywardenException> OnLost;
        /// <summary>When the current lease ends unless renewed.</summary>
        public DateTimeOffset ExpiresAt { get { return Utc.FromMs(Interlocked.Read(ref _expiresMs)); } }
        /// <summary>True while held and not past its expiry.</summary>
        public bool Active { get { return _released == 0 && Lost == null && _clock().ToUnixTimeMilliseconds() < Interlocked.Read(ref _expiresMs); } }

        internal SeatLease(Func<string, string, byte[], Task<KeyValuePair<int, IDictionary<string, object>>>> send, IEnumerable<ResponseKey> keys,
            string appId, string hwid, Func<DateTimeOffset> clock, Action<KeywardenLogLevel, string> log)
        {
            _send = send; _keys = keys; _appId = appId; Hwid = hwid; _clock = clock; _log = log;
        }

        internal async Task TakeAsync()
        {
            var r = await _send("POST", "/relay/v1/leases", Encoding.UTF8.GetBytes("{\"hwid\":" + Json.Serialize(Hwid) + "}")).ConfigureAwait(false);
            Accept(r, 201);
        }

        internal void Start()
        {
            AppDomain.CurrentDomain.ProcessExit += OnExit;
            Task.Run(RunAsync);
        }

        private void OnExit(object sender, EventArgs e) { Release(); }

        private static KeywardenException Refused(int status, IDictionary<string, object> body)
        {
            var detail = body == null ? null : Json.GetString(body, "detail");
            var code = status == 409 && detail == Airgap.NoSeats ? KeywardenErrorCode.SessionLimit : KeywardenErrorCode.Server;
            return KeywardenException.RelayRefused(code, status, detail);
        }

        private void Accept(KeyValuePair<int, IDictionary<string, object>> r, int expect)
        {
            if (r.Key != expect) throw Refused(r.Key, r.Value);
            var p = r.Value ?? new Dictionary<string, object>();
            var pool = Airgap.VerifyPool(Json.GetString(p, "pool"), _keys, _appId, _clock());
            var id = Json.GetString(p, "lease_id");
            object exp;
            p.TryGetValue("expires_at", out exp);
            var expires = Utc.ParseMs(exp);
            if (string.IsNullOrEmpty(id) || !expires.HasValue || Json.GetString(p, "hwid") != (Hwid ?? "").ToLowerInvariant())
                throw KeywardenException.OfflineRefused(OfflineReason.Malformed, "relay lease lacks lease_id or expires_at, or names another hwid");
            lock (_gate)
            {
                LeaseId = id;
                Pool = pool;
                Interlocked.Exchange(ref _expiresMs, expires.Value);
            }
        }

        /// <summary>Renews now; a lease the relay forgot (404) is taken again. Throws like the first lease.</summary>
        public async Task RenewAsync()
        {
            var r = await _send("PUT", "/relay/v1/leases/" + Uri.EscapeDataString(LeaseId), null).ConfigureAwait(false);
            if (r.Key == 404)
            {
                _log(KeywardenLogLevel.Info, "keywarden.relay.lease_gone " + LeaseId + ", leasing again");
                await TakeAsync().ConfigureAwait(false);
            }
            else Accept(r, 200);
            Renewals++;
        }

        private async Task RunAsync()
        {
            while (!_stop.IsCancellationRequested)
            {
                var wait = Math.Max(1000, (Interlocked.Read(ref _expiresMs) - _clock().ToUnixTimeMilliseconds()) / 2);
                try { await Task.Delay(TimeSpan.FromMilliseconds(wait), _stop.Token).ConfigureAwait(false); }
                catch (OperationCanceledException) { return; }
                try
                {
                    await RenewAsync().ConfigureAwait(false);
                }
                catch (KeywardenException e)
                {
                    var retry = e.Code == KeywardenErrorCode.Network || e.Code == KeywardenErrorCode.Timeout || e.Code == KeywardenErrorCode.Server;
                    if (retry && _clock().ToUnixTimeMilliseconds() < Interlocked.Read(ref _expiresMs))
                    {
                        _log(KeywardenLogLevel.Warn, "keywarden.relay.renew_failed " + e.Message);
                        continue;
                    }
                    Lost = e;
                    _log(KeywardenLogLevel.Warn, "keywarden.relay.lease_lost " + e.Message);
                    var h = OnLost;
                    if (h != null) h(e);
                    return;
                }
            }
        }

        /// <summary>Gives the seat back (DELETE); never throws (a relay that cannot be reached lets it expire).</summary>
        public void Release()
        {
            if (Interlocked.Exchange(ref _released, 1) == 1) return;
            _stop.Cancel();
            AppDomain.CurrentDomain.ProcessExit -= OnExit;
            try
            {
                var r = _send("DELETE", "/relay/v1/leases/" + Uri.EscapeDataString(LeaseId), null).GetAwaiter().GetResult();
                if (r.Key != 204 && r.Key != 404) throw Refused(r.Key, r.Value);
            }
            catch (KeywardenException e)
            {
                _log(KeywardenLogLevel.Warn, "keywarden.relay.release_failed " + e.Message);
            }
        }

        /// <summary>Release.</summary>
        public void Dispose() { Release(); }
    }
}
