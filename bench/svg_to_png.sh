#!/usr/bin/env bash
# PNG copies of Textual SVG screenshots for the README (needs rsvg-convert: Debian librsvg2-bin).
# Textual writes runs of spaces as &#160; inside <text>; rsvg drops them unless whitespace is preserved.
# Usage: bash bench/svg_to_png.sh screenshots/*.svg
set -euo pipefail
for svg in "$@"; do
  sed 's/<svg /<svg xml:space="preserve" /' "$svg" | rsvg-convert -o "${svg%.svg}.png"
done
