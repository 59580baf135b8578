// Example: activate a license key from the command line and keep a heartbeat for three beats.
//   mono build/Activate.exe <license-key> [path/to/keywarden.json] [--beats N]
//   dotnet run --project examples/Activate.csproj -- <license-key>
// Every failure is a KeywardenException with a Code: the program decides what to tell the user.
using System;
using System.Threading;
using System.Threading.Tasks;
using Keywarden;

internal static class Activate
{
    private static int Main(string[] args)
    {
        try
        {
            return Run(args).GetAwaiter().GetResult();
        }
        catch (KeywardenConfigException e)
        {
            Console.Error.WriteLine(e.Message);
            return 2;
        }
    }

    private static async Task<int> Run(string[] args)
    {
        string key = null, config = "keywarden.json";
        var beats = 3;
        for (var i = 0; i < args.Length; i++)
        {
            if (args[i] == "--beats" && i + 1 < args.Length) beats = int.Parse(args[++i]);
            else if (key == null) key = args[i];
            else config = args[i];
        }
        if (key == null)
        {
            Console.Error.WriteLine("usage: Activate <license-key> [keywarden.json] [--beats N]");
            return 2;
        }

        using (var client = KeywardenClient.FromConfig(config, new KeywardenOptions
        {
            Logger = (level, message) => { if (level >= KeywardenLogLevel.Warn) Console.Error.WriteLine("[" + level + "] " + message); },
        }))
        {
            try
            {
                var app = await client.InitAsync();
                Console.WriteLine("connected to " + app.Name + " (version " + app.Version + ")");
                var license = await client.ActivateLicenseAsync(key);
                Console.WriteLine("license ok: level " + license.Level + ", expires " + (license.ExpiresAt.HasValue ? license.ExpiresAt.Value.ToString("u") : "never"));

                // Beat faster than the server's interval so the example finishes quickly (only late beats count as drift).
                var heartbeat = client.CreateHeartbeat(null, null, new HeartbeatOptions { Interval = TimeSpan.FromSeconds(1), Reauthenticate = true });
                var done = new TaskCompletionSource<bool>();
                heartbeat.Beat += (s, e) =>
                {
                    Console.WriteLine("beat " + e.Index + " verified");
                    if (e.Index >= beats) done.TrySetResult(true);
                };
                heartbeat.Degraded += (s, e) => Console.Error.WriteLine("heartbeat degraded: " + e.Error.Message);
                heartbeat.Killed += (s, e) =>
                {
                    Console.Error.WriteLine("heartbeat killed: " + e.Error.WireCode + " " + e.Error.Message);
                    done.TrySetResult(false);
                };
                await heartbeat.StartAsync();
                var ok = await done.Task;
                if (ok)
                {
                    await heartbeat.StopAsync();
                    Console.WriteLine("heartbeat stopped");
                }
                return ok ? 0 : 1;
            }
            catch (KeywardenException e)
            {
                switch (e.Code)
                {
                    case KeywardenErrorCode.UpdateRequired:
                        Console.Error.WriteLine("please update to " + e.LatestVersion + ": " + e.UpdateUrl);
                        break;
                    case KeywardenErrorCode.RateLimited:
                        Console.Error.WriteLine("too many attempts, retry in " + e.RetryAfter);
                        break;
                    case KeywardenErrorCode.Verification:
                        Console.Error.WriteLine("the server's answer did not verify (" + e.Reason + "): not talking to the real server?");
                        break;
                    default:
                        Console.Error.WriteLine(e.WireCode + ": " + e.Message);
                        break;
                }
                return 1;
            }
        }
    }
}
