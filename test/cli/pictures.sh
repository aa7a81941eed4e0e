#!/usr/bin/env bash
# The pictures and the questions users ask first: the memory timeline (monet-solve --timeline, monet-check
# --simulate --timeline), the frontier (monet-solve --frontier N --plot) and the largest batch (monet-fit). Each SVG
# is checked for its structure (XML, the series it must hold) and, where rsvg-convert is installed (librsvg2-bin,
# scripts/install_deps.sh), rendered to a PNG that must not be blank. -q leaves stderr empty; -v adds detail.
# Usage: pictures.sh BUILD_DIR SOURCE_DIR
set -u
bin=$1/apps
src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
tiny="$src/models/tiny.onnx"

# svg_check FILE MIN_AREAS MIN_LINES MIN_MARKERS: well-formed SVG with at least these series.
svg_check() {
  /usr/bin/python3 - "$@" <<'PY' || fail "SVG structure of $1"
import sys, xml.etree.ElementTree as ET
path, areas, lines, markers = sys.argv[1], *map(int, sys.argv[2:5])
root = ET.parse(path).getroot()
ns = "{http://www.w3.org/2000/svg}"
assert root.tag == ns + "svg", root.tag
def count(tag, cls):
    return sum(1 for e in root.iter(ns + tag) if e.get("class") == cls)
got = (count("polygon", "area"), count("polyline", "line") + count("line", "hline"), count("circle", "marker"))
assert got[0] >= areas and got[1] >= lines and got[2] >= markers, (path, got)
for e in root.iter(ns + "polygon"):
    for pt in e.get("points").split():
        x, y = map(float, pt.split(","))
        assert 0 <= x <= float(root.get("width")) and 0 <= y <= float(root.get("height")), (path, pt)
print("ok:", path, "areas/lines/markers", got)
PY
  if command -v rsvg-convert >/dev/null 2>&1; then
    rsvg-convert "$1" -o "$1.png" || fail "rsvg-convert $1"
    /usr/bin/python3 - "$1.png" <<'PY' || fail "render of $1"
import struct, sys, zlib
data = open(sys.argv[1], "rb").read()
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
pos, idat, width = 8, b"", 0
while pos < len(data):
    n, kind = struct.unpack(">I4s", data[pos:pos + 8])
    if kind == b"IHDR":
        width, height = struct.unpack(">II", data[pos + 8:pos + 16])
    if kind == b"IDAT":
        idat += data[pos + 8:pos + 8 + n]
    pos += 12 + n
raw = zlib.decompress(idat)
# A blank picture compresses to almost nothing and has one byte value; ours has colours on white.
assert width >= 900 and len(set(raw)) > 16, (width, len(set(raw)))
print("rendered:", sys.argv[1], width, "x", height)
PY
  fi
}

"$bin/monet-profile" "$tiny" --batch 8 --device estimate -o "$tmp/p.json" -q >/dev/null || fail "monet-profile"
"$bin/monet-solve" "$tmp/p.json" --frontier 3 --time-limit 1e6 --threads 1 --plot "$tmp/frontier.svg" \
  --report "$tmp/frontier.json" -q >"$tmp/frontier.log" 2>"$tmp/frontier.err" || { cat "$tmp/frontier.log"; fail "--frontier"; }
[ -s "$tmp/frontier.err" ] && { cat "$tmp/frontier.err"; fail "-q: the frontier wrote on stderr"; }
[ "$(grep -c '^ *[0-9.]* [KMG]B  ' "$tmp/frontier.log")" -eq 3 ] || { cat "$tmp/frontier.log"; fail "3 frontier rows"; }
svg_check "$tmp/frontier.svg" 0 1 3
budget=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['frontier'][1]['budget_bytes'])" \
  "$tmp/frontier.json") || fail "frontier report"

"$bin/monet-solve" "$tmp/p.json" --budget "$budget" --time-limit 1e6 --threads 1 -o "$tmp/s.json" \
  --timeline "$tmp/solve.svg" -v >"$tmp/solve.log" 2>"$tmp/solve.err" || { cat "$tmp/solve.log"; fail "--timeline"; }
grep -q "incumbent" "$tmp/solve.err" || { cat "$tmp/solve.err"; fail "-v: no progress on stderr"; }
grep -q "incumbent" "$tmp/solve.log" && fail "progress on stdout"
svg_check "$tmp/solve.svg" 5 2 0
"$bin/monet-check" "$tiny" --schedule "$tmp/s.json" --simulate --timeline "$tmp/check.svg" >/dev/null ||
  fail "monet-check --simulate --timeline"
svg_check "$tmp/check.svg" 5 2 0

"$bin/monet-fit" "$tiny" --budget "$budget" --time-limit 1e6 --threads 1 --max-batch 64 -o "$tmp/fit.json" \
  --report "$tmp/fit_report.json" -q >"$tmp/fit.log" || { cat "$tmp/fit.log"; fail "monet-fit"; }
# The answer fits at its batch, and the batch above it does not (or it is --max-batch).
/usr/bin/python3 - "$tmp/fit_report.json" <<'PY' || { cat "$tmp/fit.log"; fail "monet-fit report"; }
import json, sys
r = json.load(open(sys.argv[1]))
best = r["largest_batch"]
rows = {t["batch"]: t for t in r["tried"]}
assert best >= 8 and rows[best]["fits"], r  # batch 8 fits this budget: the frontier above was solved at it
assert best == 64 or (best + 1 in rows and not rows[best + 1]["fits"]), r
assert all(t["predicted_peak_bytes"] <= r["budget_bytes"] for t in r["tried"] if t["fits"])
print("ok: largest batch", best)
PY
batch=$(/usr/bin/python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['largest_batch'])" "$tmp/fit_report.json")
"$bin/monet-check" "$tiny" --schedule "$tmp/fit.json" --simulate --batch "$batch" >/dev/null ||
  fail "monet-fit's schedule does not replay at batch $batch"
echo "ok: timeline, frontier and largest batch"
