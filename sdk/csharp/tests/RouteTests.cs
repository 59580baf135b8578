// The route hint (X-Keywarden-Route): sent back on every call until an answer is 502/503/504 (signed
// or not) or the call fails on the way (a timeout, a dropped connection); the call after that carries
// none, so a balancer routing on it picks any live worker.
using System;
using System.Collections.Generic;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal static class RouteTests
    {
        private static Func<TransportRequest, Task<TransportResponse>> Named(int status, string route)
        {
            return req =>
            {
                var o = new Fake.AnswerOptions();
                if (route != null) o.Headers["X-Keywarden-Route"] = route;
                return Fake.Done(Fake.Answer(req, status, status == 200 ? Fake.InitOk : "{\"detail\":\"x\"}", o));
            };
        }

        private static Func<TransportRequest, Task<TransportResponse>> Throws(TransportFailure kind)
        {
            return req => { throw new TransportException(kind, true, kind.ToString()); };
        }

        public static void Register(Registry r)
        {
            r.Unit("route: dropped after a 502/503/504 (signed or not), a timeout or a connection error", async () =>
            {
                var steps = new Queue<Func<TransportRequest, Task<TransportResponse>>>(new[]
                {
                    Named(200, "a-0"), // init: the answer names the owner
                    Named(503, "a-0"), // a signed 503: dropped, even though it names one
                    Named(401, "b-1"),
                    req => Fake.Done(new TransportResponse(502, null, Encoding.UTF8.GetBytes("<html>502</html>"))), // a balancer's own
                    Named(401, "b-1"),
                    Named(504, "b-1"),
                    Named(401, "b-0"),
                    Throws(TransportFailure.Timeout),
                    Named(401, "b-1"),
                    Throws(TransportFailure.Network), // the connection dropped after the request left
                    Named(401, "b-0"),
                    Named(401, null),
                });
                var t = new ScriptedTransport((req, n, ct) => steps.Dequeue()(req));
                using (var c = Fake.Client(t, o => o.Retries = 0))
                {
                    await c.InitAsync();
                    while (steps.Count > 0)
                        await Assert.Fails(() => c.ActivateLicenseAsync("KEY", "hwid"), "activation");
                }
                var sent = new List<string>();
                foreach (var req in t.Requests)
                {
                    string route;
                    sent.Add(req.Headers.TryGetValue("x-keywarden-route", out route) ? route : "-");
                }
                Assert.Equal("-,a-0,-,b-1,-,b-1,-,b-0,-,b-1,-,b-0", string.Join(",", sent), "routes sent");
            });
        }
    }
}
