#!/usr/bin/env bash
# Builds the Keywarden Java SDK with the JDK alone (javac + jar, JDK 17+; no Maven, no network):
#   build/keywarden.jar          the library (what a program puts on its class path)
#   build/keywarden-tests.jar    the test program (unit tests over sdk/vectors; integration tests with KW_BASE_URL)
#   build/examples/              the example program, compiled against the library
# Usage: bash build.sh [output directory, default ./build]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:-$here/build}" && cd "${1:-$here/build}" && pwd)"
command -v javac >/dev/null || { echo "build.sh: javac not found (Debian: apt install default-jdk-headless)" >&2; exit 1; }
rm -rf "$out/classes" "$out/test-classes" "$out/examples"
mkdir -p "$out/classes" "$out/test-classes" "$out/examples"
mapfile -t main < <(find "$here/src/main/java" -name '*.java' | sort)
javac --release 17 -encoding UTF-8 -Xlint:all -Werror -d "$out/classes" "${main[@]}"
jar --create --file "$out/keywarden.jar" -C "$out/classes" .
if [ -d "$here/src/test/java" ]; then
  mapfile -t tests < <(find "$here/src/test/java" -name '*.java' | sort)
  javac --release 17 -encoding UTF-8 -cp "$out/keywarden.jar" -d "$out/test-classes" "${tests[@]}"
  jar --create --file "$out/keywarden-tests.jar" --main-class io.keywarden.Main -C "$out/test-classes" .
fi
javac --release 17 -encoding UTF-8 -cp "$out/keywarden.jar" -d "$out/examples" "$here"/examples/*.java
echo "built $out/keywarden.jar"
