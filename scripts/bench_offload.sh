#!/usr/bin/env bash
# Offload benchmark: each row (a model's committed profile and a budget) solved without and with --offload, the two
# side by side (same time limit and threads, so both see the same load), and a table of the predicted steps: the
# issue's "never worse than without offload at the same budget and time limit", row by row.
# Usage: scripts/bench_offload.sh [--time-limit S] [--threads N] [--host-bandwidth GB/s] [--host-limit BYTES|GB]
#                                 [--profile h200] [--profiles DIR] [--out DIR] ROW...
#   ROW: <schedules folder>:<budget>, e.g. resnet50_184:4.99GB (profile DIR/<folder>/<profile>/profile.json, DIR
#   schedules/ unless --profiles names another folder of that layout, such as a GPU call's schedules/)
# Writes DIR/<folder>_<budget>_{none,offload}.{log,json} (reports; none where no schedule was found) and
# DIR/OFFLOAD.md (the table, also printed).
set -euo pipefail
cd "$(dirname "$0")/.."
time_limit=60
threads=1
bandwidth=50
host_limit=64GB
profile=h200
profiles=schedules
out=/tmp/bench_offload
rows=()
while [ $# -gt 0 ]; do
  case "$1" in
    --time-limit) time_limit=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --host-bandwidth) bandwidth=$2; shift 2 ;;
    --host-limit) host_limit=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --profiles) profiles=${2%/}; shift 2 ;;
    --out) out=$2; shift 2 ;;
    -*) echo "bench_offload.sh: unknown option '$1'" >&2; exit 2 ;;
    *) rows+=("$1"); shift ;;
  esac
done
if [ ${#rows[@]} -eq 0 ]; then
  echo "bench_offload.sh: no rows given (e.g. resnet50_184:4.99GB)" >&2
  exit 2
fi
for row in "${rows[@]}"; do
  prof=$profiles/${row%%:*}/$profile/profile.json
  if [[ $row != *:* ]] || [ ! -f "$prof" ]; then
    echo "bench_offload.sh: row '$row': expected <folder>:<budget> with $prof present" >&2
    exit 2
  fi
done
bin=${MONET_BUILD:-build}/apps
[ -x $bin/monet-solve ] || bash scripts/build.sh
mkdir -p "$out"

for row in "${rows[@]}"; do
  folder=${row%%:*}
  budget=${row##*:}
  name=${folder}_${budget}
  solve() {  # mode (none or offload), then the extra flags
    local mode=$1
    shift
    rm -f "$out/${name}_$mode.json"
    $bin/monet-solve "$profiles/$folder/$profile/profile.json" --budget "$budget" --time-limit "$time_limit" \
      --threads "$threads" "$@" -o "$out/${name}_$mode.schedule.json" --report "$out/${name}_$mode.json" \
      >"$out/${name}_$mode.log" 2>&1 || true
  }
  echo "== $(date +%H:%M:%S) $row: solving without and with --offload, $time_limit s each, side by side"
  solve none &
  solve offload --offload --host-bandwidth "$bandwidth" --host-limit "$host_limit" &
  wait
done

python3 - "$out" "$time_limit" "$threads" "$bandwidth" "$host_limit" "$profiles/<folder>/$profile/profile.json" "${rows[@]}" <<'EOF'
import json, os, sys
sys.path.insert(0, os.path.join(os.getcwd(), "scripts"))
from bench_floor import MONET  # MONeT's published (budget GB, overhead %) rows per model

out, limit, threads, bandwidth, host_limit, profile = sys.argv[1:7]
rows = sys.argv[7:]

def report(name):  # None where no schedule was found (no report, or one that does not fit)
    path = os.path.join(out, name + ".json")
    r = json.load(open(path)) if os.path.exists(path) else None
    return r if r and r.get("fits") else None

def cell(r):
    if r is None:
        return "none"
    return "%.3f ms (%+.2f%%, gap %.1f%%)" % (r["predicted_step_ms"], 100 * r["overhead"], 100 * (r["gap"] or 0))

def monet(folder, budget):  # MONeT's published overhead (%) for this model, batch and budget, or None
    model, _, batch = folder.rpartition("_")
    entry = MONET.get(model)
    if not entry or str(entry[0]) != batch:
        return None
    gb = float(budget.rstrip("GB"))
    return next((o for b, o in entry[2] if abs(b - gb) < 0.005), None)

lines = ["Predicted steps, profile `%s`, %s s, %s thread(s), `--host-bandwidth %s --host-limit %s` with offload; "
         "overheads against the profile's lean store-all; MONeT: its published overhead at that budget, and whether "
         "the faster of the two schedules is below it." % (profile, limit, threads, bandwidth, host_limit), "",
         "| row | without offload | with `--offload` | copies (GB), resident values at home on the host (parameters), waits | never worse | MONeT |",
         "|---|---|---|---|---|---|"]
held = monet_rows = below = 0
for row in rows:
    folder, budget = row.split(":")
    none, off = report("%s_%s_none" % (folder, budget)), report("%s_%s_offload" % (folder, budget))
    copies = "-"
    if off and off.get("offload"):
        o = off["offload"]
        copies = "%d (%.2f), %d (%d), %.2f ms" % (o["transfers"], o["transfer_bytes"] / 1e9, o.get("states_on_host", 0),
                                                  o.get("parameters_on_host", 0), o["copy_wait_ms"])
    if off is None:
        ok = none is None
    else:
        ok = none is None or off["predicted_step_ms"] <= none["predicted_step_ms"] + 1e-6
    held += ok
    m, mark = monet(folder, budget), "-"
    if m is not None:
        monet_rows += 1
        best = min((r["overhead"] for r in (none, off) if r), default=None)
        is_below = best is not None and 100 * best < m
        below += is_below
        mark = "%+.2f%% (%s)" % (m, "below" if is_below else "not below")
    lines.append("| %s at %s | %s | %s | %s | %s | %s |" % (folder, budget, cell(none), cell(off), copies,
                                                         "yes" if ok else "no", mark))
lines += ["", "Never worse: %d of %d rows." % (held, len(rows))]
if monet_rows:
    lines.append("Below MONeT's overhead (predicted): %d of %d of its rows." % (below, monet_rows))
text = "\n".join(lines) + "\n"
open(os.path.join(out, "OFFLOAD.md"), "w").write(text)
print(text, end="")
EOF
