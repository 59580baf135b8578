package keywarden

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strings"
	"time"
)

// Machine identity and integrity helpers. The raw machine id never leaves the machine: what is sent is
// sha256("kwhwid1\n" + salt + "\n" + lower(trim(id))), so two vendors (different salts) cannot correlate
// their users and a leaked hwid does not reveal the id. The same formula in every SDK.

var (
	ioregUUID   = regexp.MustCompile(`"IOPlatformUUID"\s*=\s*"([^"]+)"`)
	machineGUID = regexp.MustCompile(`MachineGuid\s+REG_SZ\s+(\S+)`)
)

// command runs a platform tool for its output, bounded in time; "" when it fails.
func command(name string, args ...string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).Output()
	if err != nil {
		return ""
	}
	return string(out)
}

// RawMachineID is the platform's machine id, as every SDK reads it: Windows MachineGuid (the 64-bit
// registry view), macOS IOPlatformUUID, Linux /etc/machine-id.
func RawMachineID() string {
	switch runtime.GOOS {
	case "windows":
		if m := machineGUID.FindStringSubmatch(command("reg", "query", `HKLM\SOFTWARE\Microsoft\Cryptography`, "/v", "MachineGuid", "/reg:64")); m != nil {
			return m[1]
		}
		return ""
	case "darwin":
		if m := ioregUUID.FindStringSubmatch(command("ioreg", "-rd1", "-c", "IOPlatformExpertDevice")); m != nil {
			return m[1]
		}
		return ""
	}
	for _, f := range []string{"/etc/machine-id", "/var/lib/dbus/machine-id"} {
		if b, err := os.ReadFile(f); err == nil {
			if s := strings.TrimSpace(string(b)); s != "" {
				return s
			}
		}
	}
	return ""
}

// HWIDFor is the hwid formula on its own (64 lower-case hex characters).
func HWIDFor(salt, rawID string) string {
	h := sha256.Sum256([]byte("kwhwid1\n" + salt + "\n" + strings.ToLower(strings.TrimSpace(rawID))))
	return hex.EncodeToString(h[:])
}

// MachineHWID is a stable, salted hardware id (the client passes its api_key as salt). Without a platform
// id it falls back to host name, OS and architecture, which is weaker: pass your own hwid then.
func MachineHWID(salt string) string {
	raw := RawMachineID()
	if raw == "" {
		host, _ := os.Hostname()
		raw = "fallback:" + host + ":" + runtime.GOOS + ":" + runtime.GOARCH
	}
	return HWIDFor(salt, raw)
}

// SelfHash is the SHA-256 (lower-case hex) of the running executable, or of file when given.
func SelfHash(file string) (string, error) {
	if file == "" {
		exe, err := os.Executable()
		if err != nil {
			return "", err
		}
		file = exe
	}
	f, err := os.Open(file)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// DebuggerAttached reports a tracer (gdb, dlv, strace) on Linux through /proc/self/status TracerPid.
// Heartbeats report it as debugger_detected.
func DebuggerAttached() bool {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if line := s.Text(); strings.HasPrefix(line, "TracerPid:") {
			v := strings.TrimSpace(strings.TrimPrefix(line, "TracerPid:"))
			return v != "" && v != "0"
		}
	}
	return false
}
