// Replays fuzz inputs without libFuzzer: the main of every fuzz_replay_<target> (fuzz/CMakeLists.txt).
//
//   fuzz_replay_<target> FILE_OR_DIRECTORY...
//
// Runs the target's LLVMFuzzerTestOneInput once on each named file and on every regular file
// under each named directory (recursively, in sorted order), then prints how many inputs ran.
// Arguments starting with '-' are libFuzzer options and are ignored, so the same command line
// works for both kinds of binary. Exit status 0 when every input ran; 1 when no input was found,
// a path cannot be read, or an exception escaped the target. A crash (a broken promise's abort,
// a sanitizer report, a signal) names the input it happened on before the process dies.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);
// Present when the sanitizers are linked in (ASan, UBSan): called just before a report ends the process.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace {

namespace fs = std::filesystem;

// The input being run, for the crash message (a fixed buffer: read from a signal handler).
char g_current[4096] = "";

void sayWhere() {
  if (g_current[0] == '\0') return;
  static const char prefix[] = "fuzz replay: crashed on input ";
  [[maybe_unused]] ssize_t ignored = ::write(2, prefix, sizeof prefix - 1);
  ignored = ::write(2, g_current, std::strlen(g_current));
  ignored = ::write(2, "\n", 1);
}

void onFatalSignal(int sig) {
  sayWhere();
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void collect(const fs::path& path, std::vector<fs::path>& files, bool& failed) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    std::vector<fs::path> found;
    for (fs::recursive_directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec)) found.push_back(it->path());
    if (ec) {
      std::fprintf(stderr, "fuzz replay: cannot list %s: %s\n", path.c_str(), ec.message().c_str());
      failed = true;
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  } else if (fs::is_regular_file(path, ec)) {
    files.push_back(path);
  } else {
    std::fprintf(stderr, "fuzz replay: %s: no such file or directory\n", path.c_str());
    failed = true;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<fs::path> files;
  bool failed = false;
  for (int i = 1; i < argc; ++i)
    if (argv[i][0] != '-') collect(argv[i], files, failed);
  if (failed) return 1;
  if (files.empty()) {
    std::fprintf(stderr, "fuzz replay: no inputs (usage: %s FILE_OR_DIRECTORY...)\n", argv[0]);
    return 1;
  }

  if (__sanitizer_set_death_callback) {
    __sanitizer_set_death_callback(sayWhere);  // the sanitizers keep their own SIGSEGV handling
  } else {
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL}) ::signal(sig, onFatalSignal);
  }
  ::signal(SIGABRT, onFatalSignal);  // broken promises, std::terminate

  std::size_t ran = 0, bytes = 0;
  for (const fs::path& file : files) {
    std::ifstream in(file, std::ios::binary);
    std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.bad()) {
      std::fprintf(stderr, "fuzz replay: cannot read %s\n", file.c_str());
      return 1;
    }
    std::snprintf(g_current, sizeof g_current, "%s", file.c_str());
    try {
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(data.data()), data.size());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "fuzz replay: an exception escaped on input %s: %s\n", file.c_str(), e.what());
      return 1;
    } catch (...) {
      std::fprintf(stderr, "fuzz replay: an exception escaped on input %s\n", file.c_str());
      return 1;
    }
    g_current[0] = '\0';
    ++ran;
    bytes += data.size();
  }
  std::printf("fuzz replay: %s ran %zu inputs (%zu bytes), no crash\n", fs::path(argv[0]).filename().c_str(), ran,
              bytes);
  return 0;
}
