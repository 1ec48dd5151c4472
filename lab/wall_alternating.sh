#!/usr/bin/env bash
# An eval's wall time against an older version of the code, goal by goal: each eval in its own process
# (`eval/h200_check.py --goals G --parts evals --no-spares`), the two versions alternating, which goes first
# alternating by round. One JSON line per eval (its phases and each shape's parts) on stdout.
#
#   git archive bd7ccdb | tar -x -C OLD_DIR && rm -rf OLD_DIR/eval/results   # once, where git is
#   bash lab/wall_alternating.sh OLD_DIR "gemm_fp8 gemm_bf16 rope" 3 > wall.jsonl
#   bash lab/wall_alternating.sh OLD_DIR gemm_fp8 3 "warmup=1 graph_min_rounds=2" > wall.jsonl
#
# With a fourth argument (timing parameters) a third version, `tuned` (this code with those parameters), takes its
# turn in every round too, the order rotating by round.
#
# Run it after a pass that built the machine's caches (a whole check), and compare medians per goal: one eval per
# version moved by up to 18% (docs/decisions/2026-12-07-eval-wall-time-against-bd7ccdb.md).
set -u
old=$(cd "${1:?OLD_DIR}" && pwd) goals=${2:?GOALS} rounds=${3:-3} tuned=${4:-} new=$PWD work=$(mktemp -d)
versions="old new"; [ -n "$tuned" ] && versions="old new tuned"
for r in $(seq "$rounds"); do
  for g in $goals; do
    order=$versions
    for _ in $(seq $(((r - 1) % $(echo $versions | wc -w)))); do order="${order#* } ${order%% *}"; done
    for v in $order; do
      d=$new extra=(); [ "$v" = old ] && d=$old
      if [ "$v" = tuned ]; then for t in $tuned; do extra+=(--timing "$t"); done; fi
      (cd "$d" && PYTHONPATH="$d${PYTHONPATH:+:$PYTHONPATH}" timeout 300 python3 eval/h200_check.py \
        --out "$work/$v-$g-$r" --goals "$g" --parts evals --no-spares "${extra[@]}" > /dev/null 2>> "$work/err.log")
      python3 - "$work/$v-$g-$r/check.json" "$v" "$g" "$r" <<'PY'
import json
import sys

path, version, goal, rnd = sys.argv[1:]
row = {"v": version, "goal": goal, "round": int(rnd)}
try:
    check = json.load(open(path))
except (OSError, ValueError) as exc:
    print(json.dumps(row | {"error": f"no check.json: {exc}"[:300]}))
    raise SystemExit
e = check.get("evals", {}).get(goal)
if e is None:
    print(json.dumps(row | {"error": str(check.get("errors", "no eval"))[-300:]}))
    raise SystemExit
shapes = [{"name": s["name"], "kind": s["kind"], "wall_s": s.get("wall_s")} for s in e.get("shapes", [])]
print(json.dumps(row | {"accepted": e.get("accepted"), "wall_s": e.get("wall_s"), "phases": e.get("phases"),
                        "shapes": shapes}))
PY
    done
  done
done
tail -c 600 "$work/err.log" >&2
rm -rf "$work"
