// What every family's tuning workload (templates/<family>/workload*.cpp) keeps alike: the key's problem, its
// inputs drawn from a fresh seed, copies of the buffers that calls take in turn (so back-to-back calls read
// memory, not a warm cache), and the bytes and FLOPs per call that the inputs report. A family's workload
// derives from it, fills `copies_` in its constructor and says how to prepare, plan and launch one call.
//
// Inputs provides bytes_per_call and flops_per_call (doubles); Problem provides from_key(key).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "autotune/workload.hpp"

namespace ktune::autotune {

template <class Problem, class Inputs, class Copy>
class RotatingWorkload : public Workload {
 public:
  double bytes_per_call() const final { return in_.bytes_per_call; }
  double flops_per_call() const final { return in_.flops_per_call; }

 protected:
  // make_inputs(const Problem&, uint64_t seed) -> Inputs: the key's sizes, index arrays and scalar arguments.
  template <class MakeInputs>
  RotatingWorkload(Runtime& rt, const std::string& problem_key, MakeInputs&& make_inputs)
      : rt_(rt), p_(Problem::from_key(problem_key)), seed_(std::random_device{}()), in_(make_inputs(p_, seed_)) {}

  // The copy the next call reads; the copies are taken in turn.
  Copy& next_copy() {
    Copy& c = copies_[next_];
    next_ = (next_ + 1) % copies_.size();
    return c;
  }

  Runtime& rt_;
  const Problem p_;
  const uint64_t seed_;  // the inputs' seed; buffers filled later use seed_ + 1, + 2, ...
  const Inputs in_;
  std::vector<Copy> copies_;

 private:
  size_t next_ = 0;
};

}  // namespace ktune::autotune
