#!/usr/bin/env bash
# libktune's SONAME follows the project version: libktune.so.MAJOR.MINOR while MAJOR is 0 (a 0.x minor release may
# change public struct layouts, so programs and bindings built against one minor never load another), and
# libktune.so.MAJOR from 1.0 on. Checks the built library's DT_SONAME against that rule, that the build tree holds
# the SONAME link beside it (what the dynamic loader opens), and that the Python package names the same library
# (python/ktune/_soname.py: what its loader looks for and what a platform wheel carries).
#   tests/lint/soname.sh LIBRARY VERSION [SOURCE_DIR]     (ctest lint_soname passes the built libktune.so)
set -u
lib=${1:?usage: soname.sh LIBRARY VERSION [SOURCE_DIR]}
version=${2:?usage: soname.sh LIBRARY VERSION [SOURCE_DIR]}
src=${3:-$(dirname "$0")/../..}
if [[ ! $version =~ ^([0-9]+)\.([0-9]+)(\.[0-9]+)*$ ]]; then
  echo "soname: version '$version' is not MAJOR.MINOR[.PATCH]"
  exit 2
fi
major=${BASH_REMATCH[1]} minor=${BASH_REMATCH[2]}
if [[ $major == 0 ]]; then want=libktune.so.$major.$minor; else want=libktune.so.$major; fi
[[ -e $lib ]] || { echo "soname: $lib does not exist (build the ktune target first)"; exit 2; }
got=$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]$/\1/p')
[[ -n $got ]] || got=$(objdump -p "$lib" 2>/dev/null | awk '$1 == "SONAME" { print $2 }')
fail=0
if [[ $got != "$want" ]]; then
  echo "soname: $lib has SONAME '${got:-none}', expected $want for version $version (runtime/CMakeLists.txt)"
  fail=1
elif [[ ! -e $(dirname "$lib")/$want ]]; then
  echo "soname: no $want beside $lib (the name the dynamic loader and the Python package open)"
  fail=1
fi
py=$(sed -n 's/^SONAME = "\(.*\)"$/\1/p' "$src/python/ktune/_soname.py" 2>/dev/null)
if [[ $py != "$want" ]]; then
  echo "soname: python/ktune/_soname.py names '${py:-nothing}', expected $want for version $version"
  fail=1
fi
[[ $fail == 0 ]] && echo "soname: $want (version $version)"
exit $fail
