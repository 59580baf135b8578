package io.keywarden;

/** A verified heartbeat/start: the session, the first token (its proof checked) and the server's beat interval (s). */
public record HeartbeatStart(String session, String token, long beatInterval) {}
