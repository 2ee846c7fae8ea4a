#!/usr/bin/env bash
# The Rust version the README states for its commands must be the highest `rust_version` any
# package in the build needs, dev-dependencies included (CI cannot install a second toolchain to
# try an older one, so the number is checked rather than tried).
set -euo pipefail
cd "$(dirname "$0")/.."

stated=$(grep -oE '^Rust [0-9]+\.[0-9]+ or newer runs all three' README.md | grep -oE '[0-9]+\.[0-9]+' || true)
if [[ -z "$stated" ]]; then
    echo "README.md: no line 'Rust X.Y or newer runs all three'" >&2
    exit 1
fi
needed=$(cargo metadata --format-version 1 --locked | python3 -c '
import json, sys
packages = json.load(sys.stdin)["packages"]
versions = [p["rust_version"] for p in packages if p.get("rust_version")]
key = lambda v: tuple(int(part) for part in v.split("."))
best = max(versions, key=key)
print(".".join(best.split(".")[:2]), *sorted({p["name"] for p in packages if p.get("rust_version") and key(p["rust_version"]) == key(best)}))
')
read -r highest who <<<"$needed"
if [[ "$stated" != "$highest" ]]; then
    echo "README.md states Rust $stated; the build needs $highest (for $who)" >&2
    exit 1
fi
echo "README.md states Rust $stated, the highest rust_version in the build ($who)"
