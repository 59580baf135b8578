// The default transport: System.Net.Http.HttpClient, available on netstandard2.0, .NET Framework
// 4.8, .NET 8 and Mono. netstandard2.0 cannot observe "connected" (SocketsHttpHandler's
// ConnectCallback is .NET 5+), so "was anything sent?" is answered from the failure itself:
// connection refused, unreachable and name-resolution errors happen before a byte of the request
// leaves; every other failure may have reached the server.
using System;
using System.Collections;
using System.Collections.Generic;
using System.IO;
using System.Net;
using System.Net.Http;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Cryptography.X509Certificates;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden
{
    /// <summary>HttpClient-based transport with optional proxy and TLS public-key pinning.</summary>
    public sealed class HttpClientTransport : IKeywardenTransport, IDisposable
    {
        private const string PinFailedProperty = "keywarden.tls_pin_failed";
        private readonly HttpClient _http;
        private readonly int _maxResponseBytes;
        private readonly TlsPins _pins;
        private long _lastPinFailureTicks; // UTC ticks of the last pin mismatch seen by the callback

        /// <summary>
        /// proxy: null uses the system proxy settings. pins: SPKI SHA-256 pins of the service host
        /// (null: ordinary certificate validation only). allowUntrustedPinnedCertificate: accept a
        /// certificate that fails chain validation (self-signed, private CA) when its key matches a
        /// pin; by default both the chain and the pin must hold.
        /// </summary>
        public HttpClientTransport(IWebProxy proxy = null, TlsPins pins = null, bool allowUntrustedPinnedCertificate = false, int maxResponseBytes = 1 << 20)
        {
            _maxResponseBytes = maxResponseBytes;
            _pins = pins;
            var handler = new HttpClientHandler
            {
                AllowAutoRedirect = false, // a redirect would change the signed path; the answer must come from where we asked
                UseCookies = false,
                AutomaticDecompression = DecompressionMethods.None, // the signature covers the bytes as sent
            };
            if (proxy != null)
            {
                handler.Proxy = proxy;
                handler.UseProxy = true;
            }
            if (pins != null) InstallPinning(handler, pins, allowUntrustedPinnedCertificate);
            _http = new HttpClient(handler, true) { Timeout = System.Threading.Timeout.InfiniteTimeSpan };
        }

        private void InstallPinning(HttpClientHandler handler, TlsPins pins, bool allowUntrustedPinnedCertificate)
        {
            try
            {
                handler.ServerCertificateCustomValidationCallback = (message, certificate, chain, errors) =>
                {
                    if (!pins.Matches(certificate))
                    {
                        MarkPinFailure(message);
                        Interlocked.Exchange(ref _lastPinFailureTicks, DateTime.UtcNow.Ticks);
                        return false;
                    }
                    return errors == SslPolicyErrors.None || allowUntrustedPinnedCertificate;
                };
            }
            catch (PlatformNotSupportedException e)
            {
                // .NET Framework before 4.7.1: refusing to run unpinned is the only safe answer.
                handler.Dispose();
                throw new NotSupportedException("TLS pinning needs HttpClientHandler.ServerCertificateCustomValidationCallback (.NET Framework 4.7.1+, .NET Core, Mono)", e);
            }
        }

        private static void MarkPinFailure(HttpRequestMessage message)
        {
            if (message == null) return;
#pragma warning disable 618 // Properties is obsolete on .NET 5+, and the only per-request bag netstandard2.0 has
            lock (message.Properties) message.Properties[PinFailedProperty] = true;
#pragma warning restore 618
        }

        private static bool PinFailed(HttpRequestMessage message)
        {
#pragma warning disable 618
            lock (message.Properties) return message.Properties.ContainsKey(PinFailedProperty);
#pragma warning restore 618
        }

        /// <inheritdoc />
        public async Task<TransportResponse> SendAsync(TransportRequest request, CancellationToken cancellationToken)
        {
            using (var timeout = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken))
            using (var message = new HttpRequestMessage(new HttpMethod(request.Method), request.Url))
            {
                timeout.CancelAfter(request.Timeout);
                var content = new ByteArrayContent(request.Body);
                foreach (var h in request.Headers)
                {
                    if (h.Key.StartsWith("content-", StringComparison.OrdinalIgnoreCase)) content.Headers.TryAddWithoutValidation(h.Key, h.Value);
                    else message.Headers.TryAddWithoutValidation(h.Key, h.Value);
                }
                if (request.Method != "GET") message.Content = content;
                else content.Dispose();
                // .NET Framework and Mono add Expect: 100-continue to POSTs and then wait for a 100 that many servers never send.
                message.Headers.ExpectContinue = false;
                try
                {
                    using (var response = await _http.SendAsync(message, HttpCompletionOption.ResponseHeadersRead, timeout.Token).ConfigureAwait(false))
                    {
                        var headers = new Dictionary<string, string>(StringComparer.OrdinalIgnoreCase);
                        Collect(headers, response.Headers);
                        Collect(headers, response.Content.Headers);
                        var body = await ReadCapped(response.Content, timeout.Token).ConfigureAwait(false);
                        return new TransportResponse((int)response.StatusCode, headers, body);
                    }
                }
                catch (OperationCanceledException) when (!cancellationToken.IsCancellationRequested)
                {
                    throw new TransportException(TransportFailure.Timeout, true, "no answer within " + request.Timeout.TotalMilliseconds + " ms");
                }
                catch (TransportException)
                {
                    throw;
                }
                catch (Exception e) when (!(e is OperationCanceledException))
                {
                    if (_pins != null && (PinFailed(message) || RecentPinFailureCaused(e)))
                        throw new TransportException(TransportFailure.Network, false, "the TLS certificate of " + request.Url.Host + " does not match a pinned public key", e, true);
                    var notSent = NeverSent(e);
                    throw new TransportException(TransportFailure.Network, !notSent, Describe(e), e);
                }
            }
        }

        /// <summary>
        /// A GET whose body is left to the caller to stream (the update download): resolves once the
        /// headers arrived within timeout. Failures are TransportExceptions, as for SendAsync.
        /// </summary>
        internal async Task<HttpResponseMessage> GetStreamingAsync(Uri url, TimeSpan timeout, CancellationToken cancellationToken)
        {
            using (var limit = CancellationTokenSource.CreateLinkedTokenSource(cancellationToken))
            {
                limit.CancelAfter(timeout);
                var message = new HttpRequestMessage(HttpMethod.Get, url);
                try
                {
                    return await _http.SendAsync(message, HttpCompletionOption.ResponseHeadersRead, limit.Token).ConfigureAwait(false);
                }
                catch (OperationCanceledException) when (!cancellationToken.IsCancellationRequested)
                {
                    throw new TransportException(TransportFailure.Timeout, true, "no answer within " + timeout.TotalMilliseconds + " ms");
                }
                catch (Exception e) when (!(e is OperationCanceledException))
                {
                    throw new TransportException(TransportFailure.Network, !NeverSent(e), Describe(e), e);
                }
            }
        }

        private async Task<byte[]> ReadCapped(HttpContent content, CancellationToken ct)
        {
            var declared = content.Headers.ContentLength;
            if (declared.HasValue && declared.Value > _maxResponseBytes)
                throw new TransportException(TransportFailure.Network, true, "response larger than " + _maxResponseBytes + " bytes");
            using (var stream = await content.ReadAsStreamAsync().ConfigureAwait(false))
            using (var buffer = new MemoryStream())
            {
                var chunk = new byte[16384];
                while (true)
                {
                    var n = await stream.ReadAsync(chunk, 0, chunk.Length, ct).ConfigureAwait(false);
                    if (n == 0) break;
                    if (buffer.Length + n > _maxResponseBytes)
                        throw new TransportException(TransportFailure.Network, true, "response larger than " + _maxResponseBytes + " bytes");
                    buffer.Write(chunk, 0, n);
                }
                return buffer.ToArray();
            }
        }

        private static void Collect(Dictionary<string, string> into, System.Net.Http.Headers.HttpHeaders from)
        {
            foreach (var h in from)
            {
                var value = string.Join(", ", h.Value);
                string existing;
                into[h.Key] = into.TryGetValue(h.Key, out existing) ? existing + ", " + value : value;
            }
        }

        /// <summary>
        /// .NET 6+ opens pooled connections apart from the request that asked for them, so the request
        /// whose handshake failed is not always the one the callback was given: a TLS authentication
        /// failure right after a pin mismatch is that mismatch.
        /// </summary>
        private bool RecentPinFailureCaused(Exception e)
        {
            var last = Interlocked.Read(ref _lastPinFailureTicks);
            if (last == 0 || DateTime.UtcNow.Ticks - last > TimeSpan.TicksPerSecond * 10) return false;
            for (var x = e; x != null; x = x.InnerException)
                if (x is System.Security.Authentication.AuthenticationException) return true;
            return false;
        }

        /// <summary>True when the failure happened before any request byte can have left this machine.</summary>
        internal static bool NeverSent(Exception e)
        {
            var pending = new Stack<Exception>();
            pending.Push(e);
            var visited = 0;
            while (pending.Count > 0 && visited++ < 32)
            {
                var x = pending.Pop();
                var se = x as SocketException;
                if (se != null)
                {
                    switch (se.SocketErrorCode)
                    {
                        case SocketError.ConnectionRefused:
                        case SocketError.HostNotFound:
                        case SocketError.HostUnreachable:
                        case SocketError.NetworkUnreachable:
                        case SocketError.NoData:
                        case SocketError.TryAgain:
                        case SocketError.AddressNotAvailable:
                        case SocketError.HostDown:
                            return true;
                    }
                }
                var we = x as WebException;
                if (we != null && (we.Status == WebExceptionStatus.ConnectFailure || we.Status == WebExceptionStatus.NameResolutionFailure
                    || we.Status == WebExceptionStatus.ProxyNameResolutionFailure))
                    return true;
                var agg = x as AggregateException;
                if (agg != null) foreach (var inner in agg.InnerExceptions) pending.Push(inner);
                else if (x.InnerException != null) pending.Push(x.InnerException);
            }
            return false;
        }

        private static string Describe(Exception e)
        {
            var parts = new List<string>();
            for (var x = e; x != null && parts.Count < 4; x = x.InnerException) parts.Add(x.Message);
            return string.Join(" -> ", parts);
        }

        /// <summary>Releases the HttpClient.</summary>
        public void Dispose()
        {
            _http.Dispose();
        }
    }
}
