#!/usr/bin/env bash
# Opens `forkcache report --html`'s index.html in headless Chromium (from the Debian packages)
# and checks that every chart is in the rendered page as an <svg> and that the page's console
# logged no error. Also leaves a screenshot beside the page for a person to look at. Then does the
# same for `forkcache import claude-code --html` on a transcript fixture (DIR/import) and for
# `forkcache import codex --html` on a rollout fixture (DIR/import-codex).
#
# Usage: scripts/html-report-check.sh [DIR]   (DIR: where to write the report; target/ci-html)
# FORKCACHE_BIN: a forkcache binary to use instead of building the release one.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-target/ci-html}

if ! command -v chromium >/dev/null; then
    sudo_if_needed=""
    [[ $(id -u) -ne 0 ]] && sudo_if_needed="sudo"
    $sudo_if_needed apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo_if_needed apt-get install -y -qq --no-install-recommends chromium
fi

rm -rf "$dir"
if [[ -z "${FORKCACHE_BIN:-}" ]]; then
    cargo build --release -q
    FORKCACHE_BIN=target/release/forkcache
fi
"$FORKCACHE_BIN" report --out "$dir" --html --threads 1 >/dev/null
page="file://$(realpath "$dir/index.html")"
charts=$(find "$dir" -maxdepth 1 -name '*.svg' | wc -l)

browser=(chromium --headless --no-sandbox --disable-gpu --no-first-run --user-data-dir="$dir/.chromium"
    --enable-logging=stderr --v=0)
"${browser[@]}" --dump-dom "$page" >"$dir/dom.html" 2>"$dir/console.log"
"${browser[@]}" --screenshot="$dir/screenshot.png" --window-size=1280,2000 "$page" >/dev/null 2>>"$dir/console.log"

rendered=$(grep -o '<svg' "$dir/dom.html" | wc -l)
if [[ "$rendered" -ne "$charts" || "$charts" -eq 0 ]]; then
    echo "index.html: $rendered charts rendered, $charts written" >&2
    exit 1
fi
tables=$(grep -o '<table class="sortable">' "$dir/dom.html" | wc -l)

# Sorting: a copy of the page clicks the first table's second header once; its rows must then be
# in that column's order and the header marked.
sed 's|</body>|<script>document.querySelector("table.sortable th:nth-child(2)").click();</script></body>|' \
    "$dir/index.html" >"$dir/clicked.html"
"${browser[@]}" --dump-dom "file://$(realpath "$dir/clicked.html")" >"$dir/clicked-dom.html" 2>>"$dir/console.log"
if ! grep -q 'aria-sort="ascending"' "$dir/clicked-dom.html"; then
    echo "index.html: clicking a header did not sort its table" >&2
    exit 1
fi
column=$(python3 - "$dir/clicked-dom.html" <<'PY'
import re, sys
table = open(sys.argv[1], encoding="utf-8").read().split('<table class="sortable">')[1].split("</table>")[0]
rows = re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>")[1], re.S)
print("\n".join(re.findall(r"<td[^>]*>(.*?)</td>", row)[1] for row in rows))
PY
)
if [[ "$column" != "$(sort <<<"$column")" && "$column" != "$(sort -g <<<"$column")" ]]; then
    echo "index.html: after a click the column is not in order:" >&2
    echo "$column" >&2
    exit 1
fi

# The page's console: it logs nothing of its own, so any message (console.error, an uncaught
# exception) fails. The browser's own logs about the machine (GPU, D-Bus) are not the page's.
if grep -qE ':CONSOLE|Uncaught' "$dir/console.log"; then
    echo "index.html logged to the console:" >&2
    grep -E ':CONSOLE|Uncaught' "$dir/console.log" >&2
    exit 1
fi
echo "index.html: $rendered of $charts charts rendered, $tables sortable tables, no console error ($dir/screenshot.png)"

# Opens DIR/index.html, a page whose charts are all inline: the count to reach is the page's own
# <svg> count, and the console must stay quiet. NAME is the command that wrote it.
check_inline_page() {
    local name=$1 page_dir=$2
    local url="file://$(realpath "$page_dir/index.html")"
    local written rendered tables
    written=$(grep -o '<svg' "$page_dir/index.html" | wc -l)
    "${browser[@]}" --dump-dom "$url" >"$page_dir/dom.html" 2>"$page_dir/console.log"
    "${browser[@]}" --screenshot="$page_dir/screenshot.png" --window-size=1280,2000 "$url" \
        >/dev/null 2>>"$page_dir/console.log"
    rendered=$(grep -o '<svg' "$page_dir/dom.html" | wc -l)
    if [[ "$rendered" -ne "$written" || "$written" -eq 0 ]]; then
        echo "$name index.html: $rendered charts rendered, $written in the page" >&2
        exit 1
    fi
    if grep -qE ':CONSOLE|Uncaught' "$page_dir/console.log"; then
        echo "$name index.html logged to the console:" >&2
        grep -E ':CONSOLE|Uncaught' "$page_dir/console.log" >&2
        exit 1
    fi
    tables=$(grep -o '<table class="sortable">' "$page_dir/dom.html" | wc -l)
    echo "$name index.html: $rendered of $written charts rendered, $tables sortable tables, no console error ($page_dir/screenshot.png)"
}

# The import's page: every chart is inline (no files beside it), so the count to reach is the
# page's own <svg> count; the fixture ends in a torn line, so the import exits 3 by design.
import_dir="$dir/import"
status=0
"$FORKCACHE_BIN" import claude-code tests/data/claude_code/every_rule --what-if ttl=1h --html "$import_dir" \
    >/dev/null 2>&1 || status=$?
if [[ "$status" -ne 3 ]]; then
    echo "import --html: exit $status (expected 3: the fixture's torn last line)" >&2
    exit 1
fi
check_inline_page "import claude-code" "$import_dir"

# The Codex import's page, the same way (charts inline, sortable tables, a quiet console).
codex_dir="$dir/import-codex"
"$FORKCACHE_BIN" import codex fixtures/codex/rules.jsonl --what-if retention=24h --html "$codex_dir" -q
check_inline_page "import codex" "$codex_dir"
