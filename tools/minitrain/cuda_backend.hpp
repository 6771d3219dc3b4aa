// The CUDA backend's factory (cuda_backend.cpp, built only with CUDA). Names
// no CUDA type.
#pragma once

#include <memory>

#include "backend.hpp"

namespace minitrain {

// Opens device `device` (cudaSetDevice), a stream for the training work, and
// installs managed memory as the tensor memory. Throws Error with the CUDA
// error (file, line, call) when there is no usable device.
std::unique_ptr<Backend> open_cuda_backend(int device);

}  // namespace minitrain
