#!/usr/bin/env bash
# 8 processes warming one cache: every missing key compiled exactly once in all (ktune_stress runtime).
# Usage: attack_singleflight_stress.sh BUILD_DIR (exit 77 without NVRTC)
exec "$1/bin/ktune_stress" runtime --procs 8 --threads 2 --kernels 12
