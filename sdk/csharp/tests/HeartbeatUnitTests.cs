// The heartbeat loop against the in-memory fake server: proofs checked before a token is trusted,
// same index/token retried only while nothing was sent, lost answers degrade (and re-authenticate
// when asked), kills are final, listeners that throw change nothing, stop closes the session.
using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal static class HeartbeatUnitTests
    {
        private static readonly TimeSpan Wait = TimeSpan.FromSeconds(10);
        private const string SystemId = "fake-system-0001";
        private const string Code = HeartbeatFixture.Code;

        private static HeartbeatOptions Fast(Action<HeartbeatOptions> tweak = null)
        {
            return HeartbeatFixture.Options(TimeSpan.FromMilliseconds(40), tweak);
        }

        private static async Task<KeywardenClient> Activated(FakeServer server, ScriptedTransport t, int retries = 2)
        {
            var c = Fake.Client(t, o => o.Retries = retries);
            await c.InitAsync();
            await c.ActivateLicenseAsync("KEY-1", "hwid-0123456789");
            return c;
        }

        public static void Register(Registry r)
        {
            r.Unit("heartbeat: beats with verified proofs, then stop closes the server session", async () =>
            {
                var server = new FakeServer();
                var t = new ScriptedTransport(server.Handle);
                using (var c = await Activated(server, t))
                {
                    var hb = c.CreateHeartbeat(SystemId, Code, Fast());
                    var ev = new HeartbeatEvents(hb);
                    hb.Beat += (s, e) => { throw new Exception("a listener that throws"); };
                    await hb.StartAsync();
                    Assert.Equal(5, hb.BeatInterval);
                    Assert.True(hb.Running, "running");
                    var beats = await ev.Beats.Wait(3, Wait, "beat");
                    for (var i = 0; i < 3; i++)
                    {
                        Assert.Equal((long)(i + 1), beats[i].Index, "index");
                        Assert.Equal((long)(i + 1), beats[i].Count, "count");
                    }
                    var session = hb.Session;
                    Assert.True(await hb.StopAsync(), "the server confirmed the stop");
                    Assert.True(!server.HasSession(session), "server session closed");
                    Assert.Equal(HeartbeatStopReason.Stop, (await ev.Stopped.Wait(1, Wait, "stopped"))[0].Reason);
                    Assert.True(!hb.Running, "not running");
                    var after = server.Beats;
                    await Task.Delay(200);
                    Assert.Equal(after, server.Beats, "no beat after stop");
                    Assert.True(!await hb.StopAsync(), "a second stop does nothing");
                    var beat = Fake.Body(t.Requests.FindLast(q => q.Url.AbsolutePath.EndsWith("/heartbeat")));
                    Assert.Equal(Code, (string)beat["code_hash"]);
                    Assert.Equal(SystemId, (string)beat["system_id"]);
                    Assert.Equal(false, (bool)beat["debugger_detected"]);
                }
            });

            r.Unit("heartbeat: a bad start proof is refused before the token is used", async () =>
            {
                var server = new FakeServer();
                server.Intercept = (req, ep) =>
                    ep == "heartbeat/start" ? Fake.Answer(req, 200, "{\"success\":true,\"token\":\"TT00000000000000000000000000000000\",\"beat_interval\":5,\"proof\":\"AAAA\"}") : null;
                var t = new ScriptedTransport(server.Handle);
                using (var c = await Activated(server, t))
                {
                    var hb = c.CreateHeartbeat(SystemId, Code, Fast());
                    Assert.Verification(await Assert.Fails(() => hb.StartAsync()), VerificationReason.BadProof);
                    Assert.True(!hb.Running, "not running");
                    await Task.Delay(150);
                    Assert.Equal(0, server.Beats, "never beat with an unproven token");
                }
            });

            r.Unit("heartbeat: a beat with a bad proof degrades and its token is not trusted", async () =>
            {
                var server = new FakeServer();
                var spoil = 1;
                server.Intercept = (req, ep) =>
                {
                    if (ep != "heartbeat" || Interlocked.Exchange(ref spoil, 0) == 0) return null;
                    var real = server.Answer(req, ep);
                    var body = (IDictionary<string, object>)Json.Parse(System.Text.Encoding.UTF8.GetString(real.Body));
                    body["proof"] = "Zm9yZ2Vk";
                    return Fake.Answer(req, real.Status, Json.Serialize(body));
                };
                var t = new ScriptedTransport(server.Handle);
                using (var c = await Activated(server, t))
                {
                    var hb = c.CreateHeartbeat(SystemId, Code, Fast());
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var d = (await ev.Degraded.Wait(1, Wait, "degraded"))[0];
                    Assert.Verification(d.Error, VerificationReason.BadProof);
                    Assert.True(d.Lost, "the server took that beat");
                    // Without reauth the old token is refused by the server: killed.
                    var k = (await ev.Killed.Wait(1, Wait, "killed"))[0];
                    Assert.Equal(KeywardenErrorCode.HeartbeatKilled, k.Error.Code);
                    Assert.Equal(0, ev.Beats.Items.Count, "no beat was reported as verified");
                }
            });

            r.Unit("heartbeat: never-sent beats are retried with the same index and token", async () =>
            {
                var server = new FakeServer();
                var beatCalls = 0;
                var t = new ScriptedTransport((req, n, ct) =>
                {
                    if (req.Url.AbsolutePath.EndsWith("/heartbeat"))
                    {
                        var k = Interlocked.Increment(ref beatCalls);
                        if (k == 2 || k == 3) throw new TransportException(TransportFailure.Network, false, "connection refused");
                    }
                    return server.Handle(req, n, ct);
                });
                using (var c = await Activated(server, t))
                {
                    var hb = c.CreateHeartbeat(SystemId, Code, Fast());
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var beats = await ev.Beats.Wait(3, Wait, "beat");
                    Assert.Equal("1,2,3", string.Join(",", beats.ConvertAll(b => b.Index.ToString())));
                    Assert.Equal(0, ev.Degraded.Items.Count, "retries hid the refusals");
                    var sent = t.Requests.FindAll(q => q.Url.AbsolutePath.EndsWith("/heartbeat"));
                    var b2 = Fake.Body(sent[1]);
                    var b4 = Fake.Body(sent[3]);
                    Assert.Equal((long)b2["beat_index"], (long)b4["beat_index"], "same index");
                    Assert.Equal((string)b2["token"], (string)b4["token"], "same token");
                    await hb.StopAsync();
                }
            });

            r.Unit("heartbeat: with retries exhausted a never-sent beat degrades (not lost) and the same index goes next", async () =>
            {
                var server = new FakeServer();
                var beatCalls = 0;
                var t = new ScriptedTransport((req, n, ct) =>
                {
                    if (req.Url.AbsolutePath.EndsWith("/heartbeat") && Interlocked.Increment(ref beatCalls) == 2)
                        throw new TransportException(TransportFailure.Network, false, "connection refused");
                    return server.Handle(req, n, ct);
                });
                using (var c = await Activated(server, t, 0))
                {
                    var hb = c.CreateHeartbeat(SystemId, Code, Fast(o => o.Reauthenticate = true));
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var beats = await ev.Beats.Wait(3, Wait, "beat");
                    var d = ev.Degraded.Items[0];
                    Assert.True(!d.Lost && !d.Reauthenticating && d.Error.NotSent, "degraded, not lost: " + d.Error.Message);
                    Assert.Equal("1,2,3", string.Join(",", beats.ConvertAll(b => b.Index.ToString())), "index 2 was not skipped");
                    Assert.Equal(1, server.Inits, "no re-authentication for a beat that never left");
                    await hb.StopAsync();
                }
            });

            r.Unit("heartbeat: a lost answer degrades; with reauth it re-authenticates and starts again", async () =>
            {
                var server = new FakeServer();
                var beatCalls = 0;
                var t = new ScriptedTransport(async (req, n, ct) =>
                {
                    var res = await server.Handle(req, n, ct);
                    if (req.Url.AbsolutePath.EndsWith("/heartbeat") && Interlocked.Increment(ref beatCalls) == 2)
                        throw new TransportException(TransportFailure.Network, true, "connection reset after the server answered");
                    return res;
                });
                using (var c = await Activated(server, t))
                {
                    var first = c.Session;
                    var hb = c.CreateHeartbeat(SystemId, Code, Fast(o => o.Reauthenticate = true));
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var beats = await ev.Beats.Wait(3, Wait, "beat");
                    var d = ev.Degraded.Items[0];
                    Assert.True(d.Lost && d.Reauthenticating, "lost + reauthenticating");
                    Assert.True(ev.Recovered.Items[0].Session != first, "a new session");
                    Assert.Equal("1,1,2", string.Join(",", beats.ConvertAll(b => b.Count.ToString())), "counts restart on the new session");
                    Assert.Equal(2, server.Inits, "init ran again");
                    Assert.Equal(2, server.Starts, "heartbeat/start ran again");
                    await hb.StopAsync();
                }
            });

            r.Unit("heartbeat: a debugger report is killed as HeartbeatKilled and the loop ends", async () =>
            {
                var server = new FakeServer();
                var t = new ScriptedTransport(server.Handle);
                using (var c = await Activated(server, t))
                {
                    var hb = c.CreateHeartbeat(SystemId, Code, Fast(o => { o.DebuggerDetected = () => true; o.Reauthenticate = true; }));
                    var ev = new HeartbeatEvents(hb);
                    await hb.StartAsync();
                    var k = (await ev.Killed.Wait(1, Wait, "killed"))[0];
                    Assert.Equal(KeywardenErrorCode.HeartbeatKilled, k.Error.Code);
                    Assert.Equal((int?)403, k.Error.Status);
                    Assert.Equal(HeartbeatStopReason.Killed, (await ev.Stopped.Wait(1, Wait, "stopped"))[0].Reason);
                    Assert.True(!hb.Running, "not running");
                    var beats = server.Beats;
                    await Task.Delay(200);
                    Assert.Equal(beats, server.Beats, "no beat after the kill");
                    Assert.Equal(1, server.Inits, "a kill is not re-authenticated");
                }
            });

            r.Unit("heartbeat: sync wrappers work (StartHeartbeat / Stop)", async () =>
            {
                var server = new FakeServer();
                var t = new ScriptedTransport(server.Handle);
                using (var c = await Activated(server, t))
                {
                    var hb = c.StartHeartbeat(SystemId, Code, HeartbeatFixture.Options(TimeSpan.FromMilliseconds(400)));
                    var ev = new HeartbeatEvents(hb);
                    await ev.Beats.Wait(1, Wait, "beat");
                    Assert.True(hb.Stop(), "stopped");
                }
            });
        }
    }
}
