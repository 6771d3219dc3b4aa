// dtrace: everything lives in the library and src/cli/; main only hands over.
#include "cli/cli.hpp"

int main(int argc, char** argv) { return dtrace::cli::run(argc, argv); }
