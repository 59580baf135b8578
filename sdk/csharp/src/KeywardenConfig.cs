// keywarden.json, format 1 (sdk/vectors/README.md): what the dashboard's SDK zip carries.
// Unknown fields are ignored (later formats add fields); anything unusable is refused at load
// time with KeywardenConfigException, so a broken config never surfaces as a runtime call error.
using System;
using System.Collections.Generic;
using System.IO;
using System.Text;

namespace Keywarden
{
    /// <summary>One pinned response-signing key.</summary>
    public sealed class ResponseKey
    {
        /// <summary>Key id (X-Response-Kid).</summary>
        public string Kid { get; private set; }
        /// <summary>Always "Ed25519".</summary>
        public string Alg { get { return "Ed25519"; } }
        /// <summary>The 32-byte public key.</summary>
        public byte[] PublicKey { get { return (byte[])_publicKey.Clone(); } }
        private readonly byte[] _publicKey;

        /// <summary>Creates a pinned key (publicKeyBase64: base64 of 32 bytes).</summary>
        public ResponseKey(string kid, string publicKeyBase64)
        {
            if (string.IsNullOrEmpty(kid)) throw new KeywardenConfigException("a response key has no kid");
            byte[] raw;
            try { raw = Convert.FromBase64String(publicKeyBase64 ?? ""); }
            catch (FormatException) { raw = null; }
            if (raw == null || raw.Length != 32) throw new KeywardenConfigException("key " + kid + ": public_key must be base64 of 32 bytes");
            Kid = kid;
            _publicKey = raw;
        }

        internal byte[] Raw { get { return _publicKey; } }
    }

    /// <summary>A parsed keywarden.json.</summary>
    public sealed class KeywardenConfig
    {
        /// <summary>The key id the reference C# client expects when an entry names none (docs/spec.md "Client API" item 4).</summary>
        public const string DefaultKid = "k1";

        /// <summary>1.</summary>
        public int Format { get { return 1; } }
        /// <summary>Service root without trailing slash.</summary>
        public string BaseUrl { get; private set; }
        /// <summary>Application name (informational).</summary>
        public string AppName { get; private set; }
        /// <summary>The application's public key.</summary>
        public string ApiKey { get; private set; }
        /// <summary>Version sent to init ("1.0" when the file has none).</summary>
        public string Version { get; private set; }
        /// <summary>Present only when the application requires signed requests.</summary>
        public string ApiSecret { get; private set; }
        /// <summary>The pinned response keys.</summary>
        public IList<ResponseKey> ResponseKeys { get; private set; }
        /// <summary>The application's id (app_id): an offline license file must name it (docs/protocol.md 12.5). Null when the file has none.</summary>
        public string AppId { get; private set; }

        /// <summary>Builds a config in code (instead of a file).</summary>
        public KeywardenConfig(string baseUrl, string apiKey, IEnumerable<ResponseKey> responseKeys, string version = null, string apiSecret = null, string appName = null,
            string appId = null)
        {
            if (appId != null && appId.Length == 0) throw new KeywardenConfigException("app_id must be a non-empty string");
            if (baseUrl == null || !(baseUrl.StartsWith("http://", StringComparison.OrdinalIgnoreCase) || baseUrl.StartsWith("https://", StringComparison.OrdinalIgnoreCase)))
                throw new KeywardenConfigException("base_url must be an http(s) URL");
            Uri parsed;
            if (!Uri.TryCreate(baseUrl, UriKind.Absolute, out parsed)) throw new KeywardenConfigException("base_url is not a valid URL");
            if (string.IsNullOrEmpty(apiKey)) throw new KeywardenConfigException("api_key missing");
            var keys = new List<ResponseKey>(responseKeys ?? new ResponseKey[0]);
            if (keys.Count == 0) throw new KeywardenConfigException("response_keys must list at least one key");
            var seen = new HashSet<string>(StringComparer.Ordinal);
            foreach (var k in keys)
                if (!seen.Add(k.Kid)) throw new KeywardenConfigException("response key " + k.Kid + " is listed twice");
            BaseUrl = baseUrl.TrimEnd('/');
            ApiKey = apiKey;
            ResponseKeys = keys.AsReadOnly();
            Version = version ?? "1.0";
            ApiSecret = string.IsNullOrEmpty(apiSecret) ? null : apiSecret;
            AppName = appName;
            AppId = appId;
        }

        /// <summary>Parses the text of a keywarden.json.</summary>
        public static KeywardenConfig Parse(string json)
        {
            object raw;
            try { raw = Json.Parse(json ?? ""); }
            catch (FormatException e) { throw new KeywardenConfigException("not JSON: " + e.Message, e); }
            var c = raw as IDictionary<string, object>;
            if (c == null) throw new KeywardenConfigException("not a JSON object");
            object format;
            c.TryGetValue("format", out format);
            if (!(format is long) || (long)format != 1)
                throw new KeywardenConfigException("unsupported format " + (format == null ? "(missing)" : Json.Serialize(format)) + " (this SDK reads format 1)");
            var baseUrl = StringField(c, "base_url", true);
            var apiKey = StringField(c, "api_key", true);
            var version = StringField(c, "version", false);
            var secret = StringField(c, "api_secret", false);
            var name = StringField(c, "app_name", false);
            var appId = StringField(c, "app_id", false);
            object keysRaw;
            c.TryGetValue("response_keys", out keysRaw);
            var list = keysRaw as IList<object>;
            if (list == null || list.Count == 0) throw new KeywardenConfigException("response_keys must list at least one key");
            var keys = new List<ResponseKey>();
            foreach (var item in list)
            {
                var o = item as IDictionary<string, object>;
                if (o == null) throw new KeywardenConfigException("a response key is not an object");
                object kid, alg, pk;
                o.TryGetValue("kid", out kid);
                o.TryGetValue("alg", out alg);
                o.TryGetValue("public_key", out pk);
                if (kid != null && !(kid is string)) throw new KeywardenConfigException("a response key's kid is not a string");
                if (alg != null && !"Ed25519".Equals(alg)) throw new KeywardenConfigException("key " + kid + ": unsupported alg " + Json.Serialize(alg));
                keys.Add(new ResponseKey((string)kid ?? DefaultKid, pk as string));
            }
            return new KeywardenConfig(baseUrl, apiKey, keys, version, secret, name, appId);
        }

        /// <summary>Reads and parses a keywarden.json file.</summary>
        public static KeywardenConfig Load(string path)
        {
            string text;
            try { text = File.ReadAllText(path, new UTF8Encoding(false, true)); }
            catch (Exception e) when (e is IOException || e is UnauthorizedAccessException || e is ArgumentException || e is NotSupportedException || e is DecoderFallbackException)
            {
                throw new KeywardenConfigException("cannot read " + path + ": " + e.Message, e);
            }
            return Parse(text);
        }

        private static string StringField(IDictionary<string, object> c, string name, bool required)
        {
            object v;
            if (!c.TryGetValue(name, out v) || v == null)
            {
                if (required) throw new KeywardenConfigException(name + " missing");
                return null;
            }
            var s = v as string;
            if (s == null) throw new KeywardenConfigException(name + " must be a string");
            return s;
        }
    }
}
