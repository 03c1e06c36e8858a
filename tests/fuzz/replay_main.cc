// Replays fuzz inputs through a fuzz target without libFuzzer (any compiler): every file under the
// directories given on the command line is fed to LLVMFuzzerTestOneInput. Used by CTest (label "fuzz")
// so that seed corpora and crash regressions run in every `make test`.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

int main(int argc, char** argv) {
  std::size_t n = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path root(argv[i]);
    if (!std::filesystem::exists(root)) continue;
    std::vector<std::filesystem::path> files;
    if (std::filesystem::is_regular_file(root)) {
      files.push_back(root);
    } else {
      for (const auto& e : std::filesystem::recursive_directory_iterator(root))
        if (e.is_regular_file()) files.push_back(e.path());
    }
    for (const auto& f : files) {
      std::ifstream in(f, std::ios::binary);
      std::vector<char> buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(buf.data()), buf.size());
      ++n;
    }
  }
  std::printf("replayed %zu inputs\n", n);
  return n == 0 ? 1 : 0;
}
