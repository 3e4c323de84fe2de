#!/usr/bin/env bash
# Packaging checks that need more than `npm test` (called by .ci/run before the tests):
#  - `npm ci` accepts the committed lockfile in a fresh clone (no other platform's optional build
#    missing from it), as a user's CI and the image's build stage run it;
#  - zsh is installed, so test/cli-exit-codes.test.ts parses the zsh completion script
#    (Debian's zsh; promtool comes from .ci/run).
# The image's build steps, `npm pack` + `npm install -g` and the Kubernetes manifests are tested
# by test/packaging.test.ts and test/kubernetes.test.ts, which `npm test` runs.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

if ! command -v zsh >/dev/null 2>&1; then
  log "no zsh: installing Debian's zsh (completion script check)"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zsh
fi

log "npm ci from a fresh clone of HEAD"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
git clone --quiet . "$tmp/clone"
(cd "$tmp/clone" && npm ci --ignore-scripts --no-audit --no-fund --cache "$tmp/npm-cache" >/dev/null)
echo "npm ci: ok ($(ls "$tmp/clone/node_modules" | wc -l) top-level packages)"
