#!/usr/bin/env bash
# GPU checks, on a machine with a CUDA GPU, in at most 5 minutes:
#   1. the tests marked `cuda` (pytest -m cuda);
#   2. the quick benchmark suite on the GPU, written to gpu_results.json.
# Prints everything; exits non-zero if either step fails or runs out of time.
# Usage (from anywhere): bash benchmarks/gpu_check.sh [python]
set -u
cd "$(dirname "$0")/.."
PYTHON="${1:-${PYTHON:-python}}"

echo "== $(date -u +%FT%TZ) $(hostname)"
nvidia-smi || echo "(nvidia-smi not found)"
"$PYTHON" -c "import torch; print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), \
torch.cuda.get_device_name() if torch.cuda.is_available() else '')"

echo "== pytest -m cuda (limit 120 s)"
timeout 120 "$PYTHON" -m pytest -m cuda -q -p no:cacheprovider
tests_rc=$?
echo "pytest exit status: $tests_rc"

echo "== benchmarks/run.py --quick --device cuda (limit 170 s)"
# images and mixtures measure quality on the CPU, not the CUDA targets
timeout 170 "$PYTHON" benchmarks/run.py --quick --device cuda --out gpu_results.json \
    --sections engine memory training in_context prompt_size large_prompt
bench_rc=$?
echo "run.py exit status: $bench_rc"
[ -f gpu_results.json ] && cat gpu_results.json

echo "== done $(date -u +%FT%TZ): tests $tests_rc, benchmarks $bench_rc"
[ "$tests_rc" -eq 0 ] && [ "$bench_rc" -eq 0 ]
