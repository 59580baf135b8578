// The realtime channel (the server's docs/protocol.md, "Realtime channel"): heartbeat calls over one
// WebSocket and pushes (revoked, update_required, notice). Nothing is believed unverified: the
// hello must be signed by a pinned key over THIS client's session and fresh X25519 key, every later
// frame must carry this connection's MAC and the next sequence number. A frame that fails is
// refused: the connection is dropped and the message never acted upon.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden
{
    /// <summary>What a channel needs of its client.</summary>
    internal sealed class ChannelContext
    {
        public string BaseUrl, Version, ApiSecret;
        /// <summary>Per call on the channel.</summary>
        public TimeSpan Timeout;
        /// <summary>For the upgrade and the hello: a server that never answers an upgrade must not delay REST long.</summary>
        public TimeSpan OpenTimeout;
        public ResponseVerifier Verifier;
        public Func<DateTimeOffset> ServerNow;
        /// <summary>The route the last REST answer named (X-Keywarden-Route), sent on the upgrade.</summary>
        public Func<string> Route;
        public Action<KeywardenLogLevel, string> Log;
        public TlsPins Pins;
        public bool AllowUntrustedPinned;
    }

    /// <summary>A pushed message: Type is "revoked", "update_required" or "notice".</summary>
    internal sealed class ChannelPush
    {
        public string Type, Reason, Detail, Message, LatestVersion, UpdateUrl;
        public DateTimeOffset? At;
    }

    /// <summary>One verified connection. OnPush and OnClose run on the connection's reader thread.</summary>
    internal sealed class ChannelConnection
    {
        private static readonly UTF8Encoding Utf8 = new UTF8Encoding(false);
        private readonly ChannelContext _ctx;
        private readonly WebSocketClient _ws;
        private readonly ChannelKeys _keys;
        private readonly object _gate = new object();
        private readonly Dictionary<long, TaskCompletionSource<Dictionary<string, object>>> _pending =
            new Dictionary<long, TaskCompletionSource<Dictionary<string, object>>>();
        private long _out, _in;
        private bool _closed;

        public Action<ChannelPush> OnPush = p => { };
        public Action<int, KeywardenException> OnClose = (code, e) => { };
        public int CloseCode { get; private set; }
        public KeywardenException CloseError { get; private set; }

        private ChannelConnection(ChannelContext ctx, WebSocketClient ws, ChannelKeys keys)
        {
            _ctx = ctx;
            _ws = ws;
            _keys = keys;
        }

        public bool Open { get { lock (_gate) return !_closed; } }

        /// <summary>The result of Open: a connection, or the error and whether the server offers a channel at all.</summary>
        public sealed class OpenResult
        {
            public ChannelConnection Connection;
            public KeywardenException Error;
            /// <summary>False: this server has no channel (404/405): use REST for good.</summary>
            public bool Offered = true;
        }

        /// <summary>Upgrades, verifies the hello and derives the keys (blocking, within OpenTimeout). Never throws.</summary>
        public static OpenResult Connect(ChannelContext ctx, string session)
        {
            var secret = ChannelProtocol.NewSecret();
            var clientKey = ChannelProtocol.PublicKey(secret);
            var headers = new Dictionary<string, string> { { "X-Session", session }, { "X-Nonce", clientKey }, { "X-Client-Version", ctx.Version } };
            var route = ctx.Route != null ? ctx.Route() : null;
            if (!string.IsNullOrEmpty(route)) headers["X-Keywarden-Route"] = route;
            if (ctx.ApiSecret != null)
            {
                var ts = ctx.ServerNow().ToUnixTimeSeconds().ToString(CultureInfo.InvariantCulture);
                headers["X-Timestamp"] = ts;
                headers["X-Signature"] = KeywardenCrypto.RequestSignature(ctx.ApiSecret,
                    KeywardenCrypto.CanonicalRequest("GET", ChannelProtocol.Path, ts, clientKey, new byte[0]));
            }
            WebSocketClient ws;
            UpgradeRefusal refusal;
            try
            {
                ws = WebSocketClient.Connect(new Uri(ctx.BaseUrl + ChannelProtocol.Path), headers, ctx.OpenTimeout, ctx.Pins, ctx.AllowUntrustedPinned, out refusal);
            }
            catch (Exception e)
            {
                return new OpenResult { Error = KeywardenException.TransportFailed(KeywardenErrorCode.Network, "channel: " + Describe(e), true, e) };
            }
            if (ws == null) return Refused(ctx, clientKey, refusal);
            try
            {
                bool binary;
                var hello = ws.ReadMessage(out binary);
                if (binary) throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "channel hello is not a text frame");
                string text;
                try { text = new UTF8Encoding(false, true).GetString(hello); }
                catch (ArgumentException) { throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "channel hello is not UTF-8"); }
                long interval;
                var keys = ChannelProtocol.VerifyHello(ctx.Verifier.KeyFor, ctx.ServerNow(), session, clientKey, secret, text, out interval);
                var conn = new ChannelConnection(ctx, ws, keys);
                return new OpenResult { Connection = conn };
            }
            catch (KeywardenException e)
            {
                ws.Terminate();
                return new OpenResult { Error = e };
            }
            catch (Exception e)
            {
                ws.Terminate();
                return new OpenResult { Error = new KeywardenException(KeywardenErrorCode.Network, "channel: " + Describe(e), e) };
            }
        }

        /// <summary>Starts reading frames (after OnPush and OnClose are set).</summary>
        public void Start()
        {
            _ws.Start(Receive, (code, reason) => Finish(code, null));
        }

        private static OpenResult Refused(ChannelContext ctx, string nonce, UpgradeRefusal r)
        {
            var absent = r.Status == 404 || r.Status == 405;
            try
            {
                ctx.Verifier.Verify("GET", ChannelProtocol.Path, r.Status, r.Headers, r.Body, nonce, ctx.ServerNow(), TimeSpan.FromSeconds(300));
            }
            catch (KeywardenException e)
            {
                // An unsigned answer (a proxy that does not pass WebSockets): nothing in it is believed.
                return new OpenResult { Error = e, Offered = !absent };
            }
            object detail = null;
            try
            {
                var parsed = Json.Parse(new UTF8Encoding(false, true).GetString(r.Body)) as Dictionary<string, object>;
                if (parsed == null) throw new FormatException("not an object");
                parsed.TryGetValue("detail", out detail);
            }
            catch (Exception e) when (e is FormatException || e is ArgumentException)
            {
                return new OpenResult
                {
                    Error = KeywardenException.VerificationFailed(VerificationReason.Malformed, "channel refusal " + r.Status + " is not JSON"),
                    Offered = !absent,
                };
            }
            string retry;
            r.Headers.TryGetValue("Retry-After", out retry);
            return new OpenResult { Error = KeywardenException.FromAnswer(r.Status, detail, retry), Offered = !absent };
        }

        /// <summary>
        /// One heartbeat call: the success body, or the server's coded error, or Network with NotSent
        /// when the channel was already down (send it over REST instead).
        /// </summary>
        public async Task<Dictionary<string, object>> CallAsync(string op, IDictionary<string, object> body)
        {
            var rest = new Dictionary<string, object>();
            foreach (var kv in body) if (kv.Key != "session") rest[kv.Key] = kv.Value;
            var tcs = new TaskCompletionSource<Dictionary<string, object>>(TaskCreationOptions.RunContinuationsAsynchronously);
            long seq;
            byte[] frame;
            lock (_gate)
            {
                if (_closed) throw KeywardenException.TransportFailed(KeywardenErrorCode.Network, "channel closed", true, null);
                seq = ++_out;
                _pending[seq] = tcs;
                var payload = new Dictionary<string, object> { { "seq", seq }, { "type", "call" }, { "op", op }, { "body", rest } };
                frame = ChannelProtocol.SealFrame(_keys.C2S, Utf8.GetBytes(Json.Serialize(payload)));
                // Sent under the lock: frames must leave in seq order.
                if (!_ws.Send(frame))
                {
                    _pending.Remove(seq);
                    throw KeywardenException.TransportFailed(KeywardenErrorCode.Network, "channel closed", true, null);
                }
            }
            using (var cts = new CancellationTokenSource())
            {
                var timer = Task.Delay(_ctx.Timeout, cts.Token);
                if (await Task.WhenAny(tcs.Task, timer).ConfigureAwait(false) != tcs.Task)
                {
                    lock (_gate) _pending.Remove(seq);
                    throw KeywardenException.TransportFailed(KeywardenErrorCode.Timeout,
                        "no answer to " + op + " on the channel within " + _ctx.Timeout.TotalMilliseconds + " ms", false, null);
                }
                cts.Cancel();
            }
            return await tcs.Task.ConfigureAwait(false);
        }

        public void Close(int code = 1000)
        {
            _ws.Close(code);
        }

        private void Refuse(VerificationReason reason, string what)
        {
            Log(KeywardenLogLevel.Warn, "keywarden.channel.refused " + ErrorTable.WireName(reason));
            // First: the socket's own close must not report it as a plain drop.
            Finish(1006, KeywardenException.VerificationFailed(reason, what));
            _ws.Terminate();
        }

        private void Receive(byte[] data, bool binary)
        {
            long expected;
            lock (_gate)
            {
                if (_closed) return;
                expected = _in + 1;
            }
            VerificationReason? reason;
            string what;
            var m = ChannelProtocol.ReadFrame(_keys.S2C, expected, data, binary, out reason, out what);
            if (m == null)
            {
                Refuse(reason.Value, what);
                return;
            }
            lock (_gate) _in = expected;
            switch (Json.GetString(m, "type"))
            {
                case "reply":
                {
                    var re = Json.GetInt(m, "re");
                    TaskCompletionSource<Dictionary<string, object>> p = null;
                    lock (_gate)
                    {
                        if (re.HasValue && _pending.TryGetValue(re.Value, out p)) _pending.Remove(re.Value);
                    }
                    if (p == null) return;
                    var b = Json.GetObject(m, "body") as Dictionary<string, object> ?? new Dictionary<string, object>();
                    var status = Json.GetInt(m, "status") ?? 0;
                    if (status == 200)
                    {
                        if (Json.GetBool(b, "success") != true)
                            p.TrySetException(KeywardenException.VerificationFailed(VerificationReason.Malformed, "channel reply lacks success: true"));
                        else p.TrySetResult(b);
                        return;
                    }
                    object detail;
                    b.TryGetValue("detail", out detail);
                    object retry;
                    m.TryGetValue("retry_after", out retry);
                    p.TrySetException(KeywardenException.FromAnswer((int)status, detail,
                        retry != null ? Convert.ToString(retry, CultureInfo.InvariantCulture) : null));
                    return;
                }
                case "revoked":
                    OnPush(new ChannelPush { Type = "revoked", Reason = Json.GetString(m, "reason") ?? "", Detail = Json.GetString(m, "detail") ?? "" });
                    return;
                case "update_required":
                {
                    var d = Json.GetObject(m, "detail");
                    OnPush(new ChannelPush
                    {
                        Type = "update_required",
                        Message = Json.GetString(d, "message") ?? "A new version is required.",
                        LatestVersion = Json.GetString(d, "latest_version"),
                        UpdateUrl = Json.GetString(d, "update_url"),
                    });
                    return;
                }
                case "notice":
                {
                    var at = default(DateTimeOffset);
                    var s = Json.GetString(m, "at");
                    var ok = s != null && DateTimeOffset.TryParse(s, CultureInfo.InvariantCulture,
                        DateTimeStyles.AssumeUniversal | DateTimeStyles.AdjustToUniversal, out at);
                    OnPush(new ChannelPush { Type = "notice", Message = Json.GetString(m, "message") ?? "", At = ok ? at : (DateTimeOffset?)null });
                    return;
                }
                default:
                    return; // pong, or a message type of a newer server: verified, and harmless to skip
            }
        }

        private void Finish(int code, KeywardenException error)
        {
            List<KeyValuePair<long, TaskCompletionSource<Dictionary<string, object>>>> pending;
            lock (_gate)
            {
                if (_closed) return;
                _closed = true;
                CloseCode = code;
                CloseError = error;
                pending = new List<KeyValuePair<long, TaskCompletionSource<Dictionary<string, object>>>>(_pending);
                _pending.Clear();
            }
            foreach (var p in pending)
            {
                // Sent, unanswered: the server may have acted on it (like a REST answer lost on the way).
                p.Value.TrySetException(error ?? new KeywardenException(KeywardenErrorCode.Network,
                    "channel closed (" + code + ") before the answer to call " + p.Key));
            }
            try { OnClose(code, error); }
            catch (Exception e) { Log(KeywardenLogLevel.Error, "keywarden.channel.on_close_threw " + e.Message); }
        }

        private void Log(KeywardenLogLevel level, string message)
        {
            var l = _ctx.Log;
            if (l != null) l(level, message);
        }

        internal static string Describe(Exception e)
        {
            var parts = new List<string>();
            for (var x = e; x != null && parts.Count < 3; x = x.InnerException)
            {
                var agg = x as AggregateException;
                if (agg != null && agg.InnerExceptions.Count == 1) continue;
                parts.Add(x.Message);
            }
            return string.Join(" -> ", parts);
        }
    }

    /// <summary>A state change or push of the heartbeat's channel.</summary>
    internal sealed class LinkEvent
    {
        public ChannelPush Push;
        /// <summary>"open" or "closed" when Push is null.</summary>
        public string State;
        public int? CloseCode;
        public KeywardenException Error;
    }

    /// <summary>
    /// The heartbeat's channel: opens it, reopens it after a drop (backoff 0.5 s doubling up to 30 s),
    /// gives up for good when the server has none, and hands pushes and state changes to one sink.
    /// </summary>
    internal sealed class ChannelLink
    {
        /// <summary>Close codes after which the channel is not reopened for this session.</summary>
        private static readonly HashSet<int> FinalClose = new HashSet<int> { 1000, 4001, 4003, 4008 };
        private static readonly HashSet<KeywardenErrorCode> Transient = new HashSet<KeywardenErrorCode>
        {
            KeywardenErrorCode.Network, KeywardenErrorCode.Timeout, KeywardenErrorCode.Verification,
            KeywardenErrorCode.RateLimited, KeywardenErrorCode.Server,
        };
        private static readonly Random Jitter = new Random();
        private readonly ChannelContext _ctx;
        private readonly object _gate = new object();
        private readonly List<LinkEvent> _backlog = new List<LinkEvent>();
        private string _session;
        private ChannelConnection _conn;
        private Timer _timer;
        private int _attempts;
        private bool _off;
        private Action<LinkEvent> _sink;

        public ChannelLink(ChannelContext ctx, string session)
        {
            _ctx = ctx;
            _session = session;
        }

        public bool Ready
        {
            get
            {
                var c = Volatile.Read(ref _conn);
                return c != null && c.Open;
            }
        }

        /// <summary>Where pushes and state changes go; those that came before are delivered now.</summary>
        public void Attach(Action<LinkEvent> sink)
        {
            List<LinkEvent> backlog;
            lock (_gate)
            {
                _sink = sink;
                backlog = new List<LinkEvent>(_backlog);
                _backlog.Clear();
            }
            foreach (var e in backlog) sink(e);
        }

        private void Deliver(LinkEvent e)
        {
            Action<LinkEvent> sink;
            lock (_gate)
            {
                sink = _sink;
                if (sink == null)
                {
                    _backlog.Add(e);
                    return;
                }
            }
            sink(e);
        }

        /// <summary>One attempt now; true when the channel is open.</summary>
        public async Task<bool> ConnectAsync()
        {
            string session;
            lock (_gate)
            {
                if (_off) return false;
                if (Ready) return true;
                session = _session;
            }
            var r = await Task.Run(() => ChannelConnection.Connect(_ctx, session)).ConfigureAwait(false);
            var conn = r.Connection;
            lock (_gate)
            {
                if (_off || session != _session)
                {
                    if (conn != null) conn.Close();
                    return false;
                }
                if (conn == null)
                {
                    Log(KeywardenLogLevel.Debug, "keywarden.channel.unavailable " + r.Error.Message);
                    if (!r.Offered || !Transient.Contains(r.Error.Code)) _off = true;
                    else Retry(r.Error.RetryAfter);
                }
                else
                {
                    _attempts = 0;
                    Volatile.Write(ref _conn, conn);
                }
            }
            if (conn == null)
            {
                Deliver(new LinkEvent { State = "closed", Error = r.Error });
                return false;
            }
            conn.OnPush = p => Deliver(new LinkEvent { Push = p });
            conn.OnClose = (code, error) => Closed(conn, code, error);
            Deliver(new LinkEvent { State = "open" });
            conn.Start(); // may refuse a frame that followed the hello, and close at once
            return Ready;
        }

        private void Closed(ChannelConnection conn, int code, KeywardenException error)
        {
            lock (_gate)
            {
                if (_conn == conn) Volatile.Write(ref _conn, null);
                if (FinalClose.Contains(code)) _off = true;
                else Retry(null);
            }
            Deliver(new LinkEvent { State = "closed", CloseCode = code, Error = error });
        }

        public Task<Dictionary<string, object>> CallAsync(string op, IDictionary<string, object> body)
        {
            var c = Volatile.Read(ref _conn);
            if (c == null) throw KeywardenException.TransportFailed(KeywardenErrorCode.Network, "channel closed", true, null);
            return c.CallAsync(op, body);
        }

        /// <summary>After a re-authentication: the channel of the new session.</summary>
        public Task<bool> RebindAsync(string session)
        {
            ChannelConnection old;
            lock (_gate)
            {
                _session = session;
                old = _conn;
                Volatile.Write(ref _conn, null);
                _attempts = 0;
                _off = false;
                if (_timer != null) _timer.Dispose();
                _timer = null;
            }
            if (old != null) old.Close();
            return ConnectAsync();
        }

        /// <summary>For good.</summary>
        public void Close()
        {
            ChannelConnection old;
            lock (_gate)
            {
                _off = true;
                if (_timer != null) _timer.Dispose();
                _timer = null;
                old = _conn;
                Volatile.Write(ref _conn, null);
            }
            if (old != null) old.Close();
        }

        /// <summary>Under _gate.</summary>
        private void Retry(TimeSpan? hint)
        {
            if (_off) return;
            var baseMs = Math.Min(30000.0, 500.0 * Math.Pow(2, _attempts++));
            double jitter;
            lock (Jitter) jitter = 0.8 + Jitter.NextDouble() * 0.4;
            var delay = Math.Max(hint.HasValue ? hint.Value.TotalMilliseconds : 0, baseMs * jitter);
            if (_timer != null) _timer.Dispose();
            // ConnectAsync never faults: its outcome is delivered to the sink.
            _timer = new Timer(_ => ConnectAsync(), null, (long)delay, Timeout.Infinite);
        }

        private void Log(KeywardenLogLevel level, string message)
        {
            var l = _ctx.Log;
            if (l != null) l(level, message);
        }
    }
}
