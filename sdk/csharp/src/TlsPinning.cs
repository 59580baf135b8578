// TLS public-key pinning (docs/spec.md "Client API" item 4: the reference C# client pins the TLS public
// key of the service host). A pin is SHA-256 of the certificate's DER SubjectPublicKeyInfo, the
// same value as HPKP's pin-sha256 and `openssl x509 -pubkey | openssl pkey -pubin -outform der |
// openssl dgst -sha256`. netstandard2.0 has no ExportSubjectPublicKeyInfo, so the SPKI bytes are cut
// out of the certificate with a minimal DER walker (certificates are parsed by the platform first;
// this only re-reads the bytes it already accepted).
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Security.Cryptography;
using System.Security.Cryptography.X509Certificates;

namespace Keywarden
{
    /// <summary>SPKI SHA-256 pins of the service host's certificate.</summary>
    public sealed class TlsPins
    {
        private readonly List<byte[]> _pins = new List<byte[]>();

        /// <summary>
        /// Pins given as base64 (44 characters, as HPKP and `openssl ... | base64`) or hex (64
        /// characters), optionally prefixed with "sha256/" or "sha256:". List a backup key too, so a
        /// certificate renewal with a new key does not lock every installed client out.
        /// </summary>
        public TlsPins(IEnumerable<string> pins)
        {
            foreach (var p in pins ?? new string[0]) _pins.Add(ParsePin(p));
            if (_pins.Count == 0) throw new ArgumentException("TLS pinning needs at least one pin");
        }

        /// <summary>Number of pins.</summary>
        public int Count { get { return _pins.Count; } }

        internal static byte[] ParsePin(string pin)
        {
            var p = (pin ?? "").Trim();
            if (p.StartsWith("sha256/", StringComparison.OrdinalIgnoreCase) || p.StartsWith("sha256:", StringComparison.OrdinalIgnoreCase)) p = p.Substring(7);
            if (p.Length == 64)
            {
                var b = new byte[32];
                for (var i = 0; i < 32; i++)
                    if (!byte.TryParse(p.Substring(i * 2, 2), NumberStyles.AllowHexSpecifier, CultureInfo.InvariantCulture, out b[i]))
                        throw new ArgumentException("TLS pin is not hex: " + pin);
                return b;
            }
            try
            {
                var b = Convert.FromBase64String(p);
                if (b.Length == 32) return b;
            }
            catch (FormatException) { }
            throw new ArgumentException("TLS pin must be the SHA-256 of a SubjectPublicKeyInfo, base64 or hex: " + pin);
        }

        /// <summary>True when the certificate's public key is one of the pins.</summary>
        public bool Matches(X509Certificate certificate)
        {
            if (certificate == null) return false;
            byte[] hash;
            try { hash = SpkiSha256(certificate.GetRawCertData()); }
            catch (FormatException) { return false; }
            foreach (var p in _pins)
            {
                var diff = 0;
                for (var i = 0; i < 32; i++) diff |= p[i] ^ hash[i];
                if (diff == 0) return true;
            }
            return false;
        }

        /// <summary>SHA-256 of the DER SubjectPublicKeyInfo inside a DER certificate.</summary>
        public static byte[] SpkiSha256(byte[] certificateDer)
        {
            var spki = SubjectPublicKeyInfo(certificateDer);
            using (var sha = SHA256.Create()) return sha.ComputeHash(spki);
        }

        /// <summary>Base64 pin of a DER certificate (what to put in KeywardenOptions.TlsPins).</summary>
        public static string PinOf(byte[] certificateDer)
        {
            return Convert.ToBase64String(SpkiSha256(certificateDer));
        }

        /// <summary>
        /// Certificate ::= SEQUENCE { tbsCertificate SEQUENCE { [0] version OPTIONAL, serialNumber,
        /// signature, issuer, validity, subject, subjectPublicKeyInfo, ... }, ... } (RFC 5280 4.1).
        /// </summary>
        public static byte[] SubjectPublicKeyInfo(byte[] der)
        {
            int pos = 0, len;
            Expect(der, ref pos, 0x30, out len);              // Certificate
            Expect(der, ref pos, 0x30, out len);              // tbsCertificate
            var end = pos + len;
            if (pos < end && der[pos] == 0xA0) Skip(der, ref pos); // [0] version
            for (var i = 0; i < 5; i++) Skip(der, ref pos);       // serial, signature, issuer, validity, subject
            var start = pos;
            Expect(der, ref pos, 0x30, out len);              // subjectPublicKeyInfo
            if (pos + len > end) throw new FormatException("SPKI runs past the certificate");
            var spki = new byte[pos + len - start];
            Buffer.BlockCopy(der, start, spki, 0, spki.Length);
            return spki;
        }

        private static void Expect(byte[] d, ref int pos, byte tag, out int len)
        {
            if (pos >= d.Length || d[pos] != tag) throw new FormatException("unexpected DER tag");
            pos++;
            len = Length(d, ref pos);
        }

        private static void Skip(byte[] d, ref int pos)
        {
            if (pos >= d.Length) throw new FormatException("DER ends early");
            pos++; // tag (all tags here are single-byte)
            var len = Length(d, ref pos);
            pos += len;
        }

        private static int Length(byte[] d, ref int pos)
        {
            if (pos >= d.Length) throw new FormatException("DER ends early");
            int first = d[pos++];
            if (first < 0x80) return CheckFits(d, pos, first);
            var n = first & 0x7F;
            if (n == 0 || n > 3) throw new FormatException("unsupported DER length");
            var len = 0;
            for (var i = 0; i < n; i++)
            {
                if (pos >= d.Length) throw new FormatException("DER ends early");
                len = (len << 8) | d[pos++];
            }
            return CheckFits(d, pos, len);
        }

        private static int CheckFits(byte[] d, int pos, int len)
        {
            if (len < 0 || pos + len > d.Length) throw new FormatException("DER length runs past the data");
            return len;
        }
    }
}
