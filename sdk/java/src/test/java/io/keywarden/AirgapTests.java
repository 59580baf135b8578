package io.keywarden;

import static io.keywarden.TestRunner.check;
import static io.keywarden.TestRunner.eq;
import static io.keywarden.TestRunner.throwsKw;

import java.net.URI;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * Air-gapped machines against the real server and real relay processes prepared by test/helpers/airgap-harness.ts
 * (KW_AIRGAP_*): an activation request answered through the dashboard route and completed, an answer to an older
 * request refused, and a seat leased from a relay, renewed (by hand and by its own thread), released, refused when
 * every seat is taken, and refused when the relay serves a pool signed by another key.
 */
final class AirgapTests {
    private AirgapTests() {}

    private static int nextKey;

    static void requireAirgap() {
        String broken = System.getenv("KW_AIRGAP_ERROR");
        if (broken != null && !broken.isEmpty()) throw new AssertionError("the harness could not prepare the relays: " + broken);
        String relay = System.getenv("KW_AIRGAP_RELAY_URL");
        if (relay == null || relay.isEmpty()) {
            if ("1".equals(System.getenv("KW_REQUIRE_AIRGAP"))) throw new AssertionError("KW_REQUIRE_AIRGAP=1 but the server has no offline-activations route");
            throw new TestRunner.Skip("air-gapped pending: the server has no /api/apps/{id}/offline-activations");
        }
    }

    static synchronized String key() {
        String[] all = IntegrationTests.env("KW_AIRGAP_KEYS").split(",");
        if (nextKey >= all.length) throw new AssertionError("out of KW_AIRGAP_KEYS");
        return all[nextKey++];
    }

    static Client client(String name, ClientOptions.Builder o) throws Exception {
        Path dir = Files.createTempDirectory("kw-java-airgap-");
        return Client.fromConfig(IntegrationTests.env("KW_AIRGAP_CONFIG"), o.stateFile(dir.resolve(name + ".json")).build());
    }

    /** The operator's side: the dashboard route answers the request. */
    static String answer(String request) throws Exception {
        Object r = IntegrationTests.owner("POST", "/api/apps/" + IntegrationTests.env("KW_AIRGAP_APP_ID") + "/offline-activations",
                Map.of("request", request));
        return (String) Json.obj(r).get("response");
    }

    static long inUse() throws Exception {
        HttpResponse<String> r = IntegrationTests.HTTP.send(HttpRequest.newBuilder(URI.create(IntegrationTests.env("KW_AIRGAP_RELAY_URL") + "/relay/v1/status"))
                .timeout(Duration.ofSeconds(30)).build(), HttpResponse.BodyHandlers.ofString());
        return (Long) Json.obj(Json.parse(r.body())).get("in_use");
    }

    static void run(TestRunner t) {
        IntegrationTests.integration(t, "airgap: a request answered through the dashboard completes; a later start loads the answer", () -> {
            requireAirgap();
            Client c = client("req-a", ClientOptions.builder());
            String hwid = "java-airgap-machine-a";
            String req = c.activationRequest(key(), hwid, Map.of("cpu", "c1", "disk", "d1"));
            check(req.startsWith("kwreq1."), "kwreq1.");
            check(Files.exists(c.getRequestFile()), "the nonce is kept on disk");
            String response = answer(req);
            OfflineLicense lic = c.completeActivation(response, hwid);
            eq(IntegrationTests.env("KW_AIRGAP_APP_ID"), lic.appId(), "app_id");
            eq(hwid, lic.hwid(), "hwid");
            eq(3L, lic.level(), "level");
            Client later = Client.fromConfig(IntegrationTests.env("KW_AIRGAP_CONFIG"), ClientOptions.builder().stateFile(c.getStateFile()).build());
            eq(lic.licenseId(), later.loadOffline(response, hwid).licenseId(), "a later start");
        });
        IntegrationTests.integration(t, "airgap: an answer to an older request is wrong_request; another machine's is wrong_hwid", () -> {
            requireAirgap();
            Client c = client("req-b", ClientOptions.builder());
            String hwid = "java-airgap-machine-b";
            String k = key();
            String old = answer(c.activationRequest(k, hwid, null));
            c.activationRequest(k, hwid, null);
            KeywardenException e = throwsKw(() -> c.completeActivation(old, hwid));
            eq(ErrorCode.OFFLINE_INVALID, e.getCode(), "code");
            eq("wrong_request", e.getReasonName(), "reason");
            Client other = client("req-b-other", ClientOptions.builder());
            String foreign = answer(other.activationRequest(key(), "java-airgap-other", null));
            eq("wrong_hwid", throwsKw(() -> other.completeActivation(foreign, hwid)).getReasonName(), "another machine");
        });
        IntegrationTests.integration(t, "airgap: a seat is leased, renewed and released at the relay", () -> {
            requireAirgap();
            Client c = client("relay-a", ClientOptions.builder());
            long before = inUse();
            SeatLease lease = c.leaseSeat(IntegrationTests.env("KW_AIRGAP_RELAY_URL"), "java-relay-a");
            try {
                check(lease.active(), "active");
                eq(IntegrationTests.env("KW_AIRGAP_APP_ID"), lease.pool().appId(), "pool app");
                eq(Long.parseLong(IntegrationTests.env("KW_AIRGAP_SEATS")), lease.pool().seats(), "seats");
                eq(before + 1, inUse(), "in use");
                java.time.Instant first = lease.expiresAt();
                Thread.sleep(1100);
                lease.renew();
                check(lease.expiresAt().isAfter(first), "renewed");
                eq(1, lease.renewals(), "renewals");
            } finally {
                lease.release();
            }
            check(!lease.active(), "released");
            eq(before, inUse(), "in use after");
        });
        IntegrationTests.integration(t, "airgap: the lease renews itself before it expires", () -> {
            requireAirgap();
            // The client's clock runs 14 min 50 s ahead: the 15-minute lease has 10 s left, renewed at half that.
            Client c = client("relay-b", ClientOptions.builder().clock(() -> System.currentTimeMillis() + 890_000));
            try (SeatLease lease = c.leaseSeat(IntegrationTests.env("KW_AIRGAP_RELAY_URL"), "java-relay-b")) {
                for (int i = 0; i < 300 && lease.renewals() == 0; i++) Thread.sleep(200);
                check(lease.renewals() >= 1, "renewed by its own thread");
                check(lease.lost() == null, "not lost");
            }
        });
        IntegrationTests.integration(t, "airgap: every seat taken is session_limit until one is released", () -> {
            requireAirgap();
            Client c = client("relay-c", ClientOptions.builder());
            String url = IntegrationTests.env("KW_AIRGAP_RELAY_URL");
            List<SeatLease> held = new ArrayList<>();
            try {
                for (int i = 0; i < Integer.parseInt(IntegrationTests.env("KW_AIRGAP_SEATS")); i++) held.add(c.leaseSeat(url, "java-relay-seat-" + i));
                KeywardenException e = throwsKw(() -> c.leaseSeat(url, "java-relay-one-too-many"));
                eq(ErrorCode.SESSION_LIMIT, e.getCode(), "code");
                eq(409, e.getStatus(), "status");
                held.get(held.size() - 1).release();
                held.add(c.leaseSeat(url, "java-relay-one-too-many"));
            } finally {
                for (SeatLease l : held) l.release();
            }
        });
        IntegrationTests.integration(t, "airgap: a relay serving a pool signed by another key is refused (bad_signature)", () -> {
            requireAirgap();
            Client c = client("relay-d", ClientOptions.builder());
            KeywardenException e = throwsKw(() -> c.leaseSeat(IntegrationTests.env("KW_AIRGAP_FORGED_RELAY_URL"), "java-relay-forged"));
            eq(ErrorCode.OFFLINE_INVALID, e.getCode(), "code");
            eq("bad_signature", e.getReasonName(), "reason");
            eq(List.of(), c.getEntitlements(), "no entitlements");
        });
    }
}
