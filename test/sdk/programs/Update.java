// The update program of test/helpers/sdk-updates.ts (its protocol is described there), with the Java SDK.
//   java -cp keywarden.jar Update.java <keywarden.json> <license key> <hwid> <dir>
import io.keywarden.Artifact;
import io.keywarden.Client;
import io.keywarden.Json;
import io.keywarden.UpdateException;
import io.keywarden.UpdateOffer;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Stream;

public class Update {
    static void say(Map<String, Object> m) {
        System.out.println(Json.write(m));
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        String env = System.getenv("KW_DL_TAMPER_URLS");
        Map<String, Object> tamper = new TreeMap<>(Json.parseObject(env == null ? "{}" : env));
        Path dir = Paths.get(args[3]);
        Client c = Client.fromConfig(args[0]);
        c.init();
        c.activateLicense(args[1], args[2]);
        Map<String, Object> none = new LinkedHashMap<>();
        none.put("step", "none");
        UpdateOffer same = c.checkUpdate("1.1.0", "stable", "linux", "x64");
        none.put("upgrade", same == null ? null : same.version());
        say(none);
        UpdateOffer offer = c.checkUpdate("1.0.0", "stable", "linux", "x64");
        List<Object> listed = new ArrayList<>();
        for (Artifact a : offer.artifacts())
            listed.add(Map.of("filename", a.filename(), "platform", a.platform(), "arch", a.arch(), "size", a.size()));
        say(Map.of("step", "offer", "version", offer.version(), "channel", offer.channel(), "artifacts", listed));
        Artifact art = offer.artifacts().get(0);
        List<long[]> seen = new ArrayList<>();
        Path written = c.downloadUpdate(art, dir.resolve("app.bin"), (got, total) -> seen.add(new long[] {got, total}));
        boolean monotonic = true;
        for (int i = 1; i < seen.size(); i++) monotonic &= seen.get(i)[0] > seen.get(i - 1)[0];
        long[] last = seen.get(seen.size() - 1);
        say(Map.of("step", "download", "path", written.toString(), "calls", seen.size(), "last", List.of(last[0], last[1]), "monotonic", monotonic));
        for (Map.Entry<String, Object> m : tamper.entrySet()) {
            Path d = dir.resolve(m.getKey());
            Files.createDirectories(d);
            URI u = URI.create(art.url());
            String path = u.getRawPath() + (u.getRawQuery() != null ? "?" + u.getRawQuery() : "");
            Map<String, Object> line = new LinkedHashMap<>();
            line.put("step", "tamper");
            line.put("mode", m.getKey());
            try {
                c.downloadUpdate(art.withUrl(m.getValue() + path), d.resolve("app.bin"), null);
                line.put("error", null);
            } catch (UpdateException e) {
                List<String> files = new ArrayList<>();
                try (Stream<Path> s = Files.list(d)) {
                    s.forEach(p -> files.add(p.getFileName().toString()));
                }
                files.sort(null);
                line.put("error", "UpdateException");
                line.put("reason", e.getReasonName());
                line.put("code", e.getCode().toString());
                line.put("files", files);
            }
            say(line);
        }
        System.exit(0);
    }
}
