package io.keywarden;

/** Called by {@link Client#downloadUpdate} after every chunk written: bytes received so far, and the artifact's size. */
@FunctionalInterface
public interface DownloadProgress {
    void onProgress(long received, long total);
}
