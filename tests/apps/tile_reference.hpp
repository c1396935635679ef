// Reference tile operations (plain loops, column-major b x b) and random tiles for the tile kernel tests.
#pragma once

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace reprise::apps::testing {

using Tile = std::vector<double>;

inline double& at(Tile& t, int b, int r, int c) {
  return t[static_cast<std::size_t>(c) * b + r];
}
inline double at(const Tile& t, int b, int r, int c) {
  return t[static_cast<std::size_t>(c) * b + r];
}

inline Tile random_tile(int b, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  Tile t(static_cast<std::size_t>(b) * b);
  for (double& x : t) x = u(rng);
  return t;
}

/// Symmetric, diagonally dominant: positive definite.
inline Tile spd_tile(int b, std::mt19937_64& rng) {
  Tile t = random_tile(b, rng);
  for (int c = 0; c < b; ++c)
    for (int r = 0; r < c; ++r) at(t, b, r, c) = at(t, b, c, r);
  for (int d = 0; d < b; ++d) at(t, b, d, d) += b;
  return t;
}

inline void ref_syrk(const Tile& l, Tile& a, int b) {
  for (int c = 0; c < b; ++c)
    for (int r = c; r < b; ++r) {
      double s = 0;
      for (int k = 0; k < b; ++k) s += at(l, b, r, k) * at(l, b, c, k);
      at(a, b, r, c) -= s;
    }
}

inline void ref_gemm(const Tile& x, const Tile& y, Tile& a, int b) {
  for (int c = 0; c < b; ++c)
    for (int r = 0; r < b; ++r) {
      double s = 0;
      for (int k = 0; k < b; ++k) s += at(x, b, r, k) * at(y, b, c, k);
      at(a, b, r, c) -= s;
    }
}

/// Returns 0, or k when the leading minor of order k is not positive definite (as LAPACK's info).
inline int ref_potrf(Tile& a, int b) {
  for (int j = 0; j < b; ++j) {
    double d = at(a, b, j, j);
    for (int k = 0; k < j; ++k) d -= at(a, b, j, k) * at(a, b, j, k);
    if (!(d > 0)) return j + 1;
    const double ljj = std::sqrt(d);
    at(a, b, j, j) = ljj;
    for (int i = j + 1; i < b; ++i) {
      double s = at(a, b, i, j);
      for (int k = 0; k < j; ++k) s -= at(a, b, i, k) * at(a, b, j, k);
      at(a, b, i, j) = s / ljj;
    }
  }
  return 0;
}

/// a = a L^{-T}, L the lower triangle of l: each row x of the result solves L x^T = row^T.
inline void ref_trsm(const Tile& l, Tile& a, int b) {
  for (int r = 0; r < b; ++r)
    for (int j = 0; j < b; ++j) {
      double s = at(a, b, r, j);
      for (int k = 0; k < j; ++k) s -= at(a, b, r, k) * at(l, b, j, k);
      at(a, b, r, j) = s / at(l, b, j, j);
    }
}

/// Largest difference over the entries (lower triangle only when `lower`), relative to the largest |expected|.
inline double rel_diff(const Tile& got, const Tile& want, int b, bool lower = false) {
  double d = 0, m = 0;
  for (int c = 0; c < b; ++c)
    for (int r = lower ? c : 0; r < b; ++r) {
      d = std::max(d, std::fabs(at(got, b, r, c) - at(want, b, r, c)));
      m = std::max(m, std::fabs(at(want, b, r, c)));
    }
  return m > 0 ? d / m : d;
}

}  // namespace reprise::apps::testing
