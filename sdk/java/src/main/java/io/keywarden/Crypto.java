package io.keywarden;

import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.security.GeneralSecurityException;
import java.security.KeyFactory;
import java.security.KeyPair;
import java.security.KeyPairGenerator;
import java.security.MessageDigest;
import java.security.PrivateKey;
import java.security.PublicKey;
import java.security.Signature;
import java.security.interfaces.XECPublicKey;
import java.security.spec.NamedParameterSpec;
import java.security.spec.X509EncodedKeySpec;
import java.security.spec.XECPrivateKeySpec;
import java.security.spec.XECPublicKeySpec;
import java.util.Arrays;
import java.util.Base64;
import java.util.regex.Pattern;
import javax.crypto.Cipher;
import javax.crypto.KeyAgreement;
import javax.crypto.Mac;
import javax.crypto.spec.IvParameterSpec;
import javax.crypto.spec.SecretKeySpec;

/**
 * docs/protocol.md 3-6 and the realtime channel's crypto with the JDK alone. Each function matches one file of
 * sdk/vectors (the unit tests check them).
 */
public final class Crypto {
    private Crypto() {}

    /** DER prefix of an X.509 SubjectPublicKeyInfo holding a raw 32-byte Ed25519 key. */
    private static final byte[] ED25519_SPKI = hex("302a300506032b6570032100");
    private static final Pattern SIG_RE = Pattern.compile("^[A-Za-z0-9+/]{86}==$");

    static byte[] utf8(String s) {
        return s.getBytes(StandardCharsets.UTF_8);
    }

    public static byte[] hex(String s) {
        byte[] out = new byte[s.length() / 2];
        for (int i = 0; i < out.length; i++) out[i] = (byte) Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return out;
    }

    public static String toHex(byte[] b) {
        StringBuilder sb = new StringBuilder(b.length * 2);
        for (byte x : b) sb.append(Character.forDigit((x >> 4) & 15, 16)).append(Character.forDigit(x & 15, 16));
        return sb.toString();
    }

    public static byte[] sha256(byte[] data) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(data);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
    }

    public static String sha256Hex(byte[] data) {
        return toHex(sha256(data));
    }

    public static byte[] hmacSha256(byte[] key, byte[] data) {
        try {
            Mac mac = Mac.getInstance("HmacSHA256");
            // SecretKeySpec refuses an empty key; HMAC pads every key with zero bytes to the block size, so an
            // empty key and one zero byte are the same key.
            mac.init(new SecretKeySpec(key.length == 0 ? new byte[1] : key, "HmacSHA256"));
            return mac.doFinal(data);
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
    }

    /** docs/protocol.md 3: METHOD \n PATH \n X-Timestamp \n X-Nonce \n hex(sha256(body)). */
    public static String canonicalRequest(String method, String path, String timestamp, String nonce, byte[] body) {
        return method.toUpperCase(java.util.Locale.ROOT) + "\n" + path + "\n" + timestamp + "\n" + nonce + "\n" + sha256Hex(body);
    }

    /** X-Signature: hex(HMAC-SHA256(key = utf8(api_secret), canonical)). */
    public static String requestSignature(String apiSecret, String canonical) {
        return toHex(hmacSha256(utf8(apiSecret), utf8(canonical)));
    }

    /** docs/protocol.md 4: kw1 \n KID \n METHOD \n PATH \n STATUS \n TS \n NONCE \n hex(sha256(body)). */
    public static String responseMessage(String kid, String method, String path, int status, String timestamp,
            String nonce, byte[] body) {
        return "kw1\n" + kid + "\n" + method.toUpperCase(java.util.Locale.ROOT) + "\n" + path + "\n" + status + "\n"
                + timestamp + "\n" + nonce + "\n" + sha256Hex(body);
    }

    /** An Ed25519 public key of base64 of its 32 raw bytes; IllegalArgumentException otherwise. */
    public static PublicKey ed25519PublicKey(String b64) {
        byte[] raw = Base64.getDecoder().decode(b64);
        if (raw.length != 32) throw new IllegalArgumentException("an Ed25519 public key is 32 bytes");
        byte[] der = Arrays.copyOf(ED25519_SPKI, ED25519_SPKI.length + 32);
        System.arraycopy(raw, 0, der, ED25519_SPKI.length, 32);
        try {
            return KeyFactory.getInstance("Ed25519").generatePublic(new X509EncodedKeySpec(der));
        } catch (GeneralSecurityException e) {
            throw new IllegalArgumentException("not an Ed25519 public key: " + e.getMessage(), e);
        }
    }

    /** The 64 signature bytes of a strict base64 string (86 characters and "=="), else null. */
    public static byte[] decodeSignature(Object value) {
        if (!(value instanceof String) || !SIG_RE.matcher((String) value).matches()) return null;
        try {
            byte[] raw = Base64.getDecoder().decode((String) value);
            return raw.length == 64 ? raw : null;
        } catch (IllegalArgumentException e) {
            return null;
        }
    }

    public static boolean ed25519Verify(PublicKey key, byte[] message, byte[] signature) {
        try {
            Signature s = Signature.getInstance("Ed25519");
            s.initVerify(key);
            s.update(message);
            return s.verify(signature);
        } catch (GeneralSecurityException | RuntimeException e) {
            return false;
        }
    }

    /** docs/protocol.md 6, heartbeat/start. */
    public static String startProof(String session, String systemId, String token) {
        return Base64.getEncoder().encodeToString(hmacSha256(utf8(session), utf8("kwhs1\n" + systemId + "\n" + token)));
    }

    /** docs/protocol.md 6, heartbeat (integers in decimal). */
    public static String beatProof(String previousToken, String session, long beatIndex, String newToken, long beatCount) {
        String msg = "kwhb1\n" + session + "\n" + beatIndex + "\n" + newToken + "\n" + beatCount;
        return Base64.getEncoder().encodeToString(hmacSha256(utf8(previousToken), utf8(msg)));
    }

    /** Constant-time comparison of a received proof with the expected one. */
    public static boolean proofEquals(Object given, String expected) {
        return given instanceof String && MessageDigest.isEqual(utf8((String) given), utf8(expected));
    }

    /** docs/protocol.md 5: the plaintext bytes; IllegalArgumentException on a wrong key or a damaged ciphertext. */
    public static byte[] decryptResponse(String ciphertextB64, String encKey, String apiSecret, String initIv) {
        byte[] key = sha256(utf8(encKey + "-" + apiSecret));
        byte[] iv = Arrays.copyOf(sha256(utf8(initIv)), 16);
        byte[] data;
        try {
            data = Base64.getDecoder().decode(ciphertextB64);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("ciphertext is not base64");
        }
        if (data.length == 0 || data.length % 16 != 0) throw new IllegalArgumentException("ciphertext is not whole AES blocks");
        try {
            Cipher c = Cipher.getInstance("AES/CBC/PKCS5Padding");
            c.init(Cipher.DECRYPT_MODE, new SecretKeySpec(key, "AES"), new IvParameterSpec(iv));
            return c.doFinal(data);
        } catch (GeneralSecurityException e) {
            throw new IllegalArgumentException("ciphertext does not decrypt: " + e.getMessage());
        }
    }

    // --- the realtime channel (sdk/vectors/channel.json) -------------------------------------------

    static String b64url(byte[] b) {
        return Base64.getUrlEncoder().withoutPadding().encodeToString(b);
    }

    static byte[] b64urlDecode(String s) {
        return Base64.getUrlDecoder().decode(s);
    }

    /** "kwc1-hello" \n kid \n ts \n session \n client_key \n server_key \n conn \n beat_interval. */
    public static String channelTranscript(String kid, long ts, String session, String clientKey, String serverKey,
            String conn, long beatInterval) {
        return String.join("\n", "kwc1-hello", kid, Long.toString(ts), session, clientKey, serverKey, conn,
                Long.toString(beatInterval));
    }

    /** A fresh X25519 key pair. */
    static KeyPair x25519KeyPair() {
        try {
            return KeyPairGenerator.getInstance("X25519").generateKeyPair();
        } catch (GeneralSecurityException e) {
            throw new IllegalStateException(e);
        }
    }

    /** An X25519 private key of its raw 32-byte scalar. */
    public static PrivateKey x25519PrivateKey(byte[] scalar) {
        try {
            return KeyFactory.getInstance("X25519").generatePrivate(new XECPrivateKeySpec(NamedParameterSpec.X25519, scalar.clone()));
        } catch (GeneralSecurityException e) {
            throw new IllegalArgumentException(e);
        }
    }

    /** The raw 32 little-endian bytes of an X25519 public key. */
    public static byte[] x25519Raw(PublicKey key) {
        BigInteger u = ((XECPublicKey) key).getU();
        byte[] be = u.toByteArray();
        byte[] out = new byte[32];
        for (int i = 0; i < 32 && i < be.length; i++) out[i] = be[be.length - 1 - i];
        return out;
    }

    /** The public key of a private one (derived by a key agreement with the base point). */
    public static byte[] x25519PublicOf(PrivateKey priv) {
        byte[] base = new byte[32];
        base[0] = 9;
        return x25519(priv, base);
    }

    /** X25519(priv, peer); IllegalArgumentException for an unusable peer key (all-zero result). */
    public static byte[] x25519(PrivateKey priv, byte[] peerRaw) {
        if (peerRaw.length != 32) throw new IllegalArgumentException("an X25519 key is 32 bytes");
        byte[] le = peerRaw.clone();
        le[31] &= 0x7f;
        byte[] be = new byte[33];
        for (int i = 0; i < 32; i++) be[32 - i] = le[i];
        try {
            PublicKey pub = KeyFactory.getInstance("X25519").generatePublic(new XECPublicKeySpec(NamedParameterSpec.X25519, new BigInteger(be)));
            KeyAgreement ka = KeyAgreement.getInstance("X25519");
            ka.init(priv);
            ka.doPhase(pub, true);
            byte[] shared = ka.generateSecret();
            boolean zero = true;
            for (byte b : shared) zero &= b == 0;
            if (zero) throw new IllegalArgumentException("X25519 with a low-order key");
            return shared;
        } catch (GeneralSecurityException e) {
            throw new IllegalArgumentException("X25519 failed: " + e.getMessage(), e);
        }
    }

    /** HKDF-SHA256 (RFC 5869). */
    public static byte[] hkdf(byte[] ikm, byte[] salt, byte[] info, int length) {
        byte[] prk = hmacSha256(salt, ikm);
        byte[] out = new byte[length];
        byte[] t = new byte[0];
        int pos = 0;
        for (int i = 1; pos < length; i++) {
            byte[] in = new byte[t.length + info.length + 1];
            System.arraycopy(t, 0, in, 0, t.length);
            System.arraycopy(info, 0, in, t.length, info.length);
            in[in.length - 1] = (byte) i;
            t = hmacSha256(prk, in);
            int n = Math.min(t.length, length - pos);
            System.arraycopy(t, 0, out, pos, n);
            pos += n;
        }
        return out;
    }

    /** {s2c, c2s}: HKDF-SHA256(X25519 secret, salt = sha256(transcript), info "kwc1 keys", 64). */
    public static byte[][] channelKeys(PrivateKey priv, String serverKey, String transcript) {
        byte[] raw;
        try {
            raw = b64urlDecode(serverKey);
        } catch (IllegalArgumentException e) {
            throw new IllegalArgumentException("server_key is not base64url");
        }
        byte[] shared = x25519(priv, raw);
        byte[] okm = hkdf(shared, sha256(utf8(transcript)), utf8("kwc1 keys"), 64);
        return new byte[][] {Arrays.copyOfRange(okm, 0, 32), Arrays.copyOfRange(okm, 32, 64)};
    }

    /** HMAC-SHA256(key, payload) || payload. */
    public static byte[] sealFrame(byte[] key, byte[] payload) {
        byte[] mac = hmacSha256(key, payload);
        byte[] out = Arrays.copyOf(mac, 32 + payload.length);
        System.arraycopy(payload, 0, out, 32, payload.length);
        return out;
    }

    /** The payload when the MAC verifies (constant time), else null. */
    public static byte[] openFrame(byte[] key, byte[] frame) {
        if (frame.length <= 32) return null;
        byte[] payload = Arrays.copyOfRange(frame, 32, frame.length);
        return MessageDigest.isEqual(hmacSha256(key, payload), Arrays.copyOf(frame, 32)) ? payload : null;
    }
}
