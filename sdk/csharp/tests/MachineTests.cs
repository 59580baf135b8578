// Hardware id (the formula every SDK shares) and the self hash.
using System;
using System.IO;
using System.Security.Cryptography;

namespace Keywarden.Tests
{
    internal static class MachineTests
    {
        public static void Register(Registry r)
        {
            r.Unit("machine: hwid formula sha256(\"kwhwid1\\n\" salt \"\\n\" lower(trim(id)))", () =>
            {
                // python3 -c "import hashlib;print(hashlib.sha256(b'kwhwid1\nsalt-1\nabcdef0123').hexdigest())"
                Assert.Equal("d32ec95a313118592080fd382e60387809ad542f5ff06fab8c1f111f8b889db8", KeywardenMachine.HwidFor("salt-1", "  ABCDEF0123\n"));
            });

            r.Unit("machine: MachineHwid is salted, stable, 64 hex, and built from the platform id", () =>
            {
                var a = KeywardenMachine.MachineHwid("app-a");
                Assert.Equal(64, a.Length);
                Assert.Equal(a, KeywardenMachine.MachineHwid("app-a"), "stable");
                Assert.True(a != KeywardenMachine.MachineHwid("app-b"), "another salt gives another id");
                var raw = KeywardenMachine.RawMachineId();
                if (File.Exists("/etc/machine-id") && File.ReadAllText("/etc/machine-id").Trim().Length > 0)
                {
                    Assert.Equal(File.ReadAllText("/etc/machine-id").Trim(), raw, "Linux: /etc/machine-id");
                    Assert.Equal(KeywardenMachine.HwidFor("app-a", raw), a, "hwid from the raw id");
                }
                Assert.True(a.IndexOf(raw.ToLowerInvariant(), StringComparison.Ordinal) < 0 || raw.Length == 0, "the raw id does not appear in the hwid");
            });

            r.Unit("machine: SelfHash hashes the given file, and by default the running program", () =>
            {
                var path = Path.GetTempFileName();
                try
                {
                    File.WriteAllText(path, "hello");
                    Assert.Equal("2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824", KeywardenMachine.SelfHash(path));
                }
                finally
                {
                    File.Delete(path);
                }
                var exe = typeof(MachineTests).Assembly.Location;
                using (var sha = SHA256.Create())
                using (var f = File.OpenRead(exe))
                    Assert.Equal(KeywardenCrypto.Hex(sha.ComputeHash(f)), KeywardenClient.SelfHash(), "the entry assembly (this test program)");
            });
        }
    }
}
