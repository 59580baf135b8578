package io.keywarden;

import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;

/**
 * Heartbeats driven line by line from stdin, each event printed on stdout, for the scenarios a test drives from
 * outside (test/sdk/java.test.ts: a server restarted with SIGTERM and SIGKILL, a key expiring while running):
 * <pre>
 *   start NAME CONFIG KEY HWID on|off INTERVAL_MS   init, activate, heartbeat ("NAME started expires=...")
 *   activate NAME                                  the same activation again on that client ("NAME activated expires=...")
 *   state NAME                                     "NAME state STATE beats=N recovered=N token=T"
 *   stop NAME, quit
 * </pre>
 * Events: "NAME Beat index count channel", "NAME Recovered", "NAME Killed code", "NAME Expired code",
 * "NAME Revoked reason", "NAME Degraded code lost", "NAME ChannelState state code", "NAME Offline", ...
 */
public final class Scenario {
    private Scenario() {}

    private record Run(Client client, Heartbeat hb, String key, String hwid, int[] recovered) {}

    private static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }

    public static void main(String[] args) throws Exception {
        Map<String, Run> runs = new HashMap<>();
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while ((line = in.readLine()) != null) {
            String[] a = line.trim().split("\\s+");
            try {
                switch (a[0]) {
                    case "start" -> {
                        String name = a[1];
                        Client c = Client.fromConfig(a[2]);
                        c.init();
                        LicenseInfo lic = c.activateLicense(a[3], a[4]);
                        int[] recovered = {0};
                        Heartbeat[] self = new Heartbeat[1];
                        Heartbeat hb = c.prepareHeartbeat(HeartbeatOptions.builder().systemId(a[4]).codeHash("abcdef0123456789")
                                .interval(Duration.ofMillis(Long.parseLong(a[6]))).debuggerDetected(() -> false).reauth(true)
                                .channel(a[5].equals("on")).listener(e -> say(name + " " + describe(e, self[0], recovered))).build());
                        self[0] = hb;
                        runs.put(name, new Run(c, hb, a[3], a[4], recovered));
                        say(name + " started expires=" + lic.expiresAt());
                        hb.start();
                    }
                    case "activate" -> {
                        Run r = runs.get(a[1]);
                        say(a[1] + " activated expires=" + r.client().activateLicense(r.key(), r.hwid()).expiresAt());
                    }
                    case "state" -> {
                        Run r = runs.get(a[1]);
                        say(a[1] + " state " + r.hb().getState() + " beats=" + r.hb().getBeatCount() + " recovered=" + r.recovered()[0]
                                + " token=" + r.hb().currentToken());
                    }
                    case "stop" -> {
                        runs.get(a[1]).hb().stop();
                        say(a[1] + " stopped");
                    }
                    case "quit" -> {
                        say("bye");
                        Runtime.getRuntime().halt(0);
                    }
                    default -> say("error unknown command " + a[0]);
                }
            } catch (RuntimeException e) {
                say("error " + line + ": " + e);
            }
        }
        Runtime.getRuntime().halt(0);
    }

    private static String describe(HeartbeatEvent e, Heartbeat hb, int[] recovered) {
        if (e instanceof HeartbeatEvent.Beat b) return "Beat " + b.index() + " " + b.count() + " " + (hb != null && hb.isOnChannel());
        if (e instanceof HeartbeatEvent.Recovered) {
            recovered[0]++;
            return "Recovered";
        }
        if (e instanceof HeartbeatEvent.Killed k) return "Killed " + k.error().getCode();
        if (e instanceof HeartbeatEvent.Expired x) return "Expired " + x.error().getCode();
        if (e instanceof HeartbeatEvent.Revoked r) return "Revoked " + r.reason();
        if (e instanceof HeartbeatEvent.Degraded d) return "Degraded " + d.error().getCode() + " " + d.lost();
        if (e instanceof HeartbeatEvent.ChannelState c) return "ChannelState " + c.state() + " " + c.code();
        return e.getClass().getSimpleName();
    }
}
