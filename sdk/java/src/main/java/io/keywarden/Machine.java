package io.keywarden;

import java.io.IOException;
import java.io.InputStream;
import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.security.MessageDigest;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.TimeUnit;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * Machine identity and integrity helpers. The raw machine id never leaves the machine: what is sent is
 * {@code sha256("kwhwid1\n" + salt + "\n" + lower(trim(id)))}, the same formula in every SDK.
 */
public final class Machine {
    private Machine() {}

    /** The platform's machine id: Windows MachineGuid, Linux /etc/machine-id, macOS IOPlatformUUID; "" if none. */
    public static String rawMachineId() {
        String os = System.getProperty("os.name", "").toLowerCase(Locale.ROOT);
        try {
            if (os.contains("win")) {
                String out = run("reg", "query", "HKLM\\SOFTWARE\\Microsoft\\Cryptography", "/v", "MachineGuid", "/reg:64");
                Matcher m = Pattern.compile("MachineGuid\\s+REG_SZ\\s+(\\S+)").matcher(out);
                return m.find() ? m.group(1) : "";
            }
            if (os.contains("mac")) {
                Matcher m = Pattern.compile("\"IOPlatformUUID\"\\s*=\\s*\"([^\"]+)\"").matcher(run("ioreg", "-rd1", "-c", "IOPlatformExpertDevice"));
                return m.find() ? m.group(1) : "";
            }
            for (String f : List.of("/etc/machine-id", "/var/lib/dbus/machine-id")) {
                Path p = Paths.get(f);
                if (Files.isReadable(p)) {
                    String v = new String(Files.readAllBytes(p), StandardCharsets.UTF_8).trim();
                    if (!v.isEmpty()) return v;
                }
            }
        } catch (IOException | RuntimeException e) {
            return "";
        }
        return "";
    }

    private static String run(String... cmd) throws IOException {
        Process p = new ProcessBuilder(cmd).redirectErrorStream(true).start();
        try (InputStream in = p.getInputStream()) {
            byte[] out = in.readNBytes(1 << 16);
            p.waitFor(5, TimeUnit.SECONDS);
            return new String(out, StandardCharsets.UTF_8);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "";
        } finally {
            p.destroy();
        }
    }

    /** The hwid formula on its own (64 lower-case hex characters). */
    public static String hwidFor(String salt, String rawId) {
        return Crypto.sha256Hex(Crypto.utf8("kwhwid1\n" + salt + "\n" + rawId.trim().toLowerCase(Locale.ROOT)));
    }

    /**
     * A stable, salted hardware id (the client passes its api_key as salt). Without a platform id (a container
     * without /etc/machine-id) it falls back to host name, OS and architecture: pass your own hwid if that matters.
     */
    public static String machineHwid(String salt) {
        String raw = rawMachineId().trim();
        if (raw.isEmpty()) {
            String host;
            try {
                host = InetAddress.getLocalHost().getHostName();
            } catch (IOException e) {
                host = "";
            }
            raw = "fallback:" + host + ":" + System.getProperty("os.name") + ":" + System.getProperty("os.arch");
        }
        return hwidFor(salt, raw);
    }

    /** SHA-256 (lower-case hex) of a file. */
    public static String fileHash(Path file) {
        try (InputStream in = Files.newInputStream(file)) {
            MessageDigest md = MessageDigest.getInstance("SHA-256");
            byte[] buf = new byte[1 << 16];
            int n;
            while ((n = in.read(buf)) > 0) md.update(buf, 0, n);
            return Crypto.toHex(md.digest());
        } catch (IOException | java.security.GeneralSecurityException e) {
            throw new KeywardenException(ErrorCode.SERVER, "cannot hash " + file + ": " + e.getMessage());
        }
    }

    /**
     * SHA-256 of the running program: the jar (or class folder) this SDK was loaded from when it is a file, else the
     * java executable. For code_hash / binary_hash.
     */
    public static String selfHash() {
        try {
            java.security.CodeSource cs = Machine.class.getProtectionDomain().getCodeSource();
            if (cs != null && cs.getLocation() != null) {
                Path p = Paths.get(cs.getLocation().toURI());
                if (Files.isRegularFile(p)) return fileHash(p);
            }
        } catch (java.net.URISyntaxException | RuntimeException e) {
            // fall through
        }
        String exe = ProcessHandle.current().info().command().orElse(null);
        if (exe != null && Files.isRegularFile(Paths.get(exe))) return fileHash(Paths.get(exe));
        return Crypto.sha256Hex(Crypto.utf8(System.getProperty("java.home", "java")));
    }

    /**
     * True when a debugger is attached: a JDWP agent on the command line (IDE debugging), or a native tracer (Linux
     * TracerPid). Heartbeats report it as debugger_detected.
     */
    public static boolean debuggerAttached() {
        try {
            for (String arg : ManagementFactory.getRuntimeMXBean().getInputArguments()) {
                if (arg.startsWith("-agentlib:jdwp") || arg.startsWith("-Xrunjdwp") || arg.startsWith("-Xdebug")) return true;
            }
        } catch (RuntimeException | Error e) {
            // no management (a stripped runtime): ignore
        }
        try {
            Path status = Paths.get("/proc/self/status");
            if (Files.isReadable(status)) {
                for (String line : Files.readAllLines(status, StandardCharsets.US_ASCII)) {
                    if (line.startsWith("TracerPid:")) return !line.substring(10).trim().equals("0");
                }
            }
        } catch (IOException | RuntimeException e) {
            return false;
        }
        return false;
    }
}
