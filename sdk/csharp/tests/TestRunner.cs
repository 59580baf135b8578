// A minimal test runner (no NUnit/xUnit needed offline): every test prints one line, the summary
// reads "N passed, N failed, N skipped", and the exit code is non-zero when anything failed.
// Usage: mono Keywarden.Tests.exe [name-filter]
// Integration tests run only when KW_BASE_URL is set (see README "Tests"); with
// KW_REQUIRE_INTEGRATION=1 a missing KW_BASE_URL is a failure instead of a skip.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Threading.Tasks;

namespace Keywarden.Tests
{
    internal sealed class SkipException : Exception
    {
        public SkipException(string why) : base(why) { }
    }

    internal sealed class TestCase
    {
        public string Group, Name;
        public Func<Task> Body;
        public TimeSpan Limit;
    }

    internal sealed class Registry
    {
        public readonly List<TestCase> Cases = new List<TestCase>();

        public void Unit(string name, Func<Task> body) { Add("unit", name, body, TimeSpan.FromSeconds(30)); }
        public void Unit(string name, Action body) { Unit(name, () => { body(); return Task.FromResult(0); }); }
        public void Integration(string name, Func<Task> body) { Add("integration", name, body, TimeSpan.FromSeconds(90)); }

        private void Add(string group, string name, Func<Task> body, TimeSpan limit)
        {
            Cases.Add(new TestCase { Group = group, Name = name, Body = body, Limit = limit });
        }
    }

    internal static class Program
    {
        private static int Main(string[] args)
        {
            var filter = args.Length > 0 ? args[0] : null;
            var r = new Registry();
            JsonTests.Register(r);
            ConfigTests.Register(r);
            VectorTests.Register(r);
            ChannelVectorTests.Register(r);
            OfflineVectorTests.Register(r);
            UpdateVectorTests.Register(r);
            AirgapTests.Register(r);
            ErrorTableTests.Register(r);
            MachineTests.Register(r);
            TlsPinTests.Register(r);
            HostileTests.Register(r);
            RouteTests.Register(r);
            HeartbeatUnitTests.Register(r);
            ModelsTests.Register(r);
            IntegrationTests.Register(r);
            ChannelIntegrationTests.Register(r);
            ResilienceTests.Register(r);
            IntegrationModelsTests.Register(r);

            var haveServer = !string.IsNullOrEmpty(Environment.GetEnvironmentVariable("KW_BASE_URL"));
            var requireServer = Environment.GetEnvironmentVariable("KW_REQUIRE_INTEGRATION") == "1";
            int passed = 0, failed = 0, skipped = 0, integrationRan = 0;
            foreach (var t in r.Cases)
            {
                var full = t.Group + "/" + t.Name;
                if (filter != null && full.IndexOf(filter, StringComparison.OrdinalIgnoreCase) < 0) continue;
                if (t.Group == "integration" && !haveServer)
                {
                    if (requireServer) { failed++; Console.WriteLine("FAIL " + full + ": KW_BASE_URL is not set (KW_REQUIRE_INTEGRATION=1)"); }
                    else { skipped++; Console.WriteLine("skip " + full + ": KW_BASE_URL not set"); }
                    continue;
                }
                var watch = Stopwatch.StartNew();
                try
                {
                    var task = Task.Run(t.Body);
                    if (!task.Wait(t.Limit)) throw new TimeoutException("test did not finish within " + t.Limit.TotalSeconds + " s");
                    task.GetAwaiter().GetResult();
                    passed++;
                    if (t.Group == "integration") integrationRan++;
                    Console.WriteLine("ok   " + full + " (" + watch.ElapsedMilliseconds + " ms)");
                }
                catch (Exception e)
                {
                    var x = e is AggregateException && e.InnerException != null ? e.InnerException : e;
                    if (x is SkipException)
                    {
                        skipped++;
                        Console.WriteLine("skip " + full + ": " + x.Message);
                        continue;
                    }
                    failed++;
                    Console.WriteLine("FAIL " + full + ": " + x.GetType().Name + ": " + x.Message);
                    Console.WriteLine("     " + (x.StackTrace ?? "").Replace("\n", "\n     "));
                }
            }
            Console.WriteLine("integration tests run: " + integrationRan);
            Console.WriteLine(passed + " passed, " + failed + " failed, " + skipped + " skipped");
            return failed == 0 ? 0 : 1;
        }
    }
}
