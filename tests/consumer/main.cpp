// Protect, checkpoint, damage, restore through an installed Reprise.
#include <cstdio>
#include <reprise/reprise.hpp>
#include <vector>

int main() {
  reprise::Config cfg;
  cfg.chunk_bytes = 1024;
  reprise::Runtime rt(cfg);
  std::vector<double> field(5000);
  for (std::size_t i = 0; i < field.size(); ++i) field[i] = double(i) * 0.5;
  long step = 7;
  rt.protect("field", field.data(), field.size() * sizeof(double), reprise::MemorySpace::Host);
  rt.protect("step", &step);
  rt.checkpoint(1);
  const std::vector<double> saved = field;
  field.assign(field.size(), -1.0);
  step = 0;
  rt.wait();
  rt.restore();
  const bool ok = field == saved && step == 7;
  std::printf("consumer: %s\n", ok ? "restored exactly" : "WRONG DATA");
  return ok ? 0 : 1;
}
