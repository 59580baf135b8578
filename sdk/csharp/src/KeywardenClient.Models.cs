// The licensing models of docs/protocol.md 12 on the client: trials, entitlements, offline license files and
// the grace period. The other half of KeywardenClient, kept apart so KeywardenClient.cs stays about
// the wire.
using System;
using System.Collections.Generic;
using System.Linq;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden
{
    public sealed partial class KeywardenClient
    {
        private static readonly IList<string> NoEntitlements = new List<string>().AsReadOnly();
        private readonly Grace _grace = new Grace();
        private readonly string _stateFileOption;
        private IList<string> _entitlements = NoEntitlements;
        /// <summary>The license's (or end user's) expires_at from the last verified activation answer (unix ms).</summary>
        private long? _expiryMs;
        private ClockRecord _clockRecord;

        /// <summary>
        /// The codes of the last verified license, login, register or trial answer, or of the last offline
        /// file accepted by LoadOffline (sorted).
        /// </summary>
        public IList<string> Entitlements { get { lock (_gate) return _entitlements; } }

        /// <summary>Whether Entitlements holds code.</summary>
        public bool HasEntitlement(string code)
        {
            return Entitlements.Contains(code);
        }

        /// <summary>
        /// Until when the license stays valid while the service cannot be reached, from the latest verified
        /// answer; null when it grants none or a verified refusal ended it (docs/protocol.md 12.6).
        /// </summary>
        public DateTimeOffset? GraceUntil { get { return _grace.Until; } }

        /// <summary>True while the (server-corrected) clock is before GraceUntil.</summary>
        public bool GraceActive()
        {
            return _grace.Active(ServerNow());
        }

        internal Grace GraceState { get { return _grace; } }

        /// <summary>
        /// When the license (an end user's: the user) expires, from the last verified license, login, register or
        /// trial answer; null for a lifetime key or before any activation. A running heartbeat raises Expired once
        /// the server ends its session then (docs/protocol.md 12.8).
        /// </summary>
        public DateTimeOffset? ExpiresAt
        {
            get
            {
                lock (_gate) return _expiryMs.HasValue ? Utc.FromMs(_expiryMs.Value) : (DateTimeOffset?)null;
            }
        }

        /// <summary>A beat was accepted well after the known expiry: the key was extended (its new date is not known).</summary>
        internal void ForgetExpiry()
        {
            lock (_gate) _expiryMs = null;
        }

        // ---- trial ---------------------------------------------------------------------------

        /// <summary>
        /// Creates this device's trial key and activates it (POST /api/client/trial). Once per device and
        /// application: again throws TrialUsed; TrialDisabled when the application offers none. The key
        /// is remembered for re-authentication. hwid: default MachineHwid().
        /// </summary>
        public async Task<TrialInfo> TrialAsync(string hwid = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            var h = hwid ?? MachineHwid();
            var r = await CallAsync("trial", new Dictionary<string, object> { { "session", RequireSession() }, { "hwid", h } }, cancellationToken)
                .ConfigureAwait(false);
            var key = Json.GetString(r, "key");
            var level = Json.GetInt(r, "level");
            if (string.IsNullOrEmpty(key) || level == null)
                throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "trial answer lacks key or level");
            var ents = Activated(r);
            lock (_gate) _lastActivation = Activation.License(key, h);
            var expires = Utc.ParseMs(Json.GetString(r, "expires_at"));
            return new TrialInfo
            {
                Key = key, Level = level.Value, ExpiresAt = expires.HasValue ? Utc.FromMs(expires.Value) : (DateTimeOffset?)null,
                Message = Json.GetString(r, "message") ?? "", Entitlements = ents,
            };
        }

        /// <summary>Blocking TrialAsync.</summary>
        public TrialInfo Trial(string hwid = null)
        {
            return Block(() => TrialAsync(hwid));
        }

        // ---- offline license files ----------------------------------------------------------

        /// <summary>
        /// An offline license file for this machine (POST /api/client/offline), after a successful
        /// activation on this session. Save it; LoadOffline checks it without the service.
        /// </summary>
        public async Task<string> OfflineFileAsync(string hwid = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            var r = await CallAsync("offline", new Dictionary<string, object> { { "session", RequireSession() }, { "hwid", hwid ?? MachineHwid() } }, cancellationToken)
                .ConfigureAwait(false);
            var file = Json.GetString(r, "license_file");
            if (file == null || !file.StartsWith("kwlic1.", StringComparison.Ordinal))
                throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "offline answer lacks license_file");
            return file;
        }

        /// <summary>Blocking OfflineFileAsync.</summary>
        public string OfflineFile(string hwid = null)
        {
            return Block(() => OfflineFileAsync(hwid));
        }

        /// <summary>Where LoadOffline keeps the latest time seen (KeywardenOptions.StateFile).</summary>
        public string StateFile { get { return Record().File; } }

        private ClockRecord Record()
        {
            lock (_gate)
            {
                if (_clockRecord == null) _clockRecord = new ClockRecord(_stateFileOption ?? OfflineLicenses.DefaultStateFile(Config.ApiKey), Log);
                return _clockRecord;
            }
        }

        /// <summary>
        /// Checks an offline license file without the service (docs/protocol.md 12.5; the order of the checks is in
        /// OfflineLicense.cs). Throws KeywardenException OfflineInvalid with its OfflineReason, or
        /// KeywardenConfigException when the config has no app_id. Every check records the clock in the
        /// state file. On success Entitlements are the file's. hwid: default MachineHwid().
        /// </summary>
        public OfflineLicense LoadOffline(string file, string hwid = null)
        {
            if (Config.AppId == null) throw new KeywardenConfigException("app_id missing (offline license files are checked against it)");
            var record = Record();
            var now = _clock();
            try
            {
                var lic = OfflineLicenses.Verify(file, Config.ResponseKeys, Config.AppId, hwid ?? MachineHwid(), now, record.LastSeen());
                lock (_gate) _entitlements = lic.Entitlements;
                return lic;
            }
            catch (KeywardenException e)
            {
                Log(KeywardenLogLevel.Warn, "keywarden.offline.refused " + e.Message);
                throw;
            }
            finally
            {
                record.Record(now);
            }
        }

        // ---- what every verified answer books -------------------------------------------------

        /// <summary>The sorted codes of an answer (absent: none); anything but a list of strings is malformed.</summary>
        private static IList<string> EntitlementsOf(IDictionary<string, object> r)
        {
            object v;
            if (!r.TryGetValue("entitlements", out v) || v == null) return NoEntitlements;
            var list = v as IList<object>;
            if (list == null || !list.All(e => e is string))
                throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "entitlements is not a list of codes");
            return list.Cast<string>().Distinct().OrderBy(e => e, StringComparer.Ordinal).ToList().AsReadOnly();
        }

        /// <summary>Books a verified activation answer: its entitlements, its grace and its expiry.</summary>
        private IList<string> Activated(IDictionary<string, object> r)
        {
            var ents = EntitlementsOf(r);
            var user = Json.GetObject(r, "user");
            var expires = Json.GetString(r, "expires_at") ?? (user != null ? Json.GetString(user, "expires_at") : null);
            lock (_gate)
            {
                _entitlements = ents;
                _expiryMs = Utc.ParseMs(expires);
            }
            _grace.Note(r);
            return ents;
        }

        /// <summary>A verified refusal (also one that came over the realtime channel) ends the grace at once.</summary>
        internal void NoteRefusal(int? status)
        {
            if (!GracePeriod.IsRefusal(status) || !_grace.Until.HasValue) return;
            Log(KeywardenLogLevel.Info, "keywarden.grace.ended a verified " + status + " refusal");
            _grace.End();
        }
    }
}
