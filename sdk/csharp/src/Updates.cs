// Updates: the upgrade check's offer and the verified download of an artifact. An offer is believed
// only when every artifact carries an Ed25519 signature, by a pinned response-signing key, over
// "kwart1.<app_id>.<version>.<filename>.<sha512 hex>" (the server's docs/releases.md "Artifacts";
// sdk/vectors/artifacts.json fixes the order of the checks). A download streams into a temporary
// file next to the target, checks size, SHA-512 and that signature, and only then moves it over the
// target; any failure deletes the temporary file and throws an UpdateException.
using System;
using System.Collections.Generic;
using System.IO;
using System.Net.Http;
using System.Security.Cryptography;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden
{
    /// <summary>Why an update (an offered artifact or its download) was refused (same strings in every SDK).</summary>
    public enum UpdateReason
    {
        /// <summary>Signed under a key id that is not pinned ("unknown_kid").</summary>
        UnknownKid,
        /// <summary>Not base64 of 64 bytes, or not valid for this app, version, file name and SHA-512 ("bad_signature").</summary>
        BadSignature,
        /// <summary>The download produced another number of bytes than the offer's size ("size_mismatch").</summary>
        SizeMismatch,
        /// <summary>The downloaded bytes do not hash to the offer's sha512 ("sha512_mismatch").</summary>
        Sha512Mismatch,
        /// <summary>The link answered something other than 200, the connection failed, or the file could not be written ("download_failed").</summary>
        DownloadFailed,
    }

    /// <summary>
    /// An update refused. Code is Verification for UnknownKid, BadSignature, SizeMismatch and
    /// Sha512Mismatch; for DownloadFailed it is Server (Status and Detail of the link's answer kept),
    /// Network or Timeout.
    /// </summary>
    [Serializable]
    public class UpdateException : KeywardenException
    {
        /// <summary>Why the update was refused.</summary>
        public UpdateReason UpdateReason { get; private set; }

        /// <summary>Creates the error.</summary>
        public UpdateException(UpdateReason reason, string message, KeywardenErrorCode code = KeywardenErrorCode.Verification,
            Exception inner = null)
            : base(code, "update refused (" + WireName(reason) + "): " + message, inner)
        {
            UpdateReason = reason;
        }

        /// <summary>The snake_case name of the reason shared by every SDK ("sha512_mismatch"...).</summary>
        public string WireReason { get { return WireName(UpdateReason); } }

        /// <summary>The snake_case name of a reason.</summary>
        public static string WireName(UpdateReason reason)
        {
            switch (reason)
            {
                case UpdateReason.UnknownKid: return "unknown_kid";
                case UpdateReason.BadSignature: return "bad_signature";
                case UpdateReason.SizeMismatch: return "size_mismatch";
                case UpdateReason.Sha512Mismatch: return "sha512_mismatch";
                default: return "download_failed";
            }
        }

        internal static UpdateException Refused(int status, object detail, string message)
        {
            var e = new UpdateException(UpdateReason.DownloadFailed, message, KeywardenErrorCode.Server);
            e.SetAnswer(status, detail);
            return e;
        }
    }

    /// <summary>One file of an offered release, its signature already verified.</summary>
    public sealed class Artifact
    {
        /// <summary>The application (part of the signed message).</summary>
        public string AppId { get; set; }
        /// <summary>The release's version (part of the signed message).</summary>
        public string Version { get; set; }
        /// <summary>The file name.</summary>
        public string Filename { get; set; }
        /// <summary>linux, windows... or "any".</summary>
        public string Platform { get; set; }
        /// <summary>x64, arm64... or "any".</summary>
        public string Arch { get; set; }
        /// <summary>Bytes.</summary>
        public long Size { get; set; }
        /// <summary>Lower-case hex SHA-512 of the file.</summary>
        public string Sha512 { get; set; }
        /// <summary>Base64 Ed25519 signature of the artifact message.</summary>
        public string Signature { get; set; }
        /// <summary>The pinned key that signed it.</summary>
        public string Kid { get; set; }
        /// <summary>The short-lived download link.</summary>
        public string Url { get; set; }
        /// <summary>When the link stops working.</summary>
        public DateTimeOffset? UrlExpiresAt { get; set; }

        /// <summary>A copy with another download URL.</summary>
        public Artifact WithUrl(string url)
        {
            var a = (Artifact)MemberwiseClone();
            a.Url = url;
            return a;
        }
    }

    /// <summary>The release an upgrade check offers.</summary>
    public sealed class UpdateOffer
    {
        /// <summary>SemVer of the release.</summary>
        public string Version { get; internal set; }
        /// <summary>stable, rc, beta, alpha or dev.</summary>
        public string Channel { get; internal set; }
        /// <summary>Release notes.</summary>
        public string Notes { get; internal set; }
        /// <summary>When it was published.</summary>
        public DateTimeOffset? PublishedAt { get; internal set; }
        /// <summary>The files for the platform and arch asked, every signature verified.</summary>
        public IList<Artifact> Artifacts { get; internal set; }
    }

    internal static class ArtifactCheck
    {
        private const int Chunk = 64 * 1024;

        internal static string Message(string appId, string version, string filename, string sha512Hex)
        {
            return "kwart1." + appId + "." + version + "." + filename + "." + sha512Hex;
        }

        /// <summary>Throws UpdateException (UnknownKid, BadSignature) unless the signature holds.</summary>
        internal static void Verify(ResponseVerifier keys, Artifact a)
        {
            var key = keys.KeyFor(a.Kid);
            if (key == null) throw new UpdateException(UpdateReason.UnknownKid, a.Filename + " is signed by unpinned key " + a.Kid);
            var sig = KeywardenCrypto.DecodeSignature(a.Signature);
            var message = Encoding.UTF8.GetBytes(Message(a.AppId, a.Version, a.Filename, a.Sha512));
            if (sig == null || !KeywardenCrypto.Ed25519Verify(key, message, sig))
                throw new UpdateException(UpdateReason.BadSignature, "signature of " + a.Filename + " " + a.Version + " does not verify");
        }

        /// <summary>The offer of an upgrade answer, each artifact verified; null when a field is malformed.</summary>
        internal static UpdateOffer Parse(IDictionary<string, object> upgrade, string appId, ResponseVerifier keys,
            Func<IDictionary<string, object>, string, DateTimeOffset?> toDate)
        {
            var version = Json.GetString(upgrade, "version");
            var listed = upgrade.ContainsKey("artifacts") ? upgrade["artifacts"] as IList<object> : null;
            if (string.IsNullOrEmpty(version) || listed == null || listed.Count == 0) return null;
            var artifacts = new List<Artifact>();
            foreach (var item in listed)
            {
                var o = item as IDictionary<string, object>;
                if (o == null) return null;
                var size = Json.GetInt(o, "size");
                var a = new Artifact
                {
                    AppId = appId, Version = version, Filename = Json.GetString(o, "filename"), Platform = Json.GetString(o, "platform"),
                    Arch = Json.GetString(o, "arch"), Size = size ?? -1, Sha512 = Json.GetString(o, "sha512"),
                    Signature = Json.GetString(o, "signature"), Kid = Json.GetString(o, "kid"), Url = Json.GetString(o, "url"),
                    UrlExpiresAt = toDate(o, "url_expires_at"),
                };
                if (a.Size < 0 || string.IsNullOrEmpty(a.Filename) || a.Platform == null || a.Arch == null || a.Sha512 == null
                    || a.Signature == null || a.Kid == null || a.Url == null) return null;
                Verify(keys, a);
                artifacts.Add(a);
            }
            return new UpdateOffer
            {
                Version = version, Channel = Json.GetString(upgrade, "channel") ?? "", Notes = Json.GetString(upgrade, "notes") ?? "",
                PublishedAt = toDate(upgrade, "published_at"), Artifacts = artifacts.AsReadOnly(),
            };
        }

        /// <summary>Streams, verifies and moves into place; returns the target's full path.</summary>
        internal static async Task<string> DownloadAsync(ResponseVerifier keys, HttpClientTransport http, Artifact a, string targetPath,
            Action<long, long> progress, TimeSpan timeout, CancellationToken ct)
        {
            Verify(keys, a);
            var target = Path.GetFullPath(targetPath);
            var tmp = Path.Combine(Path.GetDirectoryName(target), "." + Path.GetFileName(target) + "." + KeywardenCrypto.RandomBase64Url(6) + ".part");
            try
            {
                using (var sha = SHA512.Create())
                {
                    long received = 0;
                    using (var file = new FileStream(tmp, FileMode.CreateNew, FileAccess.Write, FileShare.None, Chunk, true))
                    using (var response = await Get(http, a, timeout, ct).ConfigureAwait(false))
                    using (var stream = await response.Content.ReadAsStreamAsync().ConfigureAwait(false))
                    {
                        var buffer = new byte[Chunk];
                        while (true)
                        {
                            int n;
                            using (var idle = CancellationTokenSource.CreateLinkedTokenSource(ct))
                            {
                                idle.CancelAfter(timeout);
                                try { n = await stream.ReadAsync(buffer, 0, buffer.Length, idle.Token).ConfigureAwait(false); }
                                catch (OperationCanceledException) when (!ct.IsCancellationRequested)
                                {
                                    throw new UpdateException(UpdateReason.DownloadFailed, "no data from " + a.Filename + " within " + timeout.TotalMilliseconds + " ms", KeywardenErrorCode.Timeout);
                                }
                                catch (IOException e)
                                {
                                    throw new UpdateException(UpdateReason.DownloadFailed, "reading " + a.Filename + ": " + e.Message, KeywardenErrorCode.Network, e);
                                }
                            }
                            if (n == 0) break;
                            received += n;
                            if (received > a.Size) throw new UpdateException(UpdateReason.SizeMismatch, a.Filename + ": more than the offered " + a.Size + " bytes");
                            sha.TransformBlock(buffer, 0, n, null, 0);
                            await file.WriteAsync(buffer, 0, n, ct).ConfigureAwait(false);
                            if (progress != null) progress(received, a.Size);
                        }
                        await file.FlushAsync(ct).ConfigureAwait(false);
                        file.Flush(true);
                    }
                    if (received != a.Size) throw new UpdateException(UpdateReason.SizeMismatch, a.Filename + ": " + received + " bytes, offered " + a.Size);
                    sha.TransformFinalBlock(new byte[0], 0, 0);
                    if (!FixedTimeEquals(KeywardenCrypto.Hex(sha.Hash), a.Sha512.ToLowerInvariant()))
                        throw new UpdateException(UpdateReason.Sha512Mismatch, a.Filename + ": SHA-512 differs from the offer");
                }
                if (File.Exists(target)) File.Replace(tmp, target, null);
                else File.Move(tmp, target);
                return target;
            }
            catch (Exception e)
            {
                try { File.Delete(tmp); } catch (Exception) { /* nothing more to do */ }
                if (e is KeywardenException || e is OperationCanceledException) throw;
                throw new UpdateException(UpdateReason.DownloadFailed, "writing " + target + ": " + e.Message, KeywardenErrorCode.Network, e);
            }
        }

        private static async Task<HttpResponseMessage> Get(HttpClientTransport http, Artifact a, TimeSpan timeout, CancellationToken ct)
        {
            Uri url;
            if (!Uri.TryCreate(a.Url, UriKind.Absolute, out url) || (url.Scheme != "http" && url.Scheme != "https"))
                throw new UpdateException(UpdateReason.DownloadFailed, "unsupported URL " + a.Url, KeywardenErrorCode.Network);
            HttpResponseMessage response;
            try
            {
                response = await http.GetStreamingAsync(url, timeout, ct).ConfigureAwait(false);
            }
            catch (TransportException e)
            {
                throw new UpdateException(UpdateReason.DownloadFailed, "GET " + a.Filename + ": " + e.Message,
                    e.Kind == TransportFailure.Timeout ? KeywardenErrorCode.Timeout : KeywardenErrorCode.Network, e);
            }
            if ((int)response.StatusCode == 200) return response;
            using (response)
            {
                string text;
                try { text = await response.Content.ReadAsStringAsync().ConfigureAwait(false); }
                catch (Exception) { text = ""; }
                object detail = text;
                try
                {
                    var parsed = Json.Parse(text) as IDictionary<string, object>;
                    if (parsed != null && parsed.ContainsKey("detail")) detail = parsed["detail"];
                }
                catch (Exception) { /* not JSON: the text is the detail */ }
                throw UpdateException.Refused((int)response.StatusCode, detail, a.Filename + ": " + (int)response.StatusCode + " " + text);
            }
        }

        private static bool FixedTimeEquals(string a, string b)
        {
            if (a.Length != b.Length) return false;
            var diff = 0;
            for (var i = 0; i < a.Length; i++) diff |= a[i] ^ b[i];
            return diff == 0;
        }
    }

    public sealed partial class KeywardenClient
    {
        /// <summary>
        /// Asks for the newest release above version this activated key may install on platform/arch
        /// (channels stable &lt; rc &lt; beta &lt; alpha &lt; dev: a channel is offered itself and everything
        /// more stable). Null, or the offer whose every artifact's signature verified under the pinned
        /// keys (else UpdateException). Throws KeywardenConfigException when the config has no app_id.
        /// </summary>
        public async Task<UpdateOffer> CheckUpdateAsync(string version, string channel = "stable", string platform = "any",
            string arch = "any", CancellationToken cancellationToken = default(CancellationToken))
        {
            var appId = Config.AppId;
            if (string.IsNullOrEmpty(appId)) throw new KeywardenConfigException("app_id missing (release artifacts are signed for it)");
            var r = await CallAsync("releases/upgrade", new Dictionary<string, object>
            {
                { "session", RequireSession() }, { "version", version }, { "channel", channel }, { "platform", platform }, { "arch", arch },
            }, cancellationToken).ConfigureAwait(false);
            object upgrade;
            if (!r.TryGetValue("upgrade", out upgrade) || upgrade == null) return null;
            var o = upgrade as IDictionary<string, object>;
            var offer = o != null ? ArtifactCheck.Parse(o, appId, _verifier, ToDate) : null;
            if (offer == null) throw KeywardenException.VerificationFailed(VerificationReason.Malformed, "upgrade answer is malformed");
            return offer;
        }

        /// <summary>Blocking CheckUpdateAsync.</summary>
        public UpdateOffer CheckUpdate(string version, string channel = "stable", string platform = "any", string arch = "any")
        {
            return Block(() => CheckUpdateAsync(version, channel, platform, arch));
        }

        /// <summary>
        /// Downloads artifact to targetPath: streamed into a temporary file in the same folder
        /// (progress(received, total) after each chunk), checked for size, SHA-512 and signature, then
        /// moved over the target. Any failure deletes the temporary file, leaves the target untouched and
        /// throws UpdateException. Timeout bounds the connect and each pause of the stream, not the whole
        /// download. Returns the target's full path.
        /// </summary>
        public async Task<string> DownloadUpdateAsync(Artifact artifact, string targetPath, Action<long, long> progress = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            if (artifact == null) throw new ArgumentNullException("artifact");
            var own = _transport as HttpClientTransport;
            var http = own ?? new HttpClientTransport();
            try
            {
                return await ArtifactCheck.DownloadAsync(_verifier, http, artifact, targetPath, progress, Timeout, cancellationToken).ConfigureAwait(false);
            }
            finally
            {
                if (own == null) http.Dispose();
            }
        }

        /// <summary>Blocking DownloadUpdateAsync.</summary>
        public string DownloadUpdate(Artifact artifact, string targetPath, Action<long, long> progress = null)
        {
            return Block(() => DownloadUpdateAsync(artifact, targetPath, progress));
        }
    }
}
