#include "elf_symbols.hpp"

#include <cstring>

#include <fmt/format.h>

namespace ktune::detail {
namespace {

template <class T>
bool read_at(const uint8_t* data, size_t size, uint64_t offset, T* out) {
  if (offset > size || sizeof(T) > size - offset) return false;
  std::memcpy(out, data + offset, sizeof(T));
  return true;
}

// ELF64 layouts (little-endian), spelled out so no system <elf.h> is needed.
struct Header {
  unsigned char ident[16];
  uint16_t type, machine;
  uint32_t version;
  uint64_t entry, phoff, shoff;
  uint32_t flags;
  uint16_t ehsize, phentsize, phnum, shentsize, shnum, shstrndx;
};
struct Section {
  uint32_t name, type;
  uint64_t flags, addr, offset, size;
  uint32_t link, info;
  uint64_t addralign, entsize;
};
struct Symbol {
  uint32_t name;
  unsigned char info, other;
  uint16_t shndx;
  uint64_t value, size;
};
static_assert(sizeof(Header) == 64 && sizeof(Section) == 64 && sizeof(Symbol) == 24, "ELF64 layout");
constexpr uint32_t kSymtab = 2;

}  // namespace

bool elf_defined_symbols(const uint8_t* data, size_t size, std::unordered_set<std::string>* names,
                         std::string* why) {
  Header h;
  if (!read_at(data, size, 0, &h) || std::memcmp(h.ident, "\x7f" "ELF", 4) != 0) {
    *why = "not an ELF file";
    return false;
  }
  if (h.ident[4] != 2 || h.ident[5] != 1) {
    *why = "not a little-endian ELF64 file";
    return false;
  }
  if (h.shentsize != sizeof(Section)) {
    *why = fmt::format("section header size {} (expected {})", h.shentsize, sizeof(Section));
    return false;
  }
  for (uint32_t i = 0; i < h.shnum; ++i) {
    Section sec;
    if (!read_at(data, size, h.shoff + uint64_t{i} * sizeof(Section), &sec)) {
      *why = fmt::format("section header {} lies outside the file", i);
      return false;
    }
    if (sec.type != kSymtab) continue;
    Section strtab;
    if (sec.link >= h.shnum || !read_at(data, size, h.shoff + uint64_t{sec.link} * sizeof(Section), &strtab) ||
        strtab.offset > size || strtab.size > size - strtab.offset) {
      *why = fmt::format("symbol table {} has no valid string table", i);
      return false;
    }
    if (sec.offset > size || sec.size > size - sec.offset) {
      *why = fmt::format("symbol table {} lies outside the file", i);
      return false;
    }
    for (uint64_t off = 0; off + sizeof(Symbol) <= sec.size; off += sizeof(Symbol)) {
      Symbol sym;
      read_at(data, size, sec.offset + off, &sym);
      if (sym.shndx == 0 || sym.name == 0 || sym.name >= strtab.size) continue;  // undefined or unnamed
      const char* begin = reinterpret_cast<const char*>(data + strtab.offset + sym.name);
      const void* nul = std::memchr(begin, 0, strtab.size - sym.name);
      if (!nul) {
        *why = fmt::format("symbol name at {} is not terminated", sym.name);
        return false;
      }
      names->emplace(begin, static_cast<const char*>(nul) - begin);
    }
  }
  return true;
}

}  // namespace ktune::detail
