// Machine identity and integrity helpers. The raw machine id never leaves the machine: what is sent
// is sha256("kwhwid1\n" + salt + "\n" + id), so two vendors (different salts) cannot correlate their
// users and a leaked hwid does not reveal the id. Same derivation in every Keywarden SDK.
#include <sodium.h>

#include <climits>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "crypto.hpp"
#include "internal.hpp"

#if defined(_WIN32)
#ifndef WIN32_LEAN_AND_MEAN
#define WIN32_LEAN_AND_MEAN
#endif
#ifndef NOMINMAX
#define NOMINMAX
#endif
#include <windows.h>
#elif defined(__APPLE__)
#include <CoreFoundation/CoreFoundation.h>
#include <IOKit/IOKitLib.h>
#include <mach-o/dyld.h>
#include <sys/proc.h>
#include <sys/sysctl.h>
#include <sys/types.h>
#include <unistd.h>
#else
#include <limits.h>
#include <unistd.h>
#endif

namespace keywarden {

namespace {

#if defined(_WIN32)
std::string narrow(const std::wstring& w) {
  if (w.empty()) return {};
  int n = WideCharToMultiByte(CP_UTF8, 0, w.data(), static_cast<int>(w.size()), nullptr, 0, nullptr, nullptr);
  std::string out(static_cast<std::size_t>(n > 0 ? n : 0), '\0');
  if (n > 0) WideCharToMultiByte(CP_UTF8, 0, w.data(), static_cast<int>(w.size()), &out[0], n, nullptr, nullptr);
  return out;
}
#endif

std::string readFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  if (in && std::getline(in, line)) return detail::trimAscii(line);
  return {};
}

std::string hostName() {
#if defined(_WIN32)
  wchar_t buf[256];
  DWORD n = 256;
  return GetComputerNameW(buf, &n) ? narrow(std::wstring(buf, n)) : std::string();
#else
  char buf[256] = {0};
  return gethostname(buf, sizeof buf - 1) == 0 ? std::string(buf) : std::string();
#endif
}

std::string platformName() {
#if defined(_WIN32)
  return "win32";
#elif defined(__APPLE__)
  return "darwin";
#else
  return "linux";
#endif
}

std::string executablePath() {
#if defined(_WIN32)
  std::vector<wchar_t> buf(MAX_PATH);
  for (;;) {
    DWORD n = GetModuleFileNameW(nullptr, buf.data(), static_cast<DWORD>(buf.size()));
    if (n == 0) return {};
    if (n < buf.size()) return narrow(std::wstring(buf.data(), n));
    buf.resize(buf.size() * 2);
  }
#elif defined(__APPLE__)
  uint32_t size = 0;
  _NSGetExecutablePath(nullptr, &size);
  std::vector<char> buf(size + 1, '\0');
  if (_NSGetExecutablePath(buf.data(), &size) != 0) return {};
  char resolved[PATH_MAX];
  return realpath(buf.data(), resolved) ? std::string(resolved) : std::string(buf.data());
#else
  return "/proc/self/exe";  // readable even when the binary was replaced or deleted after start
#endif
}

}  // namespace

std::string rawMachineId() {
#if defined(_WIN32)
  // KEY_WOW64_64KEY: a 32-bit program must read the 64-bit view, where MachineGuid lives.
  HKEY key = nullptr;
  if (RegOpenKeyExW(HKEY_LOCAL_MACHINE, L"SOFTWARE\\Microsoft\\Cryptography", 0, KEY_QUERY_VALUE | KEY_WOW64_64KEY, &key) !=
      ERROR_SUCCESS)
    return {};
  wchar_t buf[128] = {0};
  DWORD size = sizeof buf - sizeof(wchar_t);  // keep room for a terminator RegQueryValueExW may not write
  DWORD type = 0;
  LSTATUS rc = RegQueryValueExW(key, L"MachineGuid", nullptr, &type, reinterpret_cast<LPBYTE>(buf), &size);
  RegCloseKey(key);
  if (rc != ERROR_SUCCESS || type != REG_SZ) return {};
  return detail::trimAscii(narrow(std::wstring(buf, size / sizeof(wchar_t)).c_str()));
#elif defined(__APPLE__)
  std::string out;
  io_service_t svc = IOServiceGetMatchingService(MACH_PORT_NULL, IOServiceMatching("IOPlatformExpertDevice"));
  if (!svc) return out;
  CFTypeRef value = IORegistryEntryCreateCFProperty(svc, CFSTR("IOPlatformUUID"), kCFAllocatorDefault, 0);
  if (value) {
    char buf[128] = {0};
    if (CFGetTypeID(value) == CFStringGetTypeID() &&
        CFStringGetCString(static_cast<CFStringRef>(value), buf, sizeof buf, kCFStringEncodingUTF8))
      out = buf;
    CFRelease(value);
  }
  IOObjectRelease(svc);
  return detail::trimAscii(out);
#else
  for (const char* f : {"/etc/machine-id", "/var/lib/dbus/machine-id"}) {
    std::string v = readFirstLine(f);
    if (!v.empty()) return v;
  }
  return {};
#endif
}

std::string machineHwid(const std::string& salt) {
  detail::ensureSodium();
  std::string id = detail::lowerAscii(detail::trimAscii(rawMachineId()));
  // Containers often lack /etc/machine-id: weaker, but stable for one host. Pass your own hwid if that matters.
  if (id.empty()) id = "fallback:" + hostName() + ":" + platformName();
  return detail::sha256Hex("kwhwid1\n" + salt + "\n" + id);
}

std::string fileSha256(const std::string& path) {
  detail::ensureSodium();
#if defined(_WIN32)
  // Paths are UTF-8 in this API; MSVC's ifstream takes the wide form for non-ASCII names.
  int n = MultiByteToWideChar(CP_UTF8, 0, path.c_str(), -1, nullptr, 0);
  std::wstring wide(static_cast<std::size_t>(n > 0 ? n : 1), L'\0');
  if (n > 0) MultiByteToWideChar(CP_UTF8, 0, path.c_str(), -1, &wide[0], n);
  std::ifstream in(wide.c_str(), std::ios::binary);
#else
  std::ifstream in(path, std::ios::binary);
#endif
  if (!in) throw Error(ErrorCode::server, "cannot read " + path + " to hash it");
  crypto_hash_sha256_state st;
  crypto_hash_sha256_init(&st);
  std::vector<char> buf(1 << 16);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    std::streamsize got = in.gcount();
    if (got > 0) crypto_hash_sha256_update(&st, reinterpret_cast<const unsigned char*>(buf.data()), static_cast<unsigned long long>(got));
  }
  if (in.bad()) throw Error(ErrorCode::server, "reading " + path + " failed");
  std::string raw(crypto_hash_sha256_BYTES, '\0');
  crypto_hash_sha256_final(&st, reinterpret_cast<unsigned char*>(&raw[0]));
  return detail::toHex(raw);
}

std::string selfHash() {
  std::string exe = executablePath();
  if (exe.empty()) throw Error(ErrorCode::server, "cannot locate the running executable");
  return fileSha256(exe);
}

bool debuggerAttached() {
#if defined(_WIN32)
  return IsDebuggerPresent() != 0;
#elif defined(__APPLE__)
  int mib[4] = {CTL_KERN, KERN_PROC, KERN_PROC_PID, getpid()};
  struct kinfo_proc info {};
  size_t size = sizeof info;
  if (sysctl(mib, 4, &info, &size, nullptr, 0) != 0) return false;
  return (info.kp_proc.p_flag & P_TRACED) != 0;
#else
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("TracerPid:", 0) == 0) return std::atoi(line.c_str() + 10) != 0;
  }
  return false;
#endif
}

}  // namespace keywarden
