// `dtrace hash FILE...`: the xxh3-64k/1 fingerprint of each file's bytes,
// printed like sha256sum, so anyone can check a recorder's digests.
#include <iostream>

#include "cli/cli.hpp"
#include "cli/commands.hpp"
#include "fingerprint/file.hpp"
#include "fingerprint/fingerprint.hpp"

namespace dtrace::cli {

void add_hash(CLI::App& app, int& exit_status) {
  auto files = std::make_shared<std::vector<std::string>>();
  CLI::App* cmd = app.add_subcommand(
      "hash",
      "Print the xxh3-64k/1 fingerprint of each FILE ('-' is standard input) as\n"
      "'<fingerprint>  FILE'. Exit status: 0 all hashed, 2 a file could not be read.");
  cmd->add_option("FILE", *files, "files to fingerprint")->required();
  cmd->callback([files, &exit_status] {
    for (const std::string& file : *files) {
      auto digest = fingerprint_file(file);
      if (!digest) throw Failure(digest.error().message);
      std::cout << to_hex16(*digest) << "  " << file << "\n";
    }
    exit_status = kExitSame;
  });
}

}  // namespace dtrace::cli
