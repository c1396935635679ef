// heat3d: a 3D heat equation on a Cartesian process grid, written as people write MPI + Kokkos code without
// Reprise: MPI_COMM_WORLD, MPI_Cart_create, halos packed into views and exchanged with MPI_Isend/MPI_Irecv and
// MPI_Waitall, an MPI_Allreduce of the energy every step, two views swapped every step. Its Reprise lines are the
// blocks under REPRISE_WRAPPED: built without them it is `heat3d-plain` (plain MPI); with them, and linked with
// libreprise_interpose.so, `reprise-heat3d`, whose MPI calls go through the protocol.
//   heat3d [--nx N] [--ny N] [--nz N] [--steps N] [--checkpoint-every K] [--persistent] [--overlap] [--neighbor]
//          [--graph] [--late-receive] [--output FILE [--output-every K] [--output-open|--output-ordered]] [--json FILE]
// --persistent: the halo exchange is made once as persistent requests (MPI_Recv_init, MPI_Send_init) and started
// every step (MPI_Startall), as many stencil codes do; so is the energy's reduction where MPI has persistent
// collectives (MPI 4's MPI_Allreduce_init; Open MPI 5).
// --overlap: the energy's reduction is non-blocking (MPI_Iallreduce), started at the end of a step and waited for
// after the next step's halo exchange, as codes that hide a reduction's latency do.
// --neighbor: the halo exchange is one MPI_Neighbor_alltoallw on the Cartesian communicator (the faces' addresses
// from MPI_BOTTOM), as codes written for MPI-3's neighbourhood collectives do. --graph: the same on a distributed
// graph of the faces that have a neighbour (MPI_Dist_graph_create_adjacent), as unstructured codes make theirs.
// --late-receive: each step's halos are sent (MPI_Isend), then the ranks meet in an MPI_Barrier, and only then are
// the receives posted (MPI_Irecv): the neighbours' faces wait in MPI as unexpected messages, as in codes that send
// early and receive after a synchronisation.
// --output FILE: every K steps (--output-every, default 10) the whole field is written to FILE with MPI-IO, after the
// snapshots before it (each rank its block, MPI_File_write_at_all through a subarray view), as codes write their
// output; the file is made empty at the start (MPI_File_set_size), and at the end rank 0 reads it back and prints
// `output 0x<16 hex digits> bytes N` (bit-identical for both builds, with or without failures). --output-open: the
// file is opened once in the set-up, its view set there, kept open, and each snapshot written where the previous
// one ended (MPI_File_write_all, through the file pointer), as codes appending to a time series do.
// --output-ordered: the same, each rank's block (its interior, in C order) after the blocks of the ranks before it
// (MPI_File_write_ordered, through the shared file pointer), as codes writing records of any size do.
// --json FILE: rank 0 writes the run's figures there (with Reprise: its recoveries, its memory against its budget
// and its checkpoints' metrics).
// Prints the energy every 10 steps, `checksum 0x<16 hex digits>` of the final field (bit-identical for both
// builds, with or without failures) and the slowest rank's seconds per step of the loop.
#include <mpi.h>

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#ifdef REPRISE_WRAPPED
#include "reprise/interpose.hpp"
#include "reprise/kokkos.hpp"
#endif

namespace {

using Field = Kokkos::View<double***>;
using Face = Kokkos::View<double**>;

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

struct Options {
  int nx = 48, ny = 48, nz = 48;
  long steps = 60, every = 10;
  bool persistent = false;    // --persistent: the halo exchange as persistent requests (MPI_Send_init, MPI_Startall)
  bool overlap = false;       // --overlap: the energy's reduction as MPI_Iallreduce, waited for a step later
  bool neighbor = false;      // --neighbor: the halo exchange as MPI_Neighbor_alltoallw
  bool graph = false;         // --graph: that on a distributed graph communicator
  bool late_receive = false;  // --late-receive: the halos sent, a barrier, then their receives posted
  std::string json;           // --json FILE
  std::string output;         // --output FILE
  long output_every = 10;     // --output-every K
  bool output_open = false;   // --output-open: kept open, written through the file pointer
  bool ordered = false;       // --output-ordered: kept open, written through the shared file pointer
};

Options parse(int argc, char** argv, int rank) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> long {
      if (i + 1 >= argc) {
        if (rank == 0) std::fprintf(stderr, "heat3d: %s needs a value\n", a.c_str());
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      char* end = nullptr;
      const long v = std::strtol(argv[++i], &end, 10);
      if (*end != '\0' || v <= 0) {
        if (rank == 0) std::fprintf(stderr, "heat3d: %s takes a positive integer, not '%s'\n", a.c_str(), argv[i]);
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      return v;
    };
    if (a == "--persistent")
      o.persistent = true;
    else if (a == "--overlap")
      o.overlap = true;
    else if (a == "--neighbor")
      o.neighbor = true;
    else if (a == "--graph")
      o.neighbor = o.graph = true;
    else if (a == "--late-receive")
      o.late_receive = true;
    else if (a == "--json") {
      if (i + 1 >= argc) {
        if (rank == 0) std::fprintf(stderr, "heat3d: --json needs a file name\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      o.json = argv[++i];
    } else if (a == "--output") {
      if (i + 1 >= argc) {
        if (rank == 0) std::fprintf(stderr, "heat3d: --output needs a file name\n");
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
      o.output = argv[++i];
    } else if (a == "--output-every")
      o.output_every = value();
    else if (a == "--output-open")
      o.output_open = true;
    else if (a == "--output-ordered")
      o.output_open = o.ordered = true;
    else if (a == "--nx")
      o.nx = static_cast<int>(value());
    else if (a == "--ny")
      o.ny = static_cast<int>(value());
    else if (a == "--nz")
      o.nz = static_cast<int>(value());
    else if (a == "--steps")
      o.steps = value();
    else if (a == "--checkpoint-every")
      o.every = value();
    else if (a.rfind("--kokkos", 0) != 0) {
      if (rank == 0) std::fprintf(stderr, "heat3d: unknown option %s\n", a.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
  }
  return o;
}

// The six faces of the interior, in the order (-x, +x, -y, +y, -z, +z).
struct Halo {
  Face send[6], recv[6];
  int neighbour[6];
};

void solve(const Options& o) {
  int rank = 0, size = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  int dims[3] = {0, 0, 0}, periods[3] = {0, 0, 0}, coords[3];
  MPI_Dims_create(size, 3, dims);
  MPI_Comm cart;
  MPI_Cart_create(MPI_COMM_WORLD, 3, dims, periods, 0, &cart);
  int me = 0;
  MPI_Comm_rank(cart, &me);
  MPI_Cart_coords(cart, me, 3, coords);
  if (o.nx % dims[0] || o.ny % dims[1] || o.nz % dims[2]) {
    if (me == 0)
      std::fprintf(stderr, "heat3d: the grid %dx%dx%d does not divide into %dx%dx%d processes\n", o.nx, o.ny, o.nz,
                   dims[0], dims[1], dims[2]);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int lx = o.nx / dims[0], ly = o.ny / dims[1], lz = o.nz / dims[2];
  const int x0 = coords[0] * lx, y0 = coords[1] * ly, z0 = coords[2] * lz;
  Field u("u", lx + 2, ly + 2, lz + 2), next("u_next", lx + 2, ly + 2, lz + 2);
  Kokkos::parallel_for(
      "init", Kokkos::MDRangePolicy<Kokkos::Rank<3>>({1, 1, 1}, {lx + 1, ly + 1, lz + 1}),
      KOKKOS_LAMBDA(int i, int j, int k) {
        const double x = (x0 + i - 0.5) / o.nx, y = (y0 + j - 0.5) / o.ny, z = (z0 + k - 0.5) / o.nz;
        u(i, j, k) = (x > 0.3 && x < 0.7 && y > 0.2 && y < 0.6 && z > 0.4 && z < 0.9) ? 100.0 : x * y * z;
      });
  Halo h;
  const int face_dims[6][2] = {{ly, lz}, {ly, lz}, {lx, lz}, {lx, lz}, {lx, ly}, {lx, ly}};
  for (int f = 0; f < 6; ++f) {
    h.send[f] = Face("send", face_dims[f][0], face_dims[f][1]);
    h.recv[f] = Face("recv", face_dims[f][0], face_dims[f][1]);
  }
  for (int d = 0; d < 3; ++d) MPI_Cart_shift(cart, d, 1, &h.neighbour[2 * d], &h.neighbour[2 * d + 1]);
  // --graph: an edge to and from each neighbour, in the order of the faces (those without one left out). Made from
  // MPI_COMM_WORLD (the same ranks: reorder 0 above): from `cart`, Open MPI 5.0.7's MPI_Neighbor_alltoallw then
  // crashes in the plain build (a null read inside it, checked by hand).
  std::vector<int> faces, ranks;
  MPI_Comm halo_comm = cart;
  if (o.graph) {
    for (int f = 0; f < 6; ++f)
      if (h.neighbour[f] != MPI_PROC_NULL) faces.push_back(f), ranks.push_back(h.neighbour[f]);
    const int n = static_cast<int>(ranks.size());
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, n, ranks.data(), MPI_UNWEIGHTED, n, ranks.data(), MPI_UNWEIGHTED,
                                   MPI_INFO_NULL, 0, &halo_comm);
  } else {
    for (int f = 0; f < 6; ++f) faces.push_back(f);
  }
  long step = 0;

  // --output: the field's interior as this rank's block of the file's global grid (snapshots one after the other).
  MPI_Datatype block = MPI_DATATYPE_NULL;
  MPI_File output_file = MPI_FILE_NULL;  // --output-open
  if (!o.output.empty()) {
    const int global[3] = {o.nx, o.ny, o.nz}, local[3] = {lx, ly, lz}, at[3] = {x0, y0, z0};
    MPI_Type_create_subarray(3, global, local, at, MPI_ORDER_C, MPI_DOUBLE, &block);
    MPI_Type_commit(&block);
    MPI_File f;
    if (MPI_File_open(cart, o.output.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &f) != MPI_SUCCESS) {
      if (me == 0) std::fprintf(stderr, "heat3d: cannot write %s\n", o.output.c_str());
      MPI_Abort(MPI_COMM_WORLD, 2);
    }
    MPI_File_set_size(f, 0);  // a longer file of an earlier run
    if (o.output_open)
      MPI_File_set_view(f, 0, MPI_DOUBLE, o.ordered ? MPI_DOUBLE : block, "native", MPI_INFO_NULL);
    else
      MPI_File_close(&f);
    output_file = f;
  }
  auto write_output = [&](const Field& field, long snapshot) {
    // The interior in C order, whatever the view's layout (a device view's mirror is column-major).
    auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), field);
    std::vector<double> values;
    values.reserve(static_cast<std::size_t>(lx) * ly * lz);
    for (int i = 1; i <= lx; ++i)
      for (int j = 1; j <= ly; ++j)
        for (int k = 1; k <= lz; ++k) values.push_back(host(i, j, k));
    if (o.output_open) {  // after the snapshots before it: the file pointer moved past them
      const int n = static_cast<int>(values.size());
      if (o.ordered)
        MPI_File_write_ordered(output_file, values.data(), n, MPI_DOUBLE, MPI_STATUS_IGNORE);
      else
        MPI_File_write_all(output_file, values.data(), n, MPI_DOUBLE, MPI_STATUS_IGNORE);
      return;
    }
    MPI_File f;
    MPI_File_open(cart, o.output.c_str(), MPI_MODE_WRONLY, MPI_INFO_NULL, &f);
    const MPI_Offset at = static_cast<MPI_Offset>(snapshot) * o.nx * o.ny * o.nz * sizeof(double);
    MPI_File_set_view(f, at, MPI_DOUBLE, block, "native", MPI_INFO_NULL);
    MPI_File_write_at_all(f, 0, values.data(), static_cast<int>(values.size()), MPI_DOUBLE, MPI_STATUS_IGNORE);
    MPI_File_close(&f);
  };

#ifdef REPRISE_WRAPPED
  reprise::MpiRuntime& rt = reprise::wrapped_runtime();
  rt.protect(u);  // followed through the swaps below
  rt.protect("step", &step);
  if (rt.restarted()) {
    rt.restore();
    std::printf("rank %d restored step %ld\n", me, step), std::fflush(stdout);
  }
#endif

  // A face sent towards +x arrives as the neighbour's -x ghosts: tag = the receiving side.
  MPI_Request requests[12];
  auto halo_requests = [&](bool persistent) {
    for (int f = 0; f < 6; ++f) {
      const int rn = static_cast<int>(h.recv[f].size()), sn = static_cast<int>(h.send[f].size());
      if (persistent) {
        MPI_Recv_init(h.recv[f].data(), rn, MPI_DOUBLE, h.neighbour[f], f, cart, &requests[f]);
        MPI_Send_init(h.send[f].data(), sn, MPI_DOUBLE, h.neighbour[f], f ^ 1, cart, &requests[6 + f]);
      } else if (o.late_receive) {
        MPI_Isend(h.send[f].data(), sn, MPI_DOUBLE, h.neighbour[f], f ^ 1, cart, &requests[6 + f]);
      } else {
        MPI_Irecv(h.recv[f].data(), rn, MPI_DOUBLE, h.neighbour[f], f, cart, &requests[f]);
        MPI_Isend(h.send[f].data(), sn, MPI_DOUBLE, h.neighbour[f], f ^ 1, cart, &requests[6 + f]);
      }
    }
    if (persistent || !o.late_receive) return;
    MPI_Barrier(cart);
    for (int f = 0; f < 6; ++f)
      MPI_Irecv(h.recv[f].data(), static_cast<int>(h.recv[f].size()), MPI_DOUBLE, h.neighbour[f], f, cart,
                &requests[f]);
  };
  if (o.persistent) halo_requests(true);  // made once, started every step
  // --neighbor: face f goes to the Cartesian neighbour f (MPI's order: -x, +x, -y, +y, -z, +z) and its ghosts come
  // from it; a missing neighbour's blocks are not touched. --graph: block i is face faces[i].
  auto neighbor_exchange = [&] {
    int counts[6];
    MPI_Aint send_at[6], recv_at[6];
    MPI_Datatype types[6];
    for (std::size_t i = 0; i < faces.size(); ++i) {
      const int f = faces[i];
      counts[i] = static_cast<int>(h.send[f].size());
      MPI_Get_address(h.send[f].data(), &send_at[i]);
      MPI_Get_address(h.recv[f].data(), &recv_at[i]);
      types[i] = MPI_DOUBLE;
    }
    MPI_Neighbor_alltoallw(MPI_BOTTOM, counts, send_at, types, MPI_BOTTOM, counts, recv_at, types, halo_comm);
  };

  // The energy of step `energy_step`, reduced in the background with --overlap (printed once its request completed),
  // by a persistent request with --persistent.
  double energy_local = 0, energy = 0;
  long energy_step = 0;
  MPI_Request energy_request = MPI_REQUEST_NULL;
  bool energy_pending = false, energy_persistent = false;
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
  if (o.persistent) {
    MPI_Allreduce_init(&energy_local, &energy, 1, MPI_DOUBLE, MPI_SUM, cart, MPI_INFO_NULL, &energy_request);
    energy_persistent = true;
  }
#endif
  auto energy_done = [&] {
    if (!energy_pending) return;
    MPI_Wait(&energy_request, MPI_STATUS_IGNORE);
    energy_pending = false;
    if (me == 0 && energy_step % 10 == 0)
      std::printf("step %ld energy %.17g\n", energy_step, energy), std::fflush(stdout);
  };

  const double alpha = 0.1;
  const double t0 = MPI_Wtime();
  const long first_step = step;
  while (step < o.steps) {
#ifdef REPRISE_WRAPPED
    rt.step(static_cast<std::uint64_t>(step));
#endif
    // Pack the faces, exchange them, unpack into the ghost layers (a missing neighbour: the ghosts stay 0).
    for (int f = 0; f < 6; ++f) {
      Face s = h.send[f];
      const int d = f / 2, at = f % 2 == 0 ? 1 : (d == 0 ? lx : d == 1 ? ly : lz);
      Kokkos::parallel_for(
          "pack", Kokkos::MDRangePolicy<Kokkos::Rank<2>>({0, 0}, {face_dims[f][0], face_dims[f][1]}),
          KOKKOS_LAMBDA(int a, int b) {
            s(a, b) = d == 0 ? u(at, a + 1, b + 1) : d == 1 ? u(a + 1, at, b + 1) : u(a + 1, b + 1, at);
          });
    }
    Kokkos::fence();
    if (o.neighbor) {
      neighbor_exchange();
    } else {
      if (o.persistent)
        MPI_Startall(12, requests);
      else
        halo_requests(false);
      MPI_Waitall(12, requests, MPI_STATUSES_IGNORE);
    }
    energy_done();  // (--overlap: the previous step's, reduced while this one's halos came)
    for (int f = 0; f < 6; ++f) {
      if (h.neighbour[f] == MPI_PROC_NULL) continue;
      Face r = h.recv[f];
      const int d = f / 2, at = f % 2 == 0 ? 0 : (d == 0 ? lx + 1 : d == 1 ? ly + 1 : lz + 1);
      Kokkos::parallel_for(
          "unpack", Kokkos::MDRangePolicy<Kokkos::Rank<2>>({0, 0}, {face_dims[f][0], face_dims[f][1]}),
          KOKKOS_LAMBDA(int a, int b) {
            if (d == 0)
              u(at, a + 1, b + 1) = r(a, b);
            else if (d == 1)
              u(a + 1, at, b + 1) = r(a, b);
            else
              u(a + 1, b + 1, at) = r(a, b);
          });
    }
    Kokkos::parallel_for(
        "step", Kokkos::MDRangePolicy<Kokkos::Rank<3>>({1, 1, 1}, {lx + 1, ly + 1, lz + 1}),
        KOKKOS_LAMBDA(int i, int j, int k) {
          next(i, j, k) = u(i, j, k) + alpha * (u(i - 1, j, k) + u(i + 1, j, k) + u(i, j - 1, k) + u(i, j + 1, k) +
                                                u(i, j, k - 1) + u(i, j, k + 1) - 6.0 * u(i, j, k));
        });
    Kokkos::fence();
    std::swap(u, next);
    Kokkos::parallel_reduce(
        "energy", Kokkos::MDRangePolicy<Kokkos::Rank<3>>({1, 1, 1}, {lx + 1, ly + 1, lz + 1}),
        KOKKOS_LAMBDA(int i, int j, int k, double& e) { e += u(i, j, k); }, energy_local);
    ++step;
    energy_step = step;
    if (o.overlap || energy_persistent) {
      if (energy_persistent)
        MPI_Start(&energy_request);
      else
        MPI_Iallreduce(&energy_local, &energy, 1, MPI_DOUBLE, MPI_SUM, cart, &energy_request);
      energy_pending = true;
      if (!o.overlap) energy_done();
    } else {
      MPI_Allreduce(&energy_local, &energy, 1, MPI_DOUBLE, MPI_SUM, cart);
      if (me == 0 && step % 10 == 0) std::printf("step %ld energy %.17g\n", step, energy), std::fflush(stdout);
    }
    if (!o.output.empty() && step % o.output_every == 0) write_output(u, step / o.output_every - 1);
#ifdef REPRISE_WRAPPED
    if (step % o.every == 0) rt.checkpoint(static_cast<std::uint64_t>(step));
#endif
  }
  energy_done();
  // --output: rank 0 reads the file back (the others open and close it with it) and digests it.
  std::uint64_t output_digest = 0;
  MPI_Offset output_bytes = 0;
  if (!o.output.empty()) {
    if (o.output_open) MPI_File_close(&output_file);
    MPI_File f;
    MPI_File_open(cart, o.output.c_str(), MPI_MODE_RDONLY, MPI_INFO_NULL, &f);
    MPI_File_get_size(f, &output_bytes);
    if (me == 0) {
      std::vector<std::uint64_t> words(1 << 16);
      for (MPI_Offset done = 0; done < output_bytes;) {
        const int n = static_cast<int>(std::min<MPI_Offset>(output_bytes - done, 8 << 16));
        MPI_File_read_at(f, done, words.data(), n, MPI_BYTE, MPI_STATUS_IGNORE);
        for (int w = 0; w < n / 8; ++w)
          output_digest += mix(words[static_cast<std::size_t>(w)] ^ mix(static_cast<std::uint64_t>(done / 8 + w)));
        done += n;
      }
    }
    MPI_File_close(&f);
    MPI_Type_free(&block);
  }

  // Seconds per step of the loop, the slowest rank's.
  double mine = (MPI_Wtime() - t0) / static_cast<double>(step > first_step ? step - first_step : 1), slowest = 0;
  MPI_Reduce(&mine, &slowest, 1, MPI_DOUBLE, MPI_MAX, 0, cart);
  // The checksum: every interior value's bits, mixed with its global position, summed over the ranks.
  auto host = Kokkos::create_mirror_view_and_copy(Kokkos::HostSpace(), u);
  std::uint64_t local = 0, total = 0;
  for (int i = 1; i <= lx; ++i)
    for (int j = 1; j <= ly; ++j)
      for (int k = 1; k <= lz; ++k) {
        std::uint64_t bits = 0;
        std::memcpy(&bits, &host(i, j, k), sizeof bits);
        const std::uint64_t at =
            (static_cast<std::uint64_t>(x0 + i - 1) * o.ny + (y0 + j - 1)) * static_cast<std::uint64_t>(o.nz) +
            (z0 + k - 1);
        local += mix(bits ^ mix(at));
      }
  MPI_Reduce(&local, &total, 1, MPI_UINT64_T, MPI_SUM, 0, cart);
  if (me == 0)
    std::printf("ranks %d grid %dx%dx%d steps %ld\nchecksum 0x%016" PRIx64 "\nseconds per step %.6f\n", size, o.nx,
                o.ny, o.nz, o.steps, total, slowest);
  if (me == 0 && !o.output.empty())
    std::printf("output 0x%016" PRIx64 " bytes %lld\n", output_digest, static_cast<long long>(output_bytes));
#ifdef REPRISE_WRAPPED
  if (!o.json.empty()) rt.wait();  // every rank: each checkpoint stored, so that the JSON lists them all
#endif
  if (me == 0 && !o.json.empty()) {
    char head[256];
    std::snprintf(head, sizeof head,
                  "{\"program\": \"heat3d\", \"ranks\": %d, \"grid\": [%d, %d, %d], \"steps\": %ld, "
                  "\"checksum\": \"0x%016" PRIx64 "\", \"seconds_per_step\": %.9g",
                  size, o.nx, o.ny, o.nz, o.steps, total, slowest);
    std::ofstream out(o.json);
    out << head;
#ifdef REPRISE_WRAPPED
    // Rank 0's recoveries, memory (against its budget) and its checkpoints (all stored: wait above): JSON the
    // runtime writes.
    out << ", \"recoveries\": " << rt.recovery_json() << ", \"memory\": " << rt.memory_json()
        << ", \"checkpoint_metrics\": " << rt.metrics_json();
#endif
    out << "}\n";
    if (!out) std::fprintf(stderr, "heat3d: could not write %s\n", o.json.c_str());
  }
  if (o.persistent)
    for (MPI_Request& r : requests) MPI_Request_free(&r);
  if (energy_persistent) MPI_Request_free(&energy_request);
  if (o.graph) MPI_Comm_free(&halo_comm);
  MPI_Comm_free(&cart);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const Options o = parse(argc, argv, rank);
  Kokkos::initialize(argc, argv);
#ifdef REPRISE_WRAPPED
  // After a rollback of this rank's group, solve() runs again from its top and restores (no try/catch here).
  reprise::run(argc, argv, [&o](int, char**) {
    solve(o);
    return 0;
  });
#else
  solve(o);
#endif
  Kokkos::finalize();
  MPI_Finalize();
  return 0;
}
