// GPU check of the extension's CUDA kernels (framework-src/csrc/cuda, called through their
// launchers, tfext/launch.h) against its CPU arithmetic (framework-src/csrc/cpu, through
// cpu_reference.h), on random inputs and edge cases, in half, float and double. Prints one
// table row per kernel and element type; exit 0 when every element is within tolerance,
// 1 otherwise, 77 when the CUDA runtime finds no device. run_gpu_check.sh builds and runs it.
//
//   kernel_check --label "SASS sm_90" [--header] [--seed N]
//   kernel_check --self-check [--header]   no GPU: the half and float CPU results against the
//                                          double ones, to check the cases and tolerances
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu_reference.h"
#include "tfext/launch.h"

namespace {

enum class Kernel { kBiasRelu, kGelu, kRowSoftmax };
const char* Name(Kernel k) {
  return k == Kernel::kBiasRelu ? "bias_relu" : k == Kernel::kGelu ? "gelu" : "row_softmax";
}

// How a case's inputs are drawn.
enum class Fill {
  kNormal,   // N(0, 3)
  kWide,     // random sign, magnitudes spread log-uniformly over the type's range (denormals too)
  kSpecial,  // N(0, 3) with a fifth of the values NaN, +-inf, +-0, +-max, +-denorm_min
  kOffset,   // softmax: N(0, 3) shifted far up or down (row by row): exp would overflow unshifted
  kMasked,   // softmax: N(0, 3) with 30% -inf (attention masks; a row may be all -inf)
};
const char* Name(Fill f) {
  const char* names[] = {"normal", "wide", "special", "offset", "masked"};
  return names[static_cast<int>(f)];
}

// Element types, as the device code sees them. eps: relative spacing of T; acc_eps: of the
// type the kernels compute in (tfext/device.cuh: Acc); log10 range: the wide fill's.
template <typename T>
struct Type;
template <>
struct Type<__half> {
  static constexpr DType kDType = DType::kHalf;
  static constexpr const char* kName = "half";
  static constexpr double kEps = 0x1p-10, kAccEps = 0x1p-23;
  static constexpr double kMinNormal = 0x1p-14, kDenormMin = 0x1p-24, kMax = 65504;
  static constexpr double kLog10Lo = -7.5, kLog10Hi = 4.8, kOffset = 1e3;
  static double ToDouble(__half v) { return __half2float(v); }
  static __half FromDouble(double v) { return __double2half(v); }
};
template <>
struct Type<float> {
  static constexpr DType kDType = DType::kFloat;
  static constexpr const char* kName = "float";
  static constexpr double kEps = 0x1p-23, kAccEps = 0x1p-23;
  static constexpr double kMinNormal = 0x1p-126, kDenormMin = 0x1p-149, kMax = 3.4028234663852886e38;
  static constexpr double kLog10Lo = -44.5, kLog10Hi = 38.5, kOffset = 1e5;
  static double ToDouble(float v) { return v; }
  static float FromDouble(double v) { return static_cast<float>(v); }
};
template <>
struct Type<double> {
  static constexpr DType kDType = DType::kDouble;
  static constexpr const char* kName = "double";
  static constexpr double kEps = 0x1p-52, kAccEps = 0x1p-52;
  static constexpr double kMinNormal = 0x1p-1022, kDenormMin = 0x1p-1074,
                          kMax = std::numeric_limits<double>::max();
  static constexpr double kLog10Lo = -322, kLog10Hi = 308, kOffset = 1e10;
  static double ToDouble(double v) { return v; }
  static double FromDouble(double v) { return v; }
};

// One case: a rows x cols input (bias_relu: cols channels; gelu: rows * cols elements).
struct Case {
  int rows, cols;
  Fill fill;
};

std::vector<Case> Cases(Kernel k) {
  std::vector<Case> cases;
  auto add = [&cases](std::vector<std::pair<int, int>> shapes, std::vector<Fill> fills) {
    for (Fill f : fills)
      for (auto s : shapes) cases.push_back({s.first, s.second, f});
  };
  // Sizes around the 256-thread blocks (255, 256, 257) and others no multiple of them.
  if (k == Kernel::kRowSoftmax) {
    // No zero rows or columns: the op returns before launching (tfext/kernels.h); the
    // launcher would ask for a grid of 0 blocks (rows = 0) or read in[0] of an empty row
    // (cols = 0; so would the CPU code). 100000 columns: many per thread; 70000 rows: more
    // than the 65535 blocks the launcher starts, so blocks loop over rows.
    add({{1, 1}, {3, 2}, {2, 255}, {5, 256}, {4, 257}, {7, 1000}, {3, 4097}, {1, 100000}, {70000, 3}},
        {Fill::kNormal, Fill::kOffset, Fill::kMasked, Fill::kWide, Fill::kSpecial});
  } else {
    // Zero elements too: the launchers accept n = 0 (GridBlocks starts one idle block).
    if (k == Kernel::kBiasRelu)
      add({{0, 4}, {1, 1}, {1, 255}, {3, 257}, {100, 256}, {1000, 7}, {1, 100003}},
          {Fill::kNormal, Fill::kWide, Fill::kSpecial});
    else
      add({{0, 1}, {1, 1}, {1, 255}, {1, 256}, {1, 257}, {1, 100003}},
          {Fill::kNormal, Fill::kWide, Fill::kSpecial});
    // More elements than 65535 blocks of 256 threads: the grid-stride loop's later rounds.
    add({{65537, 257}}, {Fill::kNormal});
  }
  return cases;
}

template <typename T>
std::vector<T> Draw(Fill f, int rows, int cols, std::mt19937_64& rng) {
  using Ty = Type<T>;
  const double inf = std::numeric_limits<double>::infinity();
  const double specials[] = {std::numeric_limits<double>::quiet_NaN(), inf, -inf, 0.0, -0.0,
                             Ty::kMax, -Ty::kMax, Ty::kDenormMin, -Ty::kDenormMin};
  std::normal_distribution<double> normal(0.0, 3.0);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  std::vector<T> v(static_cast<size_t>(rows) * cols);
  for (size_t i = 0; i < v.size(); ++i) {
    double x = normal(rng);
    if (f == Fill::kWide)
      x = (unit(rng) < 0.5 ? -1 : 1) * std::pow(10.0, Ty::kLog10Lo + (Ty::kLog10Hi - Ty::kLog10Lo) * unit(rng));
    else if (f == Fill::kSpecial && unit(rng) < 0.2)
      x = specials[rng() % (sizeof(specials) / sizeof(specials[0]))];
    else if (f == Fill::kOffset)
      x += (i / cols % 2 ? -1 : 1) * Ty::kOffset;
    else if (f == Fill::kMasked && unit(rng) < 0.3)
      x = -inf;
    v[i] = Ty::FromDouble(x);
  }
  return v;
}

// The extension's CPU arithmetic on the case (type t; x, bias and y hold elements of t).
void RunCpu(Kernel k, DType t, const Case& c, const void* x, const void* bias, void* y) {
  const int64_t n = static_cast<int64_t>(c.rows) * c.cols;
  if (k == Kernel::kBiasRelu) CpuBiasRelu(t, x, bias, y, n, c.cols);
  if (k == Kernel::kGelu) CpuGelu(t, x, y, n);
  if (k == Kernel::kRowSoftmax) CpuRowSoftmax(t, x, y, c.rows, c.cols);
}

// --self-check's stand-in for the GPU: the CPU arithmetic in double, rounded to T.
template <typename T>
std::vector<T> RunCpuInDouble(Kernel k, const Case& c, const std::vector<T>& x, const std::vector<T>& bias) {
  std::vector<double> xd(x.size()), bd(bias.size()), yd(x.size());
  for (size_t i = 0; i < x.size(); ++i) xd[i] = Type<T>::ToDouble(x[i]);
  for (size_t i = 0; i < bias.size(); ++i) bd[i] = Type<T>::ToDouble(bias[i]);
  RunCpu(k, DType::kDouble, c, xd.data(), bd.data(), yd.data());
  std::vector<T> y(yd.size());
  for (size_t i = 0; i < y.size(); ++i) y[i] = Type<T>::FromDouble(yd[i]);
  return y;
}

#define RETURN_IF_CUDA_ERROR(expr)                                              \
  do {                                                                          \
    const cudaError_t e_ = (expr);                                              \
    if (e_ != cudaSuccess) return std::string(#expr) + ": " + cudaGetErrorString(e_); \
  } while (0)

struct DeviceBuffer {
  void* p = nullptr;
  ~DeviceBuffer() {
    if (p) cudaFree(p);
  }
};

// Guard elements on each side of the output, preset to a byte pattern (a finite value in
// every type, not a likely result) and checked afterwards: a stray write shows there.
constexpr size_t kGuard = 1024;
constexpr unsigned char kSentinel = 0x7B;

// The kernel's output for the case through its launcher, or why there is none.
template <typename T>
std::string RunGpu(Kernel k, const Case& c, const std::vector<T>& x, const std::vector<T>& bias,
                   std::vector<T>* y) {
  const size_t n = x.size(), total = n + 2 * kGuard;
  DeviceBuffer dx, db, dy;
  RETURN_IF_CUDA_ERROR(cudaMalloc(&dx.p, std::max<size_t>(n, 1) * sizeof(T)));
  RETURN_IF_CUDA_ERROR(cudaMalloc(&db.p, std::max<size_t>(bias.size(), 1) * sizeof(T)));
  RETURN_IF_CUDA_ERROR(cudaMalloc(&dy.p, total * sizeof(T)));
  if (n) RETURN_IF_CUDA_ERROR(cudaMemcpy(dx.p, x.data(), n * sizeof(T), cudaMemcpyHostToDevice));
  if (!bias.empty())
    RETURN_IF_CUDA_ERROR(cudaMemcpy(db.p, bias.data(), bias.size() * sizeof(T), cudaMemcpyHostToDevice));
  RETURN_IF_CUDA_ERROR(cudaMemset(dy.p, kSentinel, total * sizeof(T)));
  const T* in = static_cast<const T*>(dx.p);
  T* out = static_cast<T*>(dy.p) + kGuard;
  cudaError_t launch = cudaSuccess;
  if (k == Kernel::kBiasRelu)
    launch = tfext::device::LaunchBiasRelu<T>(nullptr, static_cast<int>(n), c.cols, in,
                                              static_cast<const T*>(db.p), out);
  if (k == Kernel::kGelu) launch = tfext::device::LaunchGelu<T>(nullptr, static_cast<int>(n), in, out);
  if (k == Kernel::kRowSoftmax) launch = tfext::device::LaunchRowSoftmax<T>(nullptr, c.rows, c.cols, in, out);
  RETURN_IF_CUDA_ERROR(launch);
  RETURN_IF_CUDA_ERROR(cudaDeviceSynchronize());
  std::vector<T> all(total);
  RETURN_IF_CUDA_ERROR(cudaMemcpy(all.data(), dy.p, total * sizeof(T), cudaMemcpyDeviceToHost));
  const std::vector<unsigned char> guard(kGuard * sizeof(T), kSentinel);
  if (std::memcmp(all.data(), guard.data(), guard.size()) != 0 ||
      std::memcmp(all.data() + kGuard + n, guard.data(), guard.size()) != 0)
    return "the kernel wrote outside its output";
  y->assign(all.begin() + kGuard, all.begin() + kGuard + n);
  return "";
}

// Tolerance, in units of the arithmetic type's epsilon (plus one rounding to T when T is
// half), relative to the larger of |cpu result| and the op's scale. bias_relu does the same
// IEEE operations on both sides: equal but for a unit. gelu: tanh differs by an ulp or two
// between libm and CUDA, and 1 + tanh cancels for negative x, so its error scales with |x|.
// row_softmax: CUDA's exp, and a tree sum on the GPU against the CPU's sequential one, whose
// rounding error grows with the columns: against the exact (double) sum the CPU's float sum
// is off by 13 units at 257 columns, 32 at 4097 and 1200 at 100000 (--self-check), under a
// sixteenth of the sequential sum's worst case (cols units), which this allows plus 32.
double TolUnits(Kernel k, const Case& c) {
  if (k == Kernel::kBiasRelu) return 1;
  if (k == Kernel::kGelu) return 8;
  return 32 + c.cols / 16.0;
}

struct Stats {
  int cases = 0;
  long long bad = 0;
  double max_abs = 0, max_rel = 0;
};

template <typename T>
void Compare(Kernel k, const Case& c, int case_no, const std::vector<T>& x, const std::vector<T>& ref,
             const std::vector<T>& got, Stats* s) {
  using Ty = Type<T>;
  const double rel_tol = (Ty::kEps > Ty::kAccEps ? Ty::kEps : 0) + TolUnits(k, c) * Ty::kAccEps;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double r = Ty::ToDouble(ref[i]), g = Ty::ToDouble(got[i]);
    const double scale = std::max(std::fabs(r), k == Kernel::kGelu ? std::fabs(Ty::ToDouble(x[i])) : 0.0);
    double err = 0, tol = 0;
    bool ok;
    if (std::isnan(r) || std::isnan(g)) {
      ok = std::isnan(r) && std::isnan(g);  // the same NaN-in, NaN-out rules on both sides
    } else if (std::isinf(r) || std::isinf(g)) {
      ok = r == g;
    } else {
      err = std::fabs(g - r);
      tol = rel_tol * scale + 2 * Ty::kDenormMin;
      ok = err <= tol;
      s->max_abs = std::max(s->max_abs, err);
      s->max_rel = std::max(s->max_rel, err / std::max(scale, Ty::kMinNormal));
    }
    if (!ok && s->bad++ < 5)
      std::fprintf(stderr, "  %s/%s case %d (%dx%d %s) element %zu: x=%.9g cpu=%.9g gpu=%.9g tol=%.3g\n",
                   Name(k), Ty::kName, case_no, c.rows, c.cols, Name(c.fill), i, Ty::ToDouble(x[i]), r, g, tol);
  }
}

// mode: 45 columns, the longest label run_gpu_check.sh gives ("SASS sm_100a via ptxas+fatbinary
// options file").
const char* kRowFormat = "| %-19s | %-45s | %5s | %11s | %11s | %-6s |\n";

void PrintRow(const std::string& kernel, const std::string& mode, const Stats& s, const std::string& result) {
  char abs_err[32], rel_err[32], cases[16];
  std::snprintf(abs_err, sizeof(abs_err), "%.2e", s.max_abs);
  std::snprintf(rel_err, sizeof(rel_err), "%.2e", s.max_rel);
  std::snprintf(cases, sizeof(cases), "%d", s.cases);
  std::printf(kRowFormat, kernel.c_str(), mode.c_str(), cases, abs_err, rel_err, result.c_str());
  std::fflush(stdout);
}

// Runs every case of kernel k in type T; false when a CUDA call failed (the context may be
// unusable: the caller stops).
template <typename T>
bool CheckKernel(Kernel k, const std::string& mode, bool self_check, uint64_t seed, bool* all_passed) {
  std::seed_seq seq{seed, static_cast<uint64_t>(k), static_cast<uint64_t>(Type<T>::kDType)};
  std::mt19937_64 rng(seq);
  Stats s;
  std::string error;
  const std::vector<Case> cases = Cases(k);
  for (size_t i = 0; i < cases.size() && error.empty(); ++i) {
    const Case& c = cases[i];
    const std::vector<T> x = Draw<T>(c.fill, c.rows, c.cols, rng);
    const std::vector<T> bias = k == Kernel::kBiasRelu ? Draw<T>(c.fill, 1, c.cols, rng) : std::vector<T>();
    std::vector<T> ref(x.size()), got;
    RunCpu(k, Type<T>::kDType, c, x.data(), bias.data(), ref.data());
    if (self_check)
      got = RunCpuInDouble(k, c, x, bias);
    else if (!(error = RunGpu(k, c, x, bias, &got)).empty())
      std::fprintf(stderr, "  %s/%s case %zu (%dx%d %s): %s\n", Name(k), Type<T>::kName, i, c.rows,
                   c.cols, Name(c.fill), error.c_str());
    if (error.empty()) Compare(k, c, static_cast<int>(i), x, ref, got, &s);
    ++s.cases;
  }
  const bool passed = error.empty() && s.bad == 0;
  if (s.bad) std::fprintf(stderr, "  %s/%s: %lld elements out of tolerance\n", Name(k), Type<T>::kName, s.bad);
  PrintRow(std::string(Name(k)) + "/" + Type<T>::kName, mode, s, passed ? "PASS" : error.empty() ? "FAIL" : "ERROR");
  *all_passed = *all_passed && passed;
  return error.empty();
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode;
  bool header = false, self_check = false;
  uint64_t seed = 20240530;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--label" && i + 1 < argc) mode = argv[++i];
    else if (a == "--seed" && i + 1 < argc) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--header") header = true;
    else if (a == "--self-check") self_check = true;
    else {
      std::fprintf(stderr, "usage: %s --label MODE [--header] [--seed N] | --self-check [--header]\n", argv[0]);
      return 2;
    }
  }
  if (self_check) {
    mode = "CPU double (self-check)";
  } else {
    int count = 0;
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e == cudaErrorNoDevice || (e == cudaSuccess && count == 0)) {
      std::printf("SKIP: the CUDA runtime finds no GPU\n");
      return 77;
    }
    if (e != cudaSuccess) {
      std::fprintf(stderr, "kernel_check: cudaGetDeviceCount: %s\n", cudaGetErrorString(e));
      return 1;
    }
    if (header) {
      cudaDeviceProp p;
      int driver = 0, runtime = 0;
      cudaGetDeviceProperties(&p, 0);
      cudaDriverGetVersion(&driver);
      cudaRuntimeGetVersion(&runtime);
      std::printf("GPU 0: %s, compute capability %d.%d; driver API %d, runtime %d; seed %llu\n", p.name,
                  p.major, p.minor, driver, runtime, static_cast<unsigned long long>(seed));
    }
  }
  if (header) {
    std::printf(kRowFormat, "kernel", "mode", "cases", "max abs err", "max rel err", "result");
    std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(21, '-').c_str(), std::string(47, '-').c_str(),
                std::string(7, '-').c_str(), std::string(13, '-').c_str(), std::string(13, '-').c_str(),
                std::string(8, '-').c_str());
  }
  bool passed = true;
  for (Kernel k : {Kernel::kBiasRelu, Kernel::kGelu, Kernel::kRowSoftmax}) {
    // --self-check has no double row: its stand-in for the GPU is the double arithmetic.
    if (!CheckKernel<__half>(k, mode, self_check, seed, &passed) ||
        !CheckKernel<float>(k, mode, self_check, seed, &passed) ||
        (!self_check && !CheckKernel<double>(k, mode, self_check, seed, &passed)))
      return 1;
  }
  return passed ? 0 : 1;
}
