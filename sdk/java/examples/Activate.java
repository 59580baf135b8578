import io.keywarden.AppInfo;
import io.keywarden.Client;
import io.keywarden.Heartbeat;
import io.keywarden.HeartbeatEvent;
import io.keywarden.HeartbeatOptions;
import io.keywarden.KeywardenException;
import io.keywarden.LicenseInfo;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * Activates a license key, beats three times and stops:
 *   java -cp build/keywarden.jar:build/examples Activate <LICENSE-KEY> [keywarden.json]
 * Exit code 0 on success, 1 on a Keywarden error (printed with its code).
 */
public final class Activate {
    public static void main(String[] args) throws InterruptedException {
        if (args.length < 1) {
            System.err.println("usage: Activate <LICENSE-KEY> [keywarden.json]");
            System.exit(2);
        }
        String config = args.length > 1 ? args[1] : "keywarden.json";
        try {
            Client client = Client.fromConfig(config);
            AppInfo app = client.init();
            System.out.println("connected to " + app.name() + " (version " + app.version() + ")");
            LicenseInfo lic = client.activateLicense(args[0]);
            System.out.println("license ok: level " + lic.level() + ", expires " + (lic.expiresAt() != null ? lic.expiresAt() : "never"));
            CountDownLatch three = new CountDownLatch(3);
            Heartbeat hb = client.prepareHeartbeat(HeartbeatOptions.builder()
                    .interval(Duration.ofMillis(500))
                    .reauth(true)
                    .build());
            hb.onBeat(b -> {
                System.out.println("beat " + b.index() + " verified (count " + b.count() + ")");
                three.countDown();
            });
            hb.onKilled(k -> {
                System.out.println("killed: " + k.error().getCode() + ": " + k.error().getMessage());
                while (three.getCount() > 0) three.countDown();
            });
            hb.start(); // listeners attached before the first beat
            boolean done = three.await(30, TimeUnit.SECONDS);
            boolean killed = !hb.isRunning();
            hb.stop();
            System.out.println("heartbeat stopped");
            System.exit(done && !killed ? 0 : 1);
        } catch (KeywardenException e) {
            System.out.println("failed: " + e.getCode() + ": " + e.getMessage());
            if (e.getLatestVersion() != null) System.out.println("download " + e.getLatestVersion() + " from " + e.getUpdateUrl());
            System.exit(1);
        }
    }
}
