// sdk/vectors/artifacts.json: every case downloaded for real (from a local HttpListener serving the
// case's bytes) through KeywardenClient.DownloadUpdateAsync, which must accept it or refuse it with the
// reason the case names, leaving nothing behind when it refuses; and the refusals of a link.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Net;
using System.Net.Sockets;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal static class UpdateVectorTests
    {
        private sealed class Files : IDisposable
        {
            private readonly HttpListener _listener = new HttpListener();
            public readonly Dictionary<string, byte[]> Served = new Dictionary<string, byte[]>();
            public readonly string Base;

            public Files()
            {
                var probe = new TcpListener(IPAddress.Loopback, 0);
                probe.Start();
                var port = ((IPEndPoint)probe.LocalEndpoint).Port;
                probe.Stop();
                Base = "http://127.0.0.1:" + port;
                _listener.Prefixes.Add(Base + "/");
                _listener.Start();
                Task.Run(Serve);
            }

            private async Task Serve()
            {
                while (_listener.IsListening)
                {
                    HttpListenerContext ctx;
                    try { ctx = await _listener.GetContextAsync().ConfigureAwait(false); }
                    catch (Exception) { return; }
                    byte[] body;
                    lock (Served) Served.TryGetValue(ctx.Request.Url.AbsolutePath, out body);
                    if (body == null)
                    {
                        ctx.Response.StatusCode = 403;
                        body = System.Text.Encoding.UTF8.GetBytes("{\"detail\":\"Download link expired\"}");
                    }
                    ctx.Response.ContentLength64 = body.Length;
                    if (body.Length > 0) ctx.Response.OutputStream.Write(body, 0, body.Length);
                    ctx.Response.Close();
                }
            }

            public void Dispose() { _listener.Close(); }
        }

        private static KeywardenClient Client(IDictionary<string, object> v, string appId, string baseUrl)
        {
            var keys = Vectors.Cases(v, "pinned_keys").Select(k => new ResponseKey(Vectors.S(k, "kid"), Vectors.S(k, "public_key"))).ToList();
            return new KeywardenClient(new KeywardenConfig(baseUrl, "k", keys, appId: appId));
        }

        private static Artifact ArtifactOf(IDictionary<string, object> c, string url)
        {
            var a = (IDictionary<string, object>)c["artifact"];
            return new Artifact
            {
                AppId = Vectors.S(c, "app_id"), Version = Vectors.S(c, "version"), Filename = Vectors.S(a, "filename"), Platform = "any", Arch = "any",
                Size = Vectors.L(a, "size"), Sha512 = Vectors.S(a, "sha512"), Signature = Vectors.S(a, "signature"), Kid = Vectors.S(a, "kid"), Url = url,
            };
        }

        private static string TempDir()
        {
            var d = Path.Combine(Path.GetTempPath(), "kw-cs-update-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(d);
            return d;
        }

        private static string Listing(string dir)
        {
            return string.Join(",", Directory.GetFileSystemEntries(dir).Select(Path.GetFileName).OrderBy(x => x, StringComparer.Ordinal));
        }

        public static void Register(Registry r)
        {
            r.Unit("vectors: artifacts download or are refused for the reason each case names, nothing left behind", async () =>
            {
                var v = Vectors.Load("artifacts");
                var seen = new HashSet<string>();
                var i = 0;
                using (var files = new Files())
                {
                    foreach (var c in Vectors.Cases(v, "cases"))
                    {
                        var name = Vectors.S(c, "name");
                        var bytes = Convert.FromBase64String(Vectors.S(c, "downloaded"));
                        var path = "/dl/" + i++;
                        lock (files.Served) files.Served[path] = bytes;
                        var dir = TempDir();
                        try
                        {
                            var art = ArtifactOf(c, files.Base + path);
                            var target = Path.Combine(dir, art.Filename);
                            var last = new long[] { -1, -1 };
                            using (var client = Client(v, art.AppId, files.Base))
                            {
                                if ((bool)c["valid"])
                                {
                                    Assert.Equal(target, await client.DownloadUpdateAsync(art, target, (got, total) => { last[0] = got; last[1] = total; }), name);
                                    Assert.True(File.ReadAllBytes(target).SequenceEqual(bytes), name + ": bytes");
                                    Assert.Equal(art.Filename, Listing(dir), name);
                                    if (bytes.Length > 0) Assert.Equal(bytes.Length + "/" + bytes.Length, last[0] + "/" + last[1], name + ": progress");
                                }
                                else
                                {
                                    var e = await Assert.Fails(() => client.DownloadUpdateAsync(art, target), name);
                                    var u = e as UpdateException;
                                    Assert.True(u != null, name + ": " + e.GetType().Name + " is not an UpdateException");
                                    Assert.Equal(Vectors.S(c, "reason"), u.WireReason, name);
                                    Assert.Equal(KeywardenErrorCode.Verification, u.Code, name);
                                    Assert.Equal("", Listing(dir), name + ": left behind");
                                    seen.Add(u.WireReason);
                                }
                            }
                        }
                        finally { Directory.Delete(dir, true); }
                    }
                }
                var reasons = ((IList<object>)v["reasons"]).Cast<string>().OrderBy(x => x, StringComparer.Ordinal);
                Assert.Equal(string.Join(",", reasons), string.Join(",", seen.OrderBy(x => x, StringComparer.Ordinal)), "reasons seen");
            });

            r.Unit("updates: a refused link is DownloadFailed (Server, 403, its detail) and the existing target is kept", async () =>
            {
                var v = Vectors.Load("artifacts");
                var c = Vectors.Cases(v, "cases").First();
                var dir = TempDir();
                try
                {
                    using (var files = new Files())
                    using (var client = Client(v, Vectors.S(c, "app_id"), files.Base))
                    {
                        var target = Path.Combine(dir, "app.bin");
                        File.WriteAllText(target, "the running version");
                        var e = (UpdateException)await Assert.Fails(() => client.DownloadUpdateAsync(ArtifactOf(c, files.Base + "/gone"), target));
                        Assert.Equal(UpdateReason.DownloadFailed, e.UpdateReason);
                        Assert.Equal(KeywardenErrorCode.Server, e.Code);
                        Assert.Equal((int?)403, e.Status);
                        Assert.Equal("Download link expired", e.Detail as string);
                        Assert.Equal("app.bin", Listing(dir));
                        Assert.Equal("the running version", File.ReadAllText(target));
                    }
                }
                finally { Directory.Delete(dir, true); }
            });

            r.Unit("updates: an unreachable link is a Network DownloadFailed", async () =>
            {
                var v = Vectors.Load("artifacts");
                var c = Vectors.Cases(v, "cases").First();
                var dir = TempDir();
                try
                {
                    using (var client = Client(v, Vectors.S(c, "app_id"), "http://127.0.0.1:9"))
                    {
                        var e = (UpdateException)await Assert.Fails(() => client.DownloadUpdateAsync(ArtifactOf(c, "http://127.0.0.1:9/x"), Path.Combine(dir, "a")));
                        Assert.Equal(UpdateReason.DownloadFailed, e.UpdateReason);
                        Assert.Equal(KeywardenErrorCode.Network, e.Code);
                        Assert.Equal("", Listing(dir));
                    }
                }
                finally { Directory.Delete(dir, true); }
            });
        }
    }
}
