package io.keywarden;

final class IntegrationTests {
    private IntegrationTests() {}

    static void run(TestRunner t) {
    }
}
