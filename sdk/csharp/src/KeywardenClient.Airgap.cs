// Air-gapped machines on the client: activation requests answered by file, and floating seats leased
// from a relay on the customer's network (formats and checks: Airgap.cs).
using System;
using System.Collections.Generic;
using System.IO;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden
{
    public sealed partial class KeywardenClient
    {
        private readonly string _requestFileOption;

        /// <summary>Where ActivationRequest keeps its nonce (KeywardenOptions.RequestFile).</summary>
        public string RequestFile
        {
            get
            {
                if (_requestFileOption != null) return _requestFileOption;
                var state = StateFile;
                return (state.EndsWith(".json", StringComparison.Ordinal) ? state.Substring(0, state.Length - 5) : state) + ".request.json";
            }
        }

        private string RequireAppId()
        {
            if (Config.AppId == null) throw new KeywardenConfigException("app_id missing (offline files and pools are checked against it)");
            return Config.AppId;
        }

        /// <summary>
        /// A "kwreq1" activation request for key on this machine, written with no network. Carry it to a
        /// connected machine (dashboard or customer portal); pass its answer to CompleteActivation. A new
        /// request replaces the kept nonce: answers to older ones are refused. hwid: default MachineHwid().
        /// </summary>
        public string ActivationRequest(string key, string hwid = null, IDictionary<string, string> components = null)
        {
            return new RequestStore(RequestFile).NewRequest(RequireAppId(), key, hwid ?? MachineHwid(), _clock(), components);
        }

        /// <summary>
        /// Checks the answer to this machine's latest activation request: every check of LoadOffline, then
        /// its request_nonce (OfflineInvalid WrongRequest for an answer to an older request, or when no
        /// request is kept here). Save the answer; later starts check it with LoadOffline.
        /// </summary>
        public OfflineLicense CompleteActivation(string response, string hwid = null)
        {
            var lic = LoadOffline(response, hwid);
            try
            {
                Airgap.CheckRequestNonce(response, new RequestStore(RequestFile).Nonce());
            }
            catch (KeywardenException e)
            {
                lock (_gate) _entitlements = NoEntitlements;
                Log(KeywardenLogLevel.Warn, "keywarden.offline.refused " + e.Message);
                throw;
            }
            return lic;
        }

        /// <summary>
        /// Leases a floating seat from a relay on the local network (instead of the service) and keeps it
        /// renewed until Release/Dispose (and at process exit). Believed only with a pool that verifies
        /// under the pinned keys and names this application (else OfflineInvalid); every seat taken:
        /// SessionLimit. Entitlements become the pool's. hwid: default MachineHwid().
        /// </summary>
        public async Task<SeatLease> LeaseSeatAsync(string relayUrl, string hwid = null, CancellationToken cancellationToken = default(CancellationToken))
        {
            var appId = RequireAppId();
            var relayBase = (relayUrl ?? "").TrimEnd('/');
            Func<string, string, byte[], Task<KeyValuePair<int, IDictionary<string, object>>>> send = async (method, path, body) =>
            {
                var headers = new Dictionary<string, string>();
                if (body != null) headers["content-type"] = "application/json";
                var res = await SendAsync(new TransportRequest(method, new Uri(relayBase + path), headers, body ?? new byte[0], Timeout), path, cancellationToken)
                    .ConfigureAwait(false);
                IDictionary<string, object> parsed = null;
                try { if (res.Body != null && res.Body.Length > 0) parsed = Json.Parse(Encoding.UTF8.GetString(res.Body)) as IDictionary<string, object>; }
                catch (FormatException) { parsed = null; }
                return new KeyValuePair<int, IDictionary<string, object>>(res.Status, parsed);
            };
            var lease = new SeatLease(send, Config.ResponseKeys, appId, hwid ?? MachineHwid(), () => _clock(), Log);
            await lease.TakeAsync().ConfigureAwait(false);
            lease.Start();
            lock (_gate) _entitlements = lease.Pool.Entitlements;
            return lease;
        }

        /// <summary>Blocking LeaseSeatAsync.</summary>
        public SeatLease LeaseSeat(string relayUrl, string hwid = null)
        {
            return Block(() => LeaseSeatAsync(relayUrl, hwid));
        }
    }
}
