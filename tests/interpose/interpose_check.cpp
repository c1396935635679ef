// interpose-check: a plain MPI program that uses every call the interposition serves, built twice: against MPI
// (interpose-check-plain) and linked with libreprise_interpose.so (reprise-interpose-check). Both print the same
// lines (each call's results, folded into digests); the wrapped one also checks that the messages went through
// reprise::Comm. --refuse CASE makes one call the interposition refuses: the job stops with a message naming it.
//   interpose-check [--refuse any-tag|tag|win|cancel|graph|neighbor-no-topology|
//                             free-receive|split-type|free-icollective|errors-are-fatal|inter-collective|
//                             inter-self|spawn-self|foreign-thread|foreign-finalize|
//                             communicators|partition-not-ready|file-shared|file-atomicity|
//                             file-delete-on-close]
//   interpose-check --node-communicator
//   reprise-interpose-check --message-before-restore | --probe-across-checkpoints [any-tag] |
//                           --any-source-across-checkpoints | --any-tag-across-checkpoints |
//                           --set-up-communicators |
//                           --file-opened-in-steps FILE
//                           (reprise::run; tests with kills)
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <cinttypes>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#ifdef REPRISE_WRAPPED
#include <nlohmann/json.hpp>

#include "reprise/interpose.hpp"
#endif

namespace {

std::uint64_t mix(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

int world_rank = 0, world_size = 0;

// Every rank's digest of `what`, gathered at rank 0 and printed there with `name`.
void report(const char* name, std::uint64_t digest) {
  std::vector<std::uint64_t> all(static_cast<std::size_t>(world_size));
  MPI_Gather(&digest, 1, MPI_UINT64_T, all.data(), 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
  if (world_rank != 0) return;
  std::uint64_t d = 0;
  for (std::uint64_t x : all) d = mix(d ^ x);
  std::printf("%-22s 0x%016" PRIx64 "\n", name, d);
}

template <class T>
std::uint64_t digest(const T* p, std::size_t n) {
  std::uint64_t d = 0;
  for (std::size_t i = 0; i < n; ++i) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, &p[i], sizeof(T) < 8 ? sizeof(T) : 8);
    d = mix(d ^ bits ^ (i << 40));
  }
  return d;
}

// The ints a receive got, folded with the source, tag and count its status gives (a receive from any rank: whichever
// receive got which message, the sum of these over them is the same).
std::uint64_t received(const std::vector<int>& v, const MPI_Status& st) {
  int count = 0;
  MPI_Get_count(&st, MPI_INT, &count);
  return mix(digest(v.data(), static_cast<std::size_t>(count)) ^
             static_cast<std::uint64_t>(st.MPI_SOURCE * 100000 + st.MPI_TAG * 10 + count));
}

void point_to_point() {
  const int next = (world_rank + 1) % world_size, prev = (world_rank + world_size - 1) % world_size;
  // Send/Recv, Isend/Irecv with statuses and counts, both sizes (packed and separate payload).
  std::vector<double> out(1000), in(1000, 0);
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = world_rank * 1000.0 + static_cast<double>(i) / 7;
  MPI_Status st;
  if (world_rank % 2 == 0) {
    MPI_Send(out.data(), 1000, MPI_DOUBLE, next, 3, MPI_COMM_WORLD);
    MPI_Recv(in.data(), 1000, MPI_DOUBLE, prev, 3, MPI_COMM_WORLD, &st);
  } else {
    MPI_Recv(in.data(), 1000, MPI_DOUBLE, prev, 3, MPI_COMM_WORLD, &st);
    MPI_Send(out.data(), 1000, MPI_DOUBLE, next, 3, MPI_COMM_WORLD);
  }
  int count = 0;
  MPI_Get_count(&st, MPI_DOUBLE, &count);
  std::uint64_t d = mix(digest(in.data(), in.size()) ^ static_cast<std::uint64_t>(count) ^
                        static_cast<std::uint64_t>(st.MPI_SOURCE * 100 + st.MPI_TAG));
  report("send/recv", d);

  // Two tags from one neighbour, waited for in the other order; a shorter message than the receive posted.
  MPI_Request r[4];
  std::vector<int> small(3, world_rank), got_small(8, -1);
  MPI_Irecv(in.data(), 1000, MPI_DOUBLE, prev, 9, MPI_COMM_WORLD, &r[0]);
  MPI_Irecv(got_small.data(), 8, MPI_INT, prev, 8, MPI_COMM_WORLD, &r[1]);
  MPI_Isend(small.data(), 3, MPI_INT, next, 8, MPI_COMM_WORLD, &r[2]);
  MPI_Isend(out.data(), 1000, MPI_DOUBLE, next, 9, MPI_COMM_WORLD, &r[3]);
  MPI_Status sts[4];
  MPI_Wait(&r[0], &sts[0]);
  MPI_Waitall(3, &r[1], &sts[1]);
  int small_count = 0;
  MPI_Get_count(&sts[1], MPI_INT, &small_count);
  d = mix(digest(in.data(), in.size()) ^ digest(got_small.data(), got_small.size()) ^
          static_cast<std::uint64_t>(small_count) ^ static_cast<std::uint64_t>(r[0] == MPI_REQUEST_NULL));
  report("isend/irecv/waitall", d);

  // A send freed before it completed (MPI_Request_free) is delivered all the same; its buffer stays untouched until
  // the end (large: a payload of its own, which MPI may still be sending when the request is freed).
  static std::vector<double> fired(4000);
  for (std::size_t i = 0; i < fired.size(); ++i) fired[i] = world_rank + static_cast<double>(i) / 4;
  std::vector<double> caught(fired.size(), 0);
  MPI_Request freed;
  MPI_Isend(fired.data(), static_cast<int>(fired.size()), MPI_DOUBLE, next, 10, MPI_COMM_WORLD, &freed);
  MPI_Request_free(&freed);
  const std::uint64_t nulled = freed == MPI_REQUEST_NULL;
  MPI_Recv(caught.data(), static_cast<int>(caught.size()), MPI_DOUBLE, prev, 10, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  report("isend/request_free", mix(digest(caught.data(), caught.size()) ^ nulled));

  // Persistent requests: a halo exchange made once and started 3 times (the send buffer changed between starts),
  // a wait and a test on them while inactive (at once, empty status), then freed.
  std::vector<double> halo_out(600), halo_in(600, 0);
  MPI_Request halo[2];
  MPI_Recv_init(halo_in.data(), 600, MPI_DOUBLE, prev, 11, MPI_COMM_WORLD, &halo[0]);
  MPI_Send_init(halo_out.data(), 600, MPI_DOUBLE, next, 11, MPI_COMM_WORLD, &halo[1]);
  MPI_Wait(&halo[0], &st);  // inactive: returns at once
  std::uint64_t h = static_cast<std::uint64_t>(st.MPI_SOURCE == MPI_ANY_SOURCE) ^ (halo[0] != MPI_REQUEST_NULL);
  for (int round = 0; round < 3; ++round) {
    for (std::size_t i = 0; i < halo_out.size(); ++i) halo_out[i] = world_rank * 10.0 + round + i / 3.0;
    MPI_Startall(2, halo);
    MPI_Waitall(2, halo, sts);
    int halo_count = 0;
    MPI_Get_count(&sts[0], MPI_DOUBLE, &halo_count);
    h = mix(h ^ digest(halo_in.data(), halo_in.size()) ^ static_cast<std::uint64_t>(halo_count + sts[0].MPI_SOURCE));
  }
  int inactive = 0;
  MPI_Test(&halo[1], &inactive, MPI_STATUS_IGNORE);
  MPI_Request_free(&halo[0]);
  MPI_Request_free(&halo[1]);
  // Matched probes: MPI_Mprobe then MPI_Mrecv (the size from the status), MPI_Improbe until it matches then
  // MPI_Imrecv and a wait, a probe of MPI_PROC_NULL; a plain receive in between takes the message after the matched
  // one (tag 12: three messages in a row).
  std::vector<int> m_out(static_cast<std::size_t>(5 + world_rank)), m_in(64, -1), m_in2(64, -1), m_plain(64, -1);
  for (std::size_t i = 0; i < m_out.size(); ++i) m_out[i] = world_rank * 100 + static_cast<int>(i);
  MPI_Request m_sent[3];
  for (int k = 0; k < 3; ++k)
    MPI_Isend(m_out.data(), static_cast<int>(m_out.size()) - k, MPI_INT, next, 12, MPI_COMM_WORLD, &m_sent[k]);
  MPI_Message msg;
  MPI_Status mst;
  MPI_Mprobe(prev, 12, MPI_COMM_WORLD, &msg, &mst);
  int m_count = 0;
  MPI_Get_count(&mst, MPI_INT, &m_count);
  MPI_Recv(m_plain.data(), 64, MPI_INT, prev, 12, MPI_COMM_WORLD, &st);  // the second message
  int plain_count = 0;
  MPI_Get_count(&st, MPI_INT, &plain_count);
  MPI_Mrecv(m_in.data(), m_count, MPI_INT, &msg, &mst);
  const std::uint64_t m_null = msg == MPI_MESSAGE_NULL;
  int matched = 0;
  while (!matched) MPI_Improbe(prev, 12, MPI_COMM_WORLD, &matched, &msg, &mst);
  MPI_Request m_req;
  MPI_Imrecv(m_in2.data(), 64, MPI_INT, &msg, &m_req);
  MPI_Wait(&m_req, &mst);
  int m_count2 = 0;
  MPI_Get_count(&mst, MPI_INT, &m_count2);
  MPI_Waitall(3, m_sent, MPI_STATUSES_IGNORE);
  MPI_Message no_message;
  MPI_Mprobe(MPI_PROC_NULL, 0, MPI_COMM_WORLD, &no_message, &mst);
  const std::uint64_t no_proc = no_message == MPI_MESSAGE_NO_PROC && mst.MPI_SOURCE == MPI_PROC_NULL;
  MPI_Mrecv(nullptr, 0, MPI_INT, &no_message, MPI_STATUS_IGNORE);
  report("matched probes", mix(digest(m_in.data(), m_in.size()) ^ digest(m_in2.data(), m_in2.size()) ^
                               digest(m_plain.data(), m_plain.size()) ^
                               static_cast<std::uint64_t>(m_count * 10000 + plain_count * 100 + m_count2) ^
                               (m_null << 1) ^ (no_proc << 2) ^ (static_cast<std::uint64_t>(mst.MPI_SOURCE) << 3)));

  report("persistent requests", mix(h ^ static_cast<std::uint64_t>(inactive) ^ (halo[0] == MPI_REQUEST_NULL)));

  // Sendrecv, MPI_PROC_NULL, Test until done, Waitany, Testall.
  double a = world_rank + 0.5, b = -1;
  MPI_Sendrecv(&a, 1, MPI_DOUBLE, next, 4, &b, 1, MPI_DOUBLE, prev, 4, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  double none = 42;
  MPI_Recv(&none, 1, MPI_DOUBLE, MPI_PROC_NULL, 0, MPI_COMM_WORLD, &st);
  const std::uint64_t null_ok = none == 42 && st.MPI_SOURCE == MPI_PROC_NULL;
  MPI_Irecv(&a, 1, MPI_DOUBLE, prev, 5, MPI_COMM_WORLD, &r[0]);
  MPI_Isend(&b, 1, MPI_DOUBLE, next, 5, MPI_COMM_WORLD, &r[1]);
  int flag = 0;
  while (!flag) MPI_Test(&r[0], &flag, MPI_STATUS_IGNORE);
  int index = -1;
  MPI_Waitany(1, &r[1], &index, MPI_STATUS_IGNORE);
  MPI_Irecv(&b, 1, MPI_DOUBLE, prev, 6, MPI_COMM_WORLD, &r[0]);
  MPI_Isend(&a, 1, MPI_DOUBLE, next, 6, MPI_COMM_WORLD, &r[1]);
  for (flag = 0; !flag;) MPI_Testall(2, r, &flag, MPI_STATUSES_IGNORE);
  report("sendrecv/test/any/all", mix(digest(&a, 1) ^ digest(&b, 1) ^ null_ok ^ static_cast<std::uint64_t>(index)));

  // A derived datatype with gaps (a column of a row-major 6x4 matrix), sent and received as it is.
  MPI_Datatype column;
  MPI_Type_vector(6, 1, 4, MPI_DOUBLE, &column);
  MPI_Type_commit(&column);
  double m[6][4], got[6][4];
  for (int i = 0; i < 6; ++i)
    for (int j = 0; j < 4; ++j) m[i][j] = world_rank * 100 + i * 4 + j, got[i][j] = -1;
  MPI_Sendrecv(&m[0][1], 1, column, next, 7, &got[0][2], 1, column, prev, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Type_free(&column);
  report("derived datatype", digest(&got[0][0], 24));

  // Probes with a named source: the size learnt from the status, then the receive (blocking and not); a probe
  // repeated sees the same message; one message small (packed with its header), one large (separate payload).
  std::vector<int> p_small(static_cast<std::size_t>(3 * (world_rank + 1)), world_rank), p_large(70000, world_rank + 7);
  MPI_Request probe_sent[2];
  MPI_Isend(p_small.data(), static_cast<int>(p_small.size()), MPI_INT, next, 21, MPI_COMM_WORLD, &probe_sent[0]);
  MPI_Isend(p_large.data(), static_cast<int>(p_large.size()), MPI_INT, next, 22, MPI_COMM_WORLD, &probe_sent[1]);
  int ready = 0, n_p_small = 0, n_again = 0, n_p_large = 0;
  MPI_Probe(prev, 21, MPI_COMM_WORLD, &st);
  MPI_Get_count(&st, MPI_INT, &n_p_small);
  MPI_Probe(prev, 21, MPI_COMM_WORLD, &st);
  MPI_Get_count(&st, MPI_INT, &n_again);
  std::vector<int> got_p_small(static_cast<std::size_t>(n_p_small));
  MPI_Recv(got_p_small.data(), n_p_small, MPI_INT, prev, 21, MPI_COMM_WORLD, &st);
  while (!ready) MPI_Iprobe(prev, 22, MPI_COMM_WORLD, &ready, &st);
  MPI_Get_count(&st, MPI_INT, &n_p_large);
  std::vector<int> got_p_large(static_cast<std::size_t>(n_p_large) + 5, -1);  // room to spare, as MPI allows
  MPI_Request probe_recv;
  MPI_Irecv(got_p_large.data(), n_p_large + 5, MPI_INT, prev, 22, MPI_COMM_WORLD, &probe_recv);
  MPI_Wait(&probe_recv, &st);
  int n_received = 0;
  MPI_Get_count(&st, MPI_INT, &n_received);
  MPI_Waitall(2, probe_sent, MPI_STATUSES_IGNORE);
  const std::int64_t counts[4] = {n_p_small, n_again, n_p_large, n_received};
  report("probes", mix(digest(got_p_small.data(), got_p_small.size()) ^ digest(got_p_large.data(), got_p_large.size()) ^
                       digest(counts, 4)));

#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
  // MPI_Isendrecv (a column of a matrix in, waited for with its status) and MPI_Isendrecv_replace (a strided
  // datatype, tested until done; a large message: its own payload), with another exchange under way meanwhile.
  MPI_Datatype strided;
  MPI_Type_vector(6, 1, 4, MPI_DOUBLE, &strided);
  MPI_Type_commit(&strided);
  double col_in[6][4];
  for (auto& row : col_in)
    for (double& x : row) x = -1;
  std::vector<double> ring(30000), other_in(100, 0), other_out(100, world_rank + 0.75);
  for (std::size_t i = 0; i < ring.size(); ++i) ring[i] = world_rank * 1e4 + static_cast<double>(i) / 8;
  MPI_Request isr[3];
  MPI_Isendrecv(&m[0][3], 1, strided, prev, 31, &col_in[0][1], 1, strided, next, 31, MPI_COMM_WORLD, &isr[0]);
  MPI_Isendrecv_replace(ring.data(), 1400, strided, next, 32, prev, 32, MPI_COMM_WORLD, &isr[1]);
  MPI_Isendrecv(other_out.data(), 100, MPI_DOUBLE, next, 33, other_in.data(), 100, MPI_DOUBLE, prev, 33, MPI_COMM_WORLD,
                &isr[2]);
  MPI_Status isr_status;
  MPI_Wait(&isr[0], &isr_status);
  int isr_count = 0, isr_done = 0;
  MPI_Get_count(&isr_status, strided, &isr_count);
  MPI_Status replace_status;
  while (!isr_done) MPI_Test(&isr[1], &isr_done, &replace_status);
  MPI_Wait(&isr[2], MPI_STATUS_IGNORE);
  MPI_Type_free(&strided);
  report("isendrecv(_replace)",
         mix(digest(&col_in[0][0], 24) ^ digest(ring.data(), ring.size()) ^ digest(other_in.data(), 100) ^
             static_cast<std::uint64_t>(isr_count + 10 * isr_status.MPI_SOURCE + 1000 * isr_status.MPI_TAG) ^
             static_cast<std::uint64_t>(replace_status.MPI_SOURCE + 100 * replace_status.MPI_TAG) << 32));
#endif
}

// MPI_ANY_TAG from a named source: the next message of that rank on the communicator, whatever its tag (each
// status gives it); a message of another communicator sent first is not taken. MPI_Cancel of receives whose message
// never comes.
void any_tag_and_cancel() {
  const int next = (world_rank + 1) % world_size, prev = (world_rank + world_size - 1) % world_size;
  MPI_Comm other;
  MPI_Comm_dup(MPI_COMM_WORLD, &other);
  auto values = [&](int tag, std::size_t n) {
    std::vector<int> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = world_rank * 1000 + tag + static_cast<int>(i % 97);
    return v;
  };
  // To the next rank: tag 9 on the other communicator first, then 41 (small), 42 (large: a payload of its own),
  // 43, 44 (sized by the rank), 45, 46, 48 and 49 on MPI_COMM_WORLD.
  const std::vector<int> tags{41, 42, 43, 44, 45, 46, 48, 49};
  std::vector<std::vector<int>> out;
  std::vector<MPI_Request> sent(tags.size() + 1);
  const std::vector<int> on_other = values(9, 4);
  MPI_Isend(on_other.data(), 4, MPI_INT, next, 9, other, &sent[0]);
  for (std::size_t k = 0; k < tags.size(); ++k) {
    const int t = tags[k];
    out.push_back(values(t, t == 42 ? 30000 : t == 44 ? static_cast<std::size_t>(3 + world_rank) : 5));
    MPI_Isend(out.back().data(), static_cast<int>(out.back().size()), MPI_INT, next, t, MPI_COMM_WORLD, &sent[k + 1]);
  }
  std::uint64_t d = 0;
  auto fold = [&](const std::vector<int>& v, int count, const MPI_Status& st) {
    d = mix(d ^ digest(v.data(), static_cast<std::size_t>(count)) ^
            static_cast<std::uint64_t>(st.MPI_SOURCE * 100000 + st.MPI_TAG * 10 + count));
  };
  // Posted in this order: MPI_ANY_TAG (gets 41), tag 43 (a receive posted later, of a tag the first could take),
  // MPI_ANY_TAG (gets 42), and the other communicator's; waited for 43 first.
  std::vector<int> a(30000), b(30000), c(5), e(4);
  MPI_Request r[4];
  MPI_Irecv(a.data(), 30000, MPI_INT, prev, MPI_ANY_TAG, MPI_COMM_WORLD, &r[0]);
  MPI_Irecv(c.data(), 5, MPI_INT, prev, 43, MPI_COMM_WORLD, &r[1]);
  MPI_Irecv(b.data(), 30000, MPI_INT, prev, MPI_ANY_TAG, MPI_COMM_WORLD, &r[2]);
  MPI_Irecv(e.data(), 4, MPI_INT, prev, MPI_ANY_TAG, other, &r[3]);
  MPI_Status sts[4], first;
  MPI_Wait(&r[1], &first);
  MPI_Waitall(4, r, sts);  // (r[1] is null now: MPI_Waitall passes it by)
  sts[1] = first;
  int count = 0;
  for (int k : {0, 2, 3}) {
    MPI_Get_count(&sts[k], MPI_INT, &count);
    fold(k == 0 ? a : k == 2 ? b : e, count, sts[k]);
  }
  MPI_Get_count(&sts[1], MPI_INT, &count);
  fold(c, count, sts[1]);
  // MPI_Probe of MPI_ANY_TAG sizes the next (44), received by its tag.
  MPI_Status st;
  MPI_Probe(prev, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
  MPI_Get_count(&st, MPI_INT, &count);
#ifdef REPRISE_WRAPPED
  // The probed message is held by the interposition until received: the runtime's memory counts it.
  const auto memory = nlohmann::json::parse(reprise::wrapped_runtime().memory_json());
  const std::size_t held = memory["components"].value("interposition", std::size_t{0});
  if (held < static_cast<std::size_t>(count) * sizeof(int)) {
    std::fprintf(stderr, "rank %d: the interposition holds a probed message of %zu bytes, its memory counts %zu\n",
                 world_rank, static_cast<std::size_t>(count) * sizeof(int), held);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
#endif
  std::vector<int> f(static_cast<std::size_t>(count));
  MPI_Recv(f.data(), count, MPI_INT, prev, st.MPI_TAG, MPI_COMM_WORLD, &st);
  fold(f, count, st);
  // MPI_Iprobe of MPI_ANY_TAG until 45 is here, received as MPI_ANY_TAG; MPI_Mprobe of MPI_ANY_TAG (46), MPI_Mrecv.
  int flag = 0;
  while (!flag) MPI_Iprobe(prev, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
  const int probed_tag = st.MPI_TAG;
  std::vector<int> g(5);
  MPI_Recv(g.data(), 5, MPI_INT, prev, MPI_ANY_TAG, MPI_COMM_WORLD, &st);
  fold(g, probed_tag == st.MPI_TAG ? 5 : 0, st);
  MPI_Message message;
  MPI_Mprobe(prev, MPI_ANY_TAG, MPI_COMM_WORLD, &message, &st);
  MPI_Mrecv(g.data(), 5, MPI_INT, &message, &st);
  fold(g, 5, st);
  // Receives no one sends to, cancelled: of a tag, and of MPI_ANY_TAG on the other communicator (nothing more comes
  // on it); their statuses say so.
  MPI_Request never[2];
  MPI_Irecv(e.data(), 4, MPI_INT, prev, 47, MPI_COMM_WORLD, &never[0]);
  MPI_Irecv(e.data(), 4, MPI_INT, prev, MPI_ANY_TAG, other, &never[1]);
  int cancelled[2] = {0, 0};
  for (int k = 0; k < 2; ++k) {
    MPI_Cancel(&never[k]);
    MPI_Wait(&never[k], &st);
    MPI_Test_cancelled(&st, &cancelled[k]);
  }
  // A persistent receive of MPI_ANY_TAG started twice: 48, then 49.
  MPI_Request persistent;
  MPI_Recv_init(g.data(), 5, MPI_INT, prev, MPI_ANY_TAG, MPI_COMM_WORLD, &persistent);
  for (int k = 0; k < 2; ++k) {
    MPI_Start(&persistent);
    MPI_Wait(&persistent, &st);
    fold(g, 5, st);
  }
  MPI_Request_free(&persistent);
  MPI_Waitall(static_cast<int>(sent.size()), sent.data(), MPI_STATUSES_IGNORE);
  MPI_Comm_free(&other);
  report("any tag, cancel", mix(d ^ static_cast<std::uint64_t>(cancelled[0] + 2 * cancelled[1])));
}

// MPI_ANY_SOURCE (a named tag), on a communicator whose ranks run the other way round (its status names the
// sender's rank there): the next one or two ranks send each rank a small (61) and a large (62) message; it posts
// the receives of the small ones from any rank, receives the large ones from any rank (blocking), then waits for the
// small ones. A persistent receive from any rank (63) started once per sender; MPI_Sendrecv from any rank (64, only
// the rank before sends it); a probe of the rank before (66) then a receive from any rank of that tag (the probed
// message: nobody else sends 66); one cancelled (65); probes of any rank (67, 68, 69: below). Folded whatever order
// the senders came in. (Each sender's messages are received in the order it sent them, whatever their tags, as the
// interposition requires.)
void any_source() {
  MPI_Comm rev;
  MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &rev);
  int me = 0;
  MPI_Comm_rank(rev, &me);
  const int n = world_size, prev = (me + n - 1) % n;
  std::vector<int> to{(me + 1) % n};
  if (n > 2) to.push_back((me + 2) % n);
  const int senders = static_cast<int>(to.size());
  auto values = [&](int seed, std::size_t count) {
    std::vector<int> v(count);
    for (std::size_t i = 0; i < count; ++i) v[i] = seed * 1000 + static_cast<int>(i % 89);
    return v;
  };
  std::deque<std::vector<int>> out;
  std::vector<MPI_Request> sent;
  auto send = [&](const std::vector<int>& v, int dest, int tag) {
    out.push_back(v);
    sent.emplace_back();
    MPI_Isend(out.back().data(), static_cast<int>(v.size()), MPI_INT, dest, tag, rev, &sent.back());
  };
  for (int q : to) {
    send(values(61 + me, 5), q, 61);
    send(values(62 + me, 30000), q, 62);
    send(values(63 + me, 7), q, 63);
  }
  std::uint64_t d = 0;  // a sum: the same whatever order the senders came in
  auto fold = [&](const std::vector<int>& v, const MPI_Status& st) { d += received(v, st); };
  std::vector<std::vector<int>> small(2, std::vector<int>(5)), large(2, std::vector<int>(30000));
  std::vector<MPI_Request> r(static_cast<std::size_t>(senders));
  for (int k = 0; k < senders; ++k)
    MPI_Irecv(small[k].data(), 5, MPI_INT, MPI_ANY_SOURCE, 61, rev, &r[static_cast<std::size_t>(k)]);
  MPI_Status st;
  for (int k = 0; k < senders; ++k) {
    MPI_Recv(large[k].data(), 30000, MPI_INT, MPI_ANY_SOURCE, 62, rev, &st);
    fold(large[k], st);
  }
  std::vector<MPI_Status> sts(static_cast<std::size_t>(senders));
  MPI_Waitall(senders, r.data(), sts.data());
  for (int k = 0; k < senders; ++k) fold(small[k], sts[static_cast<std::size_t>(k)]);
  std::vector<int> g(9);
  MPI_Request persistent;
  MPI_Recv_init(g.data(), 7, MPI_INT, MPI_ANY_SOURCE, 63, rev, &persistent);
  for (int k = 0; k < senders; ++k) {
    MPI_Start(&persistent);
    MPI_Wait(&persistent, &st);
    fold(g, st);
  }
  MPI_Request_free(&persistent);
  const std::vector<int> mine = values(64 + me, 3);
  std::vector<int> got(3);
  MPI_Sendrecv(mine.data(), 3, MPI_INT, (me + 1) % n, 64, got.data(), 3, MPI_INT, MPI_ANY_SOURCE, 64, rev, &st);
  fold(got, st);
  send(values(66 + me, 9), (me + 1) % n, 66);
  for (int q : to) {
    send(values(67 + me, static_cast<std::size_t>(3 + me)), q, 67);
    send(values(68 + me, 4), q, 68);
    send(values(69 + me, 6), q, 69);
  }
  MPI_Probe(prev, 66, rev, &st);
  MPI_Recv(g.data(), 9, MPI_INT, MPI_ANY_SOURCE, 66, rev, &st);
  fold(g, st);
  // Probes of any rank: MPI_Probe sizes a message and names its sender, received from that sender (67, sized by
  // the sender); MPI_Iprobe until one is here, then a receive from any rank (68); MPI_Mprobe, then MPI_Mrecv (69).
  for (int k = 0; k < senders; ++k) {
    MPI_Probe(MPI_ANY_SOURCE, 67, rev, &st);
    int count = 0;
    MPI_Get_count(&st, MPI_INT, &count);
    std::vector<int> v(static_cast<std::size_t>(count));
    MPI_Recv(v.data(), count, MPI_INT, st.MPI_SOURCE, 67, rev, &st);
    fold(v, st);
  }
  for (int k = 0; k < senders; ++k) {
    int flag = 0;
    while (!flag) MPI_Iprobe(MPI_ANY_SOURCE, 68, rev, &flag, &st);
    std::vector<int> v(4);
    MPI_Recv(v.data(), 4, MPI_INT, MPI_ANY_SOURCE, 68, rev, &st);
    fold(v, st);
  }
  for (int k = 0; k < senders; ++k) {
    MPI_Message message;
    MPI_Mprobe(MPI_ANY_SOURCE, 69, rev, &message, &st);
    std::vector<int> v(6);
    MPI_Mrecv(v.data(), 6, MPI_INT, &message, &st);
    fold(v, st);
  }
  MPI_Request never;
  MPI_Irecv(g.data(), 1, MPI_INT, MPI_ANY_SOURCE, 65, rev, &never);
  MPI_Cancel(&never);
  MPI_Wait(&never, &st);
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  MPI_Waitall(static_cast<int>(sent.size()), sent.data(), MPI_STATUSES_IGNORE);
  MPI_Comm_free(&rev);
  report("any source", mix(d ^ static_cast<std::uint64_t>(cancelled)));
}

// Receives and probes of any rank and any tag (MPI_ANY_SOURCE with MPI_ANY_TAG), on `rev` (MPI_COMM_WORLD numbered
// the other way round) while `side` (a duplicate) carries messages too: under the interposition one library
// communicator carries every communicator's messages, so a receive of any tag on `rev` finds those of `side` among
// them and must leave them to `side`'s receives. Each rank sends the next two ranks a message on `side` (81), then
// on `rev` four (82 small, 83 large, 84 sized by the sender, 85). The receiver posts two receives of any rank and
// any tag on `rev` and one of any rank of 81 on `side` per sender (each sender's messages are received in the order
// it sent them, as the interposition requires), waits for them all, then: MPI_Probe of any rank and any tag
// sizes a message received from the source and tag it names, MPI_Iprobe until one is here then a receive of any
// rank and any tag, MPI_Mprobe and MPI_Mrecv, until each sender's four arrived. One receive of any rank and any tag
// on a communicator nobody sends on is cancelled. Folded whatever order the senders came in.
void any_source_any_tag() {
  MPI_Comm rev, side, quiet;
  MPI_Comm_split(MPI_COMM_WORLD, 0, world_size - world_rank, &rev);
  MPI_Comm_dup(rev, &side);
  MPI_Comm_dup(rev, &quiet);
  int me = 0;
  MPI_Comm_rank(rev, &me);
  const int n = world_size;
  std::vector<int> to{(me + 1) % n};
  if (n > 2) to.push_back((me + 2) % n);
  const int senders = static_cast<int>(to.size()), most = 20000;
  std::deque<std::vector<int>> out;
  std::vector<MPI_Request> sent;
  auto send = [&](std::size_t count, int seed, int dest, int tag, MPI_Comm comm) {
    std::vector<int> v(count);
    for (std::size_t i = 0; i < count; ++i) v[i] = seed * 1000 + static_cast<int>(i % 97);
    out.push_back(std::move(v));
    sent.emplace_back();
    MPI_Isend(out.back().data(), static_cast<int>(count), MPI_INT, dest, tag, comm, &sent.back());
  };
  for (int q : to) {
    send(4, 81 + me, q, 81, side);
    send(5, 82 + me, q, 82, rev);
    send(static_cast<std::size_t>(most), 83 + me, q, 83, rev);
    send(static_cast<std::size_t>(me) + 2, 84 + me, q, 84, rev);
    send(6, 85 + me, q, 85, rev);
  }
  std::uint64_t d = 0;  // a sum: the same whatever order the senders came in
  auto fold = [&](const std::vector<int>& v, const MPI_Status& st) { d += received(v, st); };
  const std::size_t posted = 2 + static_cast<std::size_t>(senders);
  std::vector<std::vector<int>> in(posted, std::vector<int>(static_cast<std::size_t>(most)));
  std::vector<MPI_Request> r(posted);
  for (std::size_t k = 0; k < posted; ++k)
    MPI_Irecv(in[k].data(), most, MPI_INT, MPI_ANY_SOURCE, k < 2 ? MPI_ANY_TAG : 81, k < 2 ? rev : side, &r[k]);
  std::vector<MPI_Status> sts(posted);
  MPI_Waitall(static_cast<int>(posted), r.data(), sts.data());
  for (std::size_t k = 0; k < posted; ++k) fold(in[k], sts[k]);
  for (int left = 4 * senders - 2; left > 0; --left) {
    MPI_Status st;
    std::vector<int> v(static_cast<std::size_t>(most));
    if (left % 3 == 0) {
      MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, rev, &st);
      int count = 0;
      MPI_Get_count(&st, MPI_INT, &count);
      v.resize(static_cast<std::size_t>(count));
      MPI_Recv(v.data(), count, MPI_INT, st.MPI_SOURCE, st.MPI_TAG, rev, &st);
    } else if (left % 3 == 1) {
      for (int flag = 0; !flag;) MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, rev, &flag, &st);
      MPI_Recv(v.data(), most, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, rev, &st);
    } else {
      MPI_Message message;
      MPI_Mprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, rev, &message, &st);
      MPI_Mrecv(v.data(), most, MPI_INT, &message, &st);
    }
    fold(v, st);
  }
  MPI_Request never;
  std::vector<int> g(1);
  MPI_Irecv(g.data(), 1, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, quiet, &never);
  MPI_Cancel(&never);
  MPI_Status st;
  MPI_Wait(&never, &st);
  int cancelled = 0;
  MPI_Test_cancelled(&st, &cancelled);
  MPI_Waitall(static_cast<int>(sent.size()), sent.data(), MPI_STATUSES_IGNORE);
  MPI_Comm_free(&quiet);
  MPI_Comm_free(&side);
  MPI_Comm_free(&rev);
  report("any source, any tag", mix(d ^ static_cast<std::uint64_t>(cancelled)));
}

// MPI_Issend completes only once its receive started: rank 0's to rank 1 must stay incomplete while rank 1 waits
// for a go that rank 0 sends only after testing it for 50 ms (through rank 2: no channel carries it after the
// message). MPI_Ssend and MPI_Ssend_init's requests go the same way.
void synchronous_send() {
  int incomplete = 1;  // (what the other ranks report)
  int x = 7, go = 0;
  if (world_size >= 3 && world_rank == 0) {
    MPI_Request r;
    MPI_Issend(&x, 1, MPI_INT, 1, 61, MPI_COMM_WORLD, &r);
    int flag = 0;
    const double until = MPI_Wtime() + 0.05;
    while (!flag && MPI_Wtime() < until) MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    incomplete = flag ? 0 : 1;
    MPI_Send(&x, 1, MPI_INT, 2, 62, MPI_COMM_WORLD);
    if (!flag) MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_Ssend(&x, 1, MPI_INT, 1, 64, MPI_COMM_WORLD);
    MPI_Request persistent;
    MPI_Ssend_init(&x, 1, MPI_INT, 1, 65, MPI_COMM_WORLD, &persistent);
    MPI_Start(&persistent);
    MPI_Wait(&persistent, MPI_STATUS_IGNORE);
    MPI_Request_free(&persistent);
  } else if (world_size >= 3 && world_rank == 2) {
    MPI_Recv(&go, 1, MPI_INT, 0, 62, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    MPI_Send(&go, 1, MPI_INT, 1, 63, MPI_COMM_WORLD);
  } else if (world_size >= 3 && world_rank == 1) {
    MPI_Recv(&go, 1, MPI_INT, 2, 63, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    for (int tag : {61, 64, 65}) {
      MPI_Recv(&x, 1, MPI_INT, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      go += x;
    }
  }
  report("synchronous send", static_cast<std::uint64_t>(incomplete + 10 * go));
}

// Datatypes freed while communication that uses them is pending (MPI: it completes normally; MPICH's test suite,
// pt2pt/dtype_send): a ring of non-contiguous receives and sends, an MPI_Ibcast and a persistent receive, each type
// freed before the wait; an MPI_Iallreduce whose user operation is freed before the wait (coll/nonblocking2). And a
// single-completion call leaves its status's MPI_ERROR as it was.
void types_freed_while_pending() {
  const int n = world_size, me = world_rank, right = (me + 1) % n, left = (me + n - 1) % n;
  std::vector<int> out(8), in(8, -1), bc(8, -1), again(8, -1);
  for (int i = 0; i < 8; ++i) out[static_cast<std::size_t>(i)] = 100 * me + i;
  MPI_Datatype every_other;  // elements 0, 2, 4, 6
  MPI_Type_vector(4, 1, 2, MPI_INT, &every_other);
  MPI_Type_commit(&every_other);
  MPI_Request r[4];
  MPI_Irecv(in.data(), 1, every_other, left, 71, MPI_COMM_WORLD, &r[0]);
  MPI_Isend(out.data(), 1, every_other, right, 71, MPI_COMM_WORLD, &r[1]);
  if (me == 0) bc = out;
  MPI_Datatype eight;  // (collectives take contiguous datatypes under Reprise)
  MPI_Type_contiguous(8, MPI_INT, &eight);
  MPI_Type_commit(&eight);
  MPI_Ibcast(bc.data(), 1, eight, 0, MPI_COMM_WORLD, &r[2]);
  MPI_Recv_init(again.data(), 1, every_other, left, 72, MPI_COMM_WORLD, &r[3]);
  MPI_Type_free(&every_other);
  MPI_Type_free(&eight);
  const bool nulled = every_other == MPI_DATATYPE_NULL && eight == MPI_DATATYPE_NULL;
  MPI_Waitall(3, r, MPI_STATUSES_IGNORE);
  std::uint64_t d = digest(in.data(), in.size()) ^ mix(digest(bc.data(), bc.size()));
  for (int round = 0; round < 2; ++round) {
    MPI_Start(&r[3]);
    MPI_Send(&out[static_cast<std::size_t>(round)], 1, MPI_INT, right, 72, MPI_COMM_WORLD);
    MPI_Status st;
    st.MPI_ERROR = MPI_ERR_DIMS;
    MPI_Wait(&r[3], &st);
    d = mix(d ^ digest(again.data(), again.size()) ^ static_cast<std::uint64_t>(st.MPI_ERROR == MPI_ERR_DIMS));
  }
  MPI_Request_free(&r[3]);
  // An operation freed while the reduction that uses it is pending (MPICH's coll/nonblocking2).
  MPI_Op max_op;
  MPI_Op_create(
      [](void* in, void* inout, int* len, MPI_Datatype*) {
        for (int i = 0; i < *len; ++i)
          static_cast<int*>(inout)[i] = std::max(static_cast<int*>(in)[i], static_cast<int*>(inout)[i]);
      },
      1, &max_op);
  int top = 0;
  MPI_Iallreduce(&me, &top, 1, MPI_INT, max_op, MPI_COMM_WORLD, &r[0]);
  MPI_Op_free(&max_op);
  MPI_Wait(&r[0], MPI_STATUS_IGNORE);
  d = mix(d ^ static_cast<std::uint64_t>(top) ^ static_cast<std::uint64_t>(max_op == MPI_OP_NULL) << 8);
  MPI_Status st;
  st.MPI_ERROR = MPI_ERR_TOPOLOGY;
  MPI_Sendrecv(&me, 1, MPI_INT, right, 73, &in[0], 1, MPI_INT, left, 73, MPI_COMM_WORLD, &st);
  d = mix(d ^ static_cast<std::uint64_t>(nulled) ^ static_cast<std::uint64_t>(st.MPI_ERROR == MPI_ERR_TOPOLOGY) << 1);
  report("types freed, pending", d);
}

// Collectives of datatypes with gaps (staged as bytes by the interposition): a struct with padding broadcast (a
// program's parameters), and gathers, scatters and all-to-alls (also MPI_IN_PLACE) of every other int (a vector type).
void collectives_of_derived_types() {
  const int n = world_size, me = world_rank;
  struct Params {
    double dt;
    int steps;  // (4 bytes of padding after it)
  } params{me == 0 ? 0.25 : -1.0, me == 0 ? 40 : -1};
  MPI_Datatype params_type, every_other;
  const int lengths[2] = {1, 1};
  const MPI_Aint at[2] = {offsetof(Params, dt), offsetof(Params, steps)};
  const MPI_Datatype types[2] = {MPI_DOUBLE, MPI_INT};
  MPI_Type_create_struct(2, lengths, at, types, &params_type);
  MPI_Type_create_resized(params_type, 0, sizeof(Params), &params_type);
  MPI_Type_commit(&params_type);
  MPI_Bcast(&params, 1, params_type, 0, MPI_COMM_WORLD);
  std::uint64_t d = mix(static_cast<std::uint64_t>(params.dt * 1000) ^ static_cast<std::uint64_t>(params.steps));
  MPI_Type_vector(2, 1, 2, MPI_INT, &every_other);  // ints 0 and 2 of 3 (extent 3 ints)
  MPI_Type_commit(&every_other);
  std::vector<int> mine(3), all(static_cast<std::size_t>(3 * n), -1), back(3, -1),
      spread(static_cast<std::size_t>(3 * n), -1);
  for (int i = 0; i < 3; ++i) mine[static_cast<std::size_t>(i)] = 10 * me + i;
  MPI_Gather(mine.data(), 1, every_other, all.data(), 1, every_other, 1 % n, MPI_COMM_WORLD);
  d = mix(d ^ digest(all.data(), all.size()));
  MPI_Allgather(mine.data(), 1, every_other, all.data(), 2, MPI_INT, MPI_COMM_WORLD);
  d = mix(d ^ digest(all.data(), all.size()));
  MPI_Scatter(all.data(), 2, MPI_INT, back.data(), 1, every_other, 0, MPI_COMM_WORLD);
  d = mix(d ^ digest(back.data(), back.size()));
  MPI_Alltoall(all.data(), 2, MPI_INT, spread.data(), 1, every_other, MPI_COMM_WORLD);
  d = mix(d ^ digest(spread.data(), spread.size()));
  MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, spread.data(), 1, every_other, MPI_COMM_WORLD);
  d = mix(d ^ digest(spread.data(), spread.size()));
  MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, all.data(), 2, MPI_INT, MPI_COMM_WORLD);
  d = mix(d ^ digest(all.data(), all.size()));
  MPI_Request r;
  params = Params{me == 0 ? 0.5 : -1.0, me == 0 ? 80 : -1};
  MPI_Ibcast(&params, 1, params_type, 0, MPI_COMM_WORLD, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  d = mix(d ^ static_cast<std::uint64_t>(params.dt * 1000) ^ static_cast<std::uint64_t>(params.steps));
  MPI_Type_free(&params_type);
  MPI_Type_free(&every_other);
  report("derived collectives", d);
}

void collectives() {
  const int n = world_size, me = world_rank;
  MPI_Barrier(MPI_COMM_WORLD);
  std::vector<double> v(5);
  // (dyadic values: their sums are exact, whatever order an MPI library adds them in)
  for (int i = 0; i < 5; ++i) v[static_cast<std::size_t>(i)] = (me + 1) * 0.25 + i;
  std::vector<double> sum(5), in_place = v;
  MPI_Allreduce(v.data(), sum.data(), 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, in_place.data(), 5, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  std::int64_t prod = me + 2, minloc[2], q = me * 3 + 1;
  std::int64_t p = 0;
  MPI_Reduce(&prod, &p, 1, MPI_INT64_T, MPI_PROD, n - 1, MPI_COMM_WORLD);
  if (me == 0)
    MPI_Reduce(MPI_IN_PLACE, &q, 1, MPI_INT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
  else
    MPI_Reduce(&q, nullptr, 1, MPI_INT64_T, MPI_BXOR, 0, MPI_COMM_WORLD);
  if (me != 0) q = 0;
  struct {
    double v;
    int at;
  } mine{static_cast<double>((me * 7) % n), me}, best{};
  MPI_Allreduce(&mine, &best, 1, MPI_DOUBLE_INT, MPI_MINLOC, MPI_COMM_WORLD);
  minloc[0] = static_cast<std::int64_t>(best.v);
  minloc[1] = best.at;
  report("allreduce/reduce",
         mix(digest(sum.data(), 5) ^ digest(in_place.data(), 5) ^ digest(&p, 1) ^ digest(minloc, 2) ^ digest(&q, 1)));
  // Prefixes and reduce-scatters (integers: exact in any order).
  std::int64_t x[2] = {me + 1, 10 * me - 3}, scan[2] = {0, 0}, exscan[2] = {-7, -7}, ex_in_place[2] = {me + 1, 2};
  MPI_Scan(x, scan, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  MPI_Exscan(x, exscan, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  MPI_Exscan(MPI_IN_PLACE, ex_in_place, 2, MPI_INT64_T, MPI_PROD, MPI_COMM_WORLD);
  if (me == 0) exscan[0] = exscan[1] = ex_in_place[0] = ex_in_place[1] = 0;  // (undefined at rank 0)
  std::vector<std::int64_t> spread(static_cast<std::size_t>(3 * n)), block(3), varied(static_cast<std::size_t>(n + 1));
  for (std::size_t i = 0; i < spread.size(); ++i) spread[i] = static_cast<std::int64_t>(i) * (me + 1);
  MPI_Reduce_scatter_block(spread.data(), block.data(), 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD);
  std::vector<int> shares(static_cast<std::size_t>(n), 1);
  shares[0] = 2;  // rank 0 gets 2 elements, the others 1 each
  std::vector<std::int64_t> whole(static_cast<std::size_t>(n + 1));
  for (std::size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<std::int64_t>(i + 1) * (me + 2);
  MPI_Reduce_scatter(whole.data(), varied.data(), shares.data(), MPI_INT64_T, MPI_BXOR, MPI_COMM_WORLD);
  report("scan/exscan/reduce_scatter", mix(digest(scan, 2) ^ digest(exscan, 2) ^ digest(ex_in_place, 2) ^
                                           digest(block.data(), 3) ^ digest(varied.data(), me == 0 ? 2 : 1)));
  // Large enough for the segmented allreduce (reduce-scatter + allgather), with an element count that does not
  // divide among the ranks, and a pair type with a gap (MPI_DOUBLE_INT: 12 bytes of data every 16).
  const int large = 40009;  // (320 KB: above kSegmentedBytes, 256 KiB)
  std::vector<double> big(static_cast<std::size_t>(large)), big_sum(static_cast<std::size_t>(large));
  for (int i = 0; i < large; ++i) big[static_cast<std::size_t>(i)] = (me + 1) * 0.5 + (i % 97);
  MPI_Allreduce(big.data(), big_sum.data(), large, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  struct Pair {
    double v;
    int at;
  };
  std::vector<Pair> pairs(20011), lowest(20011);
  for (std::size_t i = 0; i < pairs.size(); ++i)
    pairs[i] = {static_cast<double>((static_cast<int>(i) + me * 5) % (n + 1)), me};
  MPI_Allreduce(pairs.data(), lowest.data(), static_cast<int>(pairs.size()), MPI_DOUBLE_INT, MPI_MINLOC,
                MPI_COMM_WORLD);
  std::vector<std::int64_t> flat;
  for (const Pair& x : lowest) flat.push_back(static_cast<std::int64_t>(x.v) * 1000 + x.at);
  report("allreduce large", mix(digest(big_sum.data(), big_sum.size()) ^ digest(flat.data(), flat.size())));

  std::vector<int> b(7, me == 2 % n ? 11 : 0);
  MPI_Bcast(b.data(), 7, MPI_INT, 2 % n, MPI_COMM_WORLD);
  std::vector<int> all(static_cast<std::size_t>(n) * 2), gathered(static_cast<std::size_t>(n) * 2);
  int two[2] = {me, me * me};
  MPI_Allgather(two, 2, MPI_INT, all.data(), 2, MPI_INT, MPI_COMM_WORLD);
  MPI_Gather(two, 2, MPI_INT, gathered.data(), 2, MPI_INT, 0, MPI_COMM_WORLD);
  std::vector<int> counts(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r)
    counts[static_cast<std::size_t>(r)] = r % 3 + 1, displs[static_cast<std::size_t>(r)] = 4 * r;
  std::vector<int> var(static_cast<std::size_t>(4 * n), -1), mine_var(static_cast<std::size_t>(me % 3 + 1), me + 100);
  MPI_Allgatherv(mine_var.data(), me % 3 + 1, MPI_INT, var.data(), counts.data(), displs.data(), MPI_INT,
                 MPI_COMM_WORLD);
  std::vector<int> scattered(2, -1), piece(3, -1);
  MPI_Scatter(all.data(), 2, MPI_INT, scattered.data(), 2, MPI_INT, 0, MPI_COMM_WORLD);
  MPI_Scatterv(var.data(), counts.data(), displs.data(), MPI_INT, piece.data(), me % 3 + 1, MPI_INT, n - 1,
               MPI_COMM_WORLD);
  std::vector<int> to(static_cast<std::size_t>(n)), from(static_cast<std::size_t>(n));
  for (int r = 0; r < n; ++r) to[static_cast<std::size_t>(r)] = me * 1000 + r;
  MPI_Alltoall(to.data(), 1, MPI_INT, from.data(), 1, MPI_INT, MPI_COMM_WORLD);
  std::uint64_t d = digest(b.data(), b.size()) ^ digest(all.data(), all.size()) ^ digest(var.data(), var.size()) ^
                    digest(scattered.data(), 2) ^ digest(piece.data(), 3) ^ digest(from.data(), from.size());
  if (me == 0) d ^= digest(gathered.data(), gathered.size());
  report("bcast/gather/scatter/a2a", d);
}

// Non-blocking collectives: several under way at once on two communicators, point-to-point between them,
// completed by MPI_Wait (a later one first), MPI_Test in a loop, MPI_Waitall with point-to-point requests,
// MPI_Waitany, MPI_Testall; then every other kind. (Integers and dyadic values: exact in any order.)
void nonblocking_collectives() {
  const int n = world_size, me = world_rank, next = (me + 1) % n, prev = (me + n - 1) % n;
  MPI_Comm dup;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  const int large = 40009;  // (320 KB: the segmented allreduce)
  std::vector<double> v(5), sum(5), big(static_cast<std::size_t>(large)), big_sum(static_cast<std::size_t>(large));
  for (int i = 0; i < 5; ++i) v[static_cast<std::size_t>(i)] = (me + 1) * 0.25 + i;
  for (int i = 0; i < large; ++i) big[static_cast<std::size_t>(i)] = (me + 1) * 0.5 + (i % 97);
  std::int64_t prod = me + 2, p = 0;
  std::vector<int> b(7, me == 1 % n ? 11 : 0);
  double a = me + 0.5, got = -1;
  MPI_Request r[7];
  MPI_Iallreduce(v.data(), sum.data(), 5, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD, &r[0]);
  MPI_Iallreduce(big.data(), big_sum.data(), large, MPI_DOUBLE, MPI_SUM, dup, &r[1]);
  MPI_Irecv(&got, 1, MPI_DOUBLE, prev, 9, MPI_COMM_WORLD, &r[2]);
  MPI_Isend(&a, 1, MPI_DOUBLE, next, 9, MPI_COMM_WORLD, &r[3]);
  MPI_Ireduce(&prod, &p, 1, MPI_INT64_T, MPI_PROD, n - 1, MPI_COMM_WORLD, &r[4]);
  MPI_Ibcast(b.data(), 7, MPI_INT, 1 % n, dup, &r[5]);
  MPI_Ibarrier(MPI_COMM_WORLD, &r[6]);
  MPI_Wait(&r[5], MPI_STATUS_IGNORE);
  int flag = 0;
  while (!flag) MPI_Test(&r[4], &flag, MPI_STATUS_IGNORE);
  MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
  int index = -1;
  MPI_Waitany(1, &r[6], &index, MPI_STATUS_IGNORE);
  std::uint64_t d = digest(sum.data(), 5) ^ digest(big_sum.data(), big_sum.size()) ^ digest(&got, 1) ^
                    digest(b.data(), b.size()) ^ static_cast<std::uint64_t>(index) << 50;
  if (me == n - 1) d ^= digest(&p, 1);
  report("nonblocking reductions", d);

  std::vector<int> two{me, me * me}, all(static_cast<std::size_t>(2 * n)), gathered(static_cast<std::size_t>(2 * n));
  std::vector<int> counts(static_cast<std::size_t>(n)), displs(static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q)
    counts[static_cast<std::size_t>(q)] = q % 3 + 1, displs[static_cast<std::size_t>(q)] = 4 * q;
  std::vector<int> mine_var(static_cast<std::size_t>(me % 3 + 1), me + 100), var(static_cast<std::size_t>(4 * n), -1);
  std::vector<int> gv(static_cast<std::size_t>(4 * n), -1), source(static_cast<std::size_t>(4 * n));
  for (std::size_t i = 0; i < source.size(); ++i) source[i] = static_cast<int>(i) * 3 + 1;
  std::vector<int> scattered(2, -1), piece(3, -1), to(static_cast<std::size_t>(n)), from(static_cast<std::size_t>(n));
  for (int q = 0; q < n; ++q) to[static_cast<std::size_t>(q)] = me * 1000 + q;
  std::vector<int> ones(static_cast<std::size_t>(n), 1), at(static_cast<std::size_t>(n)),
      from_v(static_cast<std::size_t>(n));
  std::iota(at.begin(), at.end(), 0);
  std::int64_t x[2] = {me + 1, 10 * me - 3}, scan[2] = {0, 0}, exscan[2] = {-7, -7};
  std::vector<std::int64_t> spread(static_cast<std::size_t>(3 * n)), block(3), whole(static_cast<std::size_t>(n + 1)),
      varied(2);
  for (std::size_t i = 0; i < spread.size(); ++i) spread[i] = static_cast<std::int64_t>(i) * (me + 1);
  for (std::size_t i = 0; i < whole.size(); ++i) whole[i] = static_cast<std::int64_t>(i + 1) * (me + 2);
  std::vector<int> shares(static_cast<std::size_t>(n), 1);
  shares[0] = 2;
  MPI_Request q[12];
  MPI_Iallgather(two.data(), 2, MPI_INT, all.data(), 2, MPI_INT, MPI_COMM_WORLD, &q[0]);
  MPI_Igather(two.data(), 2, MPI_INT, gathered.data(), 2, MPI_INT, 0, dup, &q[1]);
  MPI_Iallgatherv(mine_var.data(), me % 3 + 1, MPI_INT, var.data(), counts.data(), displs.data(), MPI_INT,
                  MPI_COMM_WORLD, &q[2]);
  MPI_Igatherv(mine_var.data(), me % 3 + 1, MPI_INT, gv.data(), counts.data(), displs.data(), MPI_INT, n - 1, dup,
               &q[3]);
  MPI_Iscatter(source.data(), 2, MPI_INT, scattered.data(), 2, MPI_INT, 0, MPI_COMM_WORLD, &q[4]);
  MPI_Iscatterv(source.data(), counts.data(), displs.data(), MPI_INT, piece.data(), me % 3 + 1, MPI_INT, n - 1,
                MPI_COMM_WORLD, &q[5]);
  MPI_Ialltoall(to.data(), 1, MPI_INT, from.data(), 1, MPI_INT, dup, &q[6]);
  MPI_Ialltoallv(to.data(), ones.data(), at.data(), MPI_INT, from_v.data(), ones.data(), at.data(), MPI_INT,
                 MPI_COMM_WORLD, &q[7]);
  MPI_Iscan(x, scan, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &q[8]);
  MPI_Iexscan(x, exscan, 2, MPI_INT64_T, MPI_MAX, dup, &q[9]);
  MPI_Ireduce_scatter_block(spread.data(), block.data(), 3, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, &q[10]);
  MPI_Ireduce_scatter(whole.data(), varied.data(), shares.data(), MPI_INT64_T, MPI_BXOR, dup, &q[11]);
  for (flag = 0; !flag;) MPI_Testall(12, q, &flag, MPI_STATUSES_IGNORE);
  if (me == 0) exscan[0] = exscan[1] = 0;  // (undefined at rank 0)
  d = digest(all.data(), all.size()) ^ digest(var.data(), var.size()) ^ digest(scattered.data(), 2) ^
      digest(piece.data(), static_cast<std::size_t>(me % 3 + 1)) ^ digest(from.data(), from.size()) ^
      digest(from_v.data(), from_v.size()) ^ digest(scan, 2) ^ digest(exscan, 2) ^ digest(block.data(), 3) ^
      digest(varied.data(), me == 0 ? 2 : 1);
  if (me == 0) d ^= digest(gathered.data(), gathered.size());
  if (me == n - 1) d ^= digest(gv.data(), gv.size());
  report("nonblocking gathers", d);
  MPI_Comm_free(&dup);
}

// MPI's tag range (MPI_TAG_UB at least 32767: tags 32767 and 1000000 where the library allows it) on derived
// communicators, 40 of them alive at once (dups and splits of each other, each used by an allreduce and a ring
// message), freed in another order than made, and one made again afterwards.
void many_communicators() {
  int* ub = nullptr;
  int has = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &has);
  const int top = has && *ub >= 1000000 ? 1000000 : 32767;
  constexpr int kComms = 40;
  std::vector<MPI_Comm> comms(kComms);
  std::uint64_t d = static_cast<std::uint64_t>(has && *ub >= 32767);
  for (int i = 0; i < kComms; ++i) {
    const MPI_Comm parent = i == 0 ? MPI_COMM_WORLD : comms[static_cast<std::size_t>(i - 1)];
    if (i % 3 == 2)
      MPI_Comm_split(parent, 0, -world_rank, &comms[static_cast<std::size_t>(i)]);  // the order reversed each time
    else
      MPI_Comm_dup(parent, &comms[static_cast<std::size_t>(i)]);
    int r = 0, n = 0;
    MPI_Comm_rank(comms[static_cast<std::size_t>(i)], &r);
    MPI_Comm_size(comms[static_cast<std::size_t>(i)], &n);
    long long v = static_cast<long long>(r + 1) * (i + 3), sum = 0;
    MPI_Allreduce(&v, &sum, 1, MPI_LONG_LONG, MPI_SUM, comms[static_cast<std::size_t>(i)]);
    double x[2] = {r * 1.5 + i, 0}, y[2] = {0, 0};
    const int tag = i % 2 == 0 ? 32767 : top;
    MPI_Sendrecv(x, 1, MPI_DOUBLE, (r + 1) % n, tag, y, 1, MPI_DOUBLE, (r + n - 1) % n, tag,
                 comms[static_cast<std::size_t>(i)], MPI_STATUS_IGNORE);
    d = mix(d ^ static_cast<std::uint64_t>(sum) ^ static_cast<std::uint64_t>(r) << 32 ^ digest(y, 1));
  }
  for (int i = 0; i < kComms; i += 2) MPI_Comm_free(&comms[static_cast<std::size_t>(i)]);
  for (int i = 1; i < kComms; i += 2) MPI_Comm_free(&comms[static_cast<std::size_t>(i)]);
  MPI_Comm again;
  MPI_Comm_dup(MPI_COMM_WORLD, &again);
  const int next = (world_rank + 1) % world_size, prev = (world_rank + world_size - 1) % world_size;
  int got = -1;
  MPI_Sendrecv(&world_rank, 1, MPI_INT, next, top, &got, 1, MPI_INT, prev, top, again, MPI_STATUS_IGNORE);
  MPI_Comm_free(&again);
  report("communicators and tags", mix(d ^ static_cast<std::uint64_t>(got)));
}

// MPI_Dist_graph_create with edges given by other ranks: rank r gives those of rank r + 1 (to r + 2 and r + 4,
// weights from the source) and one of its own (to r + 3, weight 7). The library may order a rank's neighbours as
// it likes, so what each rank got is compared as (neighbour, weight) and (neighbour, value) pairs, sorted.
void dist_graph() {
  const int n = world_size, me = world_rank, s = (me + 1) % n;
  const int sources[2] = {s, me}, degrees[2] = {2, 1};
  const int destinations[3] = {(s + 1) % n, (s + 3) % n, (me + 3) % n}, weights[3] = {s * 10 + 1, s * 10 + 3, 7};
  MPI_Comm g;
  MPI_Dist_graph_create(MPI_COMM_WORLD, 2, sources, degrees, destinations, weights, MPI_INFO_NULL, 1, &g);
  int kind = -1, in = -1, out = -1, weighted = -1;
  MPI_Topo_test(g, &kind);
  MPI_Dist_graph_neighbors_count(g, &in, &out, &weighted);
  std::vector<int> src(static_cast<std::size_t>(in)), sw(src.size()), dst(static_cast<std::size_t>(out)),
      dw(dst.size());
  MPI_Dist_graph_neighbors(g, in, src.data(), sw.data(), out, dst.data(), dw.data());
  std::vector<std::pair<int, int>> in_edges, out_edges, gathered, exchanged;
  for (std::size_t i = 0; i < src.size(); ++i) in_edges.emplace_back(src[i], sw[i]);
  for (std::size_t i = 0; i < dst.size(); ++i) out_edges.emplace_back(dst[i], dw[i]);
  // Every neighbour's value (MPI_Neighbor_allgather) and one per edge (MPI_Neighbor_alltoall: the destination and
  // the edge's weight, from the source), in the order of the neighbours just read.
  const int mine = me * 3 + 1;
  std::vector<int> all(src.size(), -1), to(dst.size()), from(src.size(), -1);
  MPI_Neighbor_allgather(&mine, 1, MPI_INT, all.data(), 1, MPI_INT, g);
  for (std::size_t i = 0; i < dst.size(); ++i) to[i] = dst[i] * 1000 + dw[i];
  MPI_Neighbor_alltoall(to.data(), 1, MPI_INT, from.data(), 1, MPI_INT, g);
  for (std::size_t i = 0; i < src.size(); ++i) gathered.emplace_back(src[i], all[i]);
  for (std::size_t i = 0; i < src.size(); ++i) exchanged.emplace_back(src[i], from[i]);
  std::uint64_t d = mix(static_cast<std::uint64_t>(kind == MPI_DIST_GRAPH) ^ static_cast<std::uint64_t>(in) << 8 ^
                        static_cast<std::uint64_t>(out) << 16 ^ static_cast<std::uint64_t>(weighted) << 24);
  for (auto* pairs : {&in_edges, &out_edges, &gathered, &exchanged}) {
    std::sort(pairs->begin(), pairs->end());
    for (const auto& [a, b] : *pairs) d = mix(d ^ static_cast<std::uint64_t>(a) << 32 ^ static_cast<std::uint32_t>(b));
  }
  MPI_Comm_free(&g);
  report("neighbors dist graph", d);
}

// Partitioned communication around the ring: 4 partitions of 3 ints, started three times; partitions marked
// ready out of order (a list, a range, one), the receiver polling MPI_Parrived before its wait.
void partitioned() {
  const int next = (world_rank + 1) % world_size, prev = (world_rank + world_size - 1) % world_size;
  std::vector<int> out(12), in(12, -1);
  MPI_Request send, recv;
  MPI_Psend_init(out.data(), 4, 3, MPI_INT, next, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &send);
  MPI_Precv_init(in.data(), 4, 3, MPI_INT, prev, 9, MPI_COMM_WORLD, MPI_INFO_NULL, &recv);
  std::uint64_t d = 0;
  for (int round = 0; round < 3; ++round) {
    for (int i = 0; i < 12; ++i) out[static_cast<std::size_t>(i)] = world_rank * 100 + round * 12 + i;
    MPI_Start(&recv);
    MPI_Start(&send);
    int list[2] = {3, 1};
    MPI_Pready_list(2, list, send);
    MPI_Pready_range(0, 0, send);
    MPI_Pready(2, send);
    int arrived = 0;
    while (!arrived) MPI_Parrived(recv, 2, &arrived);
    MPI_Status st;
    MPI_Wait(&recv, &st);
    MPI_Wait(&send, MPI_STATUS_IGNORE);
    int count = -1;
    MPI_Get_count(&st, MPI_INT, &count);
    d = mix(d ^ digest(in.data(), in.size()) ^ static_cast<std::uint64_t>(count) << 40);
  }
  MPI_Request_free(&send);
  MPI_Request_free(&recv);
  report("persistent partitioned", d);
}

void communicators() {
  MPI_Comm dup, half, cart;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, -world_rank, &half);
  int hr = 0, hs = 0, sum = 0;
  MPI_Comm_rank(half, &hr);
  MPI_Comm_size(half, &hs);
  MPI_Allreduce(&world_rank, &sum, 1, MPI_INT, MPI_SUM, half);
  int cmp = -1;
  MPI_Comm_compare(dup, MPI_COMM_WORLD, &cmp);
  int dims[2] = {0, 0}, periods[2] = {1, 0}, coords[2] = {0, 0};
  MPI_Dims_create(world_size, 2, dims);
  MPI_Cart_create(dup, 2, dims, periods, 0, &cart);
  int cr = 0, src[2], dst[2];
  MPI_Comm_rank(cart, &cr);
  MPI_Cart_coords(cart, cr, 2, coords);
  MPI_Cart_shift(cart, 0, 1, &src[0], &dst[0]);
  MPI_Cart_shift(cart, 1, 1, &src[1], &dst[1]);
  double x = cr, y = -1;
  MPI_Sendrecv(&x, 1, MPI_DOUBLE, dst[0], 1, &y, 1, MPI_DOUBLE, src[0], 1, cart, MPI_STATUS_IGNORE);
  int back = -1;
  MPI_Cart_rank(cart, coords, &back);
  int* tag_ub = nullptr;
  int has = 0;
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &has);
  const std::uint64_t d =
      mix(static_cast<std::uint64_t>(hr) ^ static_cast<std::uint64_t>(hs) << 8 ^ static_cast<std::uint64_t>(sum) << 16 ^
          static_cast<std::uint64_t>(cmp) << 24 ^ static_cast<std::uint64_t>(coords[0] * 10 + coords[1]) << 32 ^
          static_cast<std::uint64_t>(src[1] + 2) << 40 ^ digest(&y, 1) ^ static_cast<std::uint64_t>(back == cr) << 48 ^
          static_cast<std::uint64_t>(has && *tag_ub >= 32767) << 56);
  MPI_Comm_free(&cart);
  MPI_Comm_free(&half);
  MPI_Comm_free(&dup);
  report("communicators", d);

  // Groups: the group of a split communicator, a group without world rank 0 reversed, MPI_Comm_create from it
  // (rank 0 gets MPI_COMM_NULL), ranks translated between the groups.
  MPI_Comm odd_even;
  MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, world_rank, &odd_even);
  MPI_Group world_group, split_group, rest, reversed;
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  MPI_Comm_group(odd_even, &split_group);
  const int zero = 0;
  MPI_Group_excl(world_group, 1, &zero, &rest);
  std::vector<int> order(static_cast<std::size_t>(world_size - 1));
  for (int i = 0; i < world_size - 1; ++i) order[static_cast<std::size_t>(i)] = world_size - 2 - i;
  MPI_Group_incl(rest, world_size - 1, order.data(), &reversed);
  MPI_Comm made;
  MPI_Comm_create(MPI_COMM_WORLD, reversed, &made);
  int made_rank = -1, made_size = -1, made_sum = -1;
  if (made != MPI_COMM_NULL) {
    MPI_Comm_rank(made, &made_rank);
    MPI_Comm_size(made, &made_size);
    MPI_Allreduce(&world_rank, &made_sum, 1, MPI_INT, MPI_SUM, made);
    MPI_Comm_free(&made);
  }
  // MPI_Comm_create_group: the odd world ranks alone (the even ones do not call it), twice with a collective of
  // the whole world between, then a reduction on each.
  int group_sum = -1, group_rank = -1, group_sum2 = -1;
  if (world_rank % 2 == 1) {
    MPI_Group odd;
    MPI_Comm_group(odd_even, &odd);
    MPI_Comm by_group, by_group2;
    MPI_Comm_create_group(MPI_COMM_WORLD, odd, 7, &by_group);
    MPI_Comm_create_group(odd_even, odd, 8, &by_group2);
    MPI_Comm_rank(by_group, &group_rank);
    MPI_Allreduce(&world_rank, &group_sum, 1, MPI_INT, MPI_SUM, by_group);
    MPI_Allreduce(&group_rank, &group_sum2, 1, MPI_INT, MPI_MAX, by_group2);
    MPI_Comm_free(&by_group2);
    MPI_Comm_free(&by_group);
    MPI_Group_free(&odd);
  }
  int split_size = 0, in_world = -1;
  MPI_Group_size(split_group, &split_size);
  const int first = 0;
  MPI_Group_translate_ranks(split_group, 1, &first, world_group, &in_world);
  for (MPI_Group* g : {&world_group, &split_group, &rest, &reversed}) MPI_Group_free(g);
  MPI_Comm_free(&odd_even);
  report("groups",
         mix(static_cast<std::uint64_t>(made_rank + 1) ^ static_cast<std::uint64_t>(made_size + 1) << 8 ^
             static_cast<std::uint64_t>(made_sum + 1) << 16 ^ static_cast<std::uint64_t>(split_size) << 32 ^
             static_cast<std::uint64_t>(in_world) << 40 ^ static_cast<std::uint64_t>(group_sum + 1) << 44 ^
             static_cast<std::uint64_t>(group_rank + 1) << 52 ^ static_cast<std::uint64_t>(group_sum2 + 1) << 58));
}

// Topologies and neighbourhood collectives: a 2D grid (periodic in its first dimension where it has more than 2
// ranks), its rows by MPI_Cart_sub, a distributed graph (each rank to the next and the one 3 further, weighted);
// every neighbourhood collective, blocking and not, with a strided datatype in the alltoallw.
void topologies() {
  const int n = world_size, me = world_rank;
  int dims[2] = {0, 0}, periods[2] = {0, 0};
  MPI_Dims_create(n, 2, dims);
  periods[0] = dims[0] > 2;
  MPI_Comm cart, row, ring;
  MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 1, &cart);
  int kind_cart = -1, kind_world = -1, kind_row = -1, kind_ring = -1, kind_dup = -1, mapped = -2;
  MPI_Topo_test(cart, &kind_cart);
  MPI_Topo_test(MPI_COMM_WORLD, &kind_world);
  MPI_Cart_map(MPI_COMM_WORLD, 2, dims, periods, &mapped);
  const int keep[2] = {0, 1};
  MPI_Cart_sub(cart, keep, &row);
  int row_rank = -1, row_size = -1, row_sum = -1, row_dims = -1, row_dim = -1, row_period = -1, row_coord = -1;
  MPI_Comm_rank(row, &row_rank);
  MPI_Comm_size(row, &row_size);
  MPI_Allreduce(&me, &row_sum, 1, MPI_INT, MPI_SUM, row);
  MPI_Cartdim_get(row, &row_dims);
  MPI_Cart_get(row, 1, &row_dim, &row_period, &row_coord);
  MPI_Topo_test(row, &kind_row);

  // Blocking neighbourhood collectives on the grid (4 neighbours, some MPI_PROC_NULL: their blocks stay -1).
  int one = me * 10 + 1, gathered[4] = {-1, -1, -1, -1};
  MPI_Neighbor_allgather(&one, 1, MPI_INT, gathered, 1, MPI_INT, cart);
  double out2[8], in2[8];
  for (int i = 0; i < 8; ++i) out2[i] = me * 100 + i * 0.5, in2[i] = -1;
  MPI_Neighbor_alltoall(out2, 2, MPI_DOUBLE, in2, 2, MPI_DOUBLE, cart);
  // Block i holds i + 1 values; what arrives in block j left the neighbour as its block j ^ 1 (the other side).
  int counts[4], rcounts[4], sd[4], rd[4], vout[10], vin[10];
  for (int i = 0; i < 4; ++i) counts[i] = i + 1, rcounts[i] = (i ^ 1) + 1;
  for (int i = 0, a = 0, b = 0; i < 4; a += counts[i], b += rcounts[i], ++i) sd[i] = a, rd[i] = b;
  for (int i = 0; i < 10; ++i) vout[i] = me * 1000 + i, vin[i] = -1;
  MPI_Neighbor_alltoallv(vout, counts, sd, MPI_INT, vin, rcounts, rd, MPI_INT, cart);
  int allv[10];
  for (int i = 0; i < 10; ++i) allv[i] = -1;
  const int gcounts[4] = {1, 1, 1, 1}, gdispls[4] = {0, 2, 5, 7};
  int two[2] = {me, -me};
  MPI_Neighbor_allgatherv(two, 1, MPI_INT, allv, gcounts, gdispls, MPI_INT, cart);
  // alltoallw: columns of a 3x4 matrix (a strided type) out, rows in.
  MPI_Datatype column;
  MPI_Type_vector(3, 1, 4, MPI_INT, &column);
  MPI_Type_commit(&column);
  int matrix[12], rows[12];
  for (int i = 0; i < 12; ++i) matrix[i] = me * 50 + i, rows[i] = -1;
  int wcounts[4] = {1, 1, 1, 1}, rwcounts[4] = {3, 3, 3, 3};
  MPI_Aint sbytes[4], rbytes[4];
  MPI_Datatype stypes[4] = {column, column, column, column}, rtypes[4] = {MPI_INT, MPI_INT, MPI_INT, MPI_INT};
  for (int i = 0; i < 4; ++i)
    sbytes[i] = static_cast<MPI_Aint>(i * sizeof(int)), rbytes[i] = static_cast<MPI_Aint>(3 * i * sizeof(int));
  MPI_Neighbor_alltoallw(matrix, wcounts, sbytes, stypes, rows, rwcounts, rbytes, rtypes, cart);
  std::uint64_t d = digest(gathered, 4) ^ digest(in2, 8) ^ digest(vin, 10) ^ digest(allv, 10) ^ digest(rows, 12);
  report("neighbors grid", d);
  // Periodic dimensions of 1 and 2 ranks, where both neighbours are one rank: what goes to the -1 neighbour arrives
  // in its block from the +1 one. (Blocking only: Open MPI 5.0.7's non-blocking forms disagree with its blocking
  // ones there, and truncate with 2.)
  d = 0;
  for (int shape = 0; shape < 2; ++shape) {
    int pdims[2] = {n, 1}, all_periodic[2] = {1, 1};
    if (shape == 1) pdims[0] = n % 2 == 0 ? n / 2 : n, pdims[1] = n % 2 == 0 ? 2 : 1;
    MPI_Comm torus;
    MPI_Cart_create(MPI_COMM_WORLD, 2, pdims, all_periodic, 0, &torus);
    int tout[4], tin[4] = {-1, -1, -1, -1}, tall[4] = {-1, -1, -1, -1};
    for (int i = 0; i < 4; ++i) tout[i] = me * 10 + i;
    MPI_Neighbor_alltoall(tout, 1, MPI_INT, tin, 1, MPI_INT, torus);
    MPI_Neighbor_allgather(&one, 1, MPI_INT, tall, 1, MPI_INT, torus);
    d ^= mix(digest(tin, 4) ^ digest(tall, 4) ^ static_cast<std::uint64_t>(shape));
    MPI_Comm_free(&torus);
  }
  report("neighbors periodic", d);

  // A distributed graph: to the next rank and to the one 3 further, weights 1 and 3.
  const int dests[2] = {(me + 1) % n, (me + 3) % n}, srcs[2] = {(me + n - 1) % n, (me + 3 * n - 3) % n};
  const int weights[2] = {1, 3};
  MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, srcs, weights, 2, dests, weights, MPI_INFO_NULL, 0, &ring);
  MPI_Topo_test(ring, &kind_ring);
  MPI_Comm ring_dup;
  MPI_Comm_dup(ring, &ring_dup);
  MPI_Topo_test(ring_dup, &kind_dup);
  int indeg = -1, outdeg = -1, weighted = -1, got_src[2] = {-1, -1}, got_dst[2] = {-1, -1}, got_sw[2], got_dw[2];
  MPI_Dist_graph_neighbors_count(ring_dup, &indeg, &outdeg, &weighted);
  MPI_Dist_graph_neighbors(ring_dup, 2, got_src, got_sw, 2, got_dst, got_dw);
  std::int64_t to[2] = {me * 7 + 1, me * 7 + 2}, from[2] = {-1, -1};
  MPI_Neighbor_alltoall(to, 1, MPI_INT64_T, from, 1, MPI_INT64_T, ring);

  // Non-blocking: on both communicators at once, with point-to-point between them; then one completed by a test.
  const int next = (me + 1) % n, prev = (me + n - 1) % n;
  int ring_in[2] = {-1, -1}, grid_in[8], p2p = -1, p2p_out = me + 500;
  for (int& x : grid_in) x = -1;
  int grid_out[8];
  for (int i = 0; i < 8; ++i) grid_out[i] = me * 8 + i;
  MPI_Request r[4];
  MPI_Ineighbor_allgather(&one, 1, MPI_INT, ring_in, 1, MPI_INT, ring, &r[0]);
  MPI_Irecv(&p2p, 1, MPI_INT, prev, 3, MPI_COMM_WORLD, &r[1]);
  MPI_Ineighbor_alltoall(grid_out, 2, MPI_INT, grid_in, 2, MPI_INT, cart, &r[2]);
  MPI_Isend(&p2p_out, 1, MPI_INT, next, 3, MPI_COMM_WORLD, &r[3]);
  MPI_Waitall(4, r, MPI_STATUSES_IGNORE);
  int ra[10], rw[12], rav[10];
  for (int i = 0; i < 10; ++i) ra[i] = -1, rav[i] = -1;
  for (int& x : rw) x = -1;
  MPI_Request q[3];
  MPI_Ineighbor_alltoallv(vout, counts, sd, MPI_INT, ra, rcounts, rd, MPI_INT, cart, &q[0]);
  MPI_Ineighbor_alltoallw(matrix, wcounts, sbytes, stypes, rw, rwcounts, rbytes, rtypes, cart, &q[1]);
  MPI_Ineighbor_allgatherv(two, 1, MPI_INT, rav, gcounts, gdispls, MPI_INT, cart, &q[2]);
  int flag = 0;
  while (!flag) MPI_Testall(3, q, &flag, MPI_STATUSES_IGNORE);
  MPI_Type_free(&column);
  d = digest(from, 2) ^ digest(ring_in, 2) ^ digest(grid_in, 8) ^ digest(&p2p, 1) ^ digest(ra, 10) ^ digest(rw, 12) ^
      digest(rav, 10) ^ digest(got_src, 2) ^ digest(got_dst, 2) ^ digest(got_sw, 2) ^ digest(got_dw, 2);
  report("neighbors graph", d);
  report("topologies", mix(static_cast<std::uint64_t>(kind_cart) ^ static_cast<std::uint64_t>(kind_world + 7) << 6 ^
                           static_cast<std::uint64_t>(kind_row) << 12 ^ static_cast<std::uint64_t>(kind_ring) << 18 ^
                           static_cast<std::uint64_t>(kind_dup) << 24 ^ static_cast<std::uint64_t>(mapped + 2) << 30 ^
                           static_cast<std::uint64_t>(row_rank) << 36 ^ static_cast<std::uint64_t>(row_size) << 40 ^
                           static_cast<std::uint64_t>(row_sum) << 44 ^ static_cast<std::uint64_t>(row_dims) << 50 ^
                           static_cast<std::uint64_t>(row_dim * 4 + row_period * 2 + row_coord) << 54 ^
                           static_cast<std::uint64_t>(indeg * 9 + outdeg * 3 + weighted)));
  MPI_Comm_free(&ring_dup);
  MPI_Comm_free(&ring);
  MPI_Comm_free(&row);
  MPI_Comm_free(&cart);
}

// What a program hangs on its communicators and the calls around its handles: attributes with callbacks that make
// MPI calls (counted: which slots were copied and deleted, in order), names, info, MPI_Comm_dup_with_info,
// MPI_Comm_idup, MPI_Pack/MPI_Unpack of a message sent as MPI_PACKED, MPI_Request_get_status.
int attribute_slots[8];
int copies = 0, deletes = 0;
int copy_attribute(MPI_Comm old, int, void*, void* in, void* out, int* flag) {
  int size = 0;
  MPI_Comm_size(old, &size);
  ++copies;
  *static_cast<int**>(out) = static_cast<int*>(in) + 1;
  *flag = size == world_size ? 1 : 0;
  return MPI_SUCCESS;
}
int delete_attribute(MPI_Comm, int, void* value, void*) {
  deletes = deletes * 10 + static_cast<int>(static_cast<int*>(value) - attribute_slots);
  return MPI_SUCCESS;
}

// An error handler of the program: folds each call's code, the communicator's size and a sum over it into
// errors_seen.
std::uint64_t errors_seen = 0;
void count_error(MPI_Comm* comm, int* code, ...) {
  int size = 0, sum = 0, one = 1;
  MPI_Comm_size(*comm, &size);
  MPI_Allreduce(&one, &sum, 1, MPI_INT, MPI_SUM, *comm);
  int error_class = 0;
  MPI_Error_class(*code, &error_class);
  errors_seen = mix(errors_seen ^ static_cast<std::uint64_t>(error_class * 10000 + size * 100 + sum));
}

void handles() {
  int key = MPI_KEYVAL_INVALID, plain = MPI_KEYVAL_INVALID;
  MPI_Comm_create_keyval(copy_attribute, delete_attribute, &key, nullptr);
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &plain, nullptr);
  MPI_Comm a, b, c;
  MPI_Comm_dup(MPI_COMM_WORLD, &a);
  MPI_Comm_set_attr(a, key, &attribute_slots[1]);
  MPI_Comm_set_attr(a, plain, &attribute_slots[5]);
  MPI_Comm_set_attr(a, key, &attribute_slots[2]);  // slot 1 deleted first
  MPI_Comm_dup_with_info(a, MPI_INFO_NULL, &b);    // key copied (slot 3), plain not
  int* in_b = nullptr;
  void* plain_in_b = nullptr;
  int flag_b = -1, flag_plain = -1;
  MPI_Comm_get_attr(b, key, &in_b, &flag_b);
  MPI_Comm_get_attr(b, plain, &plain_in_b, &flag_plain);
  MPI_Request r;
  MPI_Comm_idup(b, &c, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);  // key copied again (slot 4)
  int* in_c = nullptr;
  int flag_c = -1, sum = 0;
  MPI_Comm_get_attr(c, key, &in_c, &flag_c);
  MPI_Allreduce(&world_rank, &sum, 1, MPI_INT, MPI_SUM, c);
  int* via_mpi1 = nullptr;
  int flag_mpi1 = -1;
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"  // (what is tested here)
  MPI_Attr_get(b, key, &via_mpi1, &flag_mpi1);              // (MPI-1's names for the same calls)
  MPI_Comm_delete_attr(b, key);                             // slot 3
  MPI_Attr_put(b, key, &attribute_slots[6]);
  MPI_Attr_delete(b, key);  // slot 6
#pragma GCC diagnostic pop
  MPI_Comm_set_name(c, "reprise-check");
  char name[MPI_MAX_OBJECT_NAME], world_name[MPI_MAX_OBJECT_NAME];
  int length = 0, world_length = 0;
  MPI_Comm_get_name(c, name, &length);
  MPI_Comm_get_name(MPI_COMM_WORLD, world_name, &world_length);
  MPI_Info hints, used;
  MPI_Info_create(&hints);
  MPI_Info_set(hints, "mpi_assert_no_any_source", "true");
  MPI_Comm_set_info(c, hints);
  MPI_Comm_get_info(c, &used);
  MPI_Info_free(&used);
  MPI_Info_free(&hints);
  MPI_Comm_free(&c);  // slot 4
  MPI_Comm_free(&b);
  MPI_Comm_free(&a);  // slot 2
  MPI_Comm_free_keyval(&key);
  MPI_Comm_free_keyval(&plain);
  std::uint64_t d =
      mix(static_cast<std::uint64_t>(copies) ^ static_cast<std::uint64_t>(deletes) << 8 ^
          static_cast<std::uint64_t>(in_b - attribute_slots) << 32 ^
          static_cast<std::uint64_t>(in_c - attribute_slots) << 36 ^
          static_cast<std::uint64_t>(flag_b * 4 + flag_plain * 2 + flag_c) << 40 ^
          static_cast<std::uint64_t>(sum) << 44) ^
      digest(name, static_cast<std::size_t>(length)) ^ digest(world_name, static_cast<std::size_t>(world_length)) << 1 ^
      mix(static_cast<std::uint64_t>(via_mpi1 - attribute_slots) ^ static_cast<std::uint64_t>(flag_mpi1 + 1) << 8);
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
  MPI_Comm hinted;
  MPI_Request made;
  MPI_Comm_idup_with_info(MPI_COMM_WORLD, MPI_INFO_NULL, &hinted, &made);
  MPI_Wait(&made, MPI_STATUS_IGNORE);
  int hinted_sum = 0;
  MPI_Allreduce(&world_rank, &hinted_sum, 1, MPI_INT, MPI_SUM, hinted);
  MPI_Comm_free(&hinted);
  d = mix(d ^ static_cast<std::uint64_t>(hinted_sum));
#endif
  report("attributes/names", d);

  // Error handlers: one of the program's set on a duplicate (and freed by the program at once: the communicator
  // keeps it), given back by MPI_Comm_get_errhandler, inherited by a split of it, called by MPI_Comm_call_errhandler
  // (its own MPI calls on the communicator served); MPI_ERRORS_RETURN set, got and called on MPI_COMM_WORLD, then
  // MPI_ERRORS_ARE_FATAL again. MPI_Comm_c2f and MPI_Comm_f2c give the handles back.
  MPI_Errhandler mine, got_handler, world_handler;
  MPI_Comm_create_errhandler(count_error, &mine);
  MPI_Comm e, half;
  MPI_Comm_dup(MPI_COMM_WORLD, &e);
  MPI_Comm_set_errhandler(e, mine);
  MPI_Errhandler_free(&mine);
  MPI_Comm_get_errhandler(e, &got_handler);
  MPI_Comm_split(e, world_rank % 2, 0, &half);
  const int called = MPI_Comm_call_errhandler(e, MPI_ERR_TAG);
  MPI_Comm_call_errhandler(half, MPI_ERR_COUNT);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &world_handler);
  const int returned = MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
  const std::uint64_t handlers = static_cast<std::uint64_t>(world_handler == MPI_ERRORS_RETURN) |
                                 static_cast<std::uint64_t>(returned == MPI_SUCCESS && called == MPI_SUCCESS) << 1;
  MPI_Errhandler_free(&got_handler);
  MPI_Errhandler_free(&world_handler);
  const std::uint64_t fortran = static_cast<std::uint64_t>(MPI_Comm_f2c(MPI_Comm_c2f(e)) == e) |
                                static_cast<std::uint64_t>(MPI_Comm_f2c(MPI_Comm_c2f(half)) == half) << 1 |
                                static_cast<std::uint64_t>(MPI_Comm_c2f(half) != MPI_Comm_c2f(e)) << 2 |
                                static_cast<std::uint64_t>(MPI_Comm_f2c(MPI_Comm_c2f(MPI_COMM_WORLD)) == MPI_COMM_WORLD)
                                    << 3;
  // A request through its Fortran number and back, then waited for.
  const int next_rank = (world_rank + 1) % world_size, prev_rank = (world_rank + world_size - 1) % world_size;
  double out_value = world_rank + 0.5, in_value = -1;
  MPI_Request sent, received;
  MPI_Irecv(&in_value, 1, MPI_DOUBLE, prev_rank, 30, e, &received);
  MPI_Isend(&out_value, 1, MPI_DOUBLE, next_rank, 30, e, &sent);
  MPI_Request back = MPI_Request_f2c(MPI_Request_c2f(received));
  const std::uint64_t same_request = back == received && MPI_Request_c2f(sent) != MPI_Request_c2f(received);
  MPI_Wait(&back, MPI_STATUS_IGNORE);
  MPI_Wait(&sent, MPI_STATUS_IGNORE);
  MPI_Comm_free(&half);
  MPI_Comm_free(&e);
  report("error handlers/c2f",
         mix(handlers ^ fortran << 4 ^ same_request << 6 ^ static_cast<std::uint64_t>(errors_seen) << 8) ^
             digest(&in_value, 1));

  // Packed by the program, sent as MPI_PACKED, unpacked; a receive watched by MPI_Request_get_status.
  const int n = world_size, next = (world_rank + 1) % n, prev = (world_rank + n - 1) % n;
  char out[256], in[256];
  int position = 0, packed_size = 0;
  const double values[3] = {1.5, -2.25, world_rank + 0.125};
  const int ints[2] = {7, world_rank};
  MPI_Pack_size(3, MPI_DOUBLE, MPI_COMM_WORLD, &packed_size);
  MPI_Pack(values, 3, MPI_DOUBLE, out, sizeof out, &position, MPI_COMM_WORLD);
  MPI_Pack(ints, 2, MPI_INT, out, sizeof out, &position, MPI_COMM_WORLD);
  MPI_Request q[2];
  MPI_Irecv(in, sizeof in, MPI_PACKED, prev, 11, MPI_COMM_WORLD, &q[0]);
  MPI_Isend(out, position, MPI_PACKED, next, 11, MPI_COMM_WORLD, &q[1]);
  MPI_Status st;
  int flag = 0, count = -1;
  while (!flag) MPI_Request_get_status(q[0], &flag, &st);
  MPI_Get_count(&st, MPI_PACKED, &count);
  const int source = st.MPI_SOURCE, tag = st.MPI_TAG;
  MPI_Waitall(2, q, MPI_STATUSES_IGNORE);
  double got[3] = {0, 0, 0};
  int got_ints[2] = {0, 0}, at = 0;
  MPI_Unpack(in, count, &at, got, 3, MPI_DOUBLE, MPI_COMM_WORLD);
  MPI_Unpack(in, count, &at, got_ints, 2, MPI_INT, MPI_COMM_WORLD);
  report("packed/get_status",
         digest(got, 3) ^ digest(got_ints, 2) ^
             mix(static_cast<std::uint64_t>(packed_size) ^ static_cast<std::uint64_t>(count) << 16 ^
                 static_cast<std::uint64_t>(source) << 32 ^ static_cast<std::uint64_t>(tag) << 48));

  // Buffered sends (from the attached buffer, detached at the end) and ready sends (their receives posted first).
  std::vector<char> attached(4096 + 4 * MPI_BSEND_OVERHEAD);
  MPI_Buffer_attach(attached.data(), static_cast<int>(attached.size()));
  double bs[4] = {world_rank + 0.25, world_rank + 0.5, -1, -1}, br[4] = {0, 0, 0, 0};
  MPI_Request bq[4];
  MPI_Bsend(&bs[0], 1, MPI_DOUBLE, next, 21, MPI_COMM_WORLD);
  bs[0] = -99;  // (the buffered copy went, not this)
  MPI_Ibsend(&bs[1], 1, MPI_DOUBLE, next, 22, MPI_COMM_WORLD, &bq[0]);
  MPI_Wait(&bq[0], MPI_STATUS_IGNORE);
  MPI_Recv(&br[0], 1, MPI_DOUBLE, prev, 21, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Recv(&br[1], 1, MPI_DOUBLE, prev, 22, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
  MPI_Irecv(&br[2], 1, MPI_DOUBLE, prev, 23, MPI_COMM_WORLD, &bq[1]);
  MPI_Irecv(&br[3], 1, MPI_DOUBLE, prev, 24, MPI_COMM_WORLD, &bq[2]);
  MPI_Barrier(MPI_COMM_WORLD);  // (every ready send's receive is posted)
  bs[2] = world_rank * 2.0, bs[3] = world_rank * 3.0;
  MPI_Rsend(&bs[2], 1, MPI_DOUBLE, next, 23, MPI_COMM_WORLD);
  MPI_Irsend(&bs[3], 1, MPI_DOUBLE, next, 24, MPI_COMM_WORLD, &bq[3]);
  MPI_Waitall(3, &bq[1], MPI_STATUSES_IGNORE);
  // Persistent buffered and ready sends, started three times (the buffer changed after each wait).
  double pb = world_rank + 0.125, pr = world_rank - 0.5, pb_in = 0, pr_in = 0, persistent_sum = 0;
  MPI_Request pq[4];
  MPI_Bsend_init(&pb, 1, MPI_DOUBLE, next, 25, MPI_COMM_WORLD, &pq[0]);
  MPI_Rsend_init(&pr, 1, MPI_DOUBLE, next, 26, MPI_COMM_WORLD, &pq[1]);
  MPI_Recv_init(&pb_in, 1, MPI_DOUBLE, prev, 25, MPI_COMM_WORLD, &pq[2]);
  MPI_Recv_init(&pr_in, 1, MPI_DOUBLE, prev, 26, MPI_COMM_WORLD, &pq[3]);
  for (int round = 0; round < 3; ++round) {
    MPI_Startall(2, &pq[2]);
    MPI_Barrier(MPI_COMM_WORLD);  // (the ready send's receive is posted)
    MPI_Startall(2, pq);
    MPI_Waitall(4, pq, MPI_STATUSES_IGNORE);
    persistent_sum += pb_in * (round + 1) + pr_in * (round + 7);
    pb += 1, pr -= 1;
  }
  for (MPI_Request& q : pq) MPI_Request_free(&q);
  br[0] += persistent_sum;
  void* detached = nullptr;
  int detached_size = 0;
  MPI_Buffer_detach(&detached, &detached_size);
  report("buffered/ready sends", digest(br, 4) ^ static_cast<std::uint64_t>(detached == attached.data()) << 60);
}

// Intercommunicators: the even and the odd world ranks as two groups, joined by MPI_Intercomm_create twice (leaders
// rank 0 of each group; then each group's last rank); each rank sends to and receives from every remote rank
// (blocking and not, a probe), a barrier and broadcasts across, a duplicate, the remote group's world ranks, then
// MPI_Intercomm_merge (the even group low, then both low: Open MPI's order, the group whose rank 0 is the higher
// world rank first) and a reduction over each.
// A non-commutative operation, a op b = a: a reduction in rank order gives its first rank's value.
void keep_first(void* in, void* inout, int* len, MPI_Datatype* type) {
  int size = 0;
  MPI_Type_size(*type, &size);
  std::memcpy(inout, in, static_cast<std::size_t>(*len) * static_cast<std::size_t>(size));
}

void intercommunicators() {
  if (world_size < 2) return;
  const int color = world_rank % 2;
  MPI_Comm half, inter, ends, low_first, both_low;
  MPI_Comm_split(MPI_COMM_WORLD, color, world_rank, &half);
  int local = 0, local_size = 0;
  MPI_Comm_rank(half, &local);
  MPI_Comm_size(half, &local_size);
  MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - color, 77, &inter);
  const int evens = (world_size + 1) / 2, odds = world_size / 2;
  const int other_last = color == 0 ? 2 * (odds - 1) + 1 : 2 * (evens - 1);  // the other group's last world rank
  MPI_Intercomm_create(half, local_size - 1, MPI_COMM_WORLD, other_last, 78, &ends);
  int is_inter = 0, remote_size = 0, inter_rank = -1, inter_size = 0;
  MPI_Comm_test_inter(inter, &is_inter);
  MPI_Comm_remote_size(inter, &remote_size);
  MPI_Comm_rank(inter, &inter_rank);
  MPI_Comm_size(inter, &inter_size);
  std::vector<double> out(static_cast<std::size_t>(remote_size)), in(static_cast<std::size_t>(remote_size), -1);
  std::vector<MPI_Request> requests;
  for (int r = 0; r < remote_size; ++r) {
    out[static_cast<std::size_t>(r)] = world_rank * 100.0 + r + 0.25;
    requests.emplace_back();
    MPI_Irecv(&in[static_cast<std::size_t>(r)], 1, MPI_DOUBLE, r, 5, inter, &requests.back());
  }
  for (int r = 0; r < remote_size; ++r) {
    requests.emplace_back();
    MPI_Isend(&out[static_cast<std::size_t>(r)], 1, MPI_DOUBLE, r, 5, inter, &requests.back());
  }
  std::vector<MPI_Status> statuses(requests.size());
  MPI_Waitall(static_cast<int>(requests.size()), requests.data(), statuses.data());
  std::uint64_t sources = 0;
  for (int r = 0; r < remote_size; ++r) sources = sources * 31 + static_cast<std::uint64_t>(statuses[r].MPI_SOURCE);
  // Over the second one: a ring between the groups' ranks (local rank i to remote rank i % remote size), a probe.
  int ends_remote = 0;
  MPI_Comm_remote_size(ends, &ends_remote);
  const int to = local % ends_remote;
  int token = world_rank * 7, got_token = -1, probed_count = 0;
  MPI_Request token_sent;
  MPI_Isend(&token, 1, MPI_INT, to, 9, ends, &token_sent);
  std::int64_t tokens = 0;
  for (int r = 0; r < ends_remote; ++r) {  // the remote ranks that send here: r % local_size == local
    if (r % local_size != local) continue;
    MPI_Status st;
    MPI_Probe(r, 9, ends, &st);
    MPI_Get_count(&st, MPI_INT, &probed_count);
    MPI_Recv(&got_token, 1, MPI_INT, r, 9, ends, MPI_STATUS_IGNORE);
    tokens = tokens * 131 + got_token + probed_count;
  }
  MPI_Wait(&token_sent, MPI_STATUS_IGNORE);
  // A barrier across, a broadcast from each group's rank 0 to the other group, and a duplicate used for a message.
  MPI_Barrier(inter);
  double from_even[3] = {-1, -1, -1}, from_odd[3] = {-1, -1, -1};
  if (color == 0)
    for (int i = 0; i < 3; ++i) from_even[i] = world_rank + i * 0.5 + 1;
  else
    for (int i = 0; i < 3; ++i) from_odd[i] = world_rank - i * 0.25;
  MPI_Bcast(from_even, 3, MPI_DOUBLE, color == 0 ? (local == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0, inter);
  MPI_Bcast(from_odd, 3, MPI_DOUBLE, color == 1 ? (local == 0 ? MPI_ROOT : MPI_PROC_NULL) : 0, inter);
  // Reductions across: each group gets the other's (MPI_Allreduce, a non-commutative operation too), and each
  // group's last rank gets the other group's (MPI_Reduce to a root in the remote group).
  double sent_sum[2] = {world_rank + 0.5, world_rank * 0.25}, other_sum[2] = {-1, -1};
  MPI_Allreduce(sent_sum, other_sum, 2, MPI_DOUBLE, MPI_SUM, inter);
  MPI_Op first_wins;
  MPI_Op_create(keep_first, 0, &first_wins);
  int other_first = -1;
  MPI_Allreduce(&world_rank, &other_first, 1, MPI_INT, first_wins, inter);
  MPI_Op_free(&first_wins);
  std::int64_t other_max[2] = {-1, -1};
  const std::int64_t sent_max = world_rank * 3 + 1;
  for (int g = 0; g < 2; ++g) {  // the root in group g: its last rank
    const int root = color == g ? (local == local_size - 1 ? MPI_ROOT : MPI_PROC_NULL) : (g == 0 ? evens : odds) - 1;
    MPI_Reduce(&sent_max, &other_max[g], 1, MPI_INT64_T, MPI_MAX, root, inter);
  }
  MPI_Comm inter_copy;
  MPI_Comm_dup(inter, &inter_copy);
  int copy_inter = 0, copy_remote = 0, mirrored = -1;
  MPI_Comm_test_inter(inter_copy, &copy_inter);
  MPI_Comm_remote_size(inter_copy, &copy_remote);
  if (local < copy_remote) {  // local rank i and remote rank i, where both are
    MPI_Sendrecv(&world_rank, 1, MPI_INT, local, 3, &mirrored, 1, MPI_INT, local, 3, inter_copy, MPI_STATUS_IGNORE);
  }
  MPI_Comm_free(&inter_copy);
  MPI_Group remote_group, world_group;
  MPI_Comm_remote_group(inter, &remote_group);
  MPI_Comm_group(MPI_COMM_WORLD, &world_group);
  std::vector<int> remote_ranks(static_cast<std::size_t>(remote_size)), world_ranks(remote_ranks.size());
  for (int r = 0; r < remote_size; ++r) remote_ranks[static_cast<std::size_t>(r)] = r;
  MPI_Group_translate_ranks(remote_group, remote_size, remote_ranks.data(), world_group, world_ranks.data());
  MPI_Group_free(&remote_group);
  MPI_Group_free(&world_group);
  MPI_Intercomm_merge(inter, color, &low_first);
  MPI_Intercomm_merge(ends, 0, &both_low);
  int merged_rank = -1, merged_size = 0, both_rank = -1, weighted = 0, both_weighted = 0;
  MPI_Comm_rank(low_first, &merged_rank);
  MPI_Comm_size(low_first, &merged_size);
  MPI_Comm_rank(both_low, &both_rank);
  const int mine = world_rank * (merged_rank + 1), mine_both = world_rank * (both_rank + 3);
  MPI_Allreduce(&mine, &weighted, 1, MPI_INT, MPI_SUM, low_first);
  MPI_Allreduce(&mine_both, &both_weighted, 1, MPI_INT, MPI_SUM, both_low);
  for (MPI_Comm* c : {&both_low, &low_first, &ends, &inter, &half}) MPI_Comm_free(c);
  report("intercommunicators",
         mix(digest(in.data(), in.size()) ^ sources ^ static_cast<std::uint64_t>(tokens) << 3 ^
             digest(world_ranks.data(), world_ranks.size()) << 1 ^
             static_cast<std::uint64_t>(is_inter + 2 * inter_rank + 100 * inter_size + 10000 * remote_size) << 20 ^
             static_cast<std::uint64_t>(merged_rank + 100 * merged_size) << 40 ^
             static_cast<std::uint64_t>(weighted) << 8 ^ static_cast<std::uint64_t>(both_weighted) << 12) ^
             digest(from_even, 3) ^ digest(from_odd, 3) << 2 ^ digest(other_sum, 2) << 4 ^
             static_cast<std::uint64_t>(other_first + 1) << 24 ^ digest(other_max, 2) << 6 ^
             static_cast<std::uint64_t>(copy_inter + 2 * copy_remote + 100 * (mirrored + 1)) << 5);
}

// A file name no other run uses (rank 0's process id, broadcast), in the temporary directory.
std::string scratch_file(const char* what) {
  long id = world_rank == 0 ? static_cast<long>(getpid()) : 0;
  MPI_Bcast(&id, 1, MPI_LONG, 0, MPI_COMM_WORLD);
  return (std::filesystem::temp_directory_path() / ("interpose-check-" + std::to_string(id) + "-" + what)).string();
}

int error_class(int rc) {
  int c = MPI_SUCCESS;
  MPI_Error_class(rc, &c);
  return c;
}

// MPI-IO on a communicator of the program (the odd and the even ranks, in reverse order), one file each: made
// exclusively, written past the end then cut (MPI_File_set_size), written through a strided view collectively and
// by a non-blocking write, read back whole, records appended and read back through the shared pointer; its group and
// access mode; opened exclusively again (refused: it exists), deleted, opened again without MPI_MODE_CREATE (no such
// file).
void file_io() {
  const int me = world_rank;
  MPI_Comm half;
  MPI_Comm_split(MPI_COMM_WORLD, me % 2, -me, &half);
  int hr = 0, hn = 0;
  MPI_Comm_rank(half, &hr);
  MPI_Comm_size(half, &hn);
  const std::string name = scratch_file(me % 2 ? "odd" : "even");
  const int amode = MPI_MODE_CREATE | MPI_MODE_EXCL | MPI_MODE_RDWR;
  MPI_File f;
  const int opened = MPI_File_open(half, name.c_str(), amode, MPI_INFO_NULL, &f);
  std::uint64_t d = static_cast<std::uint64_t>(error_class(opened));
  if (opened == MPI_SUCCESS) {
    long past = 1000 + me;
    MPI_File_write_at(f, 4096 + 8 * hr, &past, 1, MPI_LONG, MPI_STATUS_IGNORE);
    MPI_File_set_size(f, 8 * 3 * hn);  // cuts every rank's write past it
    MPI_Offset size = 0;
    MPI_File_get_size(f, &size);
    // Element i of this rank's three is long i * hn + hr of the file.
    MPI_Datatype strided, every;
    MPI_Type_vector(3, 1, hn, MPI_LONG, &strided);
    MPI_Type_create_resized(strided, 0, static_cast<MPI_Aint>(8) * 3 * hn, &every);
    MPI_Type_commit(&every);
    MPI_File_set_view(f, 8 * hr, MPI_LONG, every, "native", MPI_INFO_NULL);
    long mine[3] = {me * 10 + 1, me * 10 + 2, 0};
    MPI_File_write_at_all(f, 0, mine, 2, MPI_LONG, MPI_STATUS_IGNORE);
    mine[2] = me * 10 + 3;
    MPI_Request r;
    MPI_File_iwrite_at(f, 2, &mine[2], 1, MPI_LONG, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
    MPI_File_sync(f);
    MPI_Barrier(half);
    MPI_File_sync(f);
    MPI_File_set_view(f, 0, MPI_BYTE, MPI_BYTE, "native", MPI_INFO_NULL);
    std::vector<long> all(static_cast<std::size_t>(3 * hn));
    MPI_File_read_at_all(f, 0, all.data(), 3 * hn, MPI_LONG, MPI_STATUS_IGNORE);
    // The shared pointer: records of 1 or 2 longs appended in rank order at the end, twice (the second split),
    // the pointer after them, read back in order from where they start.
    const int n = 1 + hr % 2;
    long records[2] = {me * 100 + 1, me * 100 + 2}, split[2] = {me * 100 + 3, me * 100 + 4}, back[4] = {0, 0, 0, 0};
    MPI_File_seek_shared(f, 0, MPI_SEEK_END);
    MPI_File_write_ordered(f, records, n, MPI_LONG, MPI_STATUS_IGNORE);
    MPI_File_write_ordered_begin(f, split, n, MPI_LONG);
    MPI_File_write_ordered_end(f, split, MPI_STATUS_IGNORE);
    MPI_Offset shared = 0;
    MPI_File_get_position_shared(f, &shared);
    MPI_File_sync(f);
    MPI_Barrier(half);
    MPI_File_sync(f);
    MPI_File_seek_shared(f, static_cast<MPI_Offset>(8) * 3 * hn, MPI_SEEK_SET);
    MPI_File_read_ordered(f, back, n, MPI_LONG, MPI_STATUS_IGNORE);
    MPI_File_read_ordered_begin(f, back + 2, n, MPI_LONG);
    MPI_File_read_ordered_end(f, back + 2, MPI_STATUS_IGNORE);
    MPI_Offset shared_after = 0;
    MPI_File_get_position_shared(f, &shared_after);
    MPI_Group fg, cg;
    MPI_File_get_group(f, &fg);
    MPI_Comm_group(half, &cg);
    int same = MPI_UNEQUAL, got_amode = 0;
    MPI_Group_compare(fg, cg, &same);
    MPI_File_get_amode(f, &got_amode);
    MPI_Group_free(&fg);
    MPI_Group_free(&cg);
    MPI_Type_free(&every);
    MPI_Type_free(&strided);
    MPI_File_close(&f);
    d = mix(d ^ digest(back, 4) ^ static_cast<std::uint64_t>(shared) << 12 ^
            static_cast<std::uint64_t>(shared_after) << 36);
    d = mix(d ^ static_cast<std::uint64_t>(size) << 8 ^ digest(all.data(), all.size()) ^
            static_cast<std::uint64_t>(same) << 20 ^ static_cast<std::uint64_t>(got_amode == amode) << 24);
  }
  MPI_File again;
  const int twice = MPI_File_open(half, name.c_str(), amode, MPI_INFO_NULL, &again);
  if (twice == MPI_SUCCESS) MPI_File_close(&again);
  MPI_Barrier(half);
  if (hr == 0) MPI_File_delete(name.c_str(), MPI_INFO_NULL);
  MPI_Barrier(half);
  const int gone = MPI_File_open(half, name.c_str(), MPI_MODE_RDONLY, MPI_INFO_NULL, &again);
  if (gone == MPI_SUCCESS) MPI_File_close(&again);
  d = mix(d ^ static_cast<std::uint64_t>(error_class(twice)) << 32 ^
          static_cast<std::uint64_t>(error_class(gone)) << 40);
  MPI_Comm_free(&half);
  report("file io", d);
}

// MPI_Alltoallw (a strided datatype out, rows in), blocking and not; the persistent collectives (MPI 4), started
// three times with new values, several at once with persistent point-to-point, then freed.
void alltoallw_and_persistent() {
  const int n = world_size, me = world_rank, next = (me + 1) % n, prev = (me + n - 1) % n;
  MPI_Datatype column;  // column j of an n x 3 matrix of ints (stride 3)
  MPI_Type_vector(n, 1, 3, MPI_INT, &column);
  MPI_Type_commit(&column);
  std::vector<int> matrix(static_cast<std::size_t>(3 * n)), rows(static_cast<std::size_t>(n * n), -1),
      rows2(static_cast<std::size_t>(n * n), -1);
  for (int i = 0; i < 3 * n; ++i) matrix[static_cast<std::size_t>(i)] = me * 100 + i;
  std::vector<int> scounts(static_cast<std::size_t>(n), 1), sdispls(static_cast<std::size_t>(n)),
      rcounts(static_cast<std::size_t>(n), n), rdispls(static_cast<std::size_t>(n));
  std::vector<MPI_Datatype> stypes(static_cast<std::size_t>(n), column), rtypes(static_cast<std::size_t>(n), MPI_INT);
  for (int r = 0; r < n; ++r) {
    sdispls[static_cast<std::size_t>(r)] = static_cast<int>((r % 3) * sizeof(int));
    rdispls[static_cast<std::size_t>(r)] = static_cast<int>(r * n * sizeof(int));
  }
  MPI_Alltoallw(matrix.data(), scounts.data(), sdispls.data(), stypes.data(), rows.data(), rcounts.data(),
                rdispls.data(), rtypes.data(), MPI_COMM_WORLD);
  MPI_Request r;
  MPI_Ialltoallw(matrix.data(), scounts.data(), sdispls.data(), stypes.data(), rows2.data(), rcounts.data(),
                 rdispls.data(), rtypes.data(), MPI_COMM_WORLD, &r);
  MPI_Wait(&r, MPI_STATUS_IGNORE);
  std::uint64_t d = digest(rows.data(), rows.size()) ^ digest(rows2.data(), rows2.size()) << 1;
#if MPI_VERSION >= 4 || (defined(OMPI_MAJOR_VERSION) && OMPI_MAJOR_VERSION >= 5)
  MPI_Comm dup, cart;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  int dims[1] = {n}, periods[1] = {n > 2 ? 1 : 0};  // (2 periodic ranks: Open MPI's own non-blocking forms differ)
  MPI_Cart_create(MPI_COMM_WORLD, 1, dims, periods, 0, &cart);
  double x = 0, sum = 0, b[3] = {0, 0, 0}, to_nbr[2] = {0, 0}, from_nbr[2] = {-1, -1}, p2p_in = -1, p2p_out = 0;
  std::vector<int> w_rows(static_cast<std::size_t>(n * n), -1);
  std::int64_t prefix = 0, part = me + 1;
  MPI_Request q[8];
  MPI_Allreduce_init(&x, &sum, 1, MPI_DOUBLE, MPI_SUM, dup, MPI_INFO_NULL, &q[0]);
  MPI_Bcast_init(b, 3, MPI_DOUBLE, n - 1, MPI_COMM_WORLD, MPI_INFO_NULL, &q[1]);
  MPI_Neighbor_alltoall_init(to_nbr, 1, MPI_DOUBLE, from_nbr, 1, MPI_DOUBLE, cart, MPI_INFO_NULL, &q[2]);
  MPI_Recv_init(&p2p_in, 1, MPI_DOUBLE, prev, 4, MPI_COMM_WORLD, &q[3]);
  MPI_Send_init(&p2p_out, 1, MPI_DOUBLE, next, 4, MPI_COMM_WORLD, &q[4]);
  MPI_Alltoallw_init(matrix.data(), scounts.data(), sdispls.data(), stypes.data(), w_rows.data(), rcounts.data(),
                     rdispls.data(), rtypes.data(), dup, MPI_INFO_NULL, &q[5]);
  MPI_Scan_init(&part, &prefix, 1, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &q[6]);
  MPI_Barrier_init(cart, MPI_INFO_NULL, &q[7]);
  for (int round = 0; round < 3; ++round) {
    x = me * 0.5 + round;
    if (me == n - 1)
      for (int i = 0; i < 3; ++i) b[i] = round * 10 + i;
    to_nbr[0] = me - round * 0.25, to_nbr[1] = me + round * 0.25;
    p2p_out = me * 3 + round;
    part = (me + 1) * (round + 1);
    for (int i = 0; i < 3 * n; ++i) matrix[static_cast<std::size_t>(i)] = me * 100 + i + round;
    MPI_Startall(8, q);
    if (round == 1) {  // a test loop, and a lone MPI_Start of one done
      int flag = 0;
      while (!flag) MPI_Testall(8, q, &flag, MPI_STATUSES_IGNORE);
      MPI_Start(&q[0]);
      MPI_Wait(&q[0], MPI_STATUS_IGNORE);
    } else {
      MPI_Waitall(8, q, MPI_STATUSES_IGNORE);
    }
    d = mix(d ^ digest(&sum, 1) ^ digest(b, 3) << 1 ^ digest(from_nbr, 2) << 2 ^ digest(&p2p_in, 1) << 3 ^
            digest(w_rows.data(), w_rows.size()) << 4 ^ digest(&prefix, 1) << 5);
  }
  for (MPI_Request& req : q) MPI_Request_free(&req);
  // Every other persistent collective, started twice (the second time with new values) and completed by MPI_Waitall.
  {
    const int root = n - 1;
    std::int64_t v[2] = {0, 0}, red[2] = {-1, -1}, ex[2] = {-1, -1}, rs_all[64], rs_block[2] = {-1, -1};
    std::vector<std::int64_t> spread(static_cast<std::size_t>(2 * n)), gathered(static_cast<std::size_t>(2 * n)),
        gathered_v(static_cast<std::size_t>(2 * n)), all(static_cast<std::size_t>(2 * n)),
        all_v(static_cast<std::size_t>(2 * n)), a2a_in(static_cast<std::size_t>(2 * n)),
        a2av_in(static_cast<std::size_t>(2 * n)), source(static_cast<std::size_t>(2 * n));
    std::vector<int> twos(static_cast<std::size_t>(n), 2), at(static_cast<std::size_t>(n)),
        shares(static_cast<std::size_t>(n), 2);
    for (int r = 0; r < n; ++r) at[static_cast<std::size_t>(r)] = 2 * r;
    // (a neighbour MPI_PROC_NULL, at the ends of 2 ranks, leaves its block as it was)
    std::int64_t scattered[2] = {-1, -1}, scattered_v[2] = {-1, -1}, nb_in[4] = {-1, -1, -1, -1},
                 nbv_in[4] = {-1, -1, -1, -1}, nbw_in[4] = {-1, -1, -1, -1}, nbg_in[2] = {-1, -1},
                 nbgv_in[2] = {-1, -1};
    const int nb_counts[2] = {2, 2}, nb_at[2] = {0, 2}, one_each[2] = {1, 1}, one_at[2] = {0, 1};
    const MPI_Aint nb_bytes[2] = {0, 2 * sizeof(std::int64_t)};
    const MPI_Datatype nb_types[2] = {MPI_INT64_T, MPI_INT64_T};
    for (auto& x : rs_all) x = -1;
    MPI_Request p[14];
    int k = 0;
    MPI_Reduce_init(v, red, 2, MPI_INT64_T, MPI_SUM, root, dup, MPI_INFO_NULL, &p[k++]);
    MPI_Exscan_init(v, ex, 2, MPI_INT64_T, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &p[k++]);
    MPI_Reduce_scatter_init(spread.data(), rs_all, shares.data(), MPI_INT64_T, MPI_SUM, dup, MPI_INFO_NULL, &p[k++]);
    MPI_Reduce_scatter_block_init(spread.data(), rs_block, 2, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD, MPI_INFO_NULL,
                                  &p[k++]);
    MPI_Gather_init(v, 2, MPI_INT64_T, gathered.data(), 2, MPI_INT64_T, root, dup, MPI_INFO_NULL, &p[k++]);
    MPI_Gatherv_init(v, 2, MPI_INT64_T, gathered_v.data(), twos.data(), at.data(), MPI_INT64_T, 0, MPI_COMM_WORLD,
                     MPI_INFO_NULL, &p[k++]);
    MPI_Allgather_init(v, 2, MPI_INT64_T, all.data(), 2, MPI_INT64_T, dup, MPI_INFO_NULL, &p[k++]);
    MPI_Allgatherv_init(v, 2, MPI_INT64_T, all_v.data(), twos.data(), at.data(), MPI_INT64_T, MPI_COMM_WORLD,
                        MPI_INFO_NULL, &p[k++]);
    MPI_Scatter_init(source.data(), 2, MPI_INT64_T, scattered, 2, MPI_INT64_T, root, dup, MPI_INFO_NULL, &p[k++]);
    MPI_Scatterv_init(source.data(), twos.data(), at.data(), MPI_INT64_T, scattered_v, 2, MPI_INT64_T, 0,
                      MPI_COMM_WORLD, MPI_INFO_NULL, &p[k++]);
    MPI_Alltoall_init(source.data(), 2, MPI_INT64_T, a2a_in.data(), 2, MPI_INT64_T, dup, MPI_INFO_NULL, &p[k++]);
    MPI_Alltoallv_init(source.data(), twos.data(), at.data(), MPI_INT64_T, a2av_in.data(), twos.data(), at.data(),
                       MPI_INT64_T, MPI_COMM_WORLD, MPI_INFO_NULL, &p[k++]);
    MPI_Request nbr[5];
    MPI_Neighbor_allgather_init(v, 1, MPI_INT64_T, nbg_in, 1, MPI_INT64_T, cart, MPI_INFO_NULL, &nbr[0]);
    MPI_Neighbor_allgatherv_init(v, 1, MPI_INT64_T, nbgv_in, one_each, one_at, MPI_INT64_T, cart, MPI_INFO_NULL,
                                 &nbr[1]);
    MPI_Neighbor_alltoallv_init(source.data(), nb_counts, nb_at, MPI_INT64_T, nbv_in, nb_counts, nb_at, MPI_INT64_T,
                                cart, MPI_INFO_NULL, &nbr[2]);
    MPI_Neighbor_alltoallw_init(source.data(), nb_counts, nb_bytes, nb_types, nbw_in, nb_counts, nb_bytes, nb_types,
                                cart, MPI_INFO_NULL, &nbr[3]);
    MPI_Neighbor_alltoall_init(source.data(), 2, MPI_INT64_T, nb_in, 2, MPI_INT64_T, cart, MPI_INFO_NULL, &nbr[4]);
    for (int round = 0; round < 2; ++round) {
      v[0] = me * 3 + round, v[1] = me - 7 * round;
      for (int i = 0; i < 2 * n; ++i) {
        spread[static_cast<std::size_t>(i)] = (i + 1) * (me + 1) + round;
        source[static_cast<std::size_t>(i)] = me * 1000 + i + round * 100;
      }
      MPI_Startall(k, p);
      MPI_Startall(5, nbr);
      MPI_Waitall(k, p, MPI_STATUSES_IGNORE);
      MPI_Waitall(5, nbr, MPI_STATUSES_IGNORE);
      if (me == 0) ex[0] = ex[1] = 0;  // (undefined at rank 0)
      std::uint64_t e = digest(ex, 2) ^ digest(rs_all, 2) << 1 ^ digest(rs_block, 2) << 2 ^
                        digest(all.data(), all.size()) << 3 ^ digest(all_v.data(), all_v.size()) << 4 ^
                        digest(scattered, 2) << 5 ^ digest(scattered_v, 2) << 6 ^
                        digest(a2a_in.data(), a2a_in.size()) << 7 ^ digest(a2av_in.data(), a2av_in.size()) << 8 ^
                        digest(nb_in, 4) << 9 ^ digest(nbv_in, 4) << 10 ^ digest(nbw_in, 4) << 11 ^
                        digest(nbg_in, 2) << 12 ^ digest(nbgv_in, 2) << 13;
      if (me == root) e ^= digest(red, 2) ^ digest(gathered.data(), gathered.size()) << 14;
      if (me == 0) e ^= digest(gathered_v.data(), gathered_v.size()) << 15;
      d = mix(d ^ e);
    }
    for (int i = 0; i < k; ++i) MPI_Request_free(&p[i]);
    for (MPI_Request& req : nbr) MPI_Request_free(&req);
  }
  MPI_Comm_free(&cart);
  MPI_Comm_free(&dup);
#endif
  MPI_Type_free(&column);
  report("alltoallw/persistent", d);
}

void refuse(const std::string& what) {
  const int next = (world_rank + 1) % world_size;
  double x = 0;
  if (what == "any-tag") {  // a send of MPI_ANY_TAG (a receive's)
    if (world_rank == 0) MPI_Send(&x, 1, MPI_DOUBLE, next, MPI_ANY_TAG, MPI_COMM_WORLD);
  } else if (what == "tag") {  // one above MPI_TAG_UB
    int* ub = nullptr;
    int has = 0;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &has);
    if (world_rank == 0 && has && *ub < INT32_MAX) MPI_Send(&x, 1, MPI_DOUBLE, next, *ub + 1, MPI_COMM_WORLD);
  } else if (what == "partition-not-ready") {  // a wait for a partitioned send with a partition not marked
    double y[2] = {0, 0};
    MPI_Request send;
    MPI_Psend_init(y, 2, 1, MPI_DOUBLE, next, 0, MPI_COMM_WORLD, MPI_INFO_NULL, &send);
    MPI_Start(&send);
    MPI_Pready(1, send);
    MPI_Wait(&send, MPI_STATUS_IGNORE);
  } else if (what == "foreign-thread") {  // a thread other than MPI_Init's (told MPI_THREAD_FUNNELED at most)
    if (world_rank == 0) std::thread([&] { MPI_Send(&x, 1, MPI_DOUBLE, next, 0, MPI_COMM_WORLD); }).join();
  } else if (what == "foreign-finalize") {  // MPI_Finalize from another thread, the runtime running
    if (world_rank == 0) std::thread([] { MPI_Finalize(); }).join();
  } else if (what == "communicators") {  // more alive at once than the tags leave room for (kept until refused)
    std::vector<MPI_Comm> kept;
    for (int i = 0; i < 5000; ++i) {
      kept.emplace_back();
      MPI_Comm_dup(MPI_COMM_WORLD, &kept.back());
    }
    for (MPI_Comm& c : kept) MPI_Comm_free(&c);
  } else if (what == "win") {
    MPI_Win win;
    MPI_Win_create(&x, sizeof x, sizeof x, MPI_INFO_NULL, MPI_COMM_WORLD, &win);
  } else if (what == "cancel") {  // a send (a receive is served)
    MPI_Request r;
    MPI_Isend(&x, 1, MPI_DOUBLE, next, 0, MPI_COMM_WORLD, &r);
    MPI_Cancel(&r);
  } else if (what == "graph") {  // MPI-1's graph: every rank gives the whole graph (a ring)
    std::vector<int> index(static_cast<std::size_t>(world_size)), edges(index.size());
    for (int r = 0; r < world_size; ++r)
      index[static_cast<std::size_t>(r)] = r + 1, edges[static_cast<std::size_t>(r)] = (r + 1) % world_size;
    MPI_Comm g;
    MPI_Graph_create(MPI_COMM_WORLD, world_size, index.data(), edges.data(), 0, &g);
  } else if (what == "neighbor-no-topology") {
    double y[2] = {0, 0};
    MPI_Neighbor_allgather(&x, 1, MPI_DOUBLE, y, 1, MPI_DOUBLE, MPI_COMM_WORLD);
  } else if (what == "free-icollective") {  // a communicator freed under a non-blocking collective not waited for
    MPI_Comm dup;
    MPI_Comm_dup(MPI_COMM_WORLD, &dup);
    MPI_Request r;
    MPI_Ibarrier(dup, &r);
    MPI_Comm_free(&dup);
  } else if (what == "nbx") {  // the sparse exchange's probe loop: MPI_Iprobe while an MPI_Ibarrier is under way
    MPI_Request r;
    MPI_Ibarrier(MPI_COMM_WORLD, &r);
    int flag = 0, done = 0;
    while (!done) {
      MPI_Iprobe(MPI_ANY_SOURCE, 7, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
      MPI_Test(&r, &done, MPI_STATUS_IGNORE);
    }
  } else if (what == "split-type") {
    MPI_Comm c;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED + 1000, 0, MPI_INFO_NULL, &c);
  } else if (what == "inter-collective") {  // a collective on an intercommunicator
    MPI_Comm half, inter;
    MPI_Comm_split(MPI_COMM_WORLD, world_rank % 2, 0, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - world_rank % 2, 0, &inter);
    double y[2] = {0, 0};
    MPI_Allgather(&x, 1, MPI_DOUBLE, y, 1, MPI_DOUBLE, inter);
  } else if (what == "inter-self") {  // an intercommunicator of MPI_COMM_SELF, the library's communicator
    MPI_Comm inter;
    MPI_Intercomm_create(MPI_COMM_SELF, 0, MPI_COMM_WORLD, next, 0, &inter);
  } else if (what == "spawn-self") {  // new processes from MPI_COMM_SELF: outside the protocol
    MPI_Comm children;
    char command[] = "true";
    MPI_Comm_spawn(command, MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_SELF, &children, MPI_ERRCODES_IGNORE);
  } else if (what == "errors-are-fatal") {  // an error the program raises on MPI_COMM_WORLD (its default handler)
    if (world_rank == 0) MPI_Comm_call_errhandler(MPI_COMM_WORLD, MPI_ERR_OTHER);
  } else if (what == "file-shared" || what == "file-atomicity" || what == "file-delete-on-close") {
    const std::string name = scratch_file(what.c_str());
    MPI_File f;
    const int extra = what == "file-delete-on-close" ? MPI_MODE_DELETE_ON_CLOSE : 0;
    MPI_File_open(MPI_COMM_WORLD, name.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY | extra, MPI_INFO_NULL, &f);
    if (what == "file-shared") MPI_File_write_shared(f, &x, 1, MPI_DOUBLE, MPI_STATUS_IGNORE);
    if (what == "file-atomicity") MPI_File_set_atomicity(f, 1);
    MPI_File_close(&f);
    if (world_rank == 0) MPI_File_delete(name.c_str(), MPI_INFO_NULL);
  } else if (what == "free-receive") {
    MPI_Request r;
    MPI_Irecv(&x, 1, MPI_DOUBLE, next, 0, MPI_COMM_WORLD, &r);
    MPI_Request_free(&r);
  } else {
    if (world_rank == 0) std::fprintf(stderr, "interpose-check: unknown --refuse %s\n", what.c_str());
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank == 0) std::printf("--refuse %s: the call was not refused\n", what.c_str());
}

#ifdef REPRISE_WRAPPED
// sum * 31 + v, wrapping around as two's complement does (no signed overflow).
std::int64_t fold(std::int64_t sum, std::int64_t v) {
  return static_cast<std::int64_t>(static_cast<std::uint64_t>(sum) * 31u + static_cast<std::uint64_t>(v));
}

// --message-before-restore: a body run through reprise::run that broadcasts before it restores. After a rollback
// the ranks that run it again are refused at that MPI_Bcast (the ranks of other groups would never answer it).
int message_before_restore(int argc, char** argv) {
  return reprise::run(argc, argv, [](int, char**) {
    int steps = 30;
    MPI_Bcast(&steps, 1, MPI_INT, 0, MPI_COMM_WORLD);
    reprise::MpiRuntime& rt = reprise::wrapped_runtime();
    long step = 0;
    double sum = 0;
    rt.protect("step", &step);
    rt.protect("sum", &sum);
    if (rt.restarted()) rt.restore();
    while (step < steps) {
      rt.step(static_cast<std::uint64_t>(step));
      double x = static_cast<double>(step + world_rank), s = 0;
      MPI_Allreduce(&x, &s, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      sum += s;
      if (++step % 10 == 0) {
        rt.checkpoint(static_cast<std::uint64_t>(step));
        rt.wait();  // committed before the kill: the group rolls back to it (not over from the beginning)
      }
    }
    if (world_rank == 0) std::printf("sum %.1f\n", sum);
    return 0;
  });
}
// --file-opened-in-steps FILE: a file opened at step 2 and written every step, open at the checkpoints: after a
// rollback to one, the set-up (run again) did not open it again, so its restore() stops the job naming the file.
int file_opened_in_steps(int argc, char** argv) {
  return reprise::run(argc, argv, [](int, char** args) {
    const std::string name = args[2];
    reprise::MpiRuntime& rt = reprise::wrapped_runtime();
    long step = 0;
    rt.protect("step", &step);
    if (rt.restarted()) rt.restore();
    MPI_File f = MPI_FILE_NULL;
    while (step < 30) {
      rt.step(static_cast<std::uint64_t>(step));
      if (step == 2) MPI_File_open(MPI_COMM_WORLD, name.c_str(), MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL, &f);
      if (f != MPI_FILE_NULL)
        MPI_File_write_at_all(f, 8 * (step * world_size + world_rank), &step, 1, MPI_LONG, MPI_STATUS_IGNORE);
      if (++step % 10 == 0) {
        rt.checkpoint(static_cast<std::uint64_t>(step));
        rt.wait();
      }
    }
    MPI_File_close(&f);
    if (world_rank == 0) MPI_File_delete(name.c_str(), MPI_INFO_NULL);
    return 0;
  });
}
// --probe-across-checkpoints: every step each rank receives the message it probed at the previous step, then
// sends one of a size that changes and probes the next one (left unreceived across the checkpoint every 10 steps:
// delivered, so kept in the version with the interposition's state). Prints `probed sum S` (the same with a
// killed rank). `any_tag` (--probe-across-checkpoints any-tag): tags 5 and 6 by turns, probed and received as
// MPI_ANY_TAG (the sum folds in the tags the statuses give).
int probe_across_checkpoints(int argc, char** argv, bool any_tag) {
  return reprise::run(argc, argv, [any_tag](int, char**) {
    reprise::MpiRuntime& rt = reprise::wrapped_runtime();
    const int next = (world_rank + 1) % world_size, prev = (world_rank + world_size - 1) % world_size;
    long step = 0;
    std::int64_t sum = 0;
    rt.protect("step", &step);
    rt.protect("sum", &sum);
    if (rt.restarted()) rt.restore();
    const int probed_tag = any_tag ? MPI_ANY_TAG : 5;
    auto receive_probed = [&] {
      MPI_Status st;
      int n = 0;
      MPI_Probe(prev, probed_tag, MPI_COMM_WORLD, &st);
      MPI_Get_count(&st, MPI_INT, &n);
      std::vector<int> in(static_cast<std::size_t>(n));
      MPI_Recv(in.data(), n, MPI_INT, prev, probed_tag, MPI_COMM_WORLD, &st);
      for (int v : in) sum = fold(sum, v);
      if (any_tag) sum = fold(sum, st.MPI_TAG);
    };
    const long steps = 30;
    while (step < steps) {
      rt.step(static_cast<std::uint64_t>(step));
      if (step > 0) receive_probed();
      std::vector<int> out(static_cast<std::size_t>(1 + (step * 7 + world_rank) % 2000), static_cast<int>(step));
      MPI_Send(out.data(), static_cast<int>(out.size()), MPI_INT, next, any_tag ? 5 + static_cast<int>(step % 2) : 5,
               MPI_COMM_WORLD);
      MPI_Status st;
      MPI_Probe(prev, probed_tag, MPI_COMM_WORLD, &st);  // received at the next step
      if (++step % 10 == 0) {
        rt.checkpoint(static_cast<std::uint64_t>(step));
        rt.wait();
      }
    }
    receive_probed();
    std::int64_t all = 0;
    MPI_Allreduce(&sum, &all, 1, MPI_INT64_T, MPI_BXOR, MPI_COMM_WORLD);
    if (world_rank == 0) std::printf("probed sum %" PRId64 "\n", all);
    return 0;
  });
}
// --any-source-across-checkpoints: every step each rank sends the next two ranks a message of the step's tag (its
// size varies with the step and the sender) and receives two of that tag from MPI_ANY_SOURCE, one posted with
// MPI_Irecv before the other is received blocking; the sum adds each message folded with the sender's rank its
// status gives, whatever order they came in. And at the end of each step a probe of any rank (of the step's tag
// 500 + step, which only the rank before sends) sizes a message that the next step receives from the sender the
// probe named, so a checkpoint keeps it (the probe's result is protected too). A checkpoint every 10 steps; the same
// sum with kills.
int any_source_across_checkpoints(int argc, char** argv) {
  return reprise::run(argc, argv, [](int, char**) {
    reprise::MpiRuntime& rt = reprise::wrapped_runtime();
    long step = 0;
    std::int64_t sum = 0;
    int probed[2] = {-1, 0};  // the sender and the count the last step's probe found
    rt.protect("step", &step);
    rt.protect("sum", &sum);
    rt.protect("probed", probed, sizeof probed, reprise::MemorySpace::Host);
    if (rt.restarted()) rt.restore();
    const long steps = 30;
    const int most = 1600;
    auto add = [&](std::int64_t h) {  // (a sum modulo 2^64: the same whichever receive got which sender)
      sum = static_cast<std::int64_t>(static_cast<std::uint64_t>(sum) + static_cast<std::uint64_t>(h));
    };
    while (step < steps) {
      rt.step(static_cast<std::uint64_t>(step));
      const int tag = 100 + static_cast<int>(step);
      if (step > 0) {  // the message the last step's probe found
        std::vector<int> in(static_cast<std::size_t>(probed[1]));
        MPI_Status st;
        MPI_Recv(in.data(), probed[1], MPI_INT, probed[0], 499 + static_cast<int>(step), MPI_COMM_WORLD, &st);
        std::int64_t h = 7 * probed[0];
        for (int v : in) h = fold(h, v);
        add(h);
      }
      std::vector<std::vector<int>> out(2);
      MPI_Request sends[2];
      for (int k = 0; k < 2; ++k) {
        out[k].assign(static_cast<std::size_t>(1 + (step * 7 + world_rank * 3 + k) % (most - 1)),
                      static_cast<int>(step * 1000 + world_rank));
        MPI_Isend(out[k].data(), static_cast<int>(out[k].size()), MPI_INT, (world_rank + 1 + k) % world_size, tag,
                  MPI_COMM_WORLD, &sends[k]);
      }
      std::vector<int> a(most), b(most);
      MPI_Request first;
      MPI_Status st[2];
      MPI_Irecv(b.data(), most, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &first);
      MPI_Recv(a.data(), most, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD, &st[0]);
      MPI_Wait(&first, &st[1]);
      for (int k = 0; k < 2; ++k) {
        int count = 0;
        MPI_Get_count(&st[k], MPI_INT, &count);
        std::int64_t h = st[k].MPI_SOURCE;
        for (int i = 0; i < count; ++i) h = fold(h, (k == 0 ? a : b)[static_cast<std::size_t>(i)]);
        add(h);
      }
      MPI_Waitall(2, sends, MPI_STATUSES_IGNORE);
      const std::vector<int> ahead(static_cast<std::size_t>(1 + (step * 5 + world_rank) % 700), world_rank);
      MPI_Send(ahead.data(), static_cast<int>(ahead.size()), MPI_INT, (world_rank + 1) % world_size,
               500 + static_cast<int>(step), MPI_COMM_WORLD);
      MPI_Status st_probe;
      MPI_Probe(MPI_ANY_SOURCE, 500 + static_cast<int>(step), MPI_COMM_WORLD, &st_probe);
      probed[0] = st_probe.MPI_SOURCE;
      MPI_Get_count(&st_probe, MPI_INT, &probed[1]);
      if (++step % 10 == 0) {
        rt.checkpoint(static_cast<std::uint64_t>(step));
        rt.wait();
      }
    }
    {
      std::vector<int> in(static_cast<std::size_t>(probed[1]));
      MPI_Recv(in.data(), probed[1], MPI_INT, probed[0], 499 + static_cast<int>(step), MPI_COMM_WORLD,
               MPI_STATUS_IGNORE);
      std::int64_t h = 7 * probed[0];
      for (int v : in) h = fold(h, v);
      add(h);
    }
    std::int64_t all = 0;
    MPI_Allreduce(&sum, &all, 1, MPI_INT64_T, MPI_BXOR, MPI_COMM_WORLD);
    if (world_rank == 0) std::printf("any-source sum %" PRId64 "\n", all);
    return 0;
  });
}
// --any-tag-across-checkpoints: receives and probes of any rank and any tag (MPI_ANY_SOURCE with MPI_ANY_TAG)
// under checkpoints and kills. Every step each rank sends the rank after it a message on `side` (a duplicate of
// MPI_COMM_WORLD made in the set-up; tag step % 5), then the next two ranks each two on MPI_COMM_WORLD (tags
// 10 + step % 7 and 20 + step % 3, sized by the step and the sender). It posts two receives of any rank and any tag
// on MPI_COMM_WORLD, probes `side` for any rank and any tag and receives what the probe found from the source and
// tag it named, receives the other two of any rank and any tag, blocking, and waits for the first two. Under the
// interposition every communicator's messages travel on one library communicator, so the receives on
// MPI_COMM_WORLD may find the message on `side` first: kept for the probe. A barrier ends the step (a rank ahead
// would otherwise send messages this step's receives of any tag could take). The sum adds each message folded with
// the source and tag its status gives; a checkpoint every 10 steps; the same sum with kills.
int any_tag_across_checkpoints(int argc, char** argv) {
  return reprise::run(argc, argv, [](int, char**) {
    reprise::MpiRuntime& rt = reprise::wrapped_runtime();
    MPI_Comm side;
    MPI_Comm_dup(MPI_COMM_WORLD, &side);
    long step = 0;
    std::int64_t sum = 0;
    rt.protect("step", &step);
    rt.protect("sum", &sum);
    if (rt.restarted()) rt.restore();
    const long steps = 30;
    const int most = 1600;
    auto add = [&](const std::vector<int>& v, const MPI_Status& st) {  // (modulo 2^64: any order gives it)
      int count = 0;
      MPI_Get_count(&st, MPI_INT, &count);
      std::int64_t h = st.MPI_SOURCE * 1000 + st.MPI_TAG;
      for (int i = 0; i < count; ++i) h = fold(h, v[static_cast<std::size_t>(i)]);
      sum = static_cast<std::int64_t>(static_cast<std::uint64_t>(sum) + static_cast<std::uint64_t>(h));
    };
    const int next = (world_rank + 1) % world_size;
    while (step < steps) {
      rt.step(static_cast<std::uint64_t>(step));
      std::deque<std::vector<int>> out;
      std::vector<MPI_Request> sends(5);
      out.emplace_back(static_cast<std::size_t>(1 + (step + world_rank) % 9), static_cast<int>(step + 7));
      MPI_Isend(out.back().data(), static_cast<int>(out.back().size()), MPI_INT, next, static_cast<int>(step % 5), side,
                &sends[0]);
      for (int k = 0; k < 4; ++k) {
        out.emplace_back(static_cast<std::size_t>(1 + (step * 7 + world_rank * 3 + k) % (most - 1)),
                         static_cast<int>(step * 1000 + world_rank * 10 + k));
        const int tag = k % 2 == 0 ? 10 + static_cast<int>(step % 7) : 20 + static_cast<int>(step % 3);
        MPI_Isend(out.back().data(), static_cast<int>(out.back().size()), MPI_INT,
                  (world_rank + 1 + k / 2) % world_size, tag, MPI_COMM_WORLD, &sends[1 + static_cast<std::size_t>(k)]);
      }
      std::vector<std::vector<int>> in(4, std::vector<int>(most));
      MPI_Request first[2];
      MPI_Status st[4];
      for (int k = 0; k < 2; ++k)
        MPI_Irecv(in[k].data(), most, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &first[k]);
      MPI_Status found;
      MPI_Probe(MPI_ANY_SOURCE, MPI_ANY_TAG, side, &found);
      int count = 0;
      MPI_Get_count(&found, MPI_INT, &count);
      std::vector<int> aside(static_cast<std::size_t>(count));
      MPI_Recv(aside.data(), count, MPI_INT, found.MPI_SOURCE, found.MPI_TAG, side, &found);
      add(aside, found);
      for (int k = 2; k < 4; ++k)
        MPI_Recv(in[k].data(), most, MPI_INT, MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &st[k]);
      MPI_Waitall(2, first, st);
      for (int k = 0; k < 4; ++k) add(in[k], st[k]);
      MPI_Waitall(5, sends.data(), MPI_STATUSES_IGNORE);
      MPI_Barrier(MPI_COMM_WORLD);
      if (++step % 10 == 0) {
        rt.checkpoint(static_cast<std::uint64_t>(step));
        rt.wait();
      }
    }
    MPI_Comm_free(&side);
    std::int64_t all = 0;
    MPI_Allreduce(&sum, &all, 1, MPI_INT64_T, MPI_BXOR, MPI_COMM_WORLD);
    if (world_rank == 0) std::printf("any-tag sum %" PRId64 "\n", all);
    return 0;
  });
}
// --set-up-communicators: a set-up that makes a communicator by each way served (MPI_Cart_create, MPI_Cart_sub,
// MPI_Dist_graph_create_adjacent, MPI_Comm_create_group by the odd ranks, MPI_Comm_idup), hangs an attribute on one,
// sets an error handler on MPI_COMM_WORLD (the grid and its rows inherit it), joins the even and the odd ranks by
// MPI_Intercomm_create and merges them, makes a persistent collective, 70 duplicates (a message on one of them, tag
// 100000) and a graph by MPI_Dist_graph_create (each rank giving another's edges); every step uses each (the row's
// error handler called). After a rollback the failed groups' set-up runs
// again and gets those communicators back from the version (tests with kills). Prints `set-up sum S`.
int set_up_communicators(int argc, char** argv) {
  return reprise::run(argc, argv, [](int, char**) {
    reprise::MpiRuntime& rt = reprise::wrapped_runtime();
    const int n = world_size, me = world_rank;
    int dims[2] = {0, 0}, periods[2] = {1, 0};
    MPI_Dims_create(n, 2, dims);
    MPI_Comm grid, row, ring, odd = MPI_COMM_NULL, copy;
    MPI_Errhandler handler;  // MPI_COMM_WORLD's, inherited by the grid and its rows
    MPI_Comm_create_errhandler(count_error, &handler);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, handler);
    MPI_Errhandler_free(&handler);
    MPI_Cart_create(MPI_COMM_WORLD, 2, dims, periods, 0, &grid);
    const int keep[2] = {0, 1};
    MPI_Cart_sub(grid, keep, &row);
    const int to[2] = {(me + 1) % n, (me + 2) % n}, from[2] = {(me + n - 1) % n, (me + n - 2) % n};
    MPI_Dist_graph_create_adjacent(MPI_COMM_WORLD, 2, from, MPI_UNWEIGHTED, 2, to, MPI_UNWEIGHTED, MPI_INFO_NULL, 0,
                                   &ring);
    if (me % 2 == 1) {
      MPI_Group world_group, odd_group;
      MPI_Comm_group(MPI_COMM_WORLD, &world_group);
      std::vector<int> odds;
      for (int r = 1; r < n; r += 2) odds.push_back(r);
      MPI_Group_incl(world_group, static_cast<int>(odds.size()), odds.data(), &odd_group);
      MPI_Comm_create_group(MPI_COMM_WORLD, odd_group, 3, &odd);
      MPI_Group_free(&odd_group);
      MPI_Group_free(&world_group);
    }
    MPI_Comm half, inter, merged;  // the even and the odd ranks, joined, then merged (the odd ones first)
    MPI_Comm_split(MPI_COMM_WORLD, me % 2, 0, &half);
    MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, 1 - me % 2, 5, &inter);
    MPI_Intercomm_merge(inter, 1 - me % 2, &merged);
    int local = 0, local_size = 0, remote_size = 0;
    MPI_Comm_rank(half, &local);
    MPI_Comm_size(half, &local_size);
    MPI_Comm_remote_size(inter, &remote_size);
    MPI_Request made;
    MPI_Comm_idup(ring, &copy, &made);
    MPI_Wait(&made, MPI_STATUS_IGNORE);
    static int tag_of_copy = 41;
    int key = MPI_KEYVAL_INVALID;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, MPI_COMM_NULL_DELETE_FN, &key, nullptr);
    MPI_Comm_set_attr(copy, key, &tag_of_copy);
    double x = 0, total = 0;
    MPI_Request reduce;
    MPI_Allreduce_init(&x, &total, 1, MPI_DOUBLE, MPI_SUM, copy, MPI_INFO_NULL, &reduce);
    MPI_Comm given;  // a graph whose edges other ranks give: rank r those of r + 1 (to r + 2 and r + 3)
    {
      const int s = (me + 1) % n, degree = 2, to[2] = {(s + 1) % n, (s + 2) % n};
      MPI_Dist_graph_create(MPI_COMM_WORLD, 1, &s, &degree, to, MPI_UNWEIGHTED, MPI_INFO_NULL, 0, &given);
    }
    std::vector<MPI_Comm> dups(70);  // more than 64 alive: the contexts in use span two words of their set
    for (std::size_t i = 0; i < dups.size(); ++i) MPI_Comm_dup(i == 0 ? MPI_COMM_WORLD : dups[i - 1], &dups[i]);
    long step = 0;
    std::int64_t sum = 0;
    rt.protect("step", &step);
    rt.protect("sum", &sum);
    if (rt.restarted()) rt.restore();
    while (step < 30) {
      rt.step(static_cast<std::uint64_t>(step));
      int mine = static_cast<int>(step * 10 + me), around[2] = {-1, -1}, row_sum = 0, odd_max = 0;
      MPI_Neighbor_allgather(&mine, 1, MPI_INT, around, 1, MPI_INT, ring);
      MPI_Allreduce(&mine, &row_sum, 1, MPI_INT, MPI_SUM, row);
      if (odd != MPI_COMM_NULL) MPI_Allreduce(&mine, &odd_max, 1, MPI_INT, MPI_MAX, odd);
      int* tag = nullptr;
      int has = 0;
      MPI_Comm_get_attr(copy, key, &tag, &has);
      x = mine * 0.5 + (has ? *tag : 0);
      MPI_Start(&reduce);
      MPI_Wait(&reduce, MPI_STATUS_IGNORE);
      errors_seen = static_cast<std::uint64_t>(step);
      MPI_Comm_call_errhandler(row, MPI_ERR_OTHER);  // (a collective over the row, in the handler)
      // Over the intercommunicator: local rank i to remote rank i % remote size; then a reduction over the merge.
      MPI_Request across;
      MPI_Isend(&mine, 1, MPI_INT, local % remote_size, 6, inter, &across);
      std::int64_t from_other = 0;
      for (int r = local; r < remote_size; r += local_size) {
        int got = 0;
        MPI_Recv(&got, 1, MPI_INT, r, 6, inter, MPI_STATUS_IGNORE);
        from_other = from_other * 7 + got;
      }
      MPI_Wait(&across, MPI_STATUS_IGNORE);
      int other_total = 0;  // the other group's sum (a reduction across the intercommunicator)
      MPI_Allreduce(&mine, &other_total, 1, MPI_INT, MPI_SUM, inter);
      from_other += static_cast<std::int64_t>(other_total) * 13;
      int merged_rank = 0, weighted = 0, term = 0;
      MPI_Comm_rank(merged, &merged_rank);
      term = mine * (merged_rank + 1);
      MPI_Allreduce(&term, &weighted, 1, MPI_INT, MPI_SUM, merged);
      int ring_value = 0;  // around the ring on one of the duplicates, with a tag above 32767
      MPI_Sendrecv(&mine, 1, MPI_INT, (me + 1) % n, 100000, &ring_value, 1, MPI_INT, (me + n - 1) % n, 100000,
                   dups[static_cast<std::size_t>(step * 17 % 70)], MPI_STATUS_IGNORE);
      weighted += ring_value * 11;
      int from_given[2] = {0, 0}, given_in[2] = {-1, -1}, given_out[2] = {-1, -1};
      MPI_Neighbor_allgather(&mine, 1, MPI_INT, from_given, 1, MPI_INT, given);
      MPI_Dist_graph_neighbors(given, 2, given_in, MPI_UNWEIGHTED, 2, given_out, MPI_UNWEIGHTED);
      for (int i = 0; i < 2; ++i) weighted += from_given[i] * (given_in[i] + 13);  // (any order of the two)
      const std::int64_t term_of_step = around[0] * 7 + around[1] * 5 + row_sum * 3 + odd_max +
                                        static_cast<std::int64_t>(total) +
                                        static_cast<std::int64_t>(errors_seen % 1000) + from_other * 3 + weighted;
      sum = fold(sum, term_of_step);
      if (++step % 10 == 0) {
        rt.checkpoint(static_cast<std::uint64_t>(step));
        rt.wait();
      }
    }
    std::int64_t all = 0;
    MPI_Allreduce(&sum, &all, 1, MPI_INT64_T, MPI_BXOR, MPI_COMM_WORLD);
    if (me == 0) std::printf("set-up sum %" PRId64 "\n", all);
    MPI_Request_free(&reduce);
    for (MPI_Comm& c : dups) MPI_Comm_free(&c);
    MPI_Comm_free(&given);
    MPI_Comm_free(&copy);
    MPI_Comm_free_keyval(&key);
    if (odd != MPI_COMM_NULL) MPI_Comm_free(&odd);
    MPI_Comm_free(&ring);
    MPI_Comm_free(&row);
    MPI_Comm_free(&grid);
    for (MPI_Comm* c : {&merged, &inter, &half}) MPI_Comm_free(c);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    return 0;
  });
}
#endif

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  int rc = 0;
#ifdef REPRISE_WRAPPED
  if (argc == 2 && std::string(argv[1]) == "--message-before-restore") {
    rc = message_before_restore(argc, argv);
  } else if (argc == 3 && std::string(argv[1]) == "--file-opened-in-steps") {
    rc = file_opened_in_steps(argc, argv);
  } else if ((argc == 2 || argc == 3) && std::string(argv[1]) == "--probe-across-checkpoints") {
    rc = probe_across_checkpoints(argc, argv, argc == 3 && std::string(argv[2]) == "any-tag");
  } else if (argc == 2 && std::string(argv[1]) == "--any-source-across-checkpoints") {
    rc = any_source_across_checkpoints(argc, argv);
  } else if (argc == 2 && std::string(argv[1]) == "--any-tag-across-checkpoints") {
    rc = any_tag_across_checkpoints(argc, argv);
  } else if (argc == 2 && std::string(argv[1]) == "--set-up-communicators") {
    rc = set_up_communicators(argc, argv);
  } else
#endif
      if (argc == 2 && std::string(argv[1]) == "--node-communicator") {
    // MPI_Comm_split_type(MPI_COMM_TYPE_SHARED): each rank prints the world ranks of its node communicator (the
    // nodes the runtime sees: REPRISE_RANKS_PER_NODE), in the communicator's order (key: minus the world rank).
    MPI_Comm node;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, -world_rank, MPI_INFO_NULL, &node);
    int size = 0;
    MPI_Comm_size(node, &size);
    std::vector<int> members(static_cast<std::size_t>(size));
    MPI_Allgather(&world_rank, 1, MPI_INT, members.data(), 1, MPI_INT, node);
    std::string line =
        "rank " + std::to_string(world_rank) + ": node communicator of " + std::to_string(size) + " ranks:";
    for (int m : members) line += " " + std::to_string(m);
    std::printf("%s\n", line.c_str());
    MPI_Comm_free(&node);
  } else if (argc == 3 && std::string(argv[1]) == "--refuse") {
    refuse(argv[2]);
    rc = 1;
  } else {
    int level = -1;
    MPI_Query_thread(&level);  // wrapped: at most MPI_THREAD_FUNNELED, whatever the library runs with
    // Another thread may ask its rank, the job's size and the thread level (answered, not refused, when wrapped).
    int their_rank = -1, their_size = -1, their_level = -1;
    std::thread([&] {
      MPI_Comm_rank(MPI_COMM_WORLD, &their_rank);
      MPI_Comm_size(MPI_COMM_WORLD, &their_size);
      MPI_Query_thread(&their_level);
    }).join();
    int differ = their_rank != world_rank || their_size != world_size || their_level != level, differ_anywhere = 0;
    MPI_Allreduce(&differ, &differ_anywhere, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (world_rank == 0)
      std::printf("thread level %d, another thread's answers %s\n", level, differ_anywhere ? "DIFFER" : "the same");
    point_to_point();
    any_tag_and_cancel();
    any_source();
    any_source_any_tag();
    synchronous_send();
    collectives();
    nonblocking_collectives();
    communicators();
    many_communicators();
    topologies();
    dist_graph();
    partitioned();
    handles();
    alltoallw_and_persistent();
    types_freed_while_pending();
    collectives_of_derived_types();
    intercommunicators();
    file_io();
#ifdef REPRISE_WRAPPED
    // The messages went through reprise::Comm: the runtime counted them.
    const auto stats = nlohmann::json::parse(reprise::wrapped_runtime().messages().stats_json());
    const std::uint64_t through = stats.value("intra_messages", 0ull) + stats.value("inter_messages", 0ull);
    std::uint64_t total = 0;
    MPI_Reduce(&through, &total, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    if (world_rank == 0) std::printf("wrapped: %" PRIu64 " messages went through reprise::Comm\n", total);
    if (world_rank == 0 && total == 0) rc = 1;
#endif
    if (world_rank == 0) std::printf("interpose-check done: %d ranks\n", world_size);
  }
  MPI_Finalize();
  return rc;
}
