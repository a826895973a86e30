#!/usr/bin/env bash
# Reruns every fuzz target (coverage-guided, libFuzzer through cargo-fuzz, nightly Rust):
#   fuzz/run.sh [seconds per target, default 600] [target ...]
# Each target starts from its committed corpus (fuzz/corpus/<target>.tar.gz, minimized, unpacked
# into fuzz/corpus/<target>/) and its seeds (fuzz/seeds/<target>/); the inputs it adds are
# minimized at the end (`cargo fuzz cmin`) and packed again. A crash ends that target's run with
# the input saved under fuzz/artifacts/<target>/ (the other targets still run, and the script
# fails): make it a unit test, then fix it.
set -euo pipefail
cd "$(dirname "$0")"
seconds=${1:-600}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(pgoutput copy_text pipeline_yaml filter signal_json informix_cdc)
command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
failed=()
for target in "${targets[@]}"; do
  mkdir -p "corpus/$target"
  [ -f "corpus/$target.tar.gz" ] && tar -xzf "corpus/$target.tar.gz" -C "corpus/$target"
  echo "== $target: ${seconds}s"
  if ! cargo +nightly fuzz run "$target" "corpus/$target" "seeds/$target" -- \
    -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1; then
    failed+=("$target")
  fi
  cargo +nightly fuzz cmin "$target" "corpus/$target" -- -max_len=4096 >/dev/null 2>&1
  tar -czf "corpus/$target.tar.gz" -C "corpus/$target" --sort=name --mtime=@0 --owner=0 --group=0 .
  echo "== $target: $(ls "corpus/$target" | wc -l) inputs in the corpus"
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "== crashed: ${failed[*]} (inputs in fuzz/artifacts/)"
  exit 1
fi
echo "== no crash"
