#!/usr/bin/env bash
# Installs the Node tools the tests use into .tools/conformance/ (git-ignored): Node 22 (the npm package `node@22`,
# needed by the MCP conformance suite) and @modelcontextprotocol/conformance. Idempotent.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
prefix="$root/.tools/conformance"
if [[ -x "$prefix/node_modules/.bin/conformance" && -x "$prefix/node_modules/.bin/node" ]]; then
  exit 0
fi
mkdir -p "$prefix"
npm install --prefix "$prefix" --no-audit --no-fund node@22 @modelcontextprotocol/conformance@0.1.16
"$prefix/node_modules/.bin/node" --version
