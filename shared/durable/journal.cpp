#include "shared/durable/journal.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include "shared/durable/durable_file.hpp"
#include "shared/durable/io_detail.hpp"

namespace mooring::durable {
namespace {

using detail::last_error;

constexpr std::string_view kMagic = "mooring-journal 1 ";

std::error_code pread_all(int fd, std::string& out, std::uint64_t offset, std::uint64_t size) {
  out.resize(size);
  std::size_t got = 0;
  while (got < size) {
    const ssize_t n = ::pread(fd, out.data() + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0) {
      if (errno == EINTR) continue;
      return last_error();
    }
    if (n == 0) break;  // shorter than fstat said: someone truncated; what was read is what there is
    got += static_cast<std::size_t>(n);
  }
  out.resize(got);
  return {};
}

// A number in `base` followed by `then`; `text` is left after both.
bool parse_number(std::string_view& text, std::uint64_t& out, int base, char then) {
  if (!detail::parse_u64(text, out, base) || !text.starts_with(then)) return false;
  text.remove_prefix(1);
  return true;
}

// The length of the header at the start of `text` when it names `generation`, else 0.
std::size_t header_for(std::string_view text, std::uint64_t generation) {
  const auto size = text.size();
  if (!text.starts_with(kMagic)) return 0;
  text.remove_prefix(kMagic.size());
  std::uint64_t named = 0;
  if (!parse_number(text, named, 10, '\n') || named != generation) return 0;
  return size - text.size();
}

// The next record's content in `text`, which is advanced past it; false at a torn or foreign record.
bool next_record(std::string_view& text, std::string_view& content) {
  std::string_view rest = text;
  std::uint64_t length = 0, hash = 0;
  if (!rest.starts_with("r ")) return false;
  rest.remove_prefix(2);
  if (!parse_number(rest, length, 10, ' ') || !parse_number(rest, hash, 16, '\n')) return false;
  if (rest.size() < length + 1 || rest[length] != '\n') return false;
  content = rest.substr(0, length);
  if (hash64(content) != hash) return false;
  text = rest.substr(length + 1);
  return true;
}

std::string header(std::uint64_t generation) { return std::string(kMagic) + std::to_string(generation) + "\n"; }

}  // namespace

Journal::Journal(std::filesystem::path path) : path_(std::move(path)) {}

Journal::~Journal() {
  if (fd_ >= 0) ::close(fd_);
}

std::error_code Journal::open_file(bool create) {
  if (fd_ >= 0) return {};
  fd_ = ::open(path_.c_str(), O_RDWR | O_CLOEXEC);
  if (fd_ >= 0) return {};
  if (errno != ENOENT) return last_error();
  if (!create) return {};  // no journal yet
  fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) return last_error();
  // The new entry must survive a crash, or a flushed record would vanish with it.
  sync_dir(path_.parent_path().empty() ? std::filesystem::path(".") : path_.parent_path());
  return {};
}

std::error_code Journal::read_new(std::uint64_t generation, std::vector<std::string>& records) {
  if (generation != generation_) {
    generation_ = generation;
    end_ = 0;
  }
  if (auto ec = open_file(false)) return ec;
  if (fd_ < 0) {  // no journal: nothing follows the checkpoint
    end_ = header_size_ = file_size_ = 0;
    follows_ = false;
    return {};
  }
  struct stat st {};
  if (::fstat(fd_, &st) != 0) return last_error();
  const auto size = static_cast<std::uint64_t>(st.st_size);
  // Records are appended in place, never rewritten, except by a restart (which changes the
  // checkpoint generation) or by cutting a torn tail. Shorter than what was read means the
  // file was restarted under us: read it again from the start (records set whole values, so
  // reading one twice, in order, is harmless).
  if (end_ > 0 && size < end_) end_ = 0;
  if (end_ > 0 && size == end_) {
    file_size_ = size;
    return {};
  }
  const std::uint64_t from = end_;
  std::string text;
  if (auto ec = pread_all(fd_, text, from, size - from)) return ec;
  file_size_ = from + text.size();
  std::string_view rest(text);
  if (from == 0) {
    header_size_ = header_for(rest, generation);
    follows_ = header_size_ > 0;
    if (!follows_) return {};  // another checkpoint's journal, or a restart cut short: nothing here
    rest.remove_prefix(header_size_);
  }
  std::string_view content;
  while (next_record(rest, content)) records.emplace_back(content);
  end_ = from + (text.size() - rest.size());
  return {};
}

std::error_code Journal::append(std::string_view record) {
  if (!follows_ || fd_ < 0) {
    if (auto ec = restart(generation_)) return ec;
  }
  if (file_size_ != end_) {  // a torn record from a crash: cut it off
    if (::ftruncate(fd_, static_cast<off_t>(end_)) != 0) return last_error();
    file_size_ = end_;
  }
  std::string data = "r " + std::to_string(record.size()) + " " + detail::hash_hex(record) + "\n";
  data.reserve(data.size() + record.size() + 1);
  data.append(record);
  data += '\n';
  file_size_ = end_ + data.size();  // until the flush is known good, the tail counts as torn
  if (auto ec = detail::write_at(fd_, data, end_)) return ec;
  if (::fdatasync(fd_) != 0) return last_error();
  end_ = file_size_;
  return {};
}

std::error_code Journal::restart(std::uint64_t generation) {
  if (auto ec = open_file(true)) return ec;
  generation_ = generation;
  follows_ = false;
  end_ = 0;
  file_size_ = 1;  // unknown until the header is flushed
  const auto text = header(generation);
  if (::ftruncate(fd_, 0) != 0) return last_error();
  if (auto ec = detail::write_at(fd_, text, 0)) return ec;
  if (::fdatasync(fd_) != 0) return last_error();
  header_size_ = end_ = file_size_ = text.size();
  follows_ = true;
  return {};
}

}  // namespace mooring::durable
