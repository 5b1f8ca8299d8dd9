# Sourced by the Nsight Compute scripts of bench/dev: the pack of bench/run_h200.sh (PACK, default h200pack)
# unpacked and on the library path, its all.db as the cache with JIT off (every kernel the benches use is in
# it), $OUT required for the report, and NCU the profiler.
: "${OUT:?set OUT to a folder for the report}"
PACK=${PACK:-h200pack}
P=$PWD/$PACK
for z in "$P"/*.db.gz; do [[ -e ${z%.gz} ]] || gunzip -k "$z"; done
export LD_LIBRARY_PATH=$P/lib:/usr/local/nvidia/lib64:/usr/local/cuda/lib64 KTUNE_CACHE=$P/all.db KTUNE_JIT=0
NCU=$(command -v ncu || echo /usr/local/cuda/bin/ncu)
