package io.keywarden;

/** What init answers: the application's name, version, hwid_lock and the new session. */
public record AppInfo(String name, String version, boolean hwidLock, String session) {}
