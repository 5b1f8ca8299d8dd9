// The symbol names an ELF64 object defines (CUBINs and host object files are both ELF64), read without
// loading it: `ktune cache verify` checks a row's binding symbol against the blob this way, with no driver,
// no plugin, and no code of the blob run. Every offset is bounds-checked: the bytes are untrusted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>

namespace ktune::detail {

// The names of the defined symbols (section index not SHN_UNDEF) of every symbol table. Returns false with
// *why when the bytes are not a well-formed little-endian ELF64 file.
bool elf_defined_symbols(const uint8_t* data, size_t size, std::unordered_set<std::string>* names,
                         std::string* why);

}  // namespace ktune::detail
