#!/usr/bin/env bash
# Coverage-guided fuzzing of every decoder (cargo-fuzz / libFuzzer).
#
#   ./fuzz/run.sh [SECONDS_PER_TARGET] [TARGET...]
#
# Needs cargo-fuzz (`cargo install cargo-fuzz`) and a C++ compiler (libFuzzer
# is built from source). The toolchain here is stable only: cargo-fuzz needs
# nightly flags, which RUSTC_BOOTSTRAP=1 allows, and no sanitizer runtime
# (`-s none`): a panic, not an ASan report, is what we look for (the code
# under test has no `unsafe` on these paths).
#
# Each target starts from its checked-in seeds (fuzz/corpus/<target>/,
# written by the ignored test `write_fuzz_seed_corpus` in
# tests/tests/decoders_never_panic_on_damaged_bytes.rs) and keeps what it
# learns in fuzz/work/<target>/ (not checked in). A crash leaves its input in
# fuzz/artifacts/<target>/: copy it to fuzz/regressions/<target>/ with the
# fix, and add it to the proptest pass.
set -euo pipefail
cd "$(dirname "$0")"
secs="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(page_header heap_tuple heap_page btree_page wal_record wal_segment
             control_file version_stamp heap_redo btree_redo)
fi
export RUSTC_BOOTSTRAP=1
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
cargo fuzz build -s none -O
summary=()
for t in "${targets[@]}"; do
    mkdir -p "work/$t" "corpus/$t"
    log="work/$t.log"
    set +e
    cargo fuzz run -s none -O "$t" "work/$t" "corpus/$t" -- \
        -max_total_time="$secs" -print_final_stats=1 >"$log" 2>&1
    rc=$?
    set -e
    runs=$(grep -o 'Done [0-9]* runs in [0-9]* second' "$log" | tail -1 || true)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
    if [ $rc -ne 0 ]; then
        summary+=("$t: FAILED (exit $rc), see fuzz/$log and fuzz/artifacts/$t/")
    else
        summary+=("$t: ${runs:-no runs reported}, ${cov:-cov ?}, 0 crashes")
    fi
done
printf '%s\n' "${summary[@]}"
if printf '%s\n' "${summary[@]}" | grep -q FAILED; then exit 1; fi
