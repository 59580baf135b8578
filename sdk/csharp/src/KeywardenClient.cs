// The Keywarden client: every call carries a fresh nonce (and an HMAC when the config holds a
// secret), and every answer is verified against the pinned keys before a byte of it is believed
// (docs/protocol.md 3-5). Failures are KeywardenExceptions; nothing here exits the process.
// Every ...Async method has a blocking twin; the twins run the async code on the thread pool, so
// they cannot deadlock on a UI SynchronizationContext (WinForms, WPF, Unity).
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden
{
    /// <summary>What the SDK repeats to re-authenticate a heartbeat by itself.</summary>
    public sealed class Activation
    {
        /// <summary>"login" or "license".</summary>
        public string Kind { get; private set; }
        internal string Username, Password, Key, Hwid;
        private Activation(string kind) { Kind = kind; }
        internal static Activation Login(string u, string p, string h) { return new Activation("login") { Username = u, Password = p, Hwid = h }; }
        internal static Activation License(string k, string h) { return new Activation("license") { Key = k, Hwid = h }; }
    }

    /// <summary>
    /// A client of one Keywarden application. Thread-safe for concurrent calls. The licensing models of
    /// docs/protocol.md 12 (trial, entitlements, offline files, grace) are in KeywardenClient.Models.cs.
    /// </summary>
    public sealed partial class KeywardenClient : IDisposable
    {
        private const string ClientPath = "/api/client/";
        /// <summary>What a reverse proxy answers, unsigned, when the service behind it is down or slow.</summary>
        private static readonly HashSet<int> GatewayStatuses = new HashSet<int> { 502, 503, 504 };
        private static readonly TimeSpan Window = TimeSpan.FromSeconds(300);
        private static readonly UTF8Encoding StrictUtf8 = new UTF8Encoding(false, true);

        private readonly IKeywardenTransport _transport;
        private readonly bool _ownsTransport;
        private readonly ResponseVerifier _verifier;
        private readonly Func<DateTimeOffset> _clock;
        private readonly Action<KeywardenLogLevel, string> _logger;
        private readonly string _encKey;
        private readonly TimeSpan _maxOffset;
        /// <summary>The realtime channel is used only with the default transport (a custom one, or a proxy, keeps every call its own).</summary>
        private readonly bool _channelCapable;
        private readonly TlsPins _pins;
        private readonly bool _allowUntrustedPinned;
        private readonly object _gate = new object();
        private TimeSpan? _offset;
        private string _session;
        // The worker owning this session as the last answer named it (X-Keywarden-Route): sent back on
        // every call so a balancer routing on it reaches that worker. Trusted for nothing else. Dropped
        // after a connection error, a timeout or a 502/503/504: the worker it names may be gone.
        private string _route;
        private InitOptions _initOptions = new InitOptions();
        private Activation _lastActivation;

        /// <summary>The parsed configuration.</summary>
        public KeywardenConfig Config { get; private set; }
        /// <summary>Service root (options.BaseUrl or the config's base_url).</summary>
        public string BaseUrl { get; private set; }
        /// <summary>Per-call timeout.</summary>
        public TimeSpan Timeout { get; private set; }
        /// <summary>Extra attempts for calls that never reached the server.</summary>
        public int Retries { get; private set; }

        /// <summary>Loads keywarden.json from a path and creates a client.</summary>
        public static KeywardenClient FromConfig(string path, KeywardenOptions options = null)
        {
            return new KeywardenClient(KeywardenConfig.Load(path), options);
        }

        /// <summary>Creates a client from a parsed config.</summary>
        public static KeywardenClient FromConfig(KeywardenConfig config, KeywardenOptions options = null)
        {
            return new KeywardenClient(config, options);
        }

        /// <summary>Creates a client. Throws KeywardenConfigException / ArgumentException for unusable settings.</summary>
        public KeywardenClient(KeywardenConfig config, KeywardenOptions options = null)
        {
            if (config == null) throw new ArgumentNullException("config");
            var o = options ?? new KeywardenOptions();
            Config = config;
            BaseUrl = (o.BaseUrl ?? config.BaseUrl).TrimEnd('/');
            Uri check;
            if (!Uri.TryCreate(BaseUrl + ClientPath, UriKind.Absolute, out check) || (check.Scheme != "http" && check.Scheme != "https"))
                throw new ArgumentException("BaseUrl must be an http(s) URL: " + BaseUrl);
            if (o.Timeout <= TimeSpan.Zero) throw new ArgumentException("Timeout must be positive");
            Timeout = o.Timeout;
            Retries = Math.Max(0, o.Retries);
            _clock = o.Clock ?? (() => DateTimeOffset.UtcNow);
            _logger = o.Logger;
            _maxOffset = o.MaxClockOffset < Window ? Window : o.MaxClockOffset;
            _encKey = string.IsNullOrEmpty(o.EncKey) ? null : o.EncKey;
            _stateFileOption = string.IsNullOrEmpty(o.StateFile) ? null : o.StateFile;
            _requestFileOption = string.IsNullOrEmpty(o.RequestFile) ? null : o.RequestFile;
            if (_encKey != null && config.ApiSecret == null)
                throw new ArgumentException("EncKey needs the api_secret of the config (docs/protocol.md 5 keys the cipher with it)");
            if (_encKey != null && _encKey.Length > 35) throw new ArgumentException("EncKey is at most 35 characters");
            _verifier = new ResponseVerifier(config.ResponseKeys);
            if (o.Transport != null)
            {
                _transport = o.Transport;
            }
            else
            {
                var pins = o.TlsPins != null && o.TlsPins.Count > 0 ? new TlsPins(o.TlsPins) : null;
                _transport = new HttpClientTransport(o.Proxy, pins, o.AllowUntrustedPinnedCertificate);
                _ownsTransport = true;
                _pins = pins;
                _allowUntrustedPinned = o.AllowUntrustedPinnedCertificate;
                _channelCapable = o.Proxy == null;
            }
        }

        /// <summary>The session from the last init, or null.</summary>
        public string Session { get { lock (_gate) return _session; } }

        /// <summary>Server time minus local time, once learned from the first verified answer.</summary>
        public TimeSpan? ClockOffset { get { lock (_gate) return _offset; } }

        /// <summary>The local clock corrected by the learned offset.</summary>
        public DateTimeOffset ServerNow()
        {
            var off = ClockOffset;
            return _clock() + (off ?? TimeSpan.Zero);
        }

        /// <summary>The last successful login or license activation (what a heartbeat's re-authentication repeats).</summary>
        public Activation LastActivation { get { lock (_gate) return _lastActivation; } }

        /// <summary>This machine's salted hardware id for this application (KeywardenMachine.MachineHwid with the api_key as salt).</summary>
        public string MachineHwid()
        {
            return KeywardenMachine.MachineHwid(Config.ApiKey);
        }

        /// <summary>SHA-256 of the running program (KeywardenMachine.SelfHash).</summary>
        public static string SelfHash(string file = null)
        {
            return KeywardenMachine.SelfHash(file);
        }

        // ---- init ----------------------------------------------------------------------------

        /// <summary>Opens a session (POST /api/client/init).</summary>
        public Task<AppInfo> InitAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            return InitAsync(null, cancellationToken);
        }

        /// <summary>Opens a session with binary hash / token fields.</summary>
        public async Task<AppInfo> InitAsync(InitOptions init, CancellationToken cancellationToken = default(CancellationToken))
        {
            var i = init ?? new InitOptions();
            lock (_gate) _initOptions = i;
            var body = new Dictionary<string, object> { { "api_key", Config.ApiKey }, { "version", Config.Version } };
            if (_encKey != null) body["enc_key"] = _encKey;
            if (!string.IsNullOrEmpty(i.BinaryHash)) body["binary_hash"] = i.BinaryHash;
            if (i.BinaryToken != null)
            {
                body["binary_token"] = i.BinaryToken;
                if (i.BinaryTokenHash != null) body["binary_token_hash"] = i.BinaryTokenHash;
            }
            lock (_gate) _route = null; // a new session lives wherever init lands
            var r = await CallAsync("init", body, cancellationToken).ConfigureAwait(false);
            var app = Json.GetObject(r, "app");
            var session = Json.GetString(r, "session");
            if (session == null || app == null || Json.GetString(app, "name") == null)
                throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "init answer lacks session or app");
            lock (_gate) _session = session;
            return new AppInfo
            {
                Name = Json.GetString(app, "name"),
                Version = Json.GetString(app, "version") ?? "",
                HwidLock = Json.GetBool(app, "hwid_lock") == true,
                Session = session,
            };
        }

        /// <summary>Blocking InitAsync.</summary>
        public AppInfo Init(InitOptions init = null)
        {
            return Block(() => InitAsync(init));
        }

        // ---- register / login / license -----------------------------------------------------

        /// <summary>
        /// Claims a license key for a new account, then logs in at once and ignores that login's
        /// failure (as the reference clients do since 1.1). hwid: default MachineHwid().
        /// </summary>
        public async Task<UserInfo> RegisterAsync(string username, string password, string license, string hwid = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var h = hwid ?? MachineHwid();
            var r = await CallAsync("register", new Dictionary<string, object>
            {
                { "session", RequireSession() }, { "username", username }, { "password", password }, { "license", license }, { "hwid", h },
            }, cancellationToken).ConfigureAwait(false);
            var user = ReadUser(r);
            Activated(r);
            try
            {
                await LoginAsync(username, password, h, cancellationToken).ConfigureAwait(false);
            }
            catch (KeywardenException e)
            {
                Log(KeywardenLogLevel.Warn, "keywarden.register.login_failed " + e.Message);
            }
            lock (_gate) _lastActivation = Activation.Login(username, password, h);
            return user;
        }

        /// <summary>Blocking RegisterAsync.</summary>
        public UserInfo Register(string username, string password, string license, string hwid = null)
        {
            return Block(() => RegisterAsync(username, password, license, hwid));
        }

        /// <summary>Logs in (POST /api/client/login). hwid: default MachineHwid().</summary>
        public async Task<UserInfo> LoginAsync(string username, string password, string hwid = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var h = hwid ?? MachineHwid();
            var r = await CallAsync("login", new Dictionary<string, object>
            {
                { "session", RequireSession() }, { "username", username }, { "password", password }, { "hwid", h },
            }, cancellationToken).ConfigureAwait(false);
            var user = ReadUser(r);
            Activated(r);
            lock (_gate) _lastActivation = Activation.Login(username, password, h);
            return user;
        }

        /// <summary>Blocking LoginAsync.</summary>
        public UserInfo Login(string username, string password, string hwid = null)
        {
            return Block(() => LoginAsync(username, password, hwid));
        }

        /// <summary>Activates a license key (license-only mode). hwid: default MachineHwid().</summary>
        public async Task<LicenseInfo> ActivateLicenseAsync(string key, string hwid = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var h = hwid ?? MachineHwid();
            var r = await CallAsync("license", new Dictionary<string, object>
            {
                { "session", RequireSession() }, { "license", key }, { "hwid", h },
            }, cancellationToken).ConfigureAwait(false);
            var level = Json.GetInt(r, "level");
            if (level == null) throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "license answer lacks level");
            var ents = Activated(r);
            lock (_gate) _lastActivation = Activation.License(key, h);
            return new LicenseInfo { Level = level.Value, ExpiresAt = ToDate(r, "expires_at"), Message = Json.GetString(r, "message") ?? "", Entitlements = ents };
        }

        /// <summary>Blocking ActivateLicenseAsync.</summary>
        public LicenseInfo ActivateLicense(string key, string hwid = null)
        {
            return Block(() => ActivateLicenseAsync(key, hwid));
        }

        // ---- heartbeat ----------------------------------------------------------------------

        /// <summary>
        /// A heartbeat that has not started yet: subscribe to its events, then StartAsync. systemId
        /// defaults to MachineHwid(), codeHash to SelfHash().
        /// </summary>
        public Heartbeat CreateHeartbeat(string systemId = null, string codeHash = null, HeartbeatOptions options = null)
        {
            return new Heartbeat(this, systemId ?? MachineHwid(), codeHash ?? KeywardenMachine.SelfHash(), options ?? new HeartbeatOptions());
        }

        /// <summary>
        /// Opens a heartbeat session (its proof verified) and beats until stopped or killed. The first
        /// beat comes one interval later: subscribe to the events right away (or use CreateHeartbeat).
        /// </summary>
        public async Task<Heartbeat> StartHeartbeatAsync(string systemId = null, string codeHash = null, HeartbeatOptions options = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            var hb = CreateHeartbeat(systemId, codeHash, options);
            await hb.StartAsync(cancellationToken).ConfigureAwait(false);
            return hb;
        }

        /// <summary>Blocking StartHeartbeatAsync.</summary>
        public Heartbeat StartHeartbeat(string systemId = null, string codeHash = null, HeartbeatOptions options = null)
        {
            return Block(() => StartHeartbeatAsync(systemId, codeHash, options));
        }

        internal sealed class HeartbeatStart
        {
            public string Session, Token;
            public int BeatInterval;
        }

        /// <summary>The realtime channel for a heartbeat, or null when this client keeps to REST (custom transport, proxy).</summary>
        internal ChannelLink CreateChannelLink()
        {
            if (!_channelCapable) return null;
            var ctx = new ChannelContext
            {
                BaseUrl = BaseUrl,
                Version = Config.Version ?? "1.0",
                ApiSecret = Config.ApiSecret,
                Timeout = Timeout,
                OpenTimeout = Timeout < TimeSpan.FromSeconds(5) ? Timeout : TimeSpan.FromSeconds(5),
                Verifier = _verifier,
                ServerNow = ServerNow,
                Route = () => { lock (_gate) return _route; },
                Log = Log,
                Pins = _pins,
                AllowUntrustedPinned = _allowUntrustedPinned,
            };
            return new ChannelLink(ctx, RequireSession());
        }

        /// <summary>heartbeat/start (on the channel when `link` opens, else REST), with the proof checked before the token is trusted.</summary>
        internal async Task<HeartbeatStart> OpenHeartbeatAsync(string systemId, ChannelLink link, CancellationToken ct)
        {
            var session = RequireSession();
            Dictionary<string, object> r = null;
            if (link != null && await link.RebindAsync(session).ConfigureAwait(false))
            {
                try
                {
                    r = await link.CallAsync("heartbeat/start", new Dictionary<string, object> { { "system_id", systemId } }).ConfigureAwait(false);
                }
                catch (KeywardenException e) when (e.NotSent)
                {
                    // the channel went down before the call left: REST below
                }
            }
            if (r == null)
                r = await CallAsync("heartbeat/start", new Dictionary<string, object> { { "session", session }, { "system_id", systemId } }, ct).ConfigureAwait(false);
            var token = Json.GetString(r, "token");
            var interval = Json.GetInt(r, "beat_interval");
            if (token == null || interval == null || interval.Value < 1 || interval.Value > 86400)
                throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "heartbeat/start answer lacks token or beat_interval");
            object proof;
            r.TryGetValue("proof", out proof);
            if (!KeywardenCrypto.ProofEquals(proof, KeywardenCrypto.StartProof(session, systemId, token)))
                throw KeywardenException.VerificationFailed(VerificationReason.BadProof, "heartbeat/start proof does not verify");
            _grace.Note(r);
            return new HeartbeatStart { Session = session, Token = token, BeatInterval = (int)interval.Value };
        }

        /// <summary>init + the remembered activation, for a heartbeat whose state was lost.</summary>
        public async Task ReauthenticateAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            Activation a;
            InitOptions init;
            lock (_gate) { a = _lastActivation; init = _initOptions; }
            if (a == null)
                throw new KeywardenException(KeywardenErrorCode.SessionExpired, "nothing to re-authenticate with: no login or license succeeded on this client");
            await InitAsync(init, cancellationToken).ConfigureAwait(false);
            if (a.Kind == "login") await LoginAsync(a.Username, a.Password, a.Hwid, cancellationToken).ConfigureAwait(false);
            else await ActivateLicenseAsync(a.Key, a.Hwid, cancellationToken).ConfigureAwait(false);
        }

        // ---- one verified call ----------------------------------------------------------------

        private sealed class ClockSkewSignal
        {
            public bool OffsetLearned;
        }

        /// <summary>
        /// One verified client call. Sends again (fresh nonce) only when the request certainly never
        /// reached the server, or once after the server refused our request signature while our
        /// clock was off (learned from that same signed answer).
        /// </summary>
        internal async Task<Dictionary<string, object>> CallAsync(string endpoint, Dictionary<string, object> body, CancellationToken ct)
        {
            var attempt = 0;
            var clockRetried = false;
            while (true)
            {
                var signal = new ClockSkewSignal();
                try
                {
                    return await OnceAsync(endpoint, body, signal, ct).ConfigureAwait(false);
                }
                catch (KeywardenException e)
                {
                    if (e.NotSent && attempt < Retries)
                    {
                        attempt++;
                        Log(KeywardenLogLevel.Debug, "keywarden.call.retry " + endpoint + " attempt " + attempt + ": " + e.Message);
                        await Task.Delay(TimeSpan.FromMilliseconds(Math.Min(2000, 100 << attempt)), ct).ConfigureAwait(false);
                        continue;
                    }
                    if (e.Code == KeywardenErrorCode.ClockSkew && signal.OffsetLearned && !clockRetried)
                    {
                        clockRetried = true;
                        continue;
                    }
                    throw;
                }
            }
        }

        private async Task<Dictionary<string, object>> OnceAsync(string endpoint, Dictionary<string, object> body, ClockSkewSignal signal, CancellationToken ct)
        {
            var path = ClientPath + endpoint;
            var initIv = _encKey != null ? KeywardenCrypto.RandomBase64Url(16) : null;
            var payload = body;
            if (initIv != null) payload = new Dictionary<string, object>(body) { { "init_iv", initIv } };
            var raw = StrictUtf8.GetBytes(Json.Serialize(payload));
            var nonce = KeywardenCrypto.RandomBase64Url(18);
            var headers = new Dictionary<string, string>
            {
                { "content-type", "application/json" }, { "accept", "application/json" }, { "x-nonce", nonce },
            };
            string route;
            lock (_gate) route = _route;
            if (!string.IsNullOrEmpty(route)) headers["x-keywarden-route"] = route;
            if (Config.ApiSecret != null)
            {
                var ts = ServerNow().ToUnixTimeSeconds().ToString(CultureInfo.InvariantCulture);
                headers["x-timestamp"] = ts;
                headers["x-signature"] = KeywardenCrypto.RequestSignature(Config.ApiSecret, KeywardenCrypto.CanonicalRequest("POST", path, ts, nonce, raw));
            }
            var request = new TransportRequest("POST", new Uri(BaseUrl + path), headers, raw, Timeout);
            TransportResponse res;
            try
            {
                res = await SendAsync(request, path, ct).ConfigureAwait(false);
            }
            catch (KeywardenException)
            {
                lock (_gate) _route = null; // let the balancer pick a live worker next time
                throw;
            }
            var gateway = GatewayStatuses.Contains(res.Status);
            // Signed or not (a balancer's own answer is not), the worker the route names may be gone.
            // Dropping a hint is all a forged answer could achieve: the next call is forwarded once.
            if (gateway) lock (_gate) _route = null;
            if (gateway && res.Header("X-Response-Kid") == null && res.Header("X-Response-Timestamp") == null
                && res.Header("X-Response-Signature") == null)
            {
                // A proxy in front saying the service is unreachable: believed for nothing, but not an
                // attack either (whoever could forge it could as well cut the connection).
                throw KeywardenException.GatewayUnreachable(res.Status, "server: " + res.Status + " from a gateway (unsigned) on " + path);
            }

            bool hadOffset;
            lock (_gate) hadOffset = _offset.HasValue;
            VerifyAnswer(path, res, nonce);
            var named = res.Header("X-Keywarden-Route");
            if (!string.IsNullOrEmpty(named) && !gateway) lock (_gate) _route = named;

            var parsed = ParseObject(res.Body);
            if (parsed == null)
                throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "answer of " + path + " (" + res.Status + ") is not a JSON object");
            if (res.Status != 200)
            {
                NoteRefusal(res.Status);
                object detail;
                parsed.TryGetValue("detail", out detail);
                var e = KeywardenException.FromAnswer(res.Status, detail, res.Header("Retry-After"));
                // Our timestamp was refused and this signed answer just taught us the server's clock: worth one retry.
                var off = ClockOffset;
                if (e.Code == KeywardenErrorCode.ClockSkew && !hadOffset && off.HasValue && off.Value.Duration() > TimeSpan.FromSeconds(60))
                    signal.OffsetLearned = true;
                throw e;
            }
            var enc = Json.GetString(parsed, "enc");
            if (enc != null && initIv != null)
            {
                Dictionary<string, object> plain = null;
                try
                {
                    plain = ParseObject(KeywardenCrypto.DecryptResponse(enc, _encKey, Config.ApiSecret, initIv));
                }
                catch (Exception x) when (x is FormatException || x is System.Security.Cryptography.CryptographicException || x is ArgumentException)
                {
                    plain = null;
                }
                if (plain == null)
                    throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "encrypted answer of " + path + " does not decrypt");
                parsed = plain;
            }
            if (Json.GetBool(parsed, "success") != true)
                throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "answer of " + path + " lacks success: true");
            return parsed;
        }

        /// <summary>
        /// The transport call with the timeout enforced here as well, so a custom transport that
        /// ignores its token cannot hang the caller. Every failure becomes a KeywardenException.
        /// </summary>
        private async Task<TransportResponse> SendAsync(TransportRequest request, string path, CancellationToken ct)
        {
            using (var cts = CancellationTokenSource.CreateLinkedTokenSource(ct))
            {
                Task<TransportResponse> send;
                try
                {
                    send = _transport.SendAsync(request, cts.Token);
                    if (send == null) throw new InvalidOperationException("transport returned no task");
                }
                catch (Exception e) when (!(e is OperationCanceledException))
                {
                    throw Wrap(e, path);
                }
                var timer = Task.Delay(Timeout, cts.Token);
                var first = await Task.WhenAny(send, timer).ConfigureAwait(false);
                if (first != send)
                {
                    cts.Cancel();
                    Observe(send);
                    ct.ThrowIfCancellationRequested();
                    throw KeywardenException.TransportFailed(KeywardenErrorCode.Timeout,
                        "timeout on " + path + ": no answer within " + Timeout.TotalMilliseconds + " ms", false, null);
                }
                cts.Cancel(); // stops the timer
                try
                {
                    var res = await send.ConfigureAwait(false);
                    if (res == null) throw new InvalidOperationException("transport returned no response");
                    return res;
                }
                catch (OperationCanceledException) when (ct.IsCancellationRequested)
                {
                    throw;
                }
                catch (Exception e)
                {
                    throw Wrap(e, path);
                }
            }
        }

        private static KeywardenException Wrap(Exception e, string path)
        {
            var t = e as TransportException;
            if (t != null)
            {
                if (t.TlsPinMismatch)
                    return KeywardenException.VerificationFailed(VerificationReason.TlsPin, t.Message, t);
                var code = t.Kind == TransportFailure.Timeout ? KeywardenErrorCode.Timeout : KeywardenErrorCode.Network;
                return KeywardenException.TransportFailed(code, ErrorTable.WireName(code) + " on " + path + ": " + t.Message, !t.RequestSent, t);
            }
            if (e is OperationCanceledException)
                return KeywardenException.TransportFailed(KeywardenErrorCode.Timeout, "timeout on " + path + ": " + e.Message, false, e);
            return KeywardenException.TransportFailed(KeywardenErrorCode.Network, "network on " + path + ": " + e.Message, false, e);
        }

        private static void Observe(Task t)
        {
            // A transport abandoned after a timeout may still fail later; its exception must not be unobserved.
            t.ContinueWith(x => { var ignored = x.Exception; }, TaskContinuationOptions.OnlyOnFaulted | TaskContinuationOptions.ExecuteSynchronously);
        }

        private void VerifyAnswer(string path, TransportResponse res, string nonce)
        {
            // Before the offset is known a larger distance is allowed: the answer is bound to this
            // request's fresh nonce, so it cannot be an old one replayed. Afterwards: 300 s around server time.
            TimeSpan? off;
            lock (_gate) off = _offset;
            var limit = off.HasValue ? Window : _maxOffset;
            var now = _clock();
            var stamped = _verifier.Verify("POST", path, res.Status, res.Headers, res.Body, nonce, now + (off ?? TimeSpan.Zero), limit);
            if (off.HasValue) return;
            var learned = stamped - now;
            lock (_gate)
            {
                if (_offset.HasValue) return;
                _offset = learned;
            }
            if (learned.Duration() > TimeSpan.FromSeconds(5))
                Log(KeywardenLogLevel.Info, "keywarden.clock.offset " + learned.TotalSeconds.ToString("0", CultureInfo.InvariantCulture) + " s");
        }

        private static Dictionary<string, object> ParseObject(byte[] body)
        {
            try
            {
                return Json.Parse(StrictUtf8.GetString(body)) as Dictionary<string, object>;
            }
            catch (FormatException) { return null; }
            catch (ArgumentException) { return null; } // DecoderFallbackException: not UTF-8
        }

        private string RequireSession()
        {
            var s = Session;
            if (s == null) throw new KeywardenException(KeywardenErrorCode.SessionExpired, "call Init first");
            return s;
        }

        private static UserInfo ReadUser(Dictionary<string, object> r)
        {
            var u = Json.GetObject(r, "user");
            var name = Json.GetString(u, "username");
            var level = Json.GetInt(u, "level");
            if (name == null || level == null) throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "answer lacks user");
            return new UserInfo
            {
                Username = name, Level = level.Value, ExpiresAt = ToDate(u, "expires_at"), Message = Json.GetString(r, "message") ?? "", Entitlements = EntitlementsOf(r),
            };
        }

        private static DateTimeOffset? ToDate(IDictionary<string, object> o, string name)
        {
            var s = Json.GetString(o, name);
            DateTimeOffset d;
            if (s != null && DateTimeOffset.TryParse(s, CultureInfo.InvariantCulture, DateTimeStyles.AssumeUniversal | DateTimeStyles.AdjustToUniversal, out d))
                return d;
            return null;
        }

        internal void Log(KeywardenLogLevel level, string message)
        {
            var l = _logger;
            if (l == null) return;
            try { l(level, message); } catch (Exception) { /* a logger must not break a call */ }
        }

        internal static T Block<T>(Func<Task<T>> run)
        {
            return Task.Run(run).GetAwaiter().GetResult();
        }

        internal static void Block(Func<Task> run)
        {
            Task.Run(run).GetAwaiter().GetResult();
        }

        /// <summary>Releases the default transport (a transport passed in options is not disposed).</summary>
        public void Dispose()
        {
            if (_ownsTransport) ((IDisposable)_transport).Dispose();
        }
    }
}
