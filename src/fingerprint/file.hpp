// Fingerprints of files and streams, for `dtrace hash` and for reading tensor
// captures back.
#pragma once

#include <cstdint>
#include <string>

#include "util/result.hpp"

namespace dtrace {

// A regular file is mapped and hashed on all cores; anything else (a pipe,
// stdin as "-") is streamed.
Result<std::uint64_t> fingerprint_file(const std::string& path);

}  // namespace dtrace
