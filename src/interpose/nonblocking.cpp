#include "interpose/nonblocking.hpp"

#include <algorithm>
#include <deque>
#include <utility>

namespace reprise::interpose {

class Collective {
 public:
  Collective(int context, std::function<void()> body, bool barrier)
      : context(context), barrier(barrier), body(std::move(body)) {}
  const int context;
  const bool barrier;
  std::function<void()> body;  // (empty once carried out)
};

namespace {
std::deque<std::shared_ptr<Collective>> pending;  // in the order the program started them
bool carrying = false;                            // a body runs now
}  // namespace

std::shared_ptr<Collective> start_collective(int context, std::function<void()> body, bool barrier) {
  auto n = std::make_shared<Collective>(context, std::move(body), barrier);
  pending.push_back(n);
  return n;
}

void carry_out_collectives(const Collective* upto) {
  if (carrying || (upto && !upto->body)) return;  // (its own call; or carried out already)
  while (!pending.empty()) {
    std::shared_ptr<Collective> n = std::move(pending.front());
    pending.pop_front();
    std::function<void()> body = std::move(n->body);
    n->body = nullptr;
    carrying = true;
    try {
      body();
    } catch (...) {  // (a Rollback: abandon_collectives() drops the others)
      carrying = false;
      throw;
    }
    carrying = false;
    if (n.get() == upto) return;
  }
}

bool collectives_pending_on(int context) {
  return std::any_of(pending.begin(), pending.end(),
                     [&](const std::shared_ptr<Collective>& n) { return n->context == context; });
}

bool barrier_pending_on(int context) {
  return std::any_of(pending.begin(), pending.end(),
                     [&](const std::shared_ptr<Collective>& n) { return n->barrier && n->context == context; });
}

void abandon_collectives() {
  for (auto& n : pending) n->body = nullptr;
  pending.clear();
}

}  // namespace reprise::interpose
