// `--backend NAME` to a Backend. The CUDA one exists only in a build with
// CUDA (MINITRAIN_HAVE_CUDA); elsewhere asking for it is a clear error.
#include <memory>

#include "backend.hpp"
#include "checkpoint.hpp"
#if MINITRAIN_HAVE_CUDA
#include "cuda_backend.hpp"
#endif

namespace minitrain {

bool cuda_backend_built() { return MINITRAIN_HAVE_CUDA != 0; }

Backend& open_backend(std::string_view name, int device) {
  if (name == "cpu") return cpu_backend();
  if (name != "cuda") throw Error("--backend " + std::string(name) + ": not cpu or cuda");
#if MINITRAIN_HAVE_CUDA
  // One per process: the tensor memory it installs serves the whole process.
  static std::unique_ptr<Backend> cuda = open_cuda_backend(device);
  return *cuda;
#else
  (void)device;
  throw Error("--backend cuda: minitrain was built without CUDA (meson setup -Dcuda=enabled)");
#endif
}

std::unique_ptr<Collective> open_collective(Backend& backend, int rank, int world,
                                            const std::string& bootstrap_dir, bool tree) {
#if MINITRAIN_HAVE_CUDA
  return open_nccl(backend, rank, world, bootstrap_dir, tree);
#else
  (void)backend, (void)rank, (void)world, (void)bootstrap_dir, (void)tree;
  throw Error("data parallelism across processes needs NCCL: minitrain was built without CUDA");
#endif
}

}  // namespace minitrain
