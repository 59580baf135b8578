// A running heartbeat (docs/protocol.md 6, docs/spec.md "Heartbeat rules"). Events (raised on a thread-pool thread, or
// the channel's reader thread for pushes):
//   Beat       a beat whose signature and proof verified (Index, Count)
//   Degraded   a beat failed (Error, Lost = the server may have seen it, Reauthenticating, LastBeatAt)
//   Compromised CompromisedAfter verification failures in a row: answers are being tampered with;
//              automatic re-authentication stops (the program decides: stop, lock, carry on)
//   Recovered  re-authentication opened a new heartbeat session
//   Killed     the server ended it (debugger, revoked, banned...): final
//   Stopped    the loop has ended (Stop or Killed)
//   Revoked, UpdateRequired, Notice, Channel: pushed on the realtime channel (Killed follows Revoked)
//   Expired    the license (or end user) expired while running (docs/protocol.md 12.8): pushed on the channel as
//              `revoked` with reason `expired`, or a beat refused (or unreachable) after the known expiry;
//              Killed follows with code Expired. The grace period never covers an expiry.
//   Offline    the service cannot be reached (network, timeout, 5xx) and the grace period (docs/protocol.md 12.6)
//              covers now: the license stays valid until GraceUntil (state Offline)
//   GraceExpired still unreachable and the grace period is over: the program decides; the heartbeat goes
//              on trying. Every failed beat still raises Degraded. State leaves Offline the moment
//              GraceUntil passes, without waiting for a beat.
// With the default transport the beats travel on the realtime channel (GET /api/client/ws) when the
// server offers it, and over REST whenever it is down; the token chain is the same on both.
// A beat that certainly never reached the server is sent again with the same index and token
// (KeywardenClient.CallAsync does that). A beat whose answer was lost cannot be: a replayed
// beat_index is refused and the new token is unknown. The heartbeat then reports Degraded and,
// with re-authentication enabled, runs init, the same activation and heartbeat/start again by
// itself; without it, it goes on with the next index and the old token, which works only if the
// server never saw the lost beat.
// A beat refused as `rejected` (403) right after the service was unreachable (network, timeout, 5xx)
// is a server that lost the session meanwhile (a restart): with re-authentication on it
// re-authenticates once and goes on; if that fails (the key was banned meanwhile), Killed carries
// that call's own error.
// Expiry (docs/protocol.md 12.8, docs/decisions.md): the server ends the session at expires_at. Knowing the
// expiry of the last verified activation (KeywardenClient.ExpiresAt), the heartbeat beats at most
// ExpiryCheck after it, so a REST client learns it on time too; a refusal then (or no answer at all)
// is Expired; a beat accepted well after it means the key was extended. The local clock alone never
// ends a heartbeat the server still accepts.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden
{
    /// <summary>Whether the heartbeat uses the realtime channel.</summary>
    public enum HeartbeatChannelMode
    {
        /// <summary>The realtime channel when the server offers it (and the client uses the default transport, no proxy).</summary>
        Auto,
        /// <summary>REST only.</summary>
        Off,
    }

    /// <summary>Where a heartbeat stands.</summary>
    public enum HeartbeatState
    {
        /// <summary>The last beat verified.</summary>
        Healthy,
        /// <summary>The service cannot be reached and the grace period covers now: the license stays valid until GraceUntil.</summary>
        Offline,
        /// <summary>The last beat failed (see LastBeatAt).</summary>
        Degraded,
        /// <summary>CompromisedAfter verification failures in a row; no automatic re-authentication until a beat verifies.</summary>
        Compromised,
        /// <summary>Ended: the server pushed `revoked`.</summary>
        Revoked,
        /// <summary>Ended: the license (or end user) expired while running (docs/protocol.md 12.8).</summary>
        Expired,
        /// <summary>Ended: the server killed it, or a final error.</summary>
        Killed,
        /// <summary>Ended: Stop was called.</summary>
        Stopped,
    }

    /// <summary>Heartbeat settings.</summary>
    public sealed class HeartbeatOptions
    {
        /// <summary>Creates options with the defaults.</summary>
        public HeartbeatOptions()
        {
            CompromisedAfter = 5;
        }

        /// <summary>Auto (default): beats on the realtime channel when offered; Off: REST only.</summary>
        public HeartbeatChannelMode Channel { get; set; }
        /// <summary>Verification failures in a row (beats or re-authentication) after which Compromised is raised. Default 5.</summary>
        public int CompromisedAfter { get; set; }
        /// <summary>Beat period; default the server's beat_interval. Beating faster is allowed (only late beats drift).</summary>
        public TimeSpan? Interval { get; set; }
        /// <summary>Sent as code_size when set.</summary>
        public long? CodeSize { get; set; }
        /// <summary>Asked before every beat; default System.Diagnostics.Debugger.IsAttached.</summary>
        public Func<bool> DebuggerDetected { get; set; }
        /// <summary>After a lost beat, repeat the client's last init + login/license and start again.</summary>
        public bool Reauthenticate { get; set; }
        /// <summary>Custom re-authentication (implies Reauthenticate): must leave the client with an activated session.</summary>
        public Func<KeywardenClient, CancellationToken, Task> ReauthCallback { get; set; }
    }

    /// <summary>Beat event data.</summary>
    public sealed class HeartbeatBeatEventArgs : EventArgs
    {
        /// <summary>beat_index of this beat (from 1 in each heartbeat session).</summary>
        public long Index { get; internal set; }
        /// <summary>The server's beat_count.</summary>
        public long Count { get; internal set; }
    }

    /// <summary>Degraded event data.</summary>
    public sealed class HeartbeatDegradedEventArgs : EventArgs
    {
        /// <summary>What failed.</summary>
        public KeywardenException Error { get; internal set; }
        /// <summary>True when the server may have processed the beat (its index is spent, its token may be gone).</summary>
        public bool Lost { get; internal set; }
        /// <summary>True when the heartbeat re-authenticates by itself.</summary>
        public bool Reauthenticating { get; internal set; }
        /// <summary>When the last beat verified (the verified heartbeat/start before the first beat), local clock.</summary>
        public DateTimeOffset LastBeatAt { get; internal set; }
        /// <summary>Verification failures in a row, this one included.</summary>
        public int VerificationFailures { get; internal set; }
    }

    /// <summary>Compromised event data.</summary>
    public sealed class HeartbeatCompromisedEventArgs : EventArgs
    {
        /// <summary>The last verification failure.</summary>
        public KeywardenException Error { get; internal set; }
        /// <summary>Verification failures in a row.</summary>
        public int Failures { get; internal set; }
        /// <summary>When the last beat verified.</summary>
        public DateTimeOffset LastBeatAt { get; internal set; }
    }

    /// <summary>Revoked event data (pushed on the realtime channel).</summary>
    public sealed class HeartbeatRevokedEventArgs : EventArgs
    {
        /// <summary>license_banned, license_deleted, user_banned, user_deleted, hwid_reset, app_disabled, app_deleted, blacklisted, session_killed.</summary>
        public string Reason { get; internal set; }
        /// <summary>The server's text.</summary>
        public string Detail { get; internal set; }
    }

    /// <summary>Expired event data: the license (or end user) expired while running; Killed follows.</summary>
    public sealed class HeartbeatExpiredEventArgs : EventArgs
    {
        /// <summary>The expiry the client knew from its last verified activation, or null.</summary>
        public DateTimeOffset? ExpiresAt { get; internal set; }
        /// <summary>The server's text, or what ended the heartbeat.</summary>
        public string Detail { get; internal set; }
    }

    /// <summary>UpdateRequired event data (pushed on the realtime channel).</summary>
    public sealed class HeartbeatUpdateRequiredEventArgs : EventArgs
    {
        /// <summary>The vendor's text.</summary>
        public string Message { get; internal set; }
        /// <summary>The version to get, or null.</summary>
        public string LatestVersion { get; internal set; }
        /// <summary>Where to get it, or null.</summary>
        public string UpdateUrl { get; internal set; }
    }

    /// <summary>Notice event data (pushed on the realtime channel).</summary>
    public sealed class HeartbeatNoticeEventArgs : EventArgs
    {
        /// <summary>A message from the vendor's dashboard.</summary>
        public string Message { get; internal set; }
        /// <summary>When it was sent, or null.</summary>
        public DateTimeOffset? At { get; internal set; }
    }

    /// <summary>Channel event data: the realtime channel opened or closed (beats then go over REST).</summary>
    public sealed class HeartbeatChannelEventArgs : EventArgs
    {
        /// <summary>"open" or "closed".</summary>
        public string State { get; internal set; }
        /// <summary>The WebSocket close code, when closed.</summary>
        public int? CloseCode { get; internal set; }
        /// <summary>Why it closed or could not open (a Verification error when a frame was refused).</summary>
        public KeywardenException Error { get; internal set; }
    }

    /// <summary>Offline event data.</summary>
    public sealed class HeartbeatOfflineEventArgs : EventArgs
    {
        /// <summary>Why the service was not reached.</summary>
        public KeywardenException Error { get; internal set; }
        /// <summary>The license stays valid until then.</summary>
        public DateTimeOffset GraceUntil { get; internal set; }
    }

    /// <summary>GraceExpired event data.</summary>
    public sealed class HeartbeatGraceExpiredEventArgs : EventArgs
    {
        /// <summary>When the grace period ended.</summary>
        public DateTimeOffset GraceUntil { get; internal set; }
        /// <summary>The latest failure to reach the service.</summary>
        public KeywardenException Error { get; internal set; }
    }

    /// <summary>Recovered event data.</summary>
    public sealed class HeartbeatRecoveredEventArgs : EventArgs
    {
        /// <summary>The new session.</summary>
        public string Session { get; internal set; }
    }

    /// <summary>Killed event data.</summary>
    public sealed class HeartbeatKilledEventArgs : EventArgs
    {
        /// <summary>Why (HeartbeatKilled, Banned, Expired...).</summary>
        public KeywardenException Error { get; internal set; }
    }

    /// <summary>Why the heartbeat ended.</summary>
    public enum HeartbeatStopReason
    {
        /// <summary>Stop was called.</summary>
        Stop,
        /// <summary>The server ended it.</summary>
        Killed,
    }

    /// <summary>Stopped event data.</summary>
    public sealed class HeartbeatStoppedEventArgs : EventArgs
    {
        /// <summary>Stop or Killed.</summary>
        public HeartbeatStopReason Reason { get; internal set; }
    }

    /// <summary>A heartbeat session kept alive in the background. Never throws from its loop.</summary>
    public sealed class Heartbeat : IDisposable
    {
        /// <summary>Answers after which beating on is pointless.</summary>
        private static readonly HashSet<KeywardenErrorCode> Final = new HashSet<KeywardenErrorCode>
        {
            KeywardenErrorCode.HeartbeatKilled, KeywardenErrorCode.Banned, KeywardenErrorCode.Expired, KeywardenErrorCode.AppDisabled,
            KeywardenErrorCode.InvalidKey, KeywardenErrorCode.HwidMismatch, KeywardenErrorCode.UpdateRequired, KeywardenErrorCode.KeyUsed,
        };
        /// <summary>Answers given before the beat was processed: the same beat may be sent again.</summary>
        /// <summary>How long after the known expiry the heartbeat beats at the latest (the server ends the session within 1 s).</summary>
        internal static readonly TimeSpan ExpiryCheck = TimeSpan.FromSeconds(1);
        /// <summary>
        /// The clock learned from the server is exact to the second: a beat refused up to this long before the known
        /// expiry is the expiry too; a beat accepted this long after it (plus ExpiryCheck) means the key was extended.
        /// </summary>
        private static readonly TimeSpan ExpirySlack = TimeSpan.FromSeconds(1);
        private static readonly HashSet<KeywardenErrorCode> NotProcessed = new HashSet<KeywardenErrorCode>
        {
            KeywardenErrorCode.RateLimited, KeywardenErrorCode.LockedOut,
        };

        private readonly KeywardenClient _client;
        private readonly HeartbeatOptions _o;
        private readonly object _gate = new object();
        private readonly CancellationTokenSource _stop = new CancellationTokenSource();
        /// <summary>Held while a beat is sent and judged: a revocation waits for it, so a kill the beat caused is reported with its own answer.</summary>
        private readonly SemaphoreSlim _beatLock = new SemaphoreSlim(1, 1);
        private ChannelLink _link;
        private string _session, _token;
        private int _interval;
        private long _lastIndex, _count;
        private bool _needsReauth, _started, _ended;
        private HeartbeatState _state = HeartbeatState.Healthy;
        private DateTimeOffset _lastVerified;
        private int _verificationFailures; // in a row; reset by a verified beat
        private bool _compromised; // Compromised raised: no automatic re-authentication until a beat verifies
        private bool _afterOutage; // the previous attempt found the service unreachable
        private bool _outageReauthSpent; // the one re-authentication a `rejected` after an outage allows
        private bool _offlineTold; // Offline raised, and neither a verified beat nor GraceExpired since
        private Task _loop = Task.FromResult(0);

        /// <summary>A verified beat.</summary>
        public event EventHandler<HeartbeatBeatEventArgs> Beat;
        /// <summary>A beat failed; the heartbeat goes on.</summary>
        public event EventHandler<HeartbeatDegradedEventArgs> Degraded;
        /// <summary>CompromisedAfter verification failures in a row: decide (stop, lock the feature...).</summary>
        public event EventHandler<HeartbeatCompromisedEventArgs> Compromised;
        /// <summary>Re-authentication succeeded with a new session.</summary>
        public event EventHandler<HeartbeatRecoveredEventArgs> Recovered;
        /// <summary>The server ended the heartbeat: final (raise your own response: exit, lock the UI...).</summary>
        public event EventHandler<HeartbeatKilledEventArgs> Killed;
        /// <summary>The loop has ended.</summary>
        public event EventHandler<HeartbeatStoppedEventArgs> Stopped;
        /// <summary>Pushed: the key, user or app was revoked (Killed follows).</summary>
        public event EventHandler<HeartbeatRevokedEventArgs> Revoked;
        /// <summary>The license (or end user) expired while running: final, Killed (code Expired) follows.</summary>
        public event EventHandler<HeartbeatExpiredEventArgs> Expired;
        /// <summary>Pushed: force_update is on and this version is outdated.</summary>
        public event EventHandler<HeartbeatUpdateRequiredEventArgs> UpdateRequired;
        /// <summary>Pushed: a message from the vendor's dashboard.</summary>
        public event EventHandler<HeartbeatNoticeEventArgs> Notice;
        /// <summary>The realtime channel opened or closed.</summary>
        public event EventHandler<HeartbeatChannelEventArgs> Channel;
        /// <summary>The service cannot be reached and the grace period covers now: the license stays valid until GraceUntil.</summary>
        public event EventHandler<HeartbeatOfflineEventArgs> Offline;
        /// <summary>The grace period ended while the service still cannot be reached: decide (lock, stop...).</summary>
        public event EventHandler<HeartbeatGraceExpiredEventArgs> GraceExpired;

        /// <summary>The system_id sent with every beat.</summary>
        public string SystemId { get; private set; }
        /// <summary>The code_hash sent with every beat.</summary>
        public string CodeHash { get; private set; }

        internal Heartbeat(KeywardenClient client, string systemId, string codeHash, HeartbeatOptions options)
        {
            if (options.CompromisedAfter < 1) throw new ArgumentException("CompromisedAfter must be at least 1");
            _client = client;
            _o = options;
            SystemId = systemId;
            CodeHash = codeHash;
        }

        /// <summary>The server's beat_interval in seconds (0 before start).</summary>
        public int BeatInterval { get { lock (_gate) return _interval; } }
        /// <summary>The server's beat_count after the last verified beat.</summary>
        public long BeatCount { get { lock (_gate) return _count; } }
        /// <summary>The heartbeat session (the client session it was started on).</summary>
        public string Session { get { lock (_gate) return _session; } }
        /// <summary>True between a successful start and the end (stop or kill).</summary>
        public bool Running { get { lock (_gate) return _started && !_ended; } }
        /// <summary>
        /// Healthy, Offline, Degraded, Compromised, or how it ended: Revoked, Expired, Killed, Stopped. Offline lasts
        /// exactly as long as the grace: past GraceUntil it reads Degraded at once.
        /// </summary>
        public HeartbeatState State
        {
            get
            {
                HeartbeatState s;
                lock (_gate) s = _state;
                return s == HeartbeatState.Offline && !_client.GraceActive() ? HeartbeatState.Degraded : s;
            }
        }

        /// <summary>The known expiry is less than margin away or has passed (server-corrected clock).</summary>
        private bool PastExpiry(TimeSpan margin)
        {
            var at = _client.ExpiresAt;
            return at.HasValue && _client.ServerNow() + margin >= at.Value;
        }
        /// <summary>When the last beat verified (the verified heartbeat/start before the first beat), local clock.</summary>
        public DateTimeOffset LastBeatAt { get { lock (_gate) return _lastVerified; } }
        /// <summary>True while the beats travel on the realtime channel.</summary>
        public bool OnChannel { get { var l = _link; return l != null && l.Ready; } }

        /// <summary>heartbeat/start (proof verified), then beats in the background. Throws KeywardenException when the start fails.</summary>
        public async Task StartAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            lock (_gate)
            {
                if (_started || _ended) throw new InvalidOperationException("a heartbeat starts once");
                _started = true;
            }
            KeywardenClient.HeartbeatStart s;
            var link = _o.Channel == HeartbeatChannelMode.Auto ? _client.CreateChannelLink() : null;
            try
            {
                s = await _client.OpenHeartbeatAsync(SystemId, link, cancellationToken).ConfigureAwait(false);
            }
            catch
            {
                lock (_gate) _ended = true;
                if (link != null) link.Close();
                throw;
            }
            lock (_gate)
            {
                _session = s.Session;
                _token = s.Token;
                _interval = s.BeatInterval;
                _lastVerified = DateTimeOffset.UtcNow;
                _link = link;
                _loop = Task.Run(() => LoopAsync());
            }
            if (link != null) link.Attach(OnLink);
        }

        /// <summary>Blocking StartAsync.</summary>
        public void Start()
        {
            KeywardenClient.Block(() => StartAsync());
        }

        private HeartbeatState RawState { get { lock (_gate) return _state; } }

        private TimeSpan Period()
        {
            var p = _o.Interval ?? TimeSpan.FromSeconds(BeatInterval);
            if (p <= TimeSpan.Zero) p = TimeSpan.FromSeconds(1);
            var until = _client.GraceState.Until;
            if (RawState == HeartbeatState.Offline && until.HasValue)
            {
                // Offline, wake when the grace period ends, so GraceExpired is told on time.
                var left = until.Value - _client.ServerNow();
                if (left < p) p = left > TimeSpan.Zero ? left : TimeSpan.Zero;
            }
            var expiry = _client.ExpiresAt;
            if (expiry.HasValue)
            {
                // The license expires before the next beat: beat just after, so the end is known on time over REST too.
                var toExpiry = expiry.Value - _client.ServerNow();
                if (toExpiry >= TimeSpan.Zero && toExpiry + ExpiryCheck < p) p = toExpiry + ExpiryCheck;
            }
            return p;
        }

        private void OnLink(LinkEvent e)
        {
            lock (_gate) if (_ended) return;
            var p = e.Push;
            if (p == null)
            {
                Raise(Channel, new HeartbeatChannelEventArgs { State = e.State, CloseCode = e.CloseCode, Error = e.Error }, "channel");
                return;
            }
            if (p.Type == "revoked" && p.Reason == "expired")
            {
                // As revoked below, but the program is told the license expired (docs/protocol.md 12.8).
                Task.Run(async () =>
                {
                    await _beatLock.WaitAsync().ConfigureAwait(false);
                    try
                    {
                        lock (_gate) if (_ended) return;
                        Expire(string.IsNullOrEmpty(p.Detail) ? "expired" : p.Detail, null);
                    }
                    finally
                    {
                        _beatLock.Release();
                    }
                });
                return;
            }
            switch (p.Type)
            {
                case "revoked":
                    // Off the reader thread, after a beat in flight: its reply (maybe the kill itself) is judged first.
                    Task.Run(async () =>
                    {
                        await _beatLock.WaitAsync().ConfigureAwait(false);
                        try
                        {
                            lock (_gate) if (_ended) return;
                            Raise(Revoked, new HeartbeatRevokedEventArgs { Reason = p.Reason, Detail = p.Detail }, "revoked");
                            var k = new KeywardenException(KeywardenErrorCode.HeartbeatKilled, "heartbeat_killed: revoked (" + p.Reason + "): " + p.Detail);
                            Kill(k, HeartbeatState.Revoked);
                        }
                        finally
                        {
                            _beatLock.Release();
                        }
                    });
                    return;
                case "update_required":
                    Raise(UpdateRequired, new HeartbeatUpdateRequiredEventArgs { Message = p.Message, LatestVersion = p.LatestVersion, UpdateUrl = p.UpdateUrl }, "update_required");
                    return;
                default:
                    Raise(Notice, new HeartbeatNoticeEventArgs { Message = p.Message, At = p.At }, "notice");
                    return;
            }
        }

        /// <summary>On the channel when it is open; over REST when it is not, or went down before the call left.</summary>
        private async Task<Dictionary<string, object>> SendAsync(string op, Dictionary<string, object> body, CancellationToken ct)
        {
            var link = _link;
            if (link != null && link.Ready)
            {
                try
                {
                    return await link.CallAsync(op, body).ConfigureAwait(false);
                }
                catch (KeywardenException e) when (e.NotSent)
                {
                    // never left: REST below
                }
            }
            return await _client.CallAsync(op, body, ct).ConfigureAwait(false);
        }

        private async Task LoopAsync()
        {
            while (true)
            {
                try
                {
                    await Task.Delay(Period(), _stop.Token).ConfigureAwait(false);
                }
                catch (OperationCanceledException)
                {
                    return;
                }
                bool reauth;
                lock (_gate)
                {
                    if (_ended) return;
                    reauth = _needsReauth;
                }
                try
                {
                    if (!reauth)
                    {
                        await _beatLock.WaitAsync().ConfigureAwait(false);
                        try { reauth = await BeatOnceAsync().ConfigureAwait(false); }
                        finally { _beatLock.Release(); }
                    }
                    if (reauth) await RecoverAsync().ConfigureAwait(false);
                }
                catch (Exception e)
                {
                    _client.Log(KeywardenLogLevel.Error, "keywarden.heartbeat.unexpected " + e);
                }
                lock (_gate) if (_ended) return;
            }
        }

        private bool DebuggerPresent()
        {
            try
            {
                return _o.DebuggerDetected != null ? _o.DebuggerDetected() : Debugger.IsAttached;
            }
            catch (Exception)
            {
                return false;
            }
        }

        private bool ReauthEnabled { get { return _o.Reauthenticate || _o.ReauthCallback != null; } }

        /// <summary>The service could not be reached or could not answer: a connection error, a timeout, a 5xx.</summary>
        private static bool Unreachable(KeywardenException e)
        {
            return e.Code == KeywardenErrorCode.Network || e.Code == KeywardenErrorCode.Timeout || (e.Status.HasValue && e.Status.Value >= 500);
        }

        /// <summary>One beat; true when the heartbeat must re-authenticate now.</summary>
        private async Task<bool> BeatOnceAsync()
        {
            string session, previous;
            long index;
            lock (_gate)
            {
                session = _session;
                previous = _token;
                index = _lastIndex + 1;
            }
            var body = new Dictionary<string, object>
            {
                { "session", session }, { "token", previous }, { "system_id", SystemId }, { "beat_index", index }, { "code_hash", CodeHash },
            };
            if (_o.CodeSize.HasValue) body["code_size"] = _o.CodeSize.Value;
            body["debugger_detected"] = DebuggerPresent();
            try
            {
                // CallAsync itself re-sends this same body (same index and token) while nothing was sent.
                // No cancellation token: Stop waits for a beat in flight instead of orphaning its token.
                var r = await SendAsync("heartbeat", body, CancellationToken.None).ConfigureAwait(false);
                var newToken = Json.GetString(r, "new_token");
                var count = Json.GetInt(r, "beat_count");
                if (newToken == null || count == null)
                    throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "beat answer lacks new_token or beat_count");
                object proof;
                r.TryGetValue("proof", out proof);
                if (!KeywardenCrypto.ProofEquals(proof, KeywardenCrypto.BeatProof(previous, session, index, newToken, count.Value)))
                    throw KeywardenException.VerificationFailed(VerificationReason.BadProof, "beat proof does not verify");
                _client.GraceState.Note(r);
                // Accepted well after it: the key was extended meanwhile (its new expiry is not known here).
                if (PastExpiry(-(ExpiryCheck + ExpirySlack))) _client.ForgetExpiry();
                lock (_gate)
                {
                    _token = newToken;
                    _lastIndex = index;
                    _count = count.Value;
                    _lastVerified = DateTimeOffset.UtcNow;
                    _verificationFailures = 0;
                    _compromised = false;
                    _afterOutage = false;
                    _outageReauthSpent = false;
                    _offlineTold = false;
                    if (!_ended) _state = HeartbeatState.Healthy;
                }
                Raise(Beat, new HeartbeatBeatEventArgs { Index = index, Count = count.Value }, "beat");
                return false;
            }
            catch (KeywardenException e)
            {
                bool lostSession;
                lock (_gate)
                {
                    if (_ended) return false; // ended meanwhile (revoked, killed, stopped): this beat's failure is no degradation
                    // A server that came back without this session answers `rejected`: worth one re-authentication.
                    lostSession = e.Code == KeywardenErrorCode.HeartbeatKilled && e.Status == 403 && _afterOutage && ReauthEnabled
                        && !_outageReauthSpent;
                    if (lostSession) _outageReauthSpent = true;
                }
                // Past the known expiry a refused beat is the server's end of it, and no answer grants no grace.
                if ((e.Code == KeywardenErrorCode.HeartbeatKilled && e.Status == 403 && PastExpiry(ExpirySlack))
                    || (Unreachable(e) && PastExpiry(TimeSpan.Zero)))
                {
                    Expire(e.Message, e);
                    return false;
                }
                if (Final.Contains(e.Code) && !lostSession) { Kill(e, HeartbeatState.Killed); return false; }
                var lost = !(e.NotSent || NotProcessed.Contains(e.Code));
                if (lost) lock (_gate) _lastIndex = index; // that index may have been used: never send it again
                return Failed(e, lost, lost && ReauthEnabled);
            }
        }

        /// <summary>
        /// Books a failure and raises Degraded (and Compromised when the streak of verification
        /// failures reaches the limit). Returns whether to re-authenticate: not once compromised,
        /// since an attacker who spoils every answer would have it spend the program's rate limits.
        /// </summary>
        private bool Failed(KeywardenException e, bool lost, bool wantsReauth)
        {
            bool reauth, newly, goingOffline, graceOver;
            int failures;
            DateTimeOffset last;
            _client.NoteRefusal(e.Status); // a refusal on the realtime channel never went through CallAsync
            var away = Unreachable(e);
            var until = _client.GraceState.Until;
            var covered = away && _client.GraceActive();
            lock (_gate)
            {
                if (e.Code == KeywardenErrorCode.Verification) _verificationFailures++;
                _afterOutage = away;
                newly = !_compromised && _verificationFailures >= _o.CompromisedAfter;
                if (newly) _compromised = true;
                reauth = wantsReauth && !_compromised;
                _needsReauth = reauth;
                if (!_ended) _state = _compromised ? HeartbeatState.Compromised : covered ? HeartbeatState.Offline : HeartbeatState.Degraded;
                goingOffline = covered && !_compromised && !_offlineTold;
                graceOver = away && !covered && _offlineTold && until.HasValue;
                if (goingOffline) _offlineTold = true;
                if (graceOver || !until.HasValue) _offlineTold = false;
                failures = _verificationFailures;
                last = _lastVerified;
            }
            _client.Log(KeywardenLogLevel.Warn, "keywarden.heartbeat.degraded " + e.Message);
            Raise(Degraded, new HeartbeatDegradedEventArgs
            {
                Error = e, Lost = lost, Reauthenticating = reauth, LastBeatAt = last, VerificationFailures = failures,
            }, "degraded");
            if (goingOffline && until.HasValue)
            {
                _client.Log(KeywardenLogLevel.Warn, "keywarden.heartbeat.offline " + e.Message + "; valid until " + until.Value.ToString("o"));
                Raise(Offline, new HeartbeatOfflineEventArgs { Error = e, GraceUntil = until.Value }, "offline");
            }
            if (graceOver)
            {
                _client.Log(KeywardenLogLevel.Warn, "keywarden.heartbeat.grace_expired the grace period ended at " + until.Value.ToString("o"));
                Raise(GraceExpired, new HeartbeatGraceExpiredEventArgs { GraceUntil = until.Value, Error = e }, "grace_expired");
            }
            if (newly)
            {
                _client.Log(KeywardenLogLevel.Warn, "keywarden.heartbeat.compromised " + failures + " verification failures in a row");
                Raise(Compromised, new HeartbeatCompromisedEventArgs { Error = e, Failures = failures, LastBeatAt = last }, "compromised");
            }
            return reauth;
        }

        /// <summary>init + activation + heartbeat/start again; on failure tries again at the next tick.</summary>
        private async Task RecoverAsync()
        {
            try
            {
                if (_o.ReauthCallback != null) await _o.ReauthCallback(_client, _stop.Token).ConfigureAwait(false);
                else await _client.ReauthenticateAsync(_stop.Token).ConfigureAwait(false);
                var s = await _client.OpenHeartbeatAsync(SystemId, _link, _stop.Token).ConfigureAwait(false);
                lock (_gate)
                {
                    if (_ended) return;
                    _session = s.Session;
                    _token = s.Token;
                    _interval = s.BeatInterval;
                    _lastIndex = 0;
                    _count = 0;
                    _needsReauth = false;
                    _afterOutage = false;
                }
                Raise(Recovered, new HeartbeatRecoveredEventArgs { Session = s.Session }, "recovered");
            }
            catch (OperationCanceledException) when (_stop.IsCancellationRequested)
            {
                // stopped while re-authenticating
            }
            catch (KeywardenException e)
            {
                if (Unreachable(e) && PastExpiry(TimeSpan.Zero)) { Expire(e.Message, e); return; }
                // The call's own error (e.g. Banned: the key was banned meanwhile), not a generic one.
                if (Final.Contains(e.Code)) { Kill(e, HeartbeatState.Killed); return; }
                Failed(e, true, true);
            }
            catch (Exception e)
            {
                // A custom ReauthCallback threw something else: report it and try again next tick.
                Failed(new KeywardenException(KeywardenErrorCode.Server, "re-authentication failed: " + e.Message, e), true, true);
            }
        }

        /// <summary>The license expired: Expired, then Killed with code Expired.</summary>
        private void Expire(string detail, KeywardenException cause)
        {
            Kill(new KeywardenException(KeywardenErrorCode.Expired, "expired: the license expired while running (" + detail + ")", cause), HeartbeatState.Expired);
        }

        private void Kill(KeywardenException error, HeartbeatState state)
        {
            _client.GraceState.End(); // every kill is a verified refusal, a revocation or an expiry: no grace after it
            var expired = error.Code == KeywardenErrorCode.Expired;
            lock (_gate)
            {
                if (_ended) return;
                _ended = true;
                _state = expired ? HeartbeatState.Expired : state;
            }
            _stop.Cancel();
            var link = _link;
            if (link != null) link.Close();
            if (expired)
            {
                var at = _client.ExpiresAt;
                _client.Log(KeywardenLogLevel.Warn, "keywarden.heartbeat.expired the license expired (" + (at.HasValue ? at.Value.ToString("o") : "date unknown") + ")");
                Raise(Expired, new HeartbeatExpiredEventArgs { ExpiresAt = at, Detail = error.Message }, "expired");
            }
            Raise(Killed, new HeartbeatKilledEventArgs { Error = error }, "killed");
            Raise(Stopped, new HeartbeatStoppedEventArgs { Reason = HeartbeatStopReason.Killed }, "stopped");
        }

        /// <summary>
        /// Stops beating, waits for a beat in flight and closes the heartbeat session on the server.
        /// Never throws; returns true when the server confirmed the close.
        /// </summary>
        public async Task<bool> StopAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            Task loop;
            lock (_gate)
            {
                if (_ended || !_started) { _ended = true; return false; }
                _ended = true;
                _state = HeartbeatState.Stopped;
                loop = _loop;
            }
            _stop.Cancel();
            try { await loop.ConfigureAwait(false); } catch (Exception) { /* the loop never throws; belt and braces */ }
            string session, token;
            lock (_gate) { session = _session; token = _token; }
            var closed = false;
            try
            {
                await SendAsync("heartbeat/stop", new Dictionary<string, object> { { "session", session }, { "token", token } }, cancellationToken).ConfigureAwait(false);
                closed = true;
            }
            catch (KeywardenException e)
            {
                _client.Log(KeywardenLogLevel.Warn, "keywarden.heartbeat.stop_failed " + e.Message);
            }
            catch (OperationCanceledException)
            {
                _client.Log(KeywardenLogLevel.Warn, "keywarden.heartbeat.stop_cancelled");
            }
            var link = _link;
            if (link != null) link.Close();
            Raise(Stopped, new HeartbeatStoppedEventArgs { Reason = HeartbeatStopReason.Stop }, "stopped");
            return closed;
        }

        /// <summary>Blocking StopAsync.</summary>
        public bool Stop()
        {
            return KeywardenClient.Block(() => StopAsync());
        }

        /// <summary>Stops the loop without waiting for the server (use StopAsync to close the session properly).</summary>
        public void Dispose()
        {
            lock (_gate)
            {
                if (!_ended) _state = HeartbeatState.Stopped;
                _ended = true;
            }
            _stop.Cancel();
            var link = _link;
            if (link != null) link.Close();
        }

        /// <summary>Each handler runs on its own: one that throws neither stops the loop nor the other handlers.</summary>
        private void Raise<T>(EventHandler<T> handlers, T args, string name) where T : EventArgs
        {
            if (handlers == null) return;
            foreach (var d in handlers.GetInvocationList())
            {
                try
                {
                    ((EventHandler<T>)d)(this, args);
                }
                catch (Exception e)
                {
                    _client.Log(KeywardenLogLevel.Error, "keywarden.heartbeat.listener_threw " + name + ": " + e.Message);
                }
            }
        }
    }
}
