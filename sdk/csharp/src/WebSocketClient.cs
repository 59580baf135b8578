// A minimal RFC 6455 client for the realtime channel over a plain socket or SslStream: the
// upgrade, masked client frames, fragments, ping/pong, close, a size cap, and one reader thread.
// System.Net.WebSockets.ClientWebSocket was considered: on netstandard2.0 (and Mono, .NET
// Framework) it hides a refused upgrade's status, headers and body, so the server's signed refusal
// (401, 403, 404 meaning "no channel here") could be neither verified nor told apart.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Cryptography;
using System.Text;
using System.Threading;

namespace Keywarden
{
    /// <summary>The server answered the upgrade with plain HTTP.</summary>
    internal sealed class UpgradeRefusal
    {
        public int Status;
        public Dictionary<string, string> Headers;
        public byte[] Body;
    }

    internal sealed class WebSocketClient
    {
        private const string Guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
        private const int MaxMessage = 1 << 20;
        private readonly TcpClient _tcp;
        private readonly Stream _stream;
        private readonly object _sendGate = new object();
        private byte[] _buf;
        private int _bufLen;
        private int _closed; // 0 open, 1 finished
        private Action<byte[], bool> _onMessage;
        private Action<int, string> _onClose;

        private WebSocketClient(TcpClient tcp, Stream stream, byte[] rest)
        {
            _tcp = tcp;
            _stream = stream;
            _buf = new byte[Math.Max(rest.Length, 4096)];
            Buffer.BlockCopy(rest, 0, _buf, 0, rest.Length);
            _bufLen = rest.Length;
        }

        /// <summary>
        /// Connects and upgrades; returns the socket or (in refusal) the server's plain HTTP answer.
        /// Throws IOException, SocketException or TimeoutException when there is no answer at all.
        /// </summary>
        public static WebSocketClient Connect(Uri url, IDictionary<string, string> headers, TimeSpan timeout, TlsPins pins,
            bool allowUntrustedPinned, out UpgradeRefusal refusal)
        {
            refusal = null;
            var secure = url.Scheme == "https" || url.Scheme == "wss";
            var tcp = new TcpClient { NoDelay = true };
            try
            {
                var connect = tcp.ConnectAsync(url.Host, url.Port);
                if (!connect.Wait(timeout)) throw new TimeoutException("no connection within " + timeout.TotalMilliseconds + " ms");
                Stream stream = tcp.GetStream();
                var ms = (int)Math.Max(1, timeout.TotalMilliseconds);
                stream.ReadTimeout = ms;
                stream.WriteTimeout = ms;
                if (secure)
                {
                    var ssl = new SslStream(stream, false, (sender, cert, chain, errors) =>
                        pins != null ? pins.Matches(cert) && (errors == SslPolicyErrors.None || allowUntrustedPinned) : errors == SslPolicyErrors.None);
                    ssl.AuthenticateAsClient(url.Host);
                    stream = ssl;
                }
                var key = Convert.ToBase64String(Random(16));
                var sb = new StringBuilder();
                sb.Append("GET ").Append(url.PathAndQuery).Append(" HTTP/1.1\r\n");
                sb.Append("Host: ").Append(url.IsDefaultPort ? url.Host : url.Host + ":" + url.Port.ToString(CultureInfo.InvariantCulture)).Append("\r\n");
                sb.Append("Connection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: ").Append(key).Append("\r\n");
                foreach (var h in headers) sb.Append(h.Key).Append(": ").Append(h.Value).Append("\r\n");
                sb.Append("\r\n");
                var request = Encoding.ASCII.GetBytes(sb.ToString());
                stream.Write(request, 0, request.Length);
                stream.Flush();

                // The answer's head, byte by byte up to 64 KiB (it is small; frames may follow at once).
                var head = new MemoryStream();
                var one = new byte[4096];
                int end;
                byte[] all;
                while (true)
                {
                    var n = stream.Read(one, 0, one.Length);
                    if (n <= 0) throw new IOException("connection closed during the upgrade");
                    head.Write(one, 0, n);
                    all = head.ToArray();
                    end = IndexOf(all, new byte[] { 13, 10, 13, 10 });
                    if (end >= 0) break;
                    if (all.Length > 65536) throw new IOException("upgrade answer too large");
                }
                var lines = Encoding.GetEncoding("ISO-8859-1").GetString(all, 0, end).Split(new[] { "\r\n" }, StringSplitOptions.None);
                var parts = lines[0].Split(' ');
                int status;
                if (parts.Length < 2 || !int.TryParse(parts[1], NumberStyles.None, CultureInfo.InvariantCulture, out status))
                    throw new IOException("not an HTTP answer: " + lines[0]);
                var got = new Dictionary<string, string>(StringComparer.OrdinalIgnoreCase);
                for (var i = 1; i < lines.Length; i++)
                {
                    var colon = lines[i].IndexOf(':');
                    if (colon <= 0) continue;
                    var name = lines[i].Substring(0, colon).Trim();
                    var value = lines[i].Substring(colon + 1).Trim();
                    string prev;
                    got[name] = got.TryGetValue(name, out prev) ? prev + ", " + value : value;
                }
                var rest = new byte[all.Length - end - 4];
                Buffer.BlockCopy(all, end + 4, rest, 0, rest.Length);
                if (status != 101)
                {
                    string cl;
                    long length = 0;
                    if (got.TryGetValue("Content-Length", out cl)) long.TryParse(cl, NumberStyles.None, CultureInfo.InvariantCulture, out length);
                    var want = (int)Math.Min(Math.Max(length, 0), 65536);
                    var body = new MemoryStream();
                    body.Write(rest, 0, Math.Min(rest.Length, want));
                    while (body.Length < want)
                    {
                        var n = stream.Read(one, 0, (int)Math.Min(one.Length, want - body.Length));
                        if (n <= 0) break;
                        body.Write(one, 0, n);
                    }
                    refusal = new UpgradeRefusal { Status = status, Headers = got, Body = body.ToArray() };
                    tcp.Close();
                    return null;
                }
                string accept;
                byte[] expected;
                using (var sha = SHA1.Create()) expected = sha.ComputeHash(Encoding.ASCII.GetBytes(key + Guid));
                if (!got.TryGetValue("Sec-WebSocket-Accept", out accept) || accept != Convert.ToBase64String(expected))
                    throw new IOException("the server did not accept the WebSocket handshake");
                return new WebSocketClient(tcp, stream, rest);
            }
            catch
            {
                tcp.Close();
                throw;
            }
        }

        /// <summary>One whole message, read on the calling thread within the stream's read timeout (the hello).</summary>
        public byte[] ReadMessage(out bool binary)
        {
            int code;
            string reason;
            var m = NextMessage(out binary, out code, out reason);
            if (m == null) throw new IOException("channel closed (" + code.ToString(CultureInfo.InvariantCulture) + ") before its hello");
            return m;
        }

        /// <summary>
        /// Delivers the messages that arrived with the hello (already received, so a frame right behind
        /// it is judged before the connection is used) on the calling thread, then starts the reader
        /// thread: every later message, then one close (the peer's code or 1006).
        /// </summary>
        public void Start(Action<byte[], bool> onMessage, Action<int, string> onClose)
        {
            _onMessage = onMessage;
            _onClose = onClose;
            try
            {
                var net = _stream as NetworkStream;
                if (net != null && _tcp.Available > 0 && _bufLen < _buf.Length)
                    _bufLen += _stream.Read(_buf, _bufLen, Math.Min(_tcp.Available, _buf.Length - _bufLen));
                while (Volatile.Read(ref _closed) == 0 && CompleteFrameBuffered())
                {
                    bool binary;
                    int code;
                    string reason;
                    var m = NextMessage(out binary, out code, out reason);
                    if (m == null) { Finish(code, reason); return; }
                    onMessage(m, binary);
                }
            }
            catch (Exception)
            {
                Finish(1006, "");
                return;
            }
            if (Volatile.Read(ref _closed) != 0) return;
            _stream.ReadTimeout = Timeout.Infinite;
            var t = new Thread(ReadLoop) { IsBackground = true, Name = "keywarden-channel" };
            t.Start();
        }

        /// <summary>True when a whole data frame sits in the buffer (fragments and control frames are left to the reader).</summary>
        private bool CompleteFrameBuffered()
        {
            if (_bufLen < 2) return false;
            var opcode = _buf[0] & 0x0f;
            if ((_buf[0] & 0x80) == 0 || (opcode != 0x1 && opcode != 0x2)) return false;
            long len = _buf[1] & 0x7f;
            var off = 2;
            if (len == 126)
            {
                if (_bufLen < 4) return false;
                len = (_buf[2] << 8) | _buf[3];
                off = 4;
            }
            else if (len == 127)
            {
                if (_bufLen < 10) return false;
                len = 0;
                for (var i = 0; i < 8; i++) len = (len << 8) | _buf[2 + i];
                off = 10;
            }
            return len >= 0 && len <= MaxMessage && _bufLen >= off + len;
        }

        public bool Send(byte[] payload, int opcode = 0x2)
        {
            var len = payload.Length;
            var headLen = len < 126 ? 2 : len < 65536 ? 4 : 10;
            var frame = new byte[headLen + 4 + len];
            frame[0] = (byte)(0x80 | opcode);
            if (len < 126) frame[1] = (byte)(0x80 | len);
            else if (len < 65536)
            {
                frame[1] = 0x80 | 126;
                frame[2] = (byte)(len >> 8);
                frame[3] = (byte)len;
            }
            else
            {
                frame[1] = 0x80 | 127;
                for (var i = 0; i < 8; i++) frame[2 + i] = (byte)((long)len >> (8 * (7 - i)));
            }
            var mask = Random(4);
            Buffer.BlockCopy(mask, 0, frame, headLen, 4);
            for (var i = 0; i < len; i++) frame[headLen + 4 + i] = (byte)(payload[i] ^ mask[i & 3]);
            try
            {
                lock (_sendGate)
                {
                    if (Volatile.Read(ref _closed) != 0) return false;
                    _stream.Write(frame, 0, frame.Length);
                    _stream.Flush();
                }
                return true;
            }
            catch (Exception e) when (e is IOException || e is ObjectDisposedException || e is SocketException)
            {
                return false;
            }
        }

        /// <summary>Sends a close frame and ends the connection.</summary>
        public void Close(int code = 1000)
        {
            Send(new[] { (byte)(code >> 8), (byte)code }, 0x8);
            Finish(code, "");
        }

        /// <summary>Drops the connection without a close frame.</summary>
        public void Terminate()
        {
            Finish(1006, "");
        }

        private void Finish(int code, string reason)
        {
            if (Interlocked.Exchange(ref _closed, 1) != 0) return;
            try { _tcp.Close(); } catch (Exception) { /* already gone */ }
            var cb = _onClose;
            if (cb != null) cb(code, reason);
        }

        private void ReadLoop()
        {
            var code = 1006;
            var reason = "";
            try
            {
                while (Volatile.Read(ref _closed) == 0)
                {
                    bool binary;
                    var m = NextMessage(out binary, out code, out reason);
                    if (m == null) break;
                    _onMessage(m, binary);
                }
            }
            catch (Exception)
            {
                code = 1006; // a broken connection, a protocol violation, or a handler that threw
                reason = "";
            }
            Finish(code, reason);
        }

        /// <summary>The next data message (control frames answered on the way); null after a close frame.</summary>
        private byte[] NextMessage(out bool binary, out int closeCode, out string closeReason)
        {
            closeCode = 1006;
            closeReason = "";
            binary = false;
            MemoryStream fragments = null;
            while (true)
            {
                Fill(2);
                var b0 = _buf[0];
                var b1 = _buf[1];
                if ((b1 & 0x80) != 0) throw new IOException("masked frame from the server");
                long len = b1 & 0x7f;
                var off = 2;
                if (len == 126)
                {
                    Fill(4);
                    len = (_buf[2] << 8) | _buf[3];
                    off = 4;
                }
                else if (len == 127)
                {
                    Fill(10);
                    len = 0;
                    for (var i = 0; i < 8; i++) len = (len << 8) | _buf[2 + i];
                    off = 10;
                }
                if (len < 0 || len > MaxMessage) throw new IOException("message too big");
                Fill(off + (int)len);
                var payload = new byte[len];
                Buffer.BlockCopy(_buf, off, payload, 0, (int)len);
                Consume(off + (int)len);
                var opcode = b0 & 0x0f;
                var fin = (b0 & 0x80) != 0;
                switch (opcode)
                {
                    case 0x0:
                    case 0x1:
                    case 0x2:
                        if (opcode != 0x0)
                        {
                            fragments = new MemoryStream();
                            binary = opcode == 0x2;
                        }
                        if (fragments == null) throw new IOException("continuation without a first frame");
                        fragments.Write(payload, 0, payload.Length);
                        if (fragments.Length > MaxMessage) throw new IOException("message too big");
                        if (fin) return fragments.ToArray();
                        break;
                    case 0x8:
                        closeCode = payload.Length >= 2 ? (payload[0] << 8) | payload[1] : 1005;
                        closeReason = payload.Length > 2 ? Encoding.UTF8.GetString(payload, 2, payload.Length - 2) : "";
                        var echo = payload.Length >= 2 ? new[] { payload[0], payload[1] } : new byte[0];
                        Send(echo, 0x8);
                        return null;
                    case 0x9:
                        Send(payload, 0xA);
                        break;
                    case 0xA:
                        break;
                    default:
                        throw new IOException("unknown opcode " + opcode);
                }
            }
        }

        private void Fill(int n)
        {
            if (_buf.Length < n) Array.Resize(ref _buf, Math.Max(n, _buf.Length * 2));
            while (_bufLen < n)
            {
                var got = _stream.Read(_buf, _bufLen, _buf.Length - _bufLen);
                if (got <= 0) throw new IOException("connection closed");
                _bufLen += got;
            }
        }

        private void Consume(int n)
        {
            Buffer.BlockCopy(_buf, n, _buf, 0, _bufLen - n);
            _bufLen -= n;
        }

        private static int IndexOf(byte[] hay, byte[] needle)
        {
            for (var i = 0; i + needle.Length <= hay.Length; i++)
            {
                var ok = true;
                for (var j = 0; j < needle.Length && ok; j++) ok = hay[i + j] == needle[j];
                if (ok) return i;
            }
            return -1;
        }

        private static byte[] Random(int n)
        {
            var b = new byte[n];
            using (var rng = RandomNumberGenerator.Create()) rng.GetBytes(b);
            return b;
        }
    }
}
