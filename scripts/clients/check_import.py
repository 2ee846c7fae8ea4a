#!/usr/bin/env python3
"""Checks `forkcache import claude-code --json` of a Claude Code run against `forkcache serve`.

    check_import.py TRACE IMPORT_JSON INDEPENDENT_JSON

TRACE is the server's trace (its `usage` members are what Claude Code was answered),
INDEPENDENT_JSON the totals of tests/claude_code_totals.py over the same transcripts.
"""
import json
import sys

FIELDS = ["input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens", "output_tokens"]


def key(usage):
    return tuple(usage.get(f, 0) for f in FIELDS)


def main(trace_path, import_path, independent_path):
    with open(trace_path) as f:
        served = {key(json.loads(line)["usage"]) for line in f if line.strip() and "usage" in json.loads(line)}
    with open(import_path) as f:
        report = json.load(f)
    with open(independent_path) as f:
        independent = json.load(f)
    failures = []
    requests = 0
    children = []
    for session in report["sessions"]:
        for chain in session["chains"]:
            if chain["chain"].startswith("agent:"):
                children.append(chain)
            for request in chain["requests"]:
                requests += 1
                if key(request["recorded"]["usage"]) not in served:
                    failures.append(f"{request['request_id']}: usage {request['recorded']['usage']} was never served")
                if not request["agreement"]:
                    failures.append(f"{request['request_id']}: predicted {request['predicted']['usage']} "
                                    f"against recorded {request['recorded']['usage']}")
    if requests == 0:
        failures.append("no request imported")
    if len(children) != 2:
        failures.append(f"expected 2 fork children, found {len(children)}")
    for child in children:
        parent = child["parent"]
        if not parent or parent["chain"] != "main":
            failures.append(f"{child['chain']} is not linked to a main-chain request: {parent}")
    totals = report["totals"]
    ours = {"requests": totals["requests"], **{f: totals["recorded"]["usage"][f] for f in FIELDS}}
    if ours != independent:
        failures.append(f"totals {ours} differ from the independent reader's {independent}")
    if totals["agreement"] != 1.0:
        failures.append(f"agreement {totals['agreement']}, expected 1.0")
    for failure in failures:
        print("FAIL:", failure, file=sys.stderr)
    if failures:
        sys.exit(1)
    print(f"import: {requests} requests, all served usage, {len(children)} linked fork children, "
          f"agreement 100% (baseline {totals['baseline_agreement']:.1%}), totals equal the independent reader's")


if __name__ == "__main__":
    main(*sys.argv[1:])
