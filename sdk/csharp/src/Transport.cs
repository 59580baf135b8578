// The HTTP layer, replaceable through KeywardenOptions.Transport. A heartbeat must know whether a
// failed request can have reached the server: a connection that was never established means
// nothing was sent and the same beat may be sent again; anything later means the server may have
// acted on it. TransportException.RequestSent carries that promise.
using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden
{
    /// <summary>One HTTP request of the client API.</summary>
    public sealed class TransportRequest
    {
        /// <summary>"POST" (every client call) or "GET".</summary>
        public string Method { get; private set; }
        /// <summary>Absolute URL.</summary>
        public Uri Url { get; private set; }
        /// <summary>Request headers (lower-case names).</summary>
        public IDictionary<string, string> Headers { get; private set; }
        /// <summary>The exact body bytes (the request signature covers them).</summary>
        public byte[] Body { get; private set; }
        /// <summary>The client's per-call timeout (the client also enforces it around the transport).</summary>
        public TimeSpan Timeout { get; private set; }

        /// <summary>Creates a request.</summary>
        public TransportRequest(string method, Uri url, IDictionary<string, string> headers, byte[] body, TimeSpan timeout)
        {
            Method = method;
            Url = url;
            Headers = new Dictionary<string, string>(headers, StringComparer.OrdinalIgnoreCase);
            Body = body;
            Timeout = timeout;
        }

        /// <summary>The same request sent to another URL (tests use it to simulate failures).</summary>
        public TransportRequest WithUrl(Uri url)
        {
            return new TransportRequest(Method, url, Headers, Body, Timeout);
        }
    }

    /// <summary>One HTTP answer: status, headers (case-insensitive names) and the raw body bytes.</summary>
    public sealed class TransportResponse
    {
        /// <summary>HTTP status.</summary>
        public int Status { get; private set; }
        /// <summary>Headers; repeated headers joined with ", ".</summary>
        public IDictionary<string, string> Headers { get; private set; }
        /// <summary>The body exactly as received (the response signature covers these bytes).</summary>
        public byte[] Body { get; private set; }

        /// <summary>Creates a response.</summary>
        public TransportResponse(int status, IDictionary<string, string> headers, byte[] body)
        {
            Status = status;
            Headers = new Dictionary<string, string>(headers ?? new Dictionary<string, string>(), StringComparer.OrdinalIgnoreCase);
            Body = body ?? new byte[0];
        }

        /// <summary>A header value or null.</summary>
        public string Header(string name)
        {
            string v;
            return Headers.TryGetValue(name, out v) ? v : null;
        }
    }

    /// <summary>Network or timeout; see RequestSent.</summary>
    public enum TransportFailure
    {
        /// <summary>The connection could not be made or broke.</summary>
        Network,
        /// <summary>No answer in time.</summary>
        Timeout,
    }

    /// <summary>
    /// What a transport throws. RequestSent = false promises that no byte of the request reached the
    /// server (connection refused, DNS failure). Any other exception a custom transport throws counts
    /// as Network with the request possibly sent.
    /// </summary>
    [Serializable]
    public class TransportException : Exception
    {
        /// <summary>Network or Timeout.</summary>
        public TransportFailure Kind { get; private set; }
        /// <summary>False only when the request certainly never reached the server.</summary>
        public bool RequestSent { get; private set; }
        /// <summary>Set when the TLS certificate failed the SPKI pin (then Kind is Network, RequestSent false).</summary>
        public bool TlsPinMismatch { get; private set; }

        /// <summary>Creates the error.</summary>
        public TransportException(TransportFailure kind, bool requestSent, string message, Exception inner = null, bool tlsPinMismatch = false)
            : base(message, inner)
        {
            Kind = kind;
            RequestSent = requestSent;
            TlsPinMismatch = tlsPinMismatch;
        }
    }

    /// <summary>Sends one request. Implementations must be safe to call from several threads at once.</summary>
    public interface IKeywardenTransport
    {
        /// <summary>Sends the request and returns the full answer, whatever its status.</summary>
        Task<TransportResponse> SendAsync(TransportRequest request, CancellationToken cancellationToken);
    }
}
