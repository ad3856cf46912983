// mooring-hostpath: what one node plugin has mounted, persisted in <data-dir>/nodes/<node-id>.json.
// The file doubles as the node's registration: the controller treats every node with a file
// there as known (its id, max volumes and topology), the way a kubelet registers its CSI node.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "shared/durable/durable_file.hpp"

namespace mooring::hostpath {

struct StagedVolume {
  std::string volume_id;
  std::string source;  // the volume directory; for a block volume its backing file
  bool readonly = false;
  bool block = false;
  std::string device;  // block: the loop device attached to the backing file ("" while attaching)
};

struct PublishedVolume {
  std::string volume_id;
  std::string staging_path;
  bool readonly = false;
  int access_mode = 0;  // csi AccessMode.Mode; 0 in records written before it was kept
  bool block = false;   // the target is a file with the loop device bind-mounted on it
  std::string device;   // block, published read-only from a read-write stage: its own read-only loop device
};

struct NodeRegistration {
  std::string node_id;
  std::int64_t max_volumes = 0;
  std::map<std::string, std::string> topology;
  std::string max_volumes_file;  // Options::max_volumes_file ("" when not given)
};

// The node's max volumes now: the number in its max_volumes_file when that holds one, else
// max_volumes (0 = unlimited).
std::int64_t current_max_volumes(const NodeRegistration& node);

struct NodeRecord {
  NodeRegistration registration;
  std::map<std::string, StagedVolume> staged;        // by staging path
  std::map<std::string, PublishedVolume> published;  // by target path
};

class NodeState {
 public:
  NodeState(std::filesystem::path data_dir, NodeRegistration registration);

  // Loads earlier records (a restart) and writes the registration; error text or empty.
  std::string open();

  // Mutations persist before returning; false when the file could not be written (the change
  // stays in memory: a record without a mount is harmless, and the next write carries it).
  // Concurrent mutations share writes (group commit): while one thread writes the file, the
  // others' changes queue up and the next write carries them all, so N node calls in flight cost
  // about two flushes, not N one after another.
  NodeRecord snapshot() const;
  bool put_staged(const std::string& path, const StagedVolume& v);
  bool erase_staged(const std::string& path);
  bool put_published(const std::string& path, const PublishedVolume& v);
  bool erase_published(const std::string& path);

 private:
  std::string text_locked() const;  // the file's content for record_
  bool save_locked();
  // Waits until the file holds every change made so far (this caller's included), writing it
  // when no other thread is.
  bool commit(std::unique_lock<std::mutex>& lock);

  std::filesystem::path file_;
  mutable std::mutex mu_;
  std::condition_variable written_cv_;
  NodeRecord record_;
  std::uint64_t changes_ = 0;  // mutations so far
  std::uint64_t written_ = 0;  // mutations the file holds
  bool writing_ = false;
  durable::Version version_;  // touched only by the thread writing
};

// Every node registered in the data dir (files under <data-dir>/nodes/).
std::vector<NodeRegistration> registered_nodes(const std::filesystem::path& data_dir);

// Nodes in the data dir that still have `volume_id` staged or published (their records say so).
std::vector<std::string> nodes_mounting(const std::filesystem::path& data_dir, const std::string& volume_id);

}  // namespace mooring::hostpath
