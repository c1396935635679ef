// reprise-demo: one rank, one Kokkos field. A hot spot diffuses through a cold plate (5-point Jacobi); the
// field is checkpointed every few steps (only the chunks the heat front has reached change, so versions are
// differential). Midway the program corrupts its own field, restores the last checkpoint, re-runs the lost
// steps, and checks that it ends bit-identical to an undisturbed run. Prints a timing report.
#include <CLI/CLI.hpp>
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "heat_kernels.hpp"
#include "reprise/kokkos.hpp"
#include "reprise/reprise.hpp"

namespace {

using reprise::heat::Field;
using Clock = std::chrono::steady_clock;

struct RunResult {
  std::uint64_t checksum;
  double seconds;
};

// Runs `steps` steps; with a runtime, checkpoints every `every` steps and, at `corrupt_at`, destroys the field and
// recovers from the last checkpoint.
RunResult run(int nx, int steps, int every, int corrupt_at, reprise::Runtime* rt) {
  Field a("u", nx, nx), b("u_next", nx, nx);
  int step = 0;
  if (rt) {
    rt->protect(a);
    rt->protect("step", &step);
  }
  reprise::heat::heat_source(a);
  Kokkos::deep_copy(b, a);
  const auto t0 = Clock::now();
  bool corrupted = false;
  while (step < steps) {
    reprise::heat::step(a, b);  // the state stays in the protected view
    ++step;
    if (rt && step % every == 0) rt->checkpoint(static_cast<std::uint64_t>(step));
    if (rt && !corrupted && step == corrupt_at) {
      corrupted = true;
      Kokkos::deep_copy(a, -1.0);  // the "failure": the field is garbage now
      step = -12345;
      const std::uint64_t v = rt->restore();
      std::printf("  step %d: field corrupted; restored version %" PRIu64 ", resuming at step %d\n", corrupt_at, v,
                  step);
    }
  }
  Kokkos::fence();
  return {reprise::heat::fingerprint(a), std::chrono::duration<double>(Clock::now() - t0).count()};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"reprise-demo: checkpoint, corrupt, restore, compare (one rank, Kokkos)"};
  int nx = 1024, steps = 300, every = 25, corrupt_at = 180;
  std::string json;
  app.add_option("--nx", nx, "grid is nx x nx doubles")->check(CLI::Range(16, 1 << 15));
  app.add_option("--steps", steps, "time steps")->check(CLI::PositiveNumber);
  app.add_option("--checkpoint-every", every, "steps between checkpoints")->check(CLI::PositiveNumber);
  app.add_option("--corrupt-at", corrupt_at, "step at which the field is destroyed (0: never, to measure overhead)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--json", json, "write the checkpoint metrics (JSON) to this file");
  CLI11_PARSE(app, argc, argv);
  if (corrupt_at != 0 && (corrupt_at > steps || corrupt_at < every)) {
    std::fprintf(stderr, "reprise-demo: --corrupt-at must be 0 or lie between --checkpoint-every and --steps\n");
    return 2;
  }
  Kokkos::ScopeGuard kokkos(argc, argv);
  std::printf("reprise-demo: %dx%d doubles (%.1f MiB, %s memory), %d steps, checkpoint every %d, corruption at %s\n",
              nx, nx, nx * double(nx) * 8 / (1 << 20),
              Kokkos::SpaceAccessibility<Kokkos::HostSpace, Field::memory_space>::accessible ? "host" : "device", steps,
              every, corrupt_at ? ("step " + std::to_string(corrupt_at)).c_str() : "no step");

  RunResult reference = run(nx, steps, every, 0, nullptr);
  std::printf("  reference run (no checkpoints):      %.3f s, checksum 0x%016" PRIx64 "\n", reference.seconds,
              reference.checksum);

  reprise::Config cfg = reprise::Config::from_env();
  if (!json.empty()) cfg.metrics_file = json;
  RunResult protected_run{};
  std::vector<reprise::CheckpointMetrics> metrics;
  {
    reprise::Runtime rt(cfg);
    protected_run = run(nx, steps, every, corrupt_at, &rt);
    rt.wait();
    metrics = rt.metrics();
  }
  std::printf("  protected run (checkpoints + restore): %.3f s, checksum 0x%016" PRIx64 "\n", protected_run.seconds,
              protected_run.checksum);
  if (!corrupt_at) {  // a second reference run after the protected one: the faster of the two is the reference
    const RunResult again = run(nx, steps, every, 0, nullptr);
    std::printf("  reference run again:                  %.3f s\n", again.seconds);
    reference.seconds = std::min(reference.seconds, again.seconds);
  }

  std::printf("\n  %8s %5s %10s %10s %8s %12s %12s\n", "version", "kind", "protected", "stored", "dirty", "visible ms",
              "durable ms");
  double visible = 0;
  for (const auto& m : metrics) {
    visible += m.app_visible_seconds;
    std::printf("  %8" PRIu64 " %5s %8.1f M %8.2f M %7.1f%% %12.3f %12.3f\n", m.version, m.full ? "full" : "diff",
                m.bytes_protected / 1048576.0, m.bytes_dirty / 1048576.0, 100 * m.dirty_ratio(),
                1e3 * m.app_visible_seconds, 1e3 * m.durable_seconds);
  }
  std::printf("\n  checkpoints: %zu, app-visible total %.3f s = %.1f%% of the protected run\n", metrics.size(), visible,
              100 * visible / protected_run.seconds);
  std::printf("  store: %s\n", cfg.dir.empty() ? "host memory (set REPRISE_DIR for files)" : cfg.dir.c_str());
  if (!corrupt_at)
    std::printf("  overhead: the protected run took %+.1f%% of the reference run's time\n",
                100 * (protected_run.seconds - reference.seconds) / reference.seconds);
  const bool same = reference.checksum == protected_run.checksum;
  std::printf("checksum 0x%016" PRIx64 " %s\n", protected_run.checksum,
              same ? "(identical to the undisturbed run)" : "DIFFERS from the undisturbed run");
  return same ? 0 : 1;
}
