// The CUDA backend's factory (cuda_backend.cu, built only with CUDA). Names
// no CUDA type.
#pragma once

#include <memory>

#include "backend.hpp"

namespace minitrain {

// Opens device `device` (cudaSetDevice), a stream for the training work, and
// installs managed memory as the tensor memory. Throws Error with the CUDA
// error (file, line, call) when there is no usable device.
std::unique_ptr<Backend> open_cuda_backend(int device);

// open_collective() with NCCL on `backend` (a CUDA backend) and its stream.
std::unique_ptr<Collective> open_nccl(Backend& backend, int rank, int world,
                                      const std::string& bootstrap_dir, bool tree);

}  // namespace minitrain
