#!/usr/bin/env bash
# Rebuilds jssip.min.js, the JsSIP browser bundle vendored beside this script (see README.md).
# Not run by the tests: they use the committed file and fetch nothing. Needs node and npm.
#
# JsSIP's npm package (3.11 and later) ships its CommonJS sources (lib/) but no browser bundle;
# its own `npm run build` (npm-scripts.mjs) makes dist/jssip.min.js with esbuild and the options
# below. This script does the same from the published package and esbuild version of its
# devDependencies, and puts the package's LICENSE.md and those of the three bundled
# dependencies (debug with ms, events, sdp-transform, all MIT) in the bundle's header.
# Usage: tests/browser_support/build-jssip.sh [VERSION]   (default 3.13.8)
set -euo pipefail
version="${1:-3.13.8}"
esbuild_version=0.27.2
out="$(cd "$(dirname "$0")" && pwd)/jssip.min.js"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"
npm pack --quiet "jssip@$version" >/dev/null 2>&1
echo '{"name":"jssip-bundle","version":"1.0.0","private":true}' > package.json
npm install --no-audit --no-fund --ignore-scripts "./jssip-$version.tgz" "esbuild@$esbuild_version" >/dev/null
{
    echo "/*"
    echo " * JsSIP $version (https://jssip.net), the browser bundle of the npm package jssip@$version"
    echo " * (\`npm pack jssip@$version\`) built with esbuild $esbuild_version as JsSIP's own build does"
    echo " * (tests/browser_support/build-jssip.sh). Bundled:$(cd node_modules && for p in debug ms events sdp-transform; do printf ' %s@%s' "$p" "$(node -p "require('./$p/package.json').version")"; done)"
    echo " *"
    sed 's/^/ * /; s/ *$//' node_modules/jssip/LICENSE.md
    for p in debug ms events sdp-transform; do
        lic=$(ls node_modules/$p/ | grep -i -m1 '^licen[cs]e' || true)
        echo " *"
        echo " * --- $p: $(node -p "require('./node_modules/$p/package.json').license")"
        [ -n "$lic" ] && sed 's/^/ * /; s/ *$//' "node_modules/$p/$lic"
    done
    echo " */"
} > banner.txt
node -e '
const esbuild = require("esbuild");
esbuild.build({
  entryPoints: ["node_modules/jssip/lib/JsSIP.js"],
  outfile: "jssip.min.js",
  bundle: true, minify: true, sourcemap: false,
  format: "iife", globalName: "JsSIP", platform: "browser", target: ["es2015"],
  supported: { "template-literal": false },
  legalComments: "none",
  banner: { js: require("fs").readFileSync("banner.txt", "utf8") },
}).catch(e => { console.error(e); process.exit(1); });
'
cp jssip.min.js "$out"
echo "wrote $out ($(wc -c < "$out") bytes)"
