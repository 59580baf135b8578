// Machine identity and integrity helpers. The raw machine id never leaves the machine: what is
// sent is sha256("kwhwid1\n" + salt + "\n" + lower(trim(id))), the same formula as every Keywarden
// SDK, so two vendors (different salts) cannot correlate their users and a leaked hwid does not
// reveal the id. Windows: MachineGuid (not the user SID: it survives reinstalls of user profiles
// and is the same for every user of the machine); Linux: /etc/machine-id; macOS: IOPlatformUUID.
using System;
using System.Diagnostics;
using System.IO;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Security.Cryptography;
using System.Text;
using System.Text.RegularExpressions;

namespace Keywarden
{
    /// <summary>Hardware id and self-hash helpers.</summary>
    public static class KeywardenMachine
    {
        /// <summary>The platform's machine id, or "" when there is none (some containers).</summary>
        public static string RawMachineId()
        {
            try
            {
                if (RuntimeInformation.IsOSPlatform(OSPlatform.Windows)) return WindowsMachineGuid();
                if (RuntimeInformation.IsOSPlatform(OSPlatform.OSX)) return MacPlatformUuid();
                return FirstFile("/etc/machine-id", "/var/lib/dbus/machine-id");
            }
            catch (Exception)
            {
                return "";
            }
        }

        /// <summary>hex(sha256(utf8("kwhwid1\n" + salt + "\n" + lower(trim(rawId))))).</summary>
        public static string HwidFor(string salt, string rawId)
        {
            var id = (rawId ?? "").Trim().ToLowerInvariant();
            using (var sha = SHA256.Create())
                return KeywardenCrypto.Hex(sha.ComputeHash(new UTF8Encoding(false).GetBytes("kwhwid1\n" + (salt ?? "") + "\n" + id)));
        }

        /// <summary>
        /// A stable, salted hardware id (64 hex characters); KeywardenClient passes its api_key as salt.
        /// Without a platform id it falls back to machine name, OS and architecture, which is weaker:
        /// pass your own hwid to the activation calls if that matters.
        /// </summary>
        public static string MachineHwid(string salt = "")
        {
            var id = RawMachineId().Trim();
            if (id.Length == 0)
                id = "fallback:" + Environment.MachineName + ":" + RuntimeInformation.OSDescription + ":" + RuntimeInformation.OSArchitecture;
            return HwidFor(salt, id);
        }

        /// <summary>
        /// SHA-256 (lower-case hex) of the running program, for code_hash / binary_hash. Default: the
        /// entry assembly (your .exe or .dll), else the process's main module (single-file apps),
        /// else this library.
        /// </summary>
        public static string SelfHash(string file = null)
        {
            var target = file;
            if (string.IsNullOrEmpty(target))
            {
                foreach (var candidate in Candidates())
                {
                    if (!string.IsNullOrEmpty(candidate) && File.Exists(candidate)) { target = candidate; break; }
                }
            }
            if (string.IsNullOrEmpty(target)) throw new InvalidOperationException("cannot locate the running program's file; pass it to SelfHash");
            using (var sha = SHA256.Create())
            using (var f = File.OpenRead(target))
                return KeywardenCrypto.Hex(sha.ComputeHash(f));
        }

        private static string[] Candidates()
        {
            string entry = null, main = null, self = null;
            try { var a = Assembly.GetEntryAssembly(); if (a != null) entry = a.Location; } catch (Exception) { }
            try { using (var p = Process.GetCurrentProcess()) main = p.MainModule != null ? p.MainModule.FileName : null; } catch (Exception) { }
            try { self = typeof(KeywardenMachine).Assembly.Location; } catch (Exception) { }
            return new[] { entry, main, self };
        }

        private static string FirstFile(params string[] files)
        {
            foreach (var f in files)
            {
                try
                {
                    if (!File.Exists(f)) continue;
                    var v = File.ReadAllText(f).Trim();
                    if (v.Length > 0) return v;
                }
                catch (Exception) { /* try the next one */ }
            }
            return "";
        }

        private static string MacPlatformUuid()
        {
            var psi = new ProcessStartInfo("ioreg", "-rd1 -c IOPlatformExpertDevice")
            {
                RedirectStandardOutput = true,
                UseShellExecute = false,
                CreateNoWindow = true,
            };
            using (var p = Process.Start(psi))
            {
                if (p == null) return "";
                var read = p.StandardOutput.ReadToEndAsync();
                if (!p.WaitForExit(5000)) { try { p.Kill(); } catch (Exception) { } return ""; }
                var m = Regex.Match(read.Result, "\"IOPlatformUUID\"\\s*=\\s*\"([^\"]+)\"");
                return m.Success ? m.Groups[1].Value : "";
            }
        }

        // RegGetValueW with RRF_SUBKEY_WOW6464KEY: a 32-bit process on 64-bit Windows would otherwise be
        // redirected to WOW6432Node, where MachineGuid does not exist. P/Invoke instead of
        // Microsoft.Win32.Registry, which netstandard2.0 does not include.
        [DllImport("advapi32.dll", CharSet = CharSet.Unicode, ExactSpelling = true)]
        private static extern int RegGetValueW(UIntPtr hkey, string subKey, string value, uint flags, IntPtr type, StringBuilder data, ref uint dataBytes);

        private static string WindowsMachineGuid()
        {
            var hklm = new UIntPtr(0x80000002u);
            const uint RrfRtRegSz = 0x00000002, RrfSubkeyWow6464Key = 0x00010000;
            var size = 256u * 2;
            var sb = new StringBuilder(256);
            var rc = RegGetValueW(hklm, "SOFTWARE\\Microsoft\\Cryptography", "MachineGuid", RrfRtRegSz | RrfSubkeyWow6464Key, IntPtr.Zero, sb, ref size);
            return rc == 0 ? sb.ToString() : "";
        }
    }
}
