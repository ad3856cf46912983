#include "shared/durable/durable_file.hpp"

#include "shared/durable/io_detail.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <cstdint>
#include <set>

namespace mooring::durable {
namespace {

using detail::last_error;
using detail::parse_u64;

std::filesystem::path dir_of(const std::filesystem::path& path) {
  return path.parent_path().empty() ? std::filesystem::path(".") : path.parent_path();
}

// ---- slots ----

constexpr std::string_view kSlotMagic = "mooring-slot 1 ";

std::filesystem::path slot_path(const std::filesystem::path& path, int i) {
  return path.string() + (i == 0 ? ".0" : ".1");
}

struct Slot {
  bool exists = false;
  bool valid = false;
  std::uint64_t generation = 0;
  std::uint64_t header_generation = 0;  // what the header says, valid content or not
  std::string content;
};

// The header's magic and generation; `text` is left after the generation.
bool parse_generation(std::string_view& text, std::uint64_t& generation) {
  if (!text.starts_with(kSlotMagic)) return false;
  text.remove_prefix(kSlotMagic.size());
  return parse_u64(text, generation, 10);
}

Slot read_slot(const std::filesystem::path& file, std::error_code& ec) {
  Slot slot;
  auto text = read_file(file, ec);
  if (!text) return slot;
  slot.exists = true;
  std::string_view rest(*text);
  std::uint64_t generation = 0, length = 0, hash = 0;
  if (!parse_generation(rest, generation)) return slot;
  slot.header_generation = generation;
  if (!rest.starts_with(' ')) return slot;
  rest.remove_prefix(1);
  if (!parse_u64(rest, length, 10) || !rest.starts_with(' ')) return slot;
  rest.remove_prefix(1);
  if (!parse_u64(rest, hash, 16) || !rest.starts_with('\n')) return slot;
  rest.remove_prefix(1);
  if (rest.size() < length) return slot;  // torn: shorter than it says
  rest = rest.substr(0, length);          // a longer earlier content may follow; it is not ours
  if (hash64(rest) != hash) return slot;
  slot.valid = true;
  slot.generation = generation;
  const auto offset = static_cast<std::size_t>(rest.data() - text->data());
  text->resize(offset + length);
  text->erase(0, offset);
  slot.content = std::move(*text);
  return slot;
}

// Index of the slot with the newest valid content, -1 when neither is valid.
int newest(const Slot (&slots)[2]) {
  if (slots[0].valid && (!slots[1].valid || slots[0].generation > slots[1].generation)) return 0;
  return slots[1].valid ? 1 : -1;
}

bool read_slots(const std::filesystem::path& path, Slot (&slots)[2], std::error_code& ec) {
  for (int i = 0; i < 2; ++i) {
    slots[i] = read_slot(slot_path(path, i), ec);
    if (ec) return false;
  }
  return true;
}

// The generation in a slot's header, 0 when it has none (missing, foreign); the content is not
// read or checked.
std::uint64_t header_generation(const std::filesystem::path& file) {
  const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char head[64];
  const ssize_t n = ::pread(fd, head, sizeof head, 0);
  ::close(fd);
  std::string_view text(head, n > 0 ? static_cast<std::size_t>(n) : 0);
  std::uint64_t generation = 0;
  return parse_generation(text, generation) ? generation : 0;
}

}  // namespace

// Detects torn and foreign content, eight bytes a step (the catalogue of a plugin can be
// hundreds of KiB). Not a cryptographic hash: nothing here is adversarial.
std::uint64_t hash64(std::string_view s) {
  constexpr std::uint64_t kMul = 0x9e3779b97f4a7c15ULL;
  std::uint64_t h = 0xcbf29ce484222325ULL ^ (s.size() * kMul);
  std::size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    std::uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * kMul;
    h ^= h >> 29;
  }
  for (; i < s.size(); ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 0x100000001b3ULL;
  h ^= h >> 32;
  return h * kMul;
}

void sync_dir(const std::filesystem::path& dir) {
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return;
  ::fsync(dfd);
  ::close(dfd);
}

std::error_code write_file_atomically(const std::filesystem::path& path, std::string_view content) {
  std::error_code ec;
  const auto dir = dir_of(path);
  std::filesystem::create_directories(dir, ec);
  if (ec) return ec;
  // A unique temp name so two writers never share one temp file: the pid tells processes apart,
  // the counter writers within one (no /dev/urandom read per write).
  static std::atomic<std::uint64_t> sequence{0};
  const auto tmp = path.string() + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(++sequence);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return last_error();
  ec = detail::write_at(fd, content, 0);
  if (!ec && ::fsync(fd) != 0) ec = last_error();
  ::close(fd);
  if (!ec && ::rename(tmp.c_str(), path.c_str()) != 0) ec = last_error();
  if (ec) {
    ::unlink(tmp.c_str());
    return ec;
  }
  sync_dir(dir);  // the rename itself must survive a crash
  return {};
}

std::optional<std::string> read_file(const std::filesystem::path& path, std::error_code& ec) {
  ec.clear();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno != ENOENT) ec = last_error();
    return std::nullopt;
  }
  std::string out;
  char buf[16384];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0) {
      if (errno == EINTR) continue;
      ec = last_error();
      ::close(fd);
      return std::nullopt;
    }
    if (n == 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(fd);
  return out;
}

std::error_code write_durable(const std::filesystem::path& path, std::string_view content, Version* version) {
  std::error_code ec;
  int current = -1;  // the slot holding the newest valid content
  std::uint64_t generation = 1;
  bool target_exists = false;
  bool other_exists = true;  // the slot not written now
  bool known = false;
  if (version && version->generation != 0 && version->slot >= 0) {
    // Checked when it was read or written here; only the headers are re-read. It still holds if
    // that slot has the highest generation on disk: nobody wrote, or tore a write, since.
    const auto mine = header_generation(slot_path(path, version->slot));
    const auto other = header_generation(slot_path(path, 1 - version->slot));
    if (mine == version->generation && other < mine) {
      known = true;
      current = version->slot;
      generation = mine + 1;
      target_exists = other != 0;  // a missing (or headerless) target is created: sync its entry
    }
  }
  if (!known) {
    Slot slots[2];
    if (!read_slots(path, slots, ec)) return ec;
    current = newest(slots);
    if (current >= 0) generation = slots[current].generation + 1;
    // Above a torn slot's header too: generation_of() (the headers' maximum) must change with
    // every write, or a reader that cached while the torn header was the highest would take the
    // new content for the one it has (the hostpath catalogue keys its cache on it).
    generation = std::max({generation, slots[0].header_generation + 1, slots[1].header_generation + 1});
    target_exists = slots[current == 0 ? 1 : 0].exists;
    other_exists = slots[current == 0 ? 0 : 1].exists;
  }
  const int target = current == 0 ? 1 : 0;
  std::string data = std::string(kSlotMagic) + std::to_string(generation) + " " + std::to_string(content.size()) + " " +
                     detail::hash_hex(content) + "\n";
  data.append(content);
  const auto dir = dir_of(path);
  const auto file = slot_path(path, target);
  int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0 && errno == ENOENT) {  // the first write: its directory may not exist yet
    std::filesystem::create_directories(dir, ec);
    if (ec) return ec;
    fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  }
  if (fd < 0) return last_error();
  ec = detail::write_at(fd, data, 0);  // the slot is overwritten in place
  if (!ec && ::fdatasync(fd) != 0) ec = last_error();
  ::close(fd);
  if (ec) return ec;
  if (!target_exists) {
    // A new slot's directory entry must survive a crash. The first write also creates the other
    // slot, empty (no valid header, so never read as content), so that one directory sync covers
    // both entries and the second write needs none: a record costs one directory sync, not two.
    if (!other_exists) {
      const int other = ::open(slot_path(path, 1 - target).c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
      if (other >= 0) ::close(other);
    }
    sync_dir(dir);
  }
  if (current < 0 && ::unlink(path.c_str()) == 0) sync_dir(dir);  // an older agent's plain file
  if (version) *version = Version{generation, target};
  return {};
}

std::optional<std::string> read_durable(const std::filesystem::path& path, std::error_code& ec, Version* version) {
  ec.clear();
  if (version) *version = Version{};
  Slot slots[2];
  if (!read_slots(path, slots, ec)) return std::nullopt;
  if (const int current = newest(slots); current >= 0) {
    if (version) *version = Version{slots[current].generation, current};
    return std::move(slots[current].content);
  }
  auto plain = read_file(path, ec);
  if (!plain && !ec && (slots[0].exists || slots[1].exists))
    ec = std::make_error_code(std::errc::illegal_byte_sequence);  // every slot torn or foreign
  return plain;
}

std::error_code remove_durable(const std::filesystem::path& path) {
  std::error_code ec;
  Slot slots[2];
  if (!read_slots(path, slots, ec)) return ec;
  const int keep_last = newest(slots) == 0 ? 0 : 1;
  for (const auto& file : {slot_path(path, 1 - keep_last), slot_path(path, keep_last), path}) {
    if (::unlink(file.c_str()) != 0 && errno != ENOENT) return last_error();
  }
  sync_dir(dir_of(path));
  return {};
}

std::uint64_t generation_of(const std::filesystem::path& path) {
  return std::max(header_generation(slot_path(path, 0)), header_generation(slot_path(path, 1)));
}

std::vector<std::filesystem::path> list_durable(const std::filesystem::path& dir, std::string_view suffix) {
  std::set<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.size() > 2 && (name.ends_with(".0") || name.ends_with(".1"))) name.resize(name.size() - 2);  // a slot
    if (name.ends_with(suffix)) files.insert(dir / name);
  }
  return {files.begin(), files.end()};
}

}  // namespace mooring::durable
