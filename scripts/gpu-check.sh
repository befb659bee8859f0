#!/usr/bin/env bash
# The GPU checks, for a machine with an NVIDIA GPU (under 5 minutes). Run from the repository
# root after `npm ci && npm run build`; GPU_EP=cuda also runs the workers on CUDA (fetch
# onnxruntime-node's CUDA binaries first: see the README's GPUs section). Checks:
#  1. placement: two workers at resources.gpu 0.5 both land on device 0 (CUDA_VISIBLE_DEVICES),
#     and bundle_gpu_runner_workers says so;
#  2. the bundle_gpu_* figures against nvidia-smi's own (memory total exactly, utilisation and
#     power within their ranges, one series per GPU);
#  3. requests are served while the GPU is monitored.
# Prints PASS or FAIL per check; exits 1 if any failed. With OUT set, the server log and a copy of
# /metrics are written there.
set -uo pipefail
cd "$(dirname "$0")/.."
PORT=${PORT:-3099}
HOME_DIR=$(mktemp -d)
OUT=${OUT:-$(mktemp -d)}
failed=0
pass() { echo "PASS $*"; }
fail() { echo "FAIL $*"; failed=1; }

nvidia-smi -L || { echo "FAIL no GPU: nvidia-smi -L failed"; exit 1; }
[ -d dist ] || npm run build >/dev/null

BUNDLE_HOME=$HOME_DIR BUNDLE_GPU_METRICS_INTERVAL_MS=1000 ./bin/bundle serve test/fixtures/gpu-service.ts \
  --port "$PORT" >"$OUT/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null; rm -rf "$HOME_DIR"' EXIT
for _ in $(seq 120); do
  curl -sf "localhost:$PORT/readyz" >/dev/null && break
  kill -0 $server 2>/dev/null || { cat "$OUT/server.log"; echo "FAIL the server exited"; exit 1; }
  sleep 1
done
curl -sf "localhost:$PORT/readyz" >/dev/null || { tail -20 "$OUT/server.log"; echo "FAIL never ready"; exit 1; }

# 1. Placement.
workers=$(pgrep -f 'bundle-runner-worker ocr-cls#' || true)
[ "$(echo "$workers" | grep -c .)" = 2 ] && pass "two ocr-cls workers" || fail "ocr-cls workers: '$workers'"
for pid in $workers; do
  tr '\0' '\n' <"/proc/$pid/environ" | grep -qx 'CUDA_VISIBLE_DEVICES=0' \
    && pass "worker $pid sees CUDA_VISIBLE_DEVICES=0" || fail "worker $pid: $(tr '\0' '\n' <"/proc/$pid/environ" | grep CUDA_VISIBLE)"
done
sleep 2 # at least one sample after start
curl -sf "localhost:$PORT/metrics" >"$OUT/metrics.txt"
grep -q '^bundle_gpu_runner_workers{service="gpu-check",gpu="0",runner="ocr-cls"} 2$' "$OUT/metrics.txt" \
  && pass "bundle_gpu_runner_workers: 2 on gpu 0" || fail "bundle_gpu_runner_workers: $(grep runner_workers "$OUT/metrics.txt")"

# 2. The figures against nvidia-smi.
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
series=$(grep -c '^bundle_gpu_memory_total_bytes{' "$OUT/metrics.txt")
[ "$series" = "$gpus" ] && pass "one memory series per GPU ($gpus)" || fail "$series memory series for $gpus GPUs"
while IFS=', ' read -r index total limit; do
  want=$((total * 1024 * 1024))
  got=$(grep "^bundle_gpu_memory_total_bytes{service=\"gpu-check\",gpu=\"$index\"," "$OUT/metrics.txt" | awk '{print $NF}')
  [ "$(printf '%.0f' "${got:-0}")" = "$want" ] && pass "gpu $index memory total $want" || fail "gpu $index memory total $got, nvidia-smi $want"
  util=$(grep "^bundle_gpu_utilization_ratio{service=\"gpu-check\",gpu=\"$index\"," "$OUT/metrics.txt" | awk '{print $NF}')
  awk -v u="${util:-x}" 'BEGIN { exit !(u != "x" && u >= 0 && u <= 1) }' && pass "gpu $index utilisation $util" \
    || echo "NOTE gpu $index gives no utilisation (MIG?): '$util'"
  power=$(grep "^bundle_gpu_power_watts{service=\"gpu-check\",gpu=\"$index\"," "$OUT/metrics.txt" | awk '{print $NF}')
  awk -v p="${power:-x}" -v l="$limit" 'BEGIN { exit !(p != "x" && p > 0 && p <= l * 1.2) }' \
    && pass "gpu $index power $power W (limit $limit)" || echo "NOTE gpu $index power '$power' (limit $limit)"
done < <(nvidia-smi --query-gpu=index,memory.total,power.limit --format=csv,noheader,nounits)

# 3. Serving.
body=$(mktemp)
head -c $((8 * 3 * 48 * 192 * 4)) /dev/zero >"$body"
ok=0
for _ in $(seq 20); do
  code=$(curl -s -o /dev/null -w '%{http_code}' "localhost:$PORT/classify" -H 'content-type: application/octet-stream' \
    -H 'x-tensor-shape: 8,3,48,192' -H 'x-tensor-dtype: float32' --data-binary @"$body")
  [ "$code" = 200 ] && ok=$((ok + 1))
done
[ "$ok" = 20 ] && pass "20 of 20 requests served (GPU_EP=${GPU_EP:-cpu})" || fail "$ok of 20 requests served"
exit $failed
