// The grace period (docs/protocol.md 12.6): how long the license stays valid while the service cannot be
// reached. Only verified answers move it: each verified answer of license, login, register, trial,
// heartbeat/start or an accepted beat sets it to its grace_until (an answer without one, or with one
// that is not a strict ISO 8601 UTC time, grants none); a verified refusal ends it at once. An answer
// that fails verification never reaches this code.
using System;
using System.Collections.Generic;

namespace Keywarden
{
    /// <summary>What a verified answer's grace_until grants.</summary>
    public static class GracePeriod
    {
        /// <summary>The time an answer grants, or null (absent, or not a strict ISO 8601 UTC time).</summary>
        public static DateTimeOffset? UntilOf(IDictionary<string, object> answer)
        {
            object v;
            var ms = answer != null && answer.TryGetValue("grace_until", out v) ? Utc.ParseMs(v) : null;
            return ms.HasValue ? Utc.FromMs(ms.Value) : (DateTimeOffset?)null;
        }

        /// <summary>A verified answer that refuses: any 4xx but 429 (which says "not now", not "no").</summary>
        public static bool IsRefusal(int? status)
        {
            return status.HasValue && status.Value >= 400 && status.Value < 500 && status.Value != 429;
        }
    }

    /// <summary>The latest verified grace_until, shared by a client and its heartbeats.</summary>
    internal sealed class Grace
    {
        private readonly object _gate = new object();
        private DateTimeOffset? _until;

        public DateTimeOffset? Until { get { lock (_gate) return _until; } }

        public void Note(IDictionary<string, object> answer)
        {
            var until = GracePeriod.UntilOf(answer);
            lock (_gate) _until = until;
        }

        public void End()
        {
            lock (_gate) _until = null;
        }

        public bool Active(DateTimeOffset now)
        {
            var until = Until;
            return until.HasValue && now < until.Value;
        }
    }
}
