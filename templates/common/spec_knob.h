// KTUNE_SPEC_KNOB(Trait, member, type, fallback): Trait<S>::v is S::member when the Spec declares it, else
// `fallback`. Dev harnesses (bench/dev/) set such members to switch pieces of a kernel off or to try variants;
// the Specs that spec.cpp generates declare none, so library kernels always get the fallback.
#pragma once

#define KTUNE_SPEC_KNOB(Trait, member, type, fallback)   \
  template <class S, class = void>                      \
  struct Trait {                                        \
    static constexpr type v = fallback;                 \
  };                                                    \
  template <class S>                                    \
  struct Trait<S, decltype(void(S::member))> {          \
    static constexpr type v = S::member;                \
  };
