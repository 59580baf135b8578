// Client options and the small result types of the client calls.
using System;
using System.Collections.Generic;
using System.Net;

namespace Keywarden
{
    /// <summary>Log levels of the optional logger.</summary>
    public enum KeywardenLogLevel
    {
        /// <summary>Retries and other details.</summary>
        Debug,
        /// <summary>Noteworthy events (a learned clock offset).</summary>
        Info,
        /// <summary>Something failed and was handled (register's follow-up login, heartbeat stop).</summary>
        Warn,
        /// <summary>Something failed unexpectedly (an event handler threw).</summary>
        Error,
    }

    /// <summary>Options of KeywardenClient; every member is optional.</summary>
    public sealed class KeywardenOptions
    {
        /// <summary>Overrides the config's base_url.</summary>
        public string BaseUrl { get; set; }
        /// <summary>Per-call timeout. Default 10 s.</summary>
        public TimeSpan Timeout { get; set; }
        /// <summary>Extra attempts for a call that certainly never reached the server. Default 2.</summary>
        public int Retries { get; set; }
        /// <summary>HTTP proxy for the default transport (null: system settings).</summary>
        public IWebProxy Proxy { get; set; }
        /// <summary>Receives the SDK's log lines (dotted event names plus details). Must not block.</summary>
        public Action<KeywardenLogLevel, string> Logger { get; set; }
        /// <summary>The local clock. Default DateTimeOffset.UtcNow.</summary>
        public Func<DateTimeOffset> Clock { get; set; }
        /// <summary>Replaces the HTTP layer (tests, custom stacks). The client does not dispose it.</summary>
        public IKeywardenTransport Transport { get; set; }
        /// <summary>Asks for encrypted success bodies (docs/protocol.md 5); needs the config's api_secret. At most 35 characters.</summary>
        public string EncKey { get; set; }
        /// <summary>Largest clock offset adopted from the first verified answer; further off it is refused as stale. Default 600 s.</summary>
        public TimeSpan MaxClockOffset { get; set; }
        /// <summary>
        /// SPKI SHA-256 pins (base64 or hex) of the service host's TLS certificate, for the default
        /// transport. Empty: no pinning. See README "TLS pinning".
        /// </summary>
        public IList<string> TlsPins { get; set; }
        /// <summary>With TlsPins: also accept a certificate that fails chain validation (self-signed) when its key is pinned.</summary>
        public bool AllowUntrustedPinnedCertificate { get; set; }
        /// <summary>
        /// Where offline license checks keep the latest time seen (docs/protocol.md 12.5). Null: per user and
        /// application, see OfflineLicenses.DefaultStateFile.
        /// </summary>
        public string StateFile { get; set; }
        /// <summary>
        /// Where ActivationRequest keeps the nonce of this machine's latest activation request. Null: the
        /// state file's path with ".request.json" instead of ".json".
        /// </summary>
        public string RequestFile { get; set; }

        /// <summary>Creates options with the defaults.</summary>
        public KeywardenOptions()
        {
            Timeout = TimeSpan.FromSeconds(10);
            Retries = 2;
            MaxClockOffset = TimeSpan.FromSeconds(600);
            TlsPins = new List<string>();
        }
    }

    /// <summary>What init returns.</summary>
    public sealed class AppInfo
    {
        /// <summary>Application name.</summary>
        public string Name { get; internal set; }
        /// <summary>The application's current version.</summary>
        public string Version { get; internal set; }
        /// <summary>Whether keys and accounts are locked to the first device.</summary>
        public bool HwidLock { get; internal set; }
        /// <summary>The new session (43 characters).</summary>
        public string Session { get; internal set; }
    }

    /// <summary>What register and login return.</summary>
    public sealed class UserInfo
    {
        /// <summary>The key's entitlement codes, sorted (docs/protocol.md 12.3).</summary>
        public IList<string> Entitlements { get; internal set; }
        /// <summary>Whether Entitlements holds code.</summary>
        public bool HasEntitlement(string code) { return Entitlements != null && Entitlements.Contains(code); }
        /// <summary>The username.</summary>
        public string Username { get; internal set; }
        /// <summary>Access level from the activating license.</summary>
        public long Level { get; internal set; }
        /// <summary>Expiry; null when the account does not expire.</summary>
        public DateTimeOffset? ExpiresAt { get; internal set; }
        /// <summary>The server's message.</summary>
        public string Message { get; internal set; }
    }

    /// <summary>What ActivateLicense returns.</summary>
    public sealed class LicenseInfo
    {
        /// <summary>The key's entitlement codes, sorted (docs/protocol.md 12.3).</summary>
        public IList<string> Entitlements { get; internal set; }
        /// <summary>Whether Entitlements holds code.</summary>
        public bool HasEntitlement(string code) { return Entitlements != null && Entitlements.Contains(code); }
        /// <summary>Access level of the key.</summary>
        public long Level { get; internal set; }
        /// <summary>Expiry; null for a lifetime key.</summary>
        public DateTimeOffset? ExpiresAt { get; internal set; }
        /// <summary>The server's message.</summary>
        public string Message { get; internal set; }
    }

    /// <summary>What Trial returns: a trial key created for this device and activated at once (docs/protocol.md 12.4).</summary>
    public sealed class TrialInfo
    {
        /// <summary>The plaintext key: the server shows it this once.</summary>
        public string Key { get; internal set; }
        /// <summary>The application's trial_level.</summary>
        public long Level { get; internal set; }
        /// <summary>When the trial ends.</summary>
        public DateTimeOffset? ExpiresAt { get; internal set; }
        /// <summary>The server's message.</summary>
        public string Message { get; internal set; }
        /// <summary>The trial key's entitlement codes, sorted.</summary>
        public IList<string> Entitlements { get; internal set; }
        /// <summary>Whether Entitlements holds code.</summary>
        public bool HasEntitlement(string code) { return Entitlements != null && Entitlements.Contains(code); }
    }

    /// <summary>Optional init fields (docs/spec.md POST /api/client/init).</summary>
    public sealed class InitOptions
    {
        /// <summary>SHA-256 or MD5 of the client binary, checked when the app has hash_check on (see KeywardenMachine.SelfHash).</summary>
        public string BinaryHash { get; set; }
        /// <summary>A pre-issued binary token.</summary>
        public string BinaryToken { get; set; }
        /// <summary>hex(HMAC-SHA256(api_secret, BinaryToken)).</summary>
        public string BinaryTokenHash { get; set; }
    }
}
