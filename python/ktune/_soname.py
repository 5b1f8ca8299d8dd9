"""The SONAME of the libktune whose C ABI this package's ctypes binding (ktune._lib) is written for: what the
loader looks for and what a platform wheel carries in ktune/lib/. While the version is 0.x a minor release may
change public struct layouts, so the minor is part of it (libktune.so.0.2); from 1.0 on the major alone.
tests/lint/soname.sh checks it against the project version and the built library."""

SONAME = "libktune.so.0.2"
