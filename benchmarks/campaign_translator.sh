#!/usr/bin/env bash
# The translator's measurement campaign (issue 14), on an otherwise idle machine.
#
#   MINITRANSFORMER_DATA=/path/to/data bash benchmarks/campaign_translator.sh
#   FORCE=1 ...        run even though the machine is busy (results are then not results)
#   MINUTES=10 ...     the training budget of each run (default: 10 scaled to the machine)
#   CHOOSE_ARGS="--tyings untied --no-words"   a shorter choose step (see campaign_translator.py)
#   STEPS="choose apply test timebleu speed quality decoding chapter"   a subset, in order
#   STEPS="recipe recipe-apply recipe-test"   the recipe on validation (issue 25), ~4 h
#   RECIPE_ARGS="--only preset 'lr x2'"       a shorter recipe step (campaign_translator.py recipe -h)
#   RECIPE_STEPS=1000  the recipe's budget: float32 optimiser steps per run (default 1000,
#                      about ten minutes of the AVX2 machine); RECIPE_STEPS=0 gives it MINUTES
#                      instead. A step budget makes the runs the same on any machine and under
#                      any load (slower, not different), so the recipe steps skip the load
#                      check, and a campaign split over sessions resumes from the records
#                      committed in benchmarks/results/recipe_runs/
#
# About 4 hours on a 2-core CPU, and 4.3 more for the recipe steps. Each
# step prints the machine (CPU model, flags, 1024² matmul GFLOP/s, load)
# and writes JSON:
#   choose    vocabulary size and tying on the validation split, 3 seeds for
#             the top two (benchmarks/campaign_translator.py; ~110 min)
#   apply     the choice into minitransformer/training/presets.py (review, commit)
#   test      the chosen configuration's runs on test_2016_flickr, greedy and beam 4
#   recipe    dropout, label smoothing, schedule, peak lr, average decay: one factor at a
#             time against the preset, 3 seeds, on the validation split (18 runs; the
#             plan and its estimate are printed first; resumable: rerun after a stop)
#   recipe-apply  the recipe's choice into presets.py and minitransformer/results (review)
#   recipe-test   the chosen recipe trained by plain train, 3 seeds, then
#             test_2016_flickr greedy and beam 4, once (~35 min)
#   timebleu  BLEU against training time, the new defaults vs torch.nn.Transformer (~55 min)
#   speed     training tokens/s, ours vs nn.Transformer (target: ours >= 1.2x torch)
#   quality   bf16 vs float32 after the same steps (the precision default)
#   decoding  greedy decoding of the 1,000 test sentences (target: <= 3 s at 200 GFLOP/s)
#   chapter   re-execute chapter 10, then check its prose numbers
# The targets are stated for a machine doing >= 180 GFLOP/s in a 1024² fp32
# matmul; on a slower one the training budget is scaled by 200 / measured
# (and the report must say so).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2} MKL_NUM_THREADS=${MKL_NUM_THREADS:-2}
export PYTHONUNBUFFERED=1
: "${MINITRANSFORMER_DATA:?set MINITRANSFORMER_DATA to the folder holding multi30k/}"
STEPS=${STEPS:-"choose apply test recipe recipe-apply recipe-test timebleu speed quality decoding chapter"}
OUT=benchmarks/results
mkdir -p "$OUT" runs/campaign

RECIPE_STEPS=${RECIPE_STEPS:-1000}
if [ "$RECIPE_STEPS" != 0 ]; then RECIPE_BUDGET="--steps $RECIPE_STEPS"; fi
timed=$(for s in $STEPS; do case $s in recipe*) if [ "$RECIPE_STEPS" = 0 ]; then echo "$s"; fi ;;
        *) echo "$s" ;; esac; done)
load=$(cut -d' ' -f1 /proc/loadavg)
if [ -n "$timed" ] && [ "${FORCE:-0}" != 1 ] && awk "BEGIN{exit !($load > 2.5)}"; then
  echo "load average $load > 2.5: the machine is busy; timings would not be results (FORCE=1 to run anyway)" >&2
  exit 1
fi

# The budget: 10 minutes on a machine doing 200 GFLOP/s, scaled on a slower one.
gflops=$(cd benchmarks && ../$PY -c "import machine; print(machine.matmul_gflops()['wall'])")
if [ -z "${MINUTES:-}" ]; then
  MINUTES=$(awk "BEGIN{g=$gflops; m=(g >= 180) ? 10 : 10 * 200 / g; printf \"%.1f\", m}")
fi
if [ -n "$timed" ]; then  # the timed steps' budget (the recipe's is RECIPE_STEPS)
  echo "matmul: $gflops GFLOP/s; training budget per run: $MINUTES minutes" | tee "$OUT/campaign_budget.txt"
else
  echo "matmul: $gflops GFLOP/s; the recipe's budget: $RECIPE_STEPS float32 steps per run"
fi

run() { echo; echo "=== $*"; (cd benchmarks && "../$PY" "$@"); }

for step in $STEPS; do
  case $step in
  choose)
    run campaign_translator.py choose --minutes "$MINUTES" --out-dir ../runs/campaign ${CHOOSE_ARGS:-} \
      | tee "$OUT/campaign_choose.log" ;;
  apply)
    run campaign_translator.py apply
    git diff --stat minitransformer/training/presets.py ;;
  test)
    for dir in $($PY -c "import json; print(' '.join(json.load(open('$OUT/campaign_choice.json'))['chosen_folders']))"); do
      for beam in 1 4; do
        $PY -m minitransformer evaluate --checkpoint "$dir" --split test_2016_flickr --beam $beam \
          --output "$dir/test_beam$beam.txt"
      done
    done 2>&1 | tee "$OUT/campaign_test.log" ;;
  recipe)
    eval "run campaign_translator.py recipe ${RECIPE_BUDGET:---minutes $MINUTES} --out-dir ../runs/recipe ${RECIPE_ARGS:-} --dry-run"
    eval "run campaign_translator.py recipe ${RECIPE_BUDGET:---minutes $MINUTES} --out-dir ../runs/recipe ${RECIPE_ARGS:-}" \
      | tee "$OUT/recipe.log" ;;
  recipe-apply)
    run campaign_translator.py recipe-apply
    git diff --stat minitransformer/training/presets.py minitransformer/results/recipe_choice.json ;;
  recipe-test)
    run campaign_translator.py recipe-test --out-dir ../runs/recipe | tee "$OUT/recipe_test.log" ;;
  timebleu)
    run bench_time_to_bleu.py --threads 2 --marks "$(awk "BEGIN{print $MINUTES/4}")" \
      "$(awk "BEGIN{print $MINUTES/2}")" "$MINUTES" "$(awk "BEGIN{print $MINUTES*2}")" \
      --quiet | tee "$OUT/time_to_bleu.log" ;;
  speed)
    run bench_translation.py --threads 2 --rounds 10 --variants ours ours-fp32 torch torch-bf16 \
      --out results/translation_speed.json | tee "$OUT/translation_speed.log" ;;
  quality)
    run bench_translation.py --threads 2 --quality-steps 300 \
      --out results/bf16_quality.json | tee "$OUT/bf16_quality.log" ;;
  decoding)
    dir=$($PY -c "import json; print(json.load(open('$OUT/campaign_choice.json'))['chosen_folders'][0])")
    run bench_decoding.py --threads 2 --checkpoint "$dir" --out results/decoding.json \
      | tee "$OUT/decoding.log" ;;
  chapter)
    make execute NOTEBOOKS=notebooks/10_translation_end_to_end.ipynb
    $PY tools/check_prose_numbers.py --all notebooks/10_translation_end_to_end.ipynb ;;
  *) echo "unknown step $step" >&2; exit 2 ;;
  esac
done
