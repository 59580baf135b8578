// The update program of test/helpers/sdk-updates.ts (its protocol is described there), with the C# SDK.
//   mono Update.exe <keywarden.json> <license key> <hwid> <dir>
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Threading.Tasks;
using Keywarden;

internal static class Update
{
    private static void Say(Dictionary<string, object> o)
    {
        Console.WriteLine(Json.Serialize(o));
        Console.Out.Flush();
    }

    private static int Main(string[] args)
    {
        return Run(args[0], args[1], args[2], args[3]).GetAwaiter().GetResult();
    }

    private static async Task<int> Run(string config, string key, string hwid, string dir)
    {
        var tamper = (IDictionary<string, object>)Json.Parse(Environment.GetEnvironmentVariable("KW_DL_TAMPER_URLS") ?? "{}");
        using (var c = KeywardenClient.FromConfig(config))
        {
            await c.InitAsync();
            await c.ActivateLicenseAsync(key, hwid);
            Say(new Dictionary<string, object> { { "step", "none" }, { "upgrade", await c.CheckUpdateAsync("1.1.0", "stable", "linux", "x64") } });
            var offer = await c.CheckUpdateAsync("1.0.0", "stable", "linux", "x64");
            Say(new Dictionary<string, object>
            {
                { "step", "offer" }, { "version", offer.Version }, { "channel", offer.Channel },
                { "artifacts", offer.Artifacts.Select(a => (object)new Dictionary<string, object>
                    { { "filename", a.Filename }, { "platform", a.Platform }, { "arch", a.Arch }, { "size", a.Size } }).ToList() },
            });
            var art = offer.Artifacts[0];
            var seen = new List<long[]>();
            var written = await c.DownloadUpdateAsync(art, Path.Combine(dir, "app.bin"), (got, total) => seen.Add(new[] { got, total }));
            var monotonic = true;
            for (var i = 1; i < seen.Count; i++) monotonic &= seen[i][0] > seen[i - 1][0];
            Say(new Dictionary<string, object>
            {
                { "step", "download" }, { "path", written }, { "calls", seen.Count },
                { "last", new List<object> { seen[seen.Count - 1][0], seen[seen.Count - 1][1] } }, { "monotonic", monotonic },
            });
            foreach (var mode in tamper.Keys.OrderBy(k => k, StringComparer.Ordinal))
            {
                var d = Path.Combine(dir, mode);
                Directory.CreateDirectory(d);
                var u = new Uri(art.Url);
                try
                {
                    await c.DownloadUpdateAsync(art.WithUrl((string)tamper[mode] + u.PathAndQuery), Path.Combine(d, "app.bin"));
                    Say(new Dictionary<string, object> { { "step", "tamper" }, { "mode", mode }, { "error", null } });
                }
                catch (UpdateException e)
                {
                    Say(new Dictionary<string, object>
                    {
                        { "step", "tamper" }, { "mode", mode }, { "error", e.GetType().Name }, { "reason", e.WireReason }, { "code", e.WireCode },
                        { "files", Directory.GetFileSystemEntries(d).Select(f => (object)Path.GetFileName(f)).OrderBy(f => (string)f, StringComparer.Ordinal).ToList() },
                    });
                }
            }
        }
        return 0;
    }
}
