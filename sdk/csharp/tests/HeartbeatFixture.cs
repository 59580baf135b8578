// Heartbeat fixture shared by the unit tests (HeartbeatUnitTests, against the in-memory fake) and
// the integration tests (IntegrationTests, against a real server): heartbeat options that beat fast
// and report no debugger, and HeartbeatEvents, which records every event a heartbeat raises and lets
// a test await the n-th one.
using System;
using System.Collections.Generic;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal static class HeartbeatFixture
    {
        /// <summary>The code hash both test files report.</summary>
        public const string Code = "abcdef0123456789";

        /// <summary>Beats every <paramref name="interval"/>, no debugger; <paramref name="tweak"/> changes the rest.</summary>
        public static HeartbeatOptions Options(TimeSpan interval, Action<HeartbeatOptions> tweak = null)
        {
            var o = new HeartbeatOptions { Interval = interval, DebuggerDetected = () => false };
            if (tweak != null) tweak(o);
            return o;
        }
    }

    /// <summary>Collects heartbeat events and lets a test await the n-th one.</summary>
    internal sealed class EventLog<T>
    {
        private readonly List<T> _items = new List<T>();
        private readonly List<KeyValuePair<int, TaskCompletionSource<List<T>>>> _waiters = new List<KeyValuePair<int, TaskCompletionSource<List<T>>>>();

        public void Add(T item)
        {
            List<KeyValuePair<int, TaskCompletionSource<List<T>>>> ready;
            List<T> snapshot;
            lock (_items)
            {
                _items.Add(item);
                snapshot = new List<T>(_items);
                ready = _waiters.FindAll(w => w.Key <= _items.Count);
                _waiters.RemoveAll(w => w.Key <= _items.Count);
            }
            foreach (var w in ready) w.Value.TrySetResult(snapshot);
        }

        public List<T> Items { get { lock (_items) return new List<T>(_items); } }

        /// <summary>Completes with the first n items, or fails after the limit.</summary>
        public async Task<List<T>> Wait(int n, TimeSpan limit, string what)
        {
            var tcs = new TaskCompletionSource<List<T>>(TaskCreationOptions.RunContinuationsAsynchronously);
            lock (_items)
            {
                if (_items.Count >= n) return new List<T>(_items);
                _waiters.Add(new KeyValuePair<int, TaskCompletionSource<List<T>>>(n, tcs));
            }
            var done = await Task.WhenAny(tcs.Task, Task.Delay(limit)).ConfigureAwait(false);
            if (done != tcs.Task) throw new AssertionException("waited " + limit.TotalSeconds + " s for " + n + " " + what + " events, got " + Items.Count);
            return tcs.Task.Result;
        }
    }

    internal sealed class HeartbeatEvents
    {
        public readonly EventLog<HeartbeatBeatEventArgs> Beats = new EventLog<HeartbeatBeatEventArgs>();
        public readonly EventLog<HeartbeatDegradedEventArgs> Degraded = new EventLog<HeartbeatDegradedEventArgs>();
        public readonly EventLog<HeartbeatRecoveredEventArgs> Recovered = new EventLog<HeartbeatRecoveredEventArgs>();
        public readonly EventLog<HeartbeatKilledEventArgs> Killed = new EventLog<HeartbeatKilledEventArgs>();
        public readonly EventLog<HeartbeatStoppedEventArgs> Stopped = new EventLog<HeartbeatStoppedEventArgs>();
        public readonly EventLog<HeartbeatCompromisedEventArgs> Compromised = new EventLog<HeartbeatCompromisedEventArgs>();
        public readonly EventLog<HeartbeatRevokedEventArgs> Revoked = new EventLog<HeartbeatRevokedEventArgs>();
        public readonly EventLog<HeartbeatExpiredEventArgs> Expired = new EventLog<HeartbeatExpiredEventArgs>();
        public readonly EventLog<HeartbeatNoticeEventArgs> Notices = new EventLog<HeartbeatNoticeEventArgs>();
        public readonly EventLog<HeartbeatChannelEventArgs> Channel = new EventLog<HeartbeatChannelEventArgs>();

        public HeartbeatEvents(Heartbeat hb)
        {
            hb.Beat += (s, e) => Beats.Add(e);
            hb.Degraded += (s, e) => Degraded.Add(e);
            hb.Recovered += (s, e) => Recovered.Add(e);
            hb.Killed += (s, e) => Killed.Add(e);
            hb.Stopped += (s, e) => Stopped.Add(e);
            hb.Compromised += (s, e) => Compromised.Add(e);
            hb.Revoked += (s, e) => Revoked.Add(e);
            hb.Expired += (s, e) => Expired.Add(e);
            hb.Notice += (s, e) => Notices.Add(e);
            hb.Channel += (s, e) => Channel.Add(e);
        }
    }
}
