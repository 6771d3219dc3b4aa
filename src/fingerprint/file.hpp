// Fingerprints of files and streams, for `dtrace hash` and for reading tensor
// captures back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "util/result.hpp"

namespace dtrace {

// A regular file is mapped and hashed on `threads` threads (0: all cores);
// anything else (a pipe, stdin as "-") is streamed.
Result<std::uint64_t> fingerprint_file(const std::string& path, unsigned threads = 0);

// Fingerprints a whole in-memory buffer somewhere else than the CPU path (the
// GPU, for `dtrace hash --gpu`); its errors are already user-facing.
using BufferFingerprint = std::function<Result<std::uint64_t>(const void* data, std::size_t bytes)>;

// The file's bytes, mapped (regular files) or read whole (pipes, "-"), handed
// to `fingerprint_buffer`.
Result<std::uint64_t> fingerprint_file_with(const std::string& path,
                                            const BufferFingerprint& fingerprint_buffer);

}  // namespace dtrace
