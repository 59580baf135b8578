package io.keywarden;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.net.http.HttpTimeoutException;
import java.nio.channels.Channels;
import java.nio.channels.FileChannel;
import java.nio.charset.StandardCharsets;
import java.nio.file.AtomicMoveNotSupportedException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.security.PublicKey;
import java.security.SecureRandom;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;

/**
 * Updates: the upgrade check's offer and the verified download of an artifact. An offer is believed only when every
 * artifact carries an Ed25519 signature, by a pinned response-signing key, over
 * {@code kwart1.<app_id>.<version>.<filename>.<sha512 hex>} (the server's docs/releases.md "Artifacts";
 * sdk/vectors/artifacts.json fixes the order of the checks). A download streams into a temporary file next to the
 * target, checks size, SHA-512 and that signature, and only then moves it over the target; any failure deletes the
 * temporary file and throws an {@link UpdateException}.
 */
final class Updates {
    private Updates() {}

    private static final int CHUNK = 64 * 1024;
    private static final SecureRandom RANDOM = new SecureRandom();

    static String message(String appId, String version, String filename, String sha512Hex) {
        return "kwart1." + appId + "." + version + "." + filename + "." + sha512Hex;
    }

    static void verify(Map<String, PublicKey> keys, Artifact a) {
        PublicKey key = keys.get(a.kid());
        if (key == null) throw new UpdateException(UpdateReason.UNKNOWN_KID, a.filename() + " is signed by unpinned key " + a.kid());
        byte[] sig = Crypto.decodeSignature(a.signature());
        if (sig == null || !Crypto.ed25519Verify(key, Crypto.utf8(message(a.appId(), a.version(), a.filename(), a.sha512())), sig))
            throw new UpdateException(UpdateReason.BAD_SIGNATURE, "signature of " + a.filename() + " " + a.version() + " does not verify");
    }

    private static String text(Map<String, Object> o, String name) {
        Object v = o.get(name);
        if (!(v instanceof String) || ((String) v).isEmpty())
            throw KeywardenException.verification(VerificationReason.MALFORMED, "upgrade answer lacks " + name);
        return (String) v;
    }

    @SuppressWarnings("unchecked")
    static UpdateOffer parse(Map<String, Object> u, String appId, Map<String, PublicKey> keys) {
        String version = text(u, "version");
        if (!(u.get("artifacts") instanceof List) || ((List<Object>) u.get("artifacts")).isEmpty())
            throw KeywardenException.verification(VerificationReason.MALFORMED, "upgrade answer lists no artifacts");
        List<Artifact> artifacts = new ArrayList<>();
        for (Object item : (List<Object>) u.get("artifacts")) {
            if (!(item instanceof Map)) throw KeywardenException.verification(VerificationReason.MALFORMED, "an artifact is not an object");
            Map<String, Object> o = (Map<String, Object>) item;
            Long size = Json.integer(o.get("size"));
            if (size == null || size < 0) throw KeywardenException.verification(VerificationReason.MALFORMED, "artifact size is not a count of bytes");
            Artifact a = new Artifact(appId, version, text(o, "filename"), text(o, "platform"), text(o, "arch"), size,
                    text(o, "sha512"), text(o, "signature"), text(o, "kid"), text(o, "url"), Utc.lenient(o.get("url_expires_at")));
            verify(keys, a);
            artifacts.add(a);
        }
        Object channel = u.get("channel");
        Object notes = u.get("notes");
        return new UpdateOffer(version, channel instanceof String ? (String) channel : "", notes instanceof String ? (String) notes : "",
                Utc.lenient(u.get("published_at")), List.copyOf(artifacts));
    }

    static Path download(Map<String, PublicKey> keys, Artifact a, Path targetPath, DownloadProgress progress, long timeoutMillis) {
        verify(keys, a);
        Path target = targetPath.toAbsolutePath();
        Path dir = target.getParent() != null ? target.getParent() : Paths.get(".");
        byte[] suffix = new byte[6];
        RANDOM.nextBytes(suffix);
        Path tmp = dir.resolve("." + target.getFileName() + "." + Crypto.toHex(suffix) + ".part");
        try {
            try (FileChannel ch = FileChannel.open(tmp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE)) {
                stream(a, Channels.newOutputStream(ch), progress, timeoutMillis);
                ch.force(true);
            } catch (IOException e) {
                throw new UpdateException(ErrorCode.NETWORK, UpdateReason.DOWNLOAD_FAILED, "writing " + tmp + ": " + e.getMessage(), null, null, e);
            }
            try {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
            } catch (AtomicMoveNotSupportedException e) {
                Files.move(tmp, target, StandardCopyOption.REPLACE_EXISTING);
            }
            return target;
        } catch (IOException e) {
            deleteQuietly(tmp);
            throw new UpdateException(ErrorCode.NETWORK, UpdateReason.DOWNLOAD_FAILED, "moving into " + target + ": " + e.getMessage(), null, null, e);
        } catch (RuntimeException e) {
            deleteQuietly(tmp);
            throw e;
        }
    }

    private static void deleteQuietly(Path p) {
        try {
            Files.deleteIfExists(p);
        } catch (IOException ignored) {
            // nothing more to do
        }
    }

    /** GET the link into out, checking size and SHA-512 on the way. */
    private static void stream(Artifact a, OutputStream out, DownloadProgress progress, long timeoutMillis) throws IOException {
        URI uri;
        try {
            uri = URI.create(a.url());
        } catch (IllegalArgumentException e) {
            uri = null;
        }
        if (uri == null || !("http".equals(uri.getScheme()) || "https".equals(uri.getScheme())))
            throw new UpdateException(ErrorCode.NETWORK, UpdateReason.DOWNLOAD_FAILED, "unsupported URL " + a.url(), null, null, null);
        HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofMillis(timeoutMillis))
                .followRedirects(HttpClient.Redirect.NEVER).build();
        HttpResponse<InputStream> res;
        try {
            res = http.send(HttpRequest.newBuilder(uri).timeout(Duration.ofMillis(timeoutMillis)).GET().build(),
                    HttpResponse.BodyHandlers.ofInputStream());
        } catch (HttpTimeoutException e) {
            throw new UpdateException(ErrorCode.TIMEOUT, UpdateReason.DOWNLOAD_FAILED, "GET " + a.filename() + ": no answer within " + timeoutMillis + " ms", null, null, e);
        } catch (IOException e) {
            throw new UpdateException(ErrorCode.NETWORK, UpdateReason.DOWNLOAD_FAILED, "GET " + a.filename() + ": " + e, null, null, e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new UpdateException(ErrorCode.NETWORK, UpdateReason.DOWNLOAD_FAILED, "interrupted", null, null, e);
        }
        try (InputStream in = res.body()) {
            if (res.statusCode() != 200) {
                String raw = new String(in.readNBytes(4096), StandardCharsets.UTF_8);
                Object detail = raw;
                try {
                    Map<String, Object> parsed = Json.parseObject(raw);
                    if (parsed.containsKey("detail")) detail = parsed.get("detail");
                } catch (RuntimeException notJson) {
                    // the text is the detail
                }
                throw new UpdateException(ErrorCode.SERVER, UpdateReason.DOWNLOAD_FAILED, a.filename() + ": " + res.statusCode() + " " + raw,
                        res.statusCode(), detail, null);
            }
            MessageDigest sha = sha512();
            byte[] buf = new byte[CHUNK];
            long received = 0;
            for (int n; (n = readChunk(in, buf, a)) > 0;) {
                received += n;
                if (received > a.size()) throw new UpdateException(UpdateReason.SIZE_MISMATCH, a.filename() + ": more than the offered " + a.size() + " bytes");
                sha.update(buf, 0, n);
                out.write(buf, 0, n);
                if (progress != null) progress.onProgress(received, a.size());
            }
            if (received != a.size())
                throw new UpdateException(UpdateReason.SIZE_MISMATCH, a.filename() + ": " + received + " bytes, offered " + a.size());
            byte[] got = Crypto.utf8(Crypto.toHex(sha.digest()));
            if (!MessageDigest.isEqual(got, Crypto.utf8(a.sha512().toLowerCase(Locale.ROOT))))
                throw new UpdateException(UpdateReason.SHA512_MISMATCH, a.filename() + ": SHA-512 differs from the offer");
        }
    }

    private static int readChunk(InputStream in, byte[] buf, Artifact a) {
        try {
            return in.read(buf);
        } catch (IOException e) {
            throw new UpdateException(ErrorCode.NETWORK, UpdateReason.DOWNLOAD_FAILED, "reading " + a.filename() + ": " + e, null, null, e);
        }
    }

    private static MessageDigest sha512() {
        try {
            return MessageDigest.getInstance("SHA-512");
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

}
