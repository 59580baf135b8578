// Expiry while running (docs/protocol.md 12.8) with the Java SDK: activates a key, beats on the realtime channel and
// reports what the heartbeat tells (protocol: test/helpers/sdk-expiry.ts). Run in source-file mode:
//   java -cp keywarden.jar ExpiryWatch.java <keywarden.json> <license key> <hwid>
import io.keywarden.Client;
import io.keywarden.Heartbeat;
import io.keywarden.HeartbeatEvent;
import io.keywarden.HeartbeatOptions;
import java.time.Duration;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

public final class ExpiryWatch {
    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) {
        Client c = Client.fromConfig(args[0]);
        c.init();
        c.activateLicense(args[1], args[2]);
        CountDownLatch first = new CountDownLatch(1);
        Heartbeat hb = c.prepareHeartbeat(HeartbeatOptions.builder().systemId("expiry-watch-java").codeHash("abcdef0123456789")
                .interval(Duration.ofMillis(300)).debuggerDetected(() -> false).build());
        hb.onBeat(b -> {
            say("beat " + b.index() + " " + System.currentTimeMillis());
            first.countDown();
        });
        hb.onExpired(e -> say("expired " + System.currentTimeMillis()));
        hb.onKilled(k -> say("killed " + k.error().getCode().wire() + " " + System.currentTimeMillis()));
        hb.onRevoked(r -> say("revoked " + r.reason() + " " + System.currentTimeMillis()));
        hb.start();
        boolean started;
        try {
            started = first.await(10, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            started = false;
        }
        if (!started) {
            say("no first beat");
            Runtime.getRuntime().halt(1);
        }
        say("ready " + (hb.isOnChannel() ? 1 : 0));
        boolean ended = hb.await(30, TimeUnit.SECONDS);
        say("state " + hb.getState().wire());
        if (!ended) hb.stop();
        Runtime.getRuntime().halt(ended ? 0 : 1);
    }
}
