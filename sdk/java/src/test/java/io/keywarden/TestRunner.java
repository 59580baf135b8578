package io.keywarden;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;

/** A tiny test runner (no JUnit offline): "ok   name (ms)", "FAIL name: why", "skip name: why", then a summary. */
final class TestRunner {
    /** A skipped test: thrown from a test body. */
    static final class Skip extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Skip(String why) {
            super(why);
        }
    }

    @FunctionalInterface
    interface Body {
        void run() throws Exception;
    }

    int passed;
    int failed;
    int skipped;
    final List<String> failures = new ArrayList<>();
    private final String filter = System.getenv("KW_ONLY");

    void test(String name, Body body) {
        if (filter != null && !filter.isEmpty() && !name.contains(filter)) return;
        long t0 = System.nanoTime();
        try {
            body.run();
            passed++;
            System.out.println("ok   " + name + " (" + (System.nanoTime() - t0) / 1_000_000 + " ms)");
        } catch (Skip s) {
            skipped++;
            System.out.println("skip " + name + ": " + s.getMessage());
        } catch (Throwable e) {
            failed++;
            failures.add(name);
            System.out.println("FAIL " + name + ": " + e);
            e.printStackTrace(System.out);
        }
        System.out.flush();
    }

    String summary() {
        return passed + " passed, " + failed + " failed, " + skipped + " skipped";
    }

    static void check(boolean cond, String what) {
        if (!cond) throw new AssertionError(what);
    }

    static void eq(Object expected, Object actual, String what) {
        if (!Objects.equals(expected, actual)) throw new AssertionError(what + ": expected <" + expected + "> but was <" + actual + ">");
    }

    /** The KeywardenException {@code body} throws; fails when it throws nothing or something else. */
    static KeywardenException throwsKw(Body body) {
        try {
            body.run();
        } catch (KeywardenException e) {
            return e;
        } catch (Throwable e) {
            throw new AssertionError("expected a KeywardenException, got " + e, e);
        }
        throw new AssertionError("expected a KeywardenException, nothing was thrown");
    }
}
