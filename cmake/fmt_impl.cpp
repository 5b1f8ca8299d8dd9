// fmt's compiled half (what fmt's own src/format.cc builds), compiled once into the static ktune_fmt: a file
// that calls fmt::format then compiles the call, not fmt's whole formatting engine. Header-only fmt put that
// engine into every such file, which was most of its compile time (cache/src/binaries.cpp: 11.6 s -> 5.4 s at
// -O2 -g, 9.5 s -> 2.9 s under ASan+UBSan at -O0). Nothing of fmt is needed at run time: the archive links into
// libktune.so, its symbols kept private there (--exclude-libs), and into each executable.
// Written against Debian 12's fmt 9.1 (tools/setup.sh): format.h declares these templates, format-inl.h
// (included here without FMT_HEADER_ONLY, so its functions are defined once, out of line) defines them.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

template FMT_API auto dragonbox::to_decimal(float x) noexcept -> dragonbox::decimal_fp<float>;
template FMT_API auto dragonbox::to_decimal(double x) noexcept -> dragonbox::decimal_fp<double>;

template FMT_API locale_ref::locale_ref(const std::locale& loc);
template FMT_API auto locale_ref::get<std::locale>() const -> std::locale;

template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API auto thousands_sep_impl(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;

}  // namespace detail
FMT_END_NAMESPACE
