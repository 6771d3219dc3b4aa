// `dtrace hash [--gpu] [--threads N] FILE...`: the xxh3-64k/1 fingerprint of
// each file's bytes, printed like sha256sum, so anyone can check a recorder's
// digests. --gpu computes them on the GPU (CUDA builds): the same digests, which
// is the point: it shows a device computing what the CPU computes.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <iostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "cli/numbers.hpp"
#include "fingerprint/file.hpp"
#include "fingerprint/fingerprint.hpp"

#if DTRACE_HAVE_CUDA
#include "cuda/fingerprint.cuh"
#endif

namespace dtrace::cli {

namespace {

// A regular file is hashed through a memory mapping (fast, and all cores can
// read it); if the file shrinks while it is read (a job still writing or
// rotating it), touching a page past its new end raises SIGBUS. The one
// message and exit status 2 are written from the handler, with only
// async-signal-safe calls, in place of a crash.
char g_bus_message[4096];
std::size_t g_bus_message_size = 0;

// Several hashing threads can touch pages past the new end at once, each
// raising its own SIGBUS: the first one writes the message and ends the
// process, any other waits for that end, so the message is written once.
// (A lock-free atomic is async-signal-safe.)
std::atomic_flag g_bus_reported = ATOMIC_FLAG_INIT;

void on_bus_error(int) {
  if (g_bus_reported.test_and_set()) {
    for (;;) ::pause();
  }
  (void)!::write(STDERR_FILENO, g_bus_message, g_bus_message_size);
  ::_exit(kExitTrouble);
}

void prepare_bus_message(const std::string& file) {
  const std::string message =
      "dtrace: error: " + file.substr(0, 3000) + ": the file shrank while it was being hashed\n";
  std::memcpy(g_bus_message, message.data(), message.size());
  g_bus_message_size = message.size();
}

Result<std::uint64_t> fingerprint_file_on_gpu(const std::string& file) {
#if DTRACE_HAVE_CUDA
  return fingerprint_file_with(
      file, [&file](const void* data, std::size_t bytes) -> Result<std::uint64_t> {
        std::uint64_t digest = 0;
        const gpu::Status status = gpu::fingerprint_host_bytes_on_device(data, bytes, &digest);
        if (status.code == gpu::Code::no_device) {
          return Error{file + ": --gpu: no usable CUDA device: " + status.message};
        }
        if (!status.ok()) return Error{file + ": --gpu: " + status.message};
        return digest;
      });
#else
  (void)file;
  return Error{"--gpu: this dtrace was built without CUDA (rebuild with nvcc and -Dcuda=enabled)"};
#endif
}

}  // namespace

void add_hash(CLI::App& app, int& exit_status) {
  struct Options {
    std::vector<std::string> files;
    bool gpu = false;
    unsigned threads = 0;
  };
  auto options = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand(
      "hash",
      "Print the xxh3-64k/1 fingerprint of each FILE ('-' is standard input) as\n"
      "'<fingerprint>  FILE'. Exit status: 0 all hashed, 2 a file could not be read\n"
      "(or --gpu could not run).");
  cmd->add_option("FILE", options->files, "files to fingerprint")->required();
  cmd->add_flag("--gpu", options->gpu,
                "copy each file to the GPU and fingerprint it there (CUDA builds only)");
  cmd->add_option("--threads", options->threads, "CPU threads per file (default 0: all cores)")
      ->check(thread_count());
  cmd->callback([options, &exit_status] {
    struct sigaction action {};
    action.sa_handler = on_bus_error;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGBUS, &action, nullptr);
    for (const std::string& file : options->files) {
      prepare_bus_message(file);
      auto digest =
          options->gpu ? fingerprint_file_on_gpu(file) : fingerprint_file(file, options->threads);
      if (!digest) throw Failure(digest.error().message);
      // Flushed: the bus-error exit must not lose the lines printed before it.
      std::cout << to_hex16(*digest) << "  " << file << std::endl;
    }
    exit_status = kExitSame;
  });
}

}  // namespace dtrace::cli
