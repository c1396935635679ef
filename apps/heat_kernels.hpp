// The 5-point Jacobi heat kernels shared by reprise-demo and reprise-bench-overhead: a hot spot held at 100 in
// the middle of a cold plate. Kernels are free functions (nvcc rejects KOKKOS_LAMBDA in some enclosing scopes).
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>

namespace reprise::heat {

using Field = Kokkos::View<double**>;

inline void jacobi_step(const Field& in, const Field& out) {
  const int nx = static_cast<int>(in.extent(0)), ny = static_cast<int>(in.extent(1));
  Kokkos::parallel_for(
      "jacobi", Kokkos::MDRangePolicy<Kokkos::Rank<2>>({1, 1}, {nx - 1, ny - 1}),
      KOKKOS_LAMBDA(int i, int j) { out(i, j) = 0.25 * (in(i - 1, j) + in(i + 1, j) + in(i, j - 1) + in(i, j + 1)); });
}

inline void heat_source(const Field& u) {
  const int cx = static_cast<int>(u.extent(0)) / 2, cy = static_cast<int>(u.extent(1)) / 2;
  Kokkos::parallel_for(
      "source", Kokkos::MDRangePolicy<Kokkos::Rank<2>>({cx - 2, cy - 2}, {cx + 2, cy + 2}),
      KOKKOS_LAMBDA(int i, int j) { u(i, j) = 100.0; });
}

/// One time step: u <- jacobi(u), with `scratch` as the other buffer; the state stays in `u`.
inline void step(const Field& u, const Field& scratch) {
  jacobi_step(u, scratch);
  Kokkos::deep_copy(u, scratch);
  heat_source(u);
}

/// FNV-1a over the field's bytes: a bit-exact fingerprint.
inline std::uint64_t fingerprint(const Field& u) {
  auto h = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), u);
  const auto* p = reinterpret_cast<const unsigned char*>(h.data());
  std::uint64_t x = 1469598103934665603ULL;
  for (std::size_t i = 0; i < h.span() * sizeof(double); ++i) x = (x ^ p[i]) * 1099511628211ULL;
  return x;
}

}  // namespace reprise::heat
