#!/usr/bin/env bash
# clang still compiles the sources for AVX2 and AVX-512 targets (README: clang builds
# zinc at the width of the target it is given; it once could not, PERFORMANCE.md
# session 37). Syntax and templates only, no code: about a minute and a half on two
# cores. Each source under src/ gets the definitions and include paths CMake gave it,
# read from the build's compile_commands.json (BUILD_DIR, default build-test, which
# scripts/test.sh builds first), so a new definition needs no second place here.
# Skipped where there is no clang++.
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v clang++ >/dev/null; then
  echo "check_clang: no clang++, skipped"
  exit 0
fi
db="${BUILD_DIR:-build-test}/compile_commands.json"
[ -f "$db" ] || { echo "check_clang: $db not found (build first: BUILD_DIR=${db%/*} scripts/build.sh)" >&2; exit 1; }
exec python3 - "$db" "$(nproc)" <<'EOF'
import concurrent.futures, json, os, shlex, subprocess, sys

db, jobs = sys.argv[1], int(sys.argv[2])
sources = []  # (path, its -D / -I / -isystem flags)
for entry in json.load(open(db)):
    path = os.path.relpath(os.path.join(entry["directory"], entry["file"]))
    if not (path.startswith("src" + os.sep) and path.endswith(".cpp")):
        continue  # tests and tools; nvcc's .cu files
    args = entry["arguments"] if "arguments" in entry else shlex.split(entry["command"])
    flags, i = [], 0
    while i < len(args):
        a = args[i]
        if a in ("-D", "-I", "-isystem") and i + 1 < len(args):
            flags += [a, args[i + 1]]
            i += 1
        elif a.startswith(("-D", "-I")):
            flags.append(a)
        i += 1
    sources.append((path, flags))
if not sources:
    sys.exit(f"check_clang: no sources under src/ in {db}")
version = subprocess.run(["clang++", "--version"], capture_output=True, text=True).stdout.splitlines()[0]
for target in ("x86-64-v3", "x86-64-v4"):
    def check(source):
        path, flags = source
        cmd = ["clang++", "-std=c++20", "-fsyntax-only", f"-march={target}", *flags, path]
        return path, subprocess.run(cmd, capture_output=True, text=True)
    with concurrent.futures.ThreadPoolExecutor(jobs) as pool:
        failed = [(p, r) for p, r in pool.map(check, sources) if r.returncode != 0]
    for path, r in failed:
        sys.stderr.write(f"check_clang: {path} (-march={target}):\n{r.stderr}")
    if failed:
        sys.exit(f"check_clang: {len(failed)} of {len(sources)} sources failed at -march={target}")
    print(f"check_clang: {version}, -march={target}: {len(sources)} sources compile")
EOF
