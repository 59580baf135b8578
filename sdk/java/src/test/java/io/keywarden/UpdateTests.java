package io.keywarden;

import static io.keywarden.TestRunner.check;
import static io.keywarden.TestRunner.eq;

import com.sun.net.httpserver.HttpServer;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;
import java.util.stream.Stream;

/**
 * sdk/vectors/artifacts.json: every case downloaded for real (from a JDK HttpServer serving the case's bytes)
 * through Client.downloadUpdate, which must accept it or refuse it with the reason the case names, leaving nothing
 * behind when it refuses; and the refusal of a link.
 */
final class UpdateTests {
    private UpdateTests() {}

    private static HttpServer serve(Map<String, byte[]> files) throws Exception {
        HttpServer server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 0);
        server.createContext("/", ex -> {
            byte[] body = files.get(ex.getRequestURI().getPath());
            int status = 200;
            if (body == null) {
                status = 403;
                body = "{\"detail\":\"Download link expired\"}".getBytes(StandardCharsets.UTF_8);
            }
            ex.sendResponseHeaders(status, body.length == 0 ? -1 : body.length);
            try (OutputStream out = ex.getResponseBody()) {
                out.write(body);
            }
        });
        server.start();
        return server;
    }

    private static Client client(Map<String, Object> v, String appId, String base) {
        String keys = Json.write(v.get("pinned_keys"));
        return new Client(Config.parse("{\"format\":1,\"base_url\":\"" + base + "\",\"api_key\":\"k\",\"app_id\":\"" + appId
                + "\",\"response_keys\":" + keys + "}"));
    }

    @SuppressWarnings("unchecked")
    private static Artifact artifact(Map<String, Object> c, String url) {
        Map<String, Object> a = (Map<String, Object>) c.get("artifact");
        return new Artifact(UnitTests.s(c, "app_id"), UnitTests.s(c, "version"), UnitTests.s(a, "filename"), "any", "any",
                UnitTests.l(a, "size"), UnitTests.s(a, "sha512"), UnitTests.s(a, "signature"), UnitTests.s(a, "kid"), url, null);
    }

    private static List<String> listing(Path dir) throws Exception {
        try (Stream<Path> s = Files.list(dir)) {
            List<String> out = new ArrayList<>();
            s.forEach(p -> out.add(p.getFileName().toString()));
            out.sort(null);
            return out;
        }
    }

    static void run(TestRunner t) {
        t.test("unit/vectors: artifacts download or are refused for the reason each case names, nothing left behind", () -> {
            Map<String, Object> v = UnitTests.vector("artifacts.json");
            Map<String, byte[]> files = new ConcurrentHashMap<>();
            HttpServer server = serve(files);
            String base = "http://127.0.0.1:" + server.getAddress().getPort();
            Set<String> seen = new TreeSet<>();
            try {
                int i = 0;
                for (Map<String, Object> c : UnitTests.list(v.get("cases"))) {
                    String name = UnitTests.s(c, "name");
                    byte[] bytes = Base64.getDecoder().decode(UnitTests.s(c, "downloaded"));
                    String path = "/dl/" + i++;
                    files.put(path, bytes);
                    Path dir = Files.createTempDirectory("kw-java-update-");
                    Artifact a = artifact(c, base + path);
                    Path target = dir.resolve(a.filename());
                    long[] last = {-1, -1};
                    Client cl = client(v, a.appId(), base);
                    if ((Boolean) c.get("valid")) {
                        eq(target, cl.downloadUpdate(a, target, (got, total) -> { last[0] = got; last[1] = total; }), name);
                        check(Arrays.equals(bytes, Files.readAllBytes(target)), name + ": bytes");
                        eq(List.of(a.filename()), listing(dir), name + ": listing");
                        if (bytes.length > 0) eq(bytes.length + "/" + bytes.length, last[0] + "/" + last[1], name + ": progress");
                    } else {
                        KeywardenException e = TestRunner.throwsKw(() -> cl.downloadUpdate(a, target, null));
                        check(e instanceof UpdateException, name + ": " + e + " is not an UpdateException");
                        eq(UnitTests.s(c, "reason"), e.getReasonName(), name);
                        eq(ErrorCode.VERIFICATION, e.getCode(), name);
                        eq(List.of(), listing(dir), name + ": left behind");
                        seen.add(e.getReasonName());
                    }
                    Files.deleteIfExists(target);
                    Files.delete(dir);
                }
            } finally {
                server.stop(0);
            }
            eq(new TreeSet<>(((List<?>) v.get("reasons")).stream().map(Object::toString).toList()).toString(), seen.toString(), "reasons seen");
        });
        t.test("unit/updates: a refused link is download_failed (server, 403, its detail) and the target is kept", () -> {
            Map<String, Object> v = UnitTests.vector("artifacts.json");
            Map<String, Object> c = UnitTests.list(v.get("cases")).get(0);
            HttpServer server = serve(new ConcurrentHashMap<>());
            String base = "http://127.0.0.1:" + server.getAddress().getPort();
            Path dir = Files.createTempDirectory("kw-java-update-");
            try {
                Path target = dir.resolve("app.bin");
                Files.writeString(target, "the running version");
                KeywardenException e = TestRunner.throwsKw(() -> client(v, UnitTests.s(c, "app_id"), base).downloadUpdate(artifact(c, base + "/gone"), target, null));
                check(e instanceof UpdateException, e + " is not an UpdateException");
                eq(UpdateReason.DOWNLOAD_FAILED, ((UpdateException) e).getUpdateReason(), "reason");
                eq(ErrorCode.SERVER, e.getCode(), "code");
                eq(403, e.getStatus(), "status");
                eq("Download link expired", e.getDetail(), "detail");
                eq(List.of("app.bin"), listing(dir), "listing");
                eq("the running version", Files.readString(target), "target");
                Files.delete(target);
                Files.delete(dir);
            } finally {
                server.stop(0);
            }
        });
    }
}
