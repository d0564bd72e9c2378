// Where a run's device time goes, measured in the run itself.
//
// With OSPREY_CUDA_KERNEL_TIMES=FILE set when the device opens, every launch of the cuda device
// (each kernel of the exact handler, each exact product with whatever it launches inside) is
// bracketed by two CUDA events on its stream, and when the device closes FILE gets one line per
// kind of launch: total milliseconds, launches, label. The events time the work as it runs:
// Nsight Compute replays each kernel alone with its caches flushed and, outside the exact
// handler's own kernels, sees other products, so its per-kernel sums are not a step's. The
// first line is the busy total and the span from the first launch to the last; the difference is
// where the device waited for the host. Without the variable the clock costs one branch a launch.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace osprey::cuda_detail {

// Where a kernel's closures were written, from its demangled type: nvcc names each extended lambda
// `__nv_dl_tag<signature, &function, n>`, the function written either as its name or, for a
// template, as its whole declaration in parentheses (`&(Ret ns::f<H>(H&, int))`); this gives
// "ns::f#n" for each, joined by " / ", or the type's first 160 characters when it holds none.
namespace clock_detail {
inline bool nameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == ':'; }
// The index just past the bracket that closes the one at `open` ('(' or '<'), or npos.
inline std::size_t pastClose(const std::string& s, std::size_t open) {
  const char o = s[open], c = o == '(' ? ')' : '>';
  int depth = 0;
  for (std::size_t k = open; k < s.size(); ++k) {
    if (s[k] == o) ++depth;
    else if (s[k] == c && --depth == 0) return k + 1;
  }
  return std::string::npos;
}
// The qualified name of the function declared in `decl` ("Ret ns::f<A>(params)"): the name before
// the last top-level parameter list, less its template arguments.
inline std::string declaredName(const std::string& decl) {
  std::size_t end = decl.size();
  while (end > 0 && decl[end - 1] != ')') --end;  // past trailing qualifiers
  int depth = 0;
  std::size_t open = end;
  while (open > 0) {  // back to the '(' that opens the parameter list
    const char c = decl[--open];
    if (c == ')') ++depth;
    else if (c == '(' && --depth == 0) break;
  }
  std::size_t stop = open;
  if (stop > 0 && decl[stop - 1] == '>') {  // template arguments
    int d = 0;
    while (stop > 0) {
      const char c = decl[--stop];
      if (c == '>') ++d;
      else if (c == '<' && --d == 0) break;
    }
  }
  std::size_t start = stop;
  while (start > 0 && nameChar(decl[start - 1])) --start;
  return decl.substr(start, stop - start);
}
}  // namespace clock_detail

inline std::string closureSites(const std::string& type) {
  using namespace clock_detail;
  std::string sites;
  const std::string tag = "__nv_dl_tag<";
  for (std::size_t at = type.find(tag); at != std::string::npos; at = type.find(tag, at + 1)) {
    const std::size_t amp = type.find(", &", at);
    if (amp == std::string::npos) break;
    std::size_t end = amp + 3;
    std::string site;
    if (end < type.size() && type[end] == '(') {
      const std::size_t past = pastClose(type, end);
      if (past == std::string::npos) break;
      site = declaredName(type.substr(end + 1, past - end - 2));
      end = past;
    } else {
      while (end < type.size() && nameChar(type[end])) ++end;
      site = type.substr(amp + 3, end - amp - 3);
      if (end < type.size() && type[end] == '<') end = pastClose(type, end);  // the function's template arguments
      if (end == std::string::npos) break;
    }
    // ", 3u>" closes the tag.
    std::size_t digits = end + 2, stop = digits;
    while (stop < type.size() && std::isdigit(static_cast<unsigned char>(type[stop]))) ++stop;
    if (site.empty()) continue;
    if (stop > digits && type.compare(end, 2, ", ") == 0) site += "#" + type.substr(digits, stop - digits);
    if (sites.find(site) == std::string::npos) sites += (sites.empty() ? "" : " / ") + site;
  }
  return sites.empty() ? type.substr(0, 160) : sites;
}

class KernelClock {
  struct Span {
    cudaEvent_t begin = nullptr, end = nullptr;
    std::string label;
  };

 public:
  KernelClock() {
    const char* file = std::getenv("OSPREY_CUDA_KERNEL_TIMES");
    if (file != nullptr && *file != '\0') m_file = file;
  }
  KernelClock(const KernelClock&) = delete;
  KernelClock& operator=(const KernelClock&) = delete;
  ~KernelClock() {
    for (const Span& s : m_spans) release(s);
    for (cudaEvent_t e : m_free) (void)cudaEventDestroy(e);
    if (m_origin != nullptr) (void)cudaEventDestroy(m_origin);
  }

  bool on() const { return !m_file.empty(); }

  // One launch's bracket: made before the launch is queued, closed (its end event queued) when it
  // goes out of scope after the launch. The events are queued on the stream, so they time the work,
  // not the queueing.
  class Timed {
   public:
    Timed(KernelClock* clock, cudaStream_t stream, Span span) : m_clock(clock), m_stream(stream), m_span(std::move(span)) {}
    Timed(const Timed&) = delete;
    Timed& operator=(const Timed&) = delete;
    ~Timed() {
      if (m_clock != nullptr) m_clock->finish(m_stream, std::move(m_span));
    }

   private:
    KernelClock* m_clock;
    cudaStream_t m_stream;
    Span m_span;
  };
  // label() makes the launch's label; it is called only while the clock is on.
  template <class Label>
  Timed time(cudaStream_t stream, Label&& label) {
    if (!on()) return Timed(nullptr, stream, Span{});
    std::string name = std::forward<Label>(label)();  // before the lock: named() takes it too
    std::lock_guard lock(m_lock);
    if (m_origin == nullptr) {
      m_origin = take();
      (void)cudaEventRecord(m_origin, stream);
    }
    Span s{take(), take(), std::move(name)};
    (void)cudaEventRecord(s.begin, stream);
    return Timed(this, stream, std::move(s));
  }

  // A label made by a function once, kept (demangling a type name per launch would be the clock's
  // own cost).
  const std::string& named(std::string (*make)()) {
    std::lock_guard lock(m_lock);
    auto it = m_names.find(make);
    if (it == m_names.end()) it = m_names.emplace(make, make()).first;
    return it->second;
  }

  // Writes the totals to the file (called by the device as it closes, while CUDA still runs).
  void report() {
    if (!on()) return;
    std::lock_guard lock(m_lock);
    harvest();
    std::vector<std::pair<std::string, Total>> rows(m_totals.begin(), m_totals.end());
    std::sort(rows.begin(), rows.end(), [](const auto& x, const auto& y) { return x.second.ms > y.second.ms; });
    double busy = 0.0;
    for (const auto& [label, t] : rows) busy += t.ms;
    std::FILE* out = std::fopen(m_file.c_str(), "w");
    if (out == nullptr) {
      std::fprintf(stderr, "osprey: OSPREY_CUDA_KERNEL_TIMES: cannot write %s\n", m_file.c_str());
      return;
    }
    std::fprintf(out, "%.3f\t%lld\tbusy total (span from the first launch to the last: %.3f ms)\n", busy, m_launches,
                 m_spanMs);
    for (const auto& [label, t] : rows) std::fprintf(out, "%.3f\t%lld\t%s\n", t.ms, t.count, label.c_str());
    std::fclose(out);
  }

 private:
  struct Total {
    double ms = 0.0;
    long long count = 0;
  };
  static constexpr std::size_t kHarvestEvery = 4096;

  void finish(cudaStream_t stream, Span s) {
    std::lock_guard lock(m_lock);
    (void)cudaEventRecord(s.end, stream);
    m_spans.push_back(std::move(s));
    if (m_spans.size() >= kHarvestEvery) harvest();
  }
  cudaEvent_t take() {
    if (!m_free.empty()) {
      cudaEvent_t e = m_free.back();
      m_free.pop_back();
      return e;
    }
    cudaEvent_t e = nullptr;
    (void)cudaEventCreate(&e);
    return e;
  }
  void release(const Span& s) {
    m_free.push_back(s.begin);
    m_free.push_back(s.end);
  }
  // Waits for the spans queued so far and adds them to the totals.
  void harvest() {
    if (m_spans.empty()) return;
    (void)cudaEventSynchronize(m_spans.back().end);
    for (const Span& s : m_spans) {
      float ms = 0.0f;
      if (cudaEventElapsedTime(&ms, s.begin, s.end) == cudaSuccess) {
        Total& t = m_totals[s.label];
        t.ms += ms;
        ++t.count;
        ++m_launches;
      }
    }
    float span = 0.0f;
    if (cudaEventElapsedTime(&span, m_origin, m_spans.back().end) == cudaSuccess) m_spanMs = span;
    for (const Span& s : m_spans) release(s);
    m_spans.clear();
    (void)cudaGetLastError();  // an event that never ran (a failed launch) leaves no sticky error
  }

  std::string m_file;
  std::mutex m_lock;
  std::vector<Span> m_spans;
  std::vector<cudaEvent_t> m_free;
  std::unordered_map<std::string, Total> m_totals;
  std::unordered_map<std::string (*)(), std::string> m_names;
  cudaEvent_t m_origin = nullptr;
  long long m_launches = 0;
  double m_spanMs = 0.0;
};

}  // namespace osprey::cuda_detail
