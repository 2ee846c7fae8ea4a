#!/usr/bin/env python3
"""Docs that cannot go stale: run every shell example in README.md and docs/*.md, check its output.

Every ```sh and ```console block of README.md and docs/*.md is run from the repository root by
bash, with target/release/ first on PATH (so `forkcache` is the release binary; build it first
with `cargo build --release`) and CARGO_TERM_QUIET=true (so `cargo run --release -- …` prints
only the program's output). A ```sh block runs as one script; in a ```console block the lines
starting with `$ ` are the commands, and the other lines shown (except `…`) must appear, in order,
in what the commands print; so must the lines of a ```text block that directly follows a block.
Standard output and standard error are captured together; a command that exits non-zero adds a
line `[exit N: line L of the block]`. The output of every block of a page is compared with the
page's golden file, tests/docs/PAGE.out (README.md.out for the front page, replay.md.out for
docs/replay.md, docs-README.md.out for docs/README.md), block by block in page order (the line
number in a block's header is not compared, so editing prose above a block needs no re-bless); a
difference prints the page, the block's line and a unified diff, and the check exits 1.

A block that cannot run here carries a marker line just above it:

    <!-- not run: needs a real API key -->

Such blocks are counted and listed by reason in the summary, never run.

Examples write only under target/docs-examples/ (emptied before the run) or a temp dir. A block
may start a server in the background on a fixed uncommon port, use it and stop it; whatever a
block leaves running is stopped when the block ends, and a block is stopped after 300 s.

Only what is inherently variable is normalised before comparing, nothing else:
  - elapsed times: a duration after `in`, `took` or `after` (`in 1.23s`, `took 12 ms`) becomes
    `<time>`; in a block that starts `forkcache serve` or `forkcache proxy`, so do the times
    counted from the server's start: `at 3034ms` in a log line, `"at_ms":N` and
    `"first_byte_ms":N` in JSON, and the `at_ms` column of a table (other durations, such as the
    gaps between a transcript's requests, are data and stay);
  - wall-clock timestamps: an ISO-8601 date-time dated today or yesterday (UTC) becomes
    `<now>` (older ones, such as a transcript's, are data and stay);
  - temp dir paths: /tmp/tmp… and the run's own temp dir become `<tmp>`; the repository's
    absolute path becomes `<repo>`;
  - port numbers: the port after 127.0.0.1, localhost or [::1] becomes `<port>`.

It also checks that every relative link and image in README.md and docs/*.md resolves: the file
(or directory) exists, and a `#anchor` names a heading of the target page under GitHub's slug
rules (lowercase; punctuation other than `-` and `_` dropped; spaces become `-`; a repeated
heading gets `-1`, `-2`, …).

Usage:
  python3 scripts/check-docs.py              # the full check
  python3 scripts/check-docs.py --bless      # rewrite tests/docs/*.out (or UPDATE_GOLDEN=1)
  python3 scripts/check-docs.py --links      # links and anchors only
  python3 scripts/check-docs.py --page docs/replay.md   # one page's blocks (and every link)
  python3 scripts/check-docs.py --self-test  # the checker fails on a changed output, a broken
                                             # link and a missing anchor
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

BLOCK_TIMEOUT_S = 300
NOT_RUN = re.compile(r"^<!--\s*not run:\s*(.*?)\s*-->$")
FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")
PRELUDE = "set -o pipefail\ntrap 'echo \"[exit $?: line $((LINENO - 2)) of the block]\"' ERR\n"


@dataclass
class Block:
    page: str  # relative to the root, e.g. docs/replay.md
    line: int  # the opening fence's line, 1-based
    lang: str  # sh or console
    text: str  # the block's lines
    not_run: str | None = None  # the marker's reason
    shown_after: str = ""  # a ```text block right after this one: output it shows


    def commands(self) -> str:
        if self.lang == "sh":
            return self.text
        return "".join(line[2:] + "\n" for line in self.text.splitlines() if line.startswith("$ "))

    def shown_output(self) -> list[str]:
        shown = self.text if self.lang == "console" else ""
        return [
            line
            for line in (shown + self.shown_after).splitlines()
            if not line.startswith("$ ") and line.strip() not in ("", "…", "...")
        ]

    def starts_server(self) -> bool:
        return re.search(r"forkcache (serve|proxy)\b", self.commands()) is not None

    def title(self) -> str:
        first = next((line for line in self.commands().splitlines() if line.strip()), "")
        return first.split("  #")[0].strip()


@dataclass
class Result:
    failures: list[str] = field(default_factory=list)
    run: int = 0
    not_run: dict[str, list[str]] = field(default_factory=dict)
    links: int = 0


# ---------------------------------------------------------------- pages, blocks and links


def pages(root: Path) -> list[Path]:
    found = [root / "README.md"] if (root / "README.md").exists() else []
    return found + sorted((root / "docs").glob("*.md"))


def golden_name(root: Path, page: Path) -> str:
    rel = page.relative_to(root).as_posix()
    if rel == "docs/README.md":
        return "docs-README.md.out"
    return page.name + ".out"


def blocks(root: Path, page: Path) -> list[Block]:
    """The sh and console blocks of a page, with the not-run marker above each, if any."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, lang = m.groups()
        end = i + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            end += 1
        if lang in ("sh", "console") and not indent:
            prev = i - 1
            while prev >= 0 and not lines[prev].strip():
                prev -= 1
            marker = NOT_RUN.match(lines[prev].strip()) if prev >= 0 else None
            text = "".join(line + "\n" for line in lines[i + 1 : end])
            rel = page.relative_to(root).as_posix()
            found.append(Block(rel, i + 1, lang, text, marker.group(1) if marker else None))
            after = end + 1
            while after < len(lines) and not lines[after].strip():
                after += 1
            if after < len(lines) and re.match(r"^(`{3,})text\s*$", lines[after]):
                close = after + 1
                while close < len(lines) and not lines[close].startswith("```"):
                    close += 1
                found[-1].shown_after = "".join(line + "\n" for line in lines[after + 1 : close])
        i = end + 1
    return found


def prose(text: str) -> str:
    """The page with fenced code emptied and inline code spans blanked, lines kept in place."""
    out, fence = [], None
    for line in text.splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(2)
            out.append("")
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            out.append("")
            continue
        out.append(re.sub(r"(`+)(?:(?!\1).)+\1", lambda s: " " * len(s.group(0)), line))
    return "\n".join(out) + "\n"


def slug(heading: str) -> str:
    """GitHub's anchor for a heading's text."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    fence = None
    for line in path.read_text(encoding="utf-8").splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group(2)
            continue
        if fence is not None:
            if line.strip().startswith(fence):
                fence = None
            continue
        h = re.match(r"^#{1,6}\s+(.*?)\s*#*\s*$", line)
        if not h:
            continue
        base = slug(h.group(1))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    for m in re.finditer(r"""<a\s+(?:name|id)=["']([^"']+)["']""", path.read_text(encoding="utf-8")):
        out.add(m.group(1))
    return out


LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"(?m)^[ ]{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
IMG_SRC = re.compile(r"""<img\s[^>]*src=["']([^"']+)["']""")


def check_links(root: Path, result: Result) -> None:
    for page in pages(root):
        rel = page.relative_to(root).as_posix()
        text = prose(page.read_text(encoding="utf-8"))
        found = [m for m in LINK.finditer(text)] + [m for m in IMG_SRC.finditer(text)]
        found += [m for m in REFDEF.finditer(text)]
        for m in found:
            target, number = m.group(1), text.count("\n", 0, m.start(1)) + 1
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
                continue
            result.links += 1
            problem = link_problem(root, page, target)
            if problem:
                result.failures.append(f"{rel}:{number}: link {target}: {problem}")


def link_problem(root: Path, page: Path, target: str) -> str | None:
    path_part, _, anchor = target.partition("#")
    dest = page if not path_part else (page.parent / path_part)
    try:
        dest.resolve().relative_to(root.resolve())
    except ValueError:
        return "points outside the repository"
    if not dest.exists():
        return "no such file"
    if anchor:
        if dest.suffix != ".md" or dest.is_dir():
            return "an anchor into a file that is not a Markdown page"
        if anchor not in anchors(dest):
            return f"no heading with the anchor #{anchor} in {dest.relative_to(root).as_posix()}"
    return None


# ---------------------------------------------------------------- running blocks


def normaliser(root: Path, tmp: Path):
    today = datetime.datetime.now(datetime.timezone.utc).date()
    days = {str(today), str(today - datetime.timedelta(days=1))}
    stamp = re.compile(r"(\d{4}-\d{2}-\d{2})[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?")
    elapsed = re.compile(r"\b(in|took|after) \d+(?:\.\d+)?\s?(?:ns|µs|us|ms|s)\b")
    live_at = re.compile(r"\bat \d+ms\b")
    live_json = re.compile(r'"(at_ms|first_byte_ms)":\s*\d+')
    port = re.compile(r"(127\.0\.0\.1|localhost|\[::1\]):\d+")
    temp = re.compile(r"/tmp/tmp[\w.-]*")
    roots = sorted({str(root.resolve()), str(root)}, key=len, reverse=True)

    def live_times(text: str) -> str:
        text = live_at.sub("at <time>", text)
        text = live_json.sub(lambda m: f'"{m.group(1)}":<time>', text)
        out, column = [], None
        for line in text.split("\n"):
            if column is not None and line.strip():
                line = re.sub(r"^(\s*\d+)\s+\d+(?=\s)", r"\1 <time>", line)
            else:
                column = None
            if re.match(r"^\s*#\s+at_ms\b", line):
                column = True
            out.append(line)
        return "\n".join(out)

    def normalise(text: str, live: bool) -> str:
        for r in roots:
            text = text.replace(r + "/", "<repo>/").replace(r, "<repo>")
        text = text.replace(str(tmp), "<tmp>")
        text = temp.sub("<tmp>", text)
        text = stamp.sub(lambda m: "<now>" if m.group(1) in days else m.group(0), text)
        text = elapsed.sub(lambda m: f"{m.group(1)} <time>", text)
        if live:
            text = live_times(text)
        return port.sub(r"\1:<port>", text)

    return normalise


def run_block(root: Path, block: Block, env: dict[str, str], out_path: Path) -> str:
    with open(out_path, "wb") as out:
        proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc", "-c", PRELUDE + block.commands()],
            cwd=root,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        timed_out = False
        try:
            proc.wait(timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            timed_out = True
        # Whatever the block left running (a server it forgot to stop) ends with it.
        try:
            os.killpg(proc.pid, signal.SIGTERM)
            time.sleep(0.05)
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
    text = out_path.read_bytes().decode("utf-8", errors="replace")
    if timed_out:
        text += f"[timed out after {BLOCK_TIMEOUT_S} s]\n"
    return text


def block_env(root: Path, tmp: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = str(root / "target" / "release") + os.pathsep + env.get("PATH", "")
    env.update(CARGO_TERM_QUIET="true", CI="true", NO_COLOR="1", TERM="dumb", TMPDIR=str(tmp))
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "UPDATE_GOLDEN"):
        env.pop(key, None)
    return env


def section(block: Block, output: str) -> str:
    return f"==> block at line {block.line}: {block.title()}\n{output}"


def parse_golden(text: str) -> list[str]:
    parts = re.split(r"(?m)^(?===> block at line )", text)
    return [p for p in parts if p]


def strip_line(sec: str) -> str:
    # Sections are matched in order; the line number in the header may move as a page is edited.
    return re.sub(r"^==> block at line \d+: ", "==> block: ", sec, count=1)


def run_pages(root: Path, only: list[str], bless: bool, result: Result, tmp: Path) -> None:
    env = block_env(root, tmp)
    normalise = normaliser(root, tmp)
    golden_dir = root / "tests" / "docs"
    written = set()
    for page in pages(root):
        rel = page.relative_to(root).as_posix()
        page_blocks = blocks(root, page)
        name = golden_name(root, page)
        if only and rel not in only:
            written.add(name)
            continue
        runnable = [b for b in page_blocks if b.not_run is None]
        for b in page_blocks:
            if b.not_run is not None:
                result.not_run.setdefault(b.not_run, []).append(f"{rel}:{b.line}")
        if not runnable:
            continue
        sections = []
        for b in runnable:
            started = time.monotonic()
            output = normalise(run_block(root, b, env, tmp / "block.out"), b.starts_server())
            elapsed = time.monotonic() - started
            result.run += 1
            print(f"  {rel}:{b.line} ({elapsed:.1f} s) {b.title()}", file=sys.stderr)
            sections.append((b, section(b, output)))
            missing = shown_but_missing(b, output)
            if missing:
                result.failures.append(
                    f"{rel}:{b.line}: the block shows output its commands did not print:\n"
                    + "".join(f"    {line}\n" for line in missing)
                )
        golden = golden_dir / name
        written.add(name)
        actual = "".join(s for _, s in sections)
        if bless:
            golden_dir.mkdir(parents=True, exist_ok=True)
            golden.write_text(actual, encoding="utf-8")
            continue
        expected = parse_golden(golden.read_text(encoding="utf-8")) if golden.exists() else []
        if not golden.exists():
            result.failures.append(f"{rel}: no golden file {golden.relative_to(root)} (run with --bless)")
            continue
        for i, (b, sec) in enumerate(sections):
            want = expected[i] if i < len(expected) else ""
            if strip_line(want) != strip_line(sec):
                diff = difflib.unified_diff(
                    want.splitlines(keepends=True),
                    sec.splitlines(keepends=True),
                    f"{golden.relative_to(root)} (expected)",
                    f"{rel}:{b.line} (actual)",
                )
                result.failures.append(f"{rel}:{b.line}: output differs\n" + "".join(diff))
        if len(expected) > len(sections):
            result.failures.append(
                f"{rel}: {golden.relative_to(root)} has {len(expected)} blocks, the page runs {len(sections)}"
            )
    if bless and not only:
        for stale in golden_dir.glob("*.out"):
            if stale.name not in written:
                stale.unlink()


def shown_but_missing(block: Block, output: str) -> list[str]:
    """The lines a console block shows that do not appear, in order, in the real output."""
    lines = [line.rstrip() for line in output.splitlines()]
    at, missing = 0, []
    for shown in block.shown_output():
        try:
            at = lines.index(shown.rstrip(), at) + 1
        except ValueError:
            missing.append(shown)
    return missing


# ---------------------------------------------------------------- the whole check


def check(root: Path, only: list[str], bless: bool, links_only: bool = False) -> Result:
    result = Result()
    check_links(root, result)
    if links_only:
        return result
    examples = root / "target" / "docs-examples"
    shutil.rmtree(examples, ignore_errors=True)
    examples.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="check-docs-") as tmp:
        run_pages(root, only, bless, result, Path(tmp))
    return result


def report(result: Result, started: float, bless: bool) -> int:
    for failure in result.failures:
        print(failure if failure.endswith("\n") else failure + "\n")
    count = sum(len(v) for v in result.not_run.values())
    print(f"check-docs: {result.run} blocks run, {count} not run, {result.links} links checked, "
          f"{len(result.failures)} problems, {time.monotonic() - started:.0f} s")
    for reason, where in sorted(result.not_run.items()):
        print(f"  not run ({len(where)}): {reason}: {', '.join(where)}")
    if bless:
        print("check-docs: goldens rewritten under tests/docs/")
    return 1 if result.failures else 0


# ---------------------------------------------------------------- self-test


def self_test() -> int:
    """A tiny repository: passes as blessed, then fails on each kind of breakage."""
    failures = []

    def expect(name: str, result: Result, needle: str | None) -> None:
        text = "\n".join(result.failures)
        if needle is None and result.failures:
            failures.append(f"{name}: expected a pass, got:\n{text}")
        elif needle is not None and needle not in text:
            failures.append(f"{name}: expected a failure mentioning {needle!r}, got:\n{text or 'a pass'}")
        else:
            print(f"  ok: {name}")

    with tempfile.TemporaryDirectory(prefix="check-docs-self-test-") as tmp:
        root = Path(tmp)
        (root / "docs").mkdir()
        (root / "README.md").write_text(
            "# Demo\n\nSee [the page](docs/page.md#a-section-with-code), [root](#demo).\n"
        )
        page = root / "docs" / "page.md"
        page_text = (
            "# Page\n\n## A section, with `code`\n\n```sh\necho hello; echo took 12ms\n```\n\n"
            "<!-- not run: needs a real API key -->\n```sh\nexit 9\n```\n\n"
            "```console\n$ printf 'a\\nb\\n'\nb\n```\n\n```sh\necho shown\n```\n\n```text\nshown\n```\n"
        )
        page.write_text(page_text)
        expect("blessing writes the goldens", check(root, [], bless=True), None)
        expect("a blessed repository passes", check(root, [], bless=False), None)
        golden = root / "tests" / "docs" / "page.md.out"
        if "took <time>" not in golden.read_text():
            failures.append("elapsed times are not normalised")
        result = check(root, [], bless=False)
        if result.not_run != {"needs a real API key": ["docs/page.md:10"]}:
            failures.append(f"not-run blocks miscounted: {result.not_run}")
        page.write_text(page_text.replace("echo hello", "echo goodbye"))
        expect("a changed output fails", check(root, [], bless=False), "-hello")
        page.write_text(page_text.replace("\nb\n```", "\nc\n```"))
        expect("a console block's shown output is checked", check(root, [], bless=False), "did not print")
        page.write_text(page_text.replace("```text\nshown", "```text\nnot shown"))
        expect("a text block after a block is its output", check(root, [], bless=False), "not shown")
        page.write_text(page_text + "\n![chart](../missing.png)\n")
        expect("a broken image fails", check(root, [], bless=False, links_only=True), "missing.png: no such file")
        page.write_text(page_text + "\n[gone](other.md)\n")
        expect("a broken link fails", check(root, [], bless=False, links_only=True), "other.md: no such file")
        page.write_text(page_text.replace("## A section, with `code`", "## Renamed"))
        expect("a missing anchor fails", check(root, [], bless=False, links_only=True),
               "no heading with the anchor #a-section-with-code")
        page.write_text(page_text + "\n`[not a link](nowhere.md)`\n")
        expect("links inside code are not links", check(root, [], bless=False, links_only=True), None)
    for failure in failures:
        print(f"check-docs --self-test: {failure}")
    print(f"check-docs --self-test: {'FAILED' if failures else 'passed'}")
    return 1 if failures else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--bless", action="store_true", help="rewrite the golden files")
    parser.add_argument("--self-test", action="store_true", help="check the checker")
    parser.add_argument("--links", action="store_true", help="check links and anchors only")
    parser.add_argument("--page", action="append", default=[], help="run only this page's blocks")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    root = Path(__file__).resolve().parent.parent
    bless = args.bless or os.environ.get("UPDATE_GOLDEN") == "1"
    if not args.links and not (root / "target" / "release" / "forkcache").exists():
        print("check-docs: target/release/forkcache is missing; run `cargo build --release` first")
        return 1
    started = time.monotonic()
    return report(check(root, args.page, bless, args.links), started, bless)


if __name__ == "__main__":
    sys.exit(main())
