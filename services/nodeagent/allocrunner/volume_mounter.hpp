// What the CSI hook needs from the volume manager, seen from the consumer side: restore what a
// previous agent mounted, mount a claimed volume, hand volumes over for a detached release. The
// agent wires it to VolumeManager (volume_manager_mounter below); unit tests use a fake.
#pragma once

#include <boost/asio/awaitable.hpp>
#include <string>
#include <vector>

#include "services/nodeagent/volumes/volume_manager.hpp"

namespace mooring::nodeagent {

class VolumeMounter {
 public:
  virtual ~VolumeMounter() = default;
  virtual std::vector<RestoredVolume> restore(const std::string& alloc_id) = 0;
  // `group`: the task's group for a writable volume (VolumeOperations::mount); none for root.
  virtual boost::asio::awaitable<MountResult> mount(const std::string& alloc_id,
                                                    const ::mooring::v1::VolumeMountInfo& info,
                                                    domain::MountOptions request_options,
                                                    std::optional<uint32_t> group) = 0;
  // Returns at once; the release runs in the volume manager's own tasks.
  virtual void release(const std::string& alloc_id, const std::vector<std::string>& volume_ids) = 0;
  // A claim answered RESOURCE_EXHAUSTED (a ControllerPublish at the node's limit): the node
  // plugins' max volumes are read again now (NodePluginLookup::limits_exhausted).
  virtual void limits_exhausted() = 0;
};

class VolumeManagerMounter final : public VolumeMounter {
 public:
  explicit VolumeManagerMounter(VolumeManager& manager) : manager_(manager) {}
  std::vector<RestoredVolume> restore(const std::string& alloc_id) override { return manager_.restore(alloc_id); }
  boost::asio::awaitable<MountResult> mount(const std::string& alloc_id, const ::mooring::v1::VolumeMountInfo& info,
                                            domain::MountOptions request_options,
                                            std::optional<uint32_t> group) override {
    return manager_.mount(alloc_id, info, std::move(request_options), group);
  }
  void release(const std::string& alloc_id, const std::vector<std::string>& volume_ids) override {
    manager_.release(alloc_id, volume_ids);
  }
  void limits_exhausted() override { manager_.limits_exhausted(); }

 private:
  VolumeManager& manager_;
};

}  // namespace mooring::nodeagent
