// Expiry while running (docs/protocol.md 12.8) with the C# SDK: activates a key, beats on the realtime channel
// and reports what the heartbeat tells (protocol: test/helpers/sdk-expiry.ts).
//   mono ExpiryWatch.exe <keywarden.json> <license key> <hwid>
using System;
using System.Threading;
using System.Threading.Tasks;
using Keywarden;

internal static class ExpiryWatch
{
    private static long NowMs() { return DateTimeOffset.UtcNow.ToUnixTimeMilliseconds(); }

    private static void Say(string line)
    {
        lock (typeof(ExpiryWatch)) { Console.WriteLine(line); Console.Out.Flush(); }
    }

    private static int Main(string[] args)
    {
        return Run(args[0], args[1], args[2]).GetAwaiter().GetResult();
    }

    private static async Task<int> Run(string config, string key, string hwid)
    {
        using (var client = KeywardenClient.FromConfig(config, new KeywardenOptions()))
        {
            await client.InitAsync();
            await client.ActivateLicenseAsync(key, hwid);
            var hb = client.CreateHeartbeat("expiry-watch-cs", "abcdef0123456789",
                new HeartbeatOptions { Interval = TimeSpan.FromMilliseconds(300), DebuggerDetected = () => false });
            var first = new TaskCompletionSource<bool>();
            var ended = new TaskCompletionSource<bool>();
            hb.Beat += (s, e) => { Say("beat " + e.Index + " " + NowMs()); first.TrySetResult(true); };
            hb.Expired += (s, e) => Say("expired " + NowMs());
            hb.Revoked += (s, e) => Say("revoked " + e.Reason + " " + NowMs());
            hb.Killed += (s, e) => Say("killed " + e.Error.WireCode + " " + NowMs());
            hb.Stopped += (s, e) => ended.TrySetResult(true);
            await hb.StartAsync();
            if (await Task.WhenAny(first.Task, Task.Delay(10000)) != first.Task)
            {
                Say("no first beat");
                return 1;
            }
            Say("ready " + (hb.OnChannel ? 1 : 0));
            var done = await Task.WhenAny(ended.Task, Task.Delay(30000)) == ended.Task;
            Say("state " + hb.State.ToString().ToLowerInvariant());
            if (!done) await hb.StopAsync();
            return done ? 0 : 1;
        }
    }
}
