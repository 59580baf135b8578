package io.keywarden;

import java.util.Map;

/**
 * The grace period (docs/protocol.md 12.6): the latest verified grace_until, shared by a client and its heartbeat. Each
 * verified answer of license, login, register, trial, heartbeat/start or an accepted beat sets it (an answer without
 * one, or with one that is not a strict ISO 8601 UTC time, grants none); a verified refusal ends it at once.
 */
final class Grace {
    private Long untilMs;

    /** The unix milliseconds an answer grants, or null. */
    static Long untilOf(Map<String, Object> answer) {
        return Utc.parseMs(answer.get("grace_until"));
    }

    /** A verified answer that refuses: any 4xx but 429 (which says "not now", not "no"). */
    static boolean isRefusal(Integer status) {
        return status != null && status >= 400 && status < 500 && status != 429;
    }

    synchronized Long untilMs() {
        return untilMs;
    }

    synchronized void note(Map<String, Object> answer) {
        untilMs = untilOf(answer);
    }

    synchronized void end() {
        untilMs = null;
    }

    synchronized boolean active(double nowSeconds) {
        return untilMs != null && nowSeconds * 1000 < untilMs;
    }
}
