// A VolumeMounter for unit tests: scripted restore answers and mount results, recorded mounts and
// releases. Mount paths are "/fake/<alloc>/<volume>".
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "services/nodeagent/allocrunner/volume_mounter.hpp"

namespace mooring::nodeagent {

class FakeVolumeMounter final : public VolumeMounter {
 public:
  std::map<std::string, std::vector<RestoredVolume>> restored;  // alloc -> what restore() answers
  std::deque<MountResult> mount_failures;                       // consumed before succeeding
  std::vector<std::pair<std::string, std::string>> mounts;      // (alloc, volume) per mount call
  std::vector<std::optional<uint32_t>> groups;                  // the task group of each mount call
  std::vector<std::pair<std::string, std::vector<std::string>>> releases;

  std::vector<RestoredVolume> restore(const std::string& alloc_id) override {
    auto it = restored.find(alloc_id);
    return it == restored.end() ? std::vector<RestoredVolume>{} : it->second;
  }
  boost::asio::awaitable<MountResult> mount(const std::string& alloc_id, const ::mooring::v1::VolumeMountInfo& info,
                                            domain::MountOptions, std::optional<uint32_t> group) override {
    mounts.emplace_back(alloc_id, info.volume_id());
    groups.push_back(group);
    if (!mount_failures.empty()) {
      auto r = mount_failures.front();
      mount_failures.pop_front();
      co_return r;
    }
    MountResult r;
    r.path = "/fake/" + alloc_id + "/" + info.volume_id();
    co_return r;
  }
  int limits_asked = 0;  // limits_exhausted() calls
  void limits_exhausted() override { ++limits_asked; }
  void release(const std::string& alloc_id, const std::vector<std::string>& volume_ids) override {
    releases.emplace_back(alloc_id, volume_ids);
  }
};

}  // namespace mooring::nodeagent
