// A running heartbeat (PROTOCOL 6, SPEC heartbeat rules). Events (raised on a thread-pool thread):
//   Beat       a beat whose signature and proof verified (Index, Count)
//   Degraded   a beat failed (Error, Lost = the server may have seen it, Reauthenticating)
//   Recovered  re-authentication opened a new heartbeat session
//   Killed     the server ended it (debugger, revoked, banned...): final
//   Stopped    the loop has ended (Stop or Killed)
// A beat that certainly never reached the server is sent again with the same index and token
// (KeywardenClient.CallAsync does that). A beat whose answer was lost cannot be: a replayed
// beat_index is refused and the new token is unknown. The heartbeat then reports Degraded and,
// with re-authentication enabled, runs init, the same activation and heartbeat/start again by
// itself; without it, it goes on with the next index and the old token, which works only if the
// server never saw the lost beat.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden
{
    /// <summary>Heartbeat settings.</summary>
    public sealed class HeartbeatOptions
    {
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
        private static readonly HashSet<KeywardenErrorCode> NotProcessed = new HashSet<KeywardenErrorCode>
        {
            KeywardenErrorCode.RateLimited, KeywardenErrorCode.LockedOut,
        };

        private readonly KeywardenClient _client;
        private readonly HeartbeatOptions _o;
        private readonly object _gate = new object();
        private readonly CancellationTokenSource _stop = new CancellationTokenSource();
        private string _session, _token;
        private int _interval;
        private long _lastIndex, _count;
        private bool _needsReauth, _started, _ended;
        private Task _loop = Task.FromResult(0);

        /// <summary>A verified beat.</summary>
        public event EventHandler<HeartbeatBeatEventArgs> Beat;
        /// <summary>A beat failed; the heartbeat goes on.</summary>
        public event EventHandler<HeartbeatDegradedEventArgs> Degraded;
        /// <summary>Re-authentication succeeded with a new session.</summary>
        public event EventHandler<HeartbeatRecoveredEventArgs> Recovered;
        /// <summary>The server ended the heartbeat: final (raise your own response: exit, lock the UI...).</summary>
        public event EventHandler<HeartbeatKilledEventArgs> Killed;
        /// <summary>The loop has ended.</summary>
        public event EventHandler<HeartbeatStoppedEventArgs> Stopped;

        /// <summary>The system_id sent with every beat.</summary>
        public string SystemId { get; private set; }
        /// <summary>The code_hash sent with every beat.</summary>
        public string CodeHash { get; private set; }

        internal Heartbeat(KeywardenClient client, string systemId, string codeHash, HeartbeatOptions options)
        {
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

        /// <summary>heartbeat/start (proof verified), then beats in the background. Throws KeywardenException when the start fails.</summary>
        public async Task StartAsync(CancellationToken cancellationToken = default(CancellationToken))
        {
            lock (_gate)
            {
                if (_started || _ended) throw new InvalidOperationException("a heartbeat starts once");
                _started = true;
            }
            KeywardenClient.HeartbeatStart s;
            try
            {
                s = await _client.OpenHeartbeatAsync(SystemId, cancellationToken).ConfigureAwait(false);
            }
            catch
            {
                lock (_gate) _ended = true;
                throw;
            }
            lock (_gate)
            {
                _session = s.Session;
                _token = s.Token;
                _interval = s.BeatInterval;
                _loop = Task.Run(() => LoopAsync());
            }
        }

        /// <summary>Blocking StartAsync.</summary>
        public void Start()
        {
            KeywardenClient.Block(() => StartAsync());
        }

        private TimeSpan Period()
        {
            var p = _o.Interval ?? TimeSpan.FromSeconds(BeatInterval);
            return p > TimeSpan.Zero ? p : TimeSpan.FromSeconds(1);
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
                    if (reauth) await RecoverAsync().ConfigureAwait(false);
                    else await BeatOnceAsync().ConfigureAwait(false);
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

        private async Task BeatOnceAsync()
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
                var r = await _client.CallAsync("heartbeat", body, CancellationToken.None).ConfigureAwait(false);
                var newToken = Json.GetString(r, "new_token");
                var count = Json.GetInt(r, "beat_count");
                if (newToken == null || count == null)
                    throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "beat answer lacks new_token or beat_count");
                object proof;
                r.TryGetValue("proof", out proof);
                if (!KeywardenCrypto.ProofEquals(proof, KeywardenCrypto.BeatProof(previous, session, index, newToken, count.Value)))
                    throw KeywardenException.VerificationFailed(VerificationReason.BadProof, "beat proof does not verify");
                lock (_gate)
                {
                    _token = newToken;
                    _lastIndex = index;
                    _count = count.Value;
                }
                Raise(Beat, new HeartbeatBeatEventArgs { Index = index, Count = count.Value }, "beat");
            }
            catch (KeywardenException e)
            {
                if (Final.Contains(e.Code)) { Kill(e); return; }
                var lost = !(e.NotSent || NotProcessed.Contains(e.Code));
                if (lost) lock (_gate) _lastIndex = index; // that index may have been used: never send it again
                var reauth = lost && ReauthEnabled;
                Raise(Degraded, new HeartbeatDegradedEventArgs { Error = e, Lost = lost, Reauthenticating = reauth }, "degraded");
                if (reauth)
                {
                    lock (_gate) _needsReauth = true;
                    await RecoverAsync().ConfigureAwait(false);
                }
            }
        }

        /// <summary>init + activation + heartbeat/start again; on failure tries again at the next tick.</summary>
        private async Task RecoverAsync()
        {
            try
            {
                if (_o.ReauthCallback != null) await _o.ReauthCallback(_client, _stop.Token).ConfigureAwait(false);
                else await _client.ReauthenticateAsync(_stop.Token).ConfigureAwait(false);
                var s = await _client.OpenHeartbeatAsync(SystemId, _stop.Token).ConfigureAwait(false);
                lock (_gate)
                {
                    if (_ended) return;
                    _session = s.Session;
                    _token = s.Token;
                    _interval = s.BeatInterval;
                    _lastIndex = 0;
                    _count = 0;
                    _needsReauth = false;
                }
                Raise(Recovered, new HeartbeatRecoveredEventArgs { Session = s.Session }, "recovered");
            }
            catch (OperationCanceledException) when (_stop.IsCancellationRequested)
            {
                // stopped while re-authenticating
            }
            catch (KeywardenException e)
            {
                if (Final.Contains(e.Code)) { Kill(e); return; }
                Raise(Degraded, new HeartbeatDegradedEventArgs { Error = e, Lost = true, Reauthenticating = true }, "degraded");
            }
            catch (Exception e)
            {
                // A custom ReauthCallback threw something else: report it and try again next tick.
                var k = new KeywardenException(KeywardenErrorCode.Server, "re-authentication failed: " + e.Message, e);
                Raise(Degraded, new HeartbeatDegradedEventArgs { Error = k, Lost = true, Reauthenticating = true }, "degraded");
            }
        }

        private void Kill(KeywardenException error)
        {
            lock (_gate)
            {
                if (_ended) return;
                _ended = true;
            }
            _stop.Cancel();
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
                loop = _loop;
            }
            _stop.Cancel();
            try { await loop.ConfigureAwait(false); } catch (Exception) { /* the loop never throws; belt and braces */ }
            string session, token;
            lock (_gate) { session = _session; token = _token; }
            var closed = false;
            try
            {
                await _client.CallAsync("heartbeat/stop", new Dictionary<string, object> { { "session", session }, { "token", token } }, cancellationToken).ConfigureAwait(false);
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
            lock (_gate) _ended = true;
            _stop.Cancel();
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
