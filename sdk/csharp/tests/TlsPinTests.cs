// TLS public-key pins: SPKI extraction from a certificate (checked against openssl's value), pin
// formats, and matching. The end-to-end check through a TLS proxy is in IntegrationTests.
using System;
using System.Security.Cryptography.X509Certificates;

namespace Keywarden.Tests
{
    internal static class TlsPinTests
    {
        // A self-signed P-256 certificate and its pin, made with:
        //   openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -subj /CN=ec-test ...
        //   openssl x509 -pubkey -noout | openssl pkey -pubin -outform der | openssl dgst -sha256 -binary | base64
        private const string CertDer = "MIIBezCCASGgAwIBAgIUS8iIwX/4Oj7fyOP907iQI9Pfc/UwCgYIKoZIzj0EAwIwEjEQMA4GA1UEAwwHZWMtdGVzdDAgFw0yNjExMjIyMzQ2MzdaGA8yMTI2MTAyOTIzNDYzN1owEjEQMA4GA1UEAwwHZWMtdGVzdDBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABJ2+NLnmfsLnQg8I8TxaBeTl7mj7C2TZLanKUiBpVgRTSTFqJCJkE7dq3mC635nT/1ZqGv5j//I/M9vADHEfhfGjUzBRMB0GA1UdDgQWBBQaVpDhgMmgVuOH6DQSHXMEICG7MDAfBgNVHSMEGDAWgBQaVpDhgMmgVuOH6DQSHXMEICG7MDAPBgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0gAMEUCIQCAxGVSeKmp1hiTfyaakBm4U+H/GbocjbMFdV/FEf3VSAIgChJVUP+lOXGOY1wUk0CMn39f+nH6EaRV+HDZjDBmEkA=";
        private const string Pin = "kmTDtu+ZTrjQWVuYvVgAOwRGsPQ7pbOndzWnBiLTaAA=";

        public static void Register(Registry r)
        {
            r.Unit("tls: the SPKI pin of a certificate equals openssl's", () =>
            {
                var der = Convert.FromBase64String(CertDer);
                Assert.Equal(Pin, TlsPins.PinOf(der));
                var spki = TlsPins.SubjectPublicKeyInfo(der);
                Assert.Equal(0x30, (int)spki[0]);
                Assert.Equal(91, spki.Length, "P-256 SPKI length");
            });

            r.Unit("tls: pins match in base64, hex and sha256/ form; others do not", () =>
            {
                var cert = new X509Certificate2(Convert.FromBase64String(CertDer));
                var hex = KeywardenCrypto.Hex(Convert.FromBase64String(Pin));
                Assert.True(new TlsPins(new[] { Pin }).Matches(cert), "base64 pin");
                Assert.True(new TlsPins(new[] { hex.ToUpperInvariant() }).Matches(cert), "hex pin");
                Assert.True(new TlsPins(new[] { "sha256/" + Pin }).Matches(cert), "sha256/ pin");
                Assert.True(new TlsPins(new[] { Convert.ToBase64String(new byte[32]), Pin }).Matches(cert), "backup pin listed first");
                Assert.True(!new TlsPins(new[] { Convert.ToBase64String(new byte[32]) }).Matches(cert), "wrong pin");
                Assert.True(!new TlsPins(new[] { Pin }).Matches(null), "no certificate");
                Assert.Throws<ArgumentException>(() => new TlsPins(new[] { "abc" }), "short pin");
                Assert.Throws<ArgumentException>(() => new TlsPins(new string[0]), "no pins");
            });

            r.Unit("tls: a damaged certificate is refused, not a crash", () =>
            {
                var der = Convert.FromBase64String(CertDer);
                Assert.Throws<FormatException>(() => TlsPins.SubjectPublicKeyInfo(new byte[] { 0x30, 0x82, 0xff, 0xff }), "length past the end");
                var cut = new byte[60];
                Array.Copy(der, cut, cut.Length);
                Assert.Throws<FormatException>(() => TlsPins.SubjectPublicKeyInfo(cut), "truncated");
            });
        }
    }
}
