#!/usr/bin/env bash
# Builds the Keywarden C# SDK with Mono's compiler (no dotnet SDK, no NuGet needed):
#   Keywarden.dll         the library (the same sources Keywarden.csproj builds for netstandard2.0)
#   Keywarden.Tests.exe   the test program (unit tests; integration tests when KW_BASE_URL is set)
#   Activate.exe          the example program
# Usage: bash build.sh [output-dir]     (default: ./build next to this script)
# Needs: mcs and mono (Debian/Ubuntu: apt install mono-mcs mono-runtime libmono-system-net-http4.0-cil,
# or simply mono-complete) and, at run time, libsodium (apt install libsodium23).
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${1:-$here/build}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

if ! command -v mcs >/dev/null 2>&1; then
  echo "build.sh: mcs not found (install mono-mcs or mono-complete, or build Keywarden.csproj with dotnet)" >&2
  exit 2
fi

# -warnaserror keeps the library clean; CS1591 (undocumented public member) is a warning we keep at zero too.
common=(-nologo -debug -optimize+ -warn:4 -warnaserror -r:System.Net.Http.dll)

mcs "${common[@]}" -target:library -out:"$out/Keywarden.dll" -doc:"$out/Keywarden.xml" "$here"/src/*.cs
mcs "${common[@]}" -target:exe -out:"$out/Keywarden.Tests.exe" -r:"$out/Keywarden.dll" "$here"/tests/*.cs
mcs "${common[@]}" -target:exe -out:"$out/Activate.exe" -r:"$out/Keywarden.dll" "$here"/examples/Activate.cs

echo "built into $out:"
echo "  mono $out/Keywarden.Tests.exe        # unit tests (integration tests need KW_BASE_URL, see README)"
echo "  mono $out/Activate.exe <license-key> [keywarden.json]"
