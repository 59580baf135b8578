// Ed25519 verification and X25519 (the realtime channel) through libsodium (P/Invoke), the library
// the server and the C++ SDK use.
// The library name differs per platform and per package: "libsodium" finds libsodium.dll on
// Windows, libsodium.dylib on macOS and libsodium.so on Linux, but the unversioned .so exists only
// with the -dev package; a runtime-only Linux install (Debian/Ubuntu libsodium23) has
// libsodium.so.23. netstandard2.0 has no NativeLibrary resolver, so each candidate name gets its
// own extern declaration and the first that loads wins (the same on .NET Framework, .NET 8, Mono).
using System;
using System.Runtime.InteropServices;

namespace Keywarden
{
    internal static class Sodium
    {
        private static readonly object Gate = new object();
        private static int _variant = -1; // -1 unknown, 0..2 the binding that loaded
        private static string _loadError;

        private static class Plain
        {
            [DllImport("libsodium", CallingConvention = CallingConvention.Cdecl)]
            public static extern int sodium_init();
            [DllImport("libsodium", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_sign_verify_detached(byte[] sig, byte[] m, ulong mlen, byte[] pk);
            [DllImport("libsodium", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_scalarmult_base(byte[] q, byte[] n);
            [DllImport("libsodium", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_scalarmult(byte[] q, byte[] n, byte[] p);
        }

        private static class So23
        {
            [DllImport("libsodium.so.23", CallingConvention = CallingConvention.Cdecl)]
            public static extern int sodium_init();
            [DllImport("libsodium.so.23", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_sign_verify_detached(byte[] sig, byte[] m, ulong mlen, byte[] pk);
            [DllImport("libsodium.so.23", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_scalarmult_base(byte[] q, byte[] n);
            [DllImport("libsodium.so.23", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_scalarmult(byte[] q, byte[] n, byte[] p);
        }

        private static class So26
        {
            [DllImport("libsodium.so.26", CallingConvention = CallingConvention.Cdecl)]
            public static extern int sodium_init();
            [DllImport("libsodium.so.26", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_sign_verify_detached(byte[] sig, byte[] m, ulong mlen, byte[] pk);
            [DllImport("libsodium.so.26", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_scalarmult_base(byte[] q, byte[] n);
            [DllImport("libsodium.so.26", CallingConvention = CallingConvention.Cdecl)]
            public static extern int crypto_scalarmult(byte[] q, byte[] n, byte[] p);
        }

        /// <summary>Loads libsodium once; throws InvalidOperationException with install advice when it cannot.</summary>
        public static void EnsureLoaded()
        {
            lock (Gate)
            {
                if (_variant >= 0) return;
                if (_loadError != null) throw new InvalidOperationException(_loadError);
                var errors = new System.Text.StringBuilder();
                for (var v = 0; v < 3; v++)
                {
                    try
                    {
                        // sodium_init picks the CPU-specific implementations; 0 = done, 1 = already done.
                        var rc = v == 0 ? Plain.sodium_init() : v == 1 ? So23.sodium_init() : So26.sodium_init();
                        if (rc < 0) { errors.Append(" sodium_init failed;"); continue; }
                        _variant = v;
                        return;
                    }
                    catch (DllNotFoundException e) { errors.Append(' ').Append(e.Message).Append(';'); }
                    catch (EntryPointNotFoundException e) { errors.Append(' ').Append(e.Message).Append(';'); }
                    catch (BadImageFormatException e) { errors.Append(' ').Append(e.Message).Append(';'); }
                }
                _loadError = "Keywarden needs libsodium to verify the server's Ed25519 signatures and could not load it "
                    + "(Windows: ship libsodium.dll next to your program or reference the `libsodium` NuGet package; "
                    + "Debian/Ubuntu: apt install libsodium23; macOS: brew install libsodium):" + errors;
                throw new InvalidOperationException(_loadError);
            }
        }

        /// <summary>crypto_sign_verify_detached: true only for a valid signature of message under publicKey.</summary>
        public static bool Verify(byte[] signature, byte[] message, byte[] publicKey)
        {
            if (signature == null || signature.Length != 64 || publicKey == null || publicKey.Length != 32 || message == null) return false;
            EnsureLoaded();
            int rc;
            switch (_variant)
            {
                case 0: rc = Plain.crypto_sign_verify_detached(signature, message, (ulong)message.Length, publicKey); break;
                case 1: rc = So23.crypto_sign_verify_detached(signature, message, (ulong)message.Length, publicKey); break;
                default: rc = So26.crypto_sign_verify_detached(signature, message, (ulong)message.Length, publicKey); break;
            }
            return rc == 0;
        }

        /// <summary>X25519 public key of a 32-byte secret (crypto_scalarmult_base).</summary>
        public static byte[] X25519Public(byte[] secret)
        {
            if (secret == null || secret.Length != 32) throw new ArgumentException("an X25519 secret is 32 bytes");
            EnsureLoaded();
            var q = new byte[32];
            int rc;
            switch (_variant)
            {
                case 0: rc = Plain.crypto_scalarmult_base(q, secret); break;
                case 1: rc = So23.crypto_scalarmult_base(q, secret); break;
                default: rc = So26.crypto_scalarmult_base(q, secret); break;
            }
            if (rc != 0) throw new InvalidOperationException("crypto_scalarmult_base failed");
            return q;
        }

        /// <summary>X25519(secret, peer public key); null for an all-zero result (a low-order peer key).</summary>
        public static byte[] X25519(byte[] secret, byte[] peerPublic)
        {
            if (secret == null || secret.Length != 32 || peerPublic == null || peerPublic.Length != 32) return null;
            EnsureLoaded();
            var q = new byte[32];
            int rc;
            switch (_variant)
            {
                case 0: rc = Plain.crypto_scalarmult(q, secret, peerPublic); break;
                case 1: rc = So23.crypto_scalarmult(q, secret, peerPublic); break;
                default: rc = So26.crypto_scalarmult(q, secret, peerPublic); break;
            }
            return rc == 0 ? q : null;
        }
    }
}
