// Bench: rendering a changed record to its storage text, as StateStore::commit does on the control
// plane's io thread for every object a commit changes: an allocation with its task and the 50
// events a long-lived one keeps (each status report re-renders them all).
// Measured: domain::to_storage_text (the text written straight into one string).
// Reference, same run, same objects, rounds alternating: the nlohmann DOM then its dump()
// (to_storage_json(a).dump(), what the store did before). The two texts are compared once.
// Output: one JSON object on stdout.
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/stats.hpp"
#include "shared/domain/json.hpp"
#include "shared/domain/storage_text.hpp"

using namespace mooring;
using json = nlohmann::json;

namespace {

domain::Allocation allocation(int events) {
  domain::Allocation a;
  a.id = "3f0e6a1c-9b2d-4c1e-8f3a-5d6b7c8e9f01";
  a.name = "bench-life-00042";
  a.node_id = "n1";
  a.client_status = domain::ClientStatus::running;
  domain::VolumeRequest r;
  r.name = "data";
  r.source = "lv-00042";
  r.access_mode = domain::AccessMode::single_node_writer;
  r.attachment_mode = domain::AttachmentMode::file_system;
  a.volumes["data"] = r;
  a.task = domain::Task{"/bin/sh", {"-c", "exit 0"}, {{"MODE", "bench"}}, std::chrono::seconds(5)};
  a.task->secret_env = {{"TOKEN", "t-0123456789"}};
  for (int i = 0; i < events; ++i)
    a.events.push_back({domain::from_unix_ms(1'700'000'000'000 + i), "Mounted", "volume data mounted at /alloc/data"});
  a.create_index = 100;
  a.modify_index = 140;
  return a;
}

// ns per render over `reps` renders, `rounds` times, alternating the two writers.
json run(int events, int rounds, int reps) {
  const auto a = allocation(events);
  if (domain::to_storage_text(a) != domain::to_storage_json(a).dump()) throw std::runtime_error("texts differ");
  std::vector<double> text_ns, dom_ns;
  std::size_t sink = 0;
  for (int round = 0; round < rounds; ++round) {
    for (int which = 0; which < 2; ++which) {
      const bool text = (round + which) % 2 == 0;  // each writer goes first in half the rounds
      const auto t0 = bench::Clock::now();
      for (int i = 0; i < reps; ++i)
        sink += text ? domain::to_storage_text(a).size() : domain::to_storage_json(a).dump().size();
      (text ? text_ns : dom_ns).push_back(bench::us_since(t0) * 1000 / reps);
    }
  }
  if (sink == 0) throw std::runtime_error("nothing rendered");
  return {{"events", events}, {"bytes", domain::to_storage_text(a).size()}, {"rounds", rounds}, {"reps", reps},
          {"text_p50_ns", bench::percentile(text_ns, 50)}, {"dom_p50_ns", bench::percentile(dom_ns, 50)},
          {"text_min_ns", bench::percentile(text_ns, 0)}, {"dom_min_ns", bench::percentile(dom_ns, 0)}};
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 21;
  for (int i = 1; i + 1 < argc; i += 2)
    if (std::string(argv[i]) == "--rounds") rounds = std::stoi(argv[i + 1]);
  if (rounds <= 0) {
    std::cerr << "usage: mooring-bench-storage-text [--rounds N]\n";
    return 2;
  }
  json out = json::array();
  for (int events : {0, 10, 50}) out.push_back(run(events, rounds, 2000));
  std::cout << out.dump() << "\n";
  return 0;
}
