package io.keywarden;

/**
 * The test program: unit tests (every vector), then the integration tests when KW_BASE_URL names a server prepared
 * by test/helpers/sdk-harness.ts. Exit 0 when nothing failed. Prints "N passed, M failed, K skipped".
 */
public final class Main {
    private Main() {}

    public static void main(String[] args) throws Exception {
        TestRunner t = new TestRunner();
        boolean onlyUnit = args.length > 0 && args[0].equals("unit");
        UnitTests.run(t);
        UpdateTests.run(t);
        if (!onlyUnit) IntegrationTests.run(t);
        System.out.println(t.summary());
        if (!t.failures.isEmpty()) System.out.println("failed: " + String.join(" | ", t.failures));
        System.out.flush();
        Runtime.getRuntime().halt(t.failed == 0 ? 0 : 1); // daemon threads of finished heartbeats need no join
    }
}
