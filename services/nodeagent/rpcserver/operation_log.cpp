#include "services/nodeagent/rpcserver/operation_log.hpp"

#include <charconv>
#include <utility>

#include "shared/durable/durable_file.hpp"
#include "shared/durable/journal.hpp"

namespace mooring::nodeagent {
namespace {

constexpr std::string_view kMagic = "op1 ";

bool number(std::string_view& text, std::uint64_t& out, int base, char then) {
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), out, base);
  if (err != std::errc{} || end == text.data() || end == text.data() + text.size() || *end != then) return false;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()) + 1);
  return true;
}

}  // namespace

// "op1 <i|r> <at_ms> <fingerprint hex> <code> <key length> <message length> <response length>\n"
// then the three strings back to back.
std::string encode(const OperationRecord& r) {
  char head[160];
  const int n = std::snprintf(head, sizeof head, "%s%c %lld %llx %d %zu %zu %zu\n", kMagic.data(),
                              r.kind == OperationRecord::Kind::intent ? 'i' : 'r', static_cast<long long>(r.at_ms),
                              static_cast<unsigned long long>(r.fingerprint), r.code, r.key.size(), r.message.size(),
                              r.response.size());
  std::string out(head, static_cast<std::size_t>(n));
  out.append(r.key).append(r.message).append(r.response);
  return out;
}

bool decode(std::string_view& text, OperationRecord& r) {
  std::string_view rest = text;
  if (!rest.starts_with(kMagic) || rest.size() < kMagic.size() + 2) return false;
  rest.remove_prefix(kMagic.size());
  const char kind = rest[0];
  if ((kind != 'i' && kind != 'r') || rest[1] != ' ') return false;
  rest.remove_prefix(2);
  std::uint64_t at = 0, fingerprint = 0, code = 0, key = 0, message = 0, response = 0;
  if (!number(rest, at, 10, ' ') || !number(rest, fingerprint, 16, ' ') || !number(rest, code, 10, ' ') ||
      !number(rest, key, 10, ' ') || !number(rest, message, 10, ' ') || !number(rest, response, 10, '\n'))
    return false;
  if (code > 16 || rest.size() < key + message + response) return false;
  r.kind = kind == 'i' ? OperationRecord::Kind::intent : OperationRecord::Kind::result;
  r.at_ms = static_cast<std::int64_t>(at);
  r.fingerprint = fingerprint;
  r.code = static_cast<int>(code);
  r.key.assign(rest.substr(0, key));
  r.message.assign(rest.substr(key, message));
  r.response.assign(rest.substr(key + message, response));
  text = rest.substr(key + message + response);
  return true;
}

OperationLog::OperationLog(std::filesystem::path file) : file_(std::move(file)) {}
OperationLog::~OperationLog() = default;

std::filesystem::path OperationLog::journal_file() const { return file_.string() + ".journal"; }

std::vector<OperationRecord> OperationLog::load(std::vector<std::string>& warnings) {
  std::vector<OperationRecord> out;
  journal_ = std::make_unique<durable::Journal>(journal_file());
  auto start_empty = [&](const std::filesystem::path& bad, const std::string& why) {
    warnings.push_back(bad.string() + ": " + why +
                       "; the operation cache starts empty (a controller call resent now reaches the plugin again)");
    out.clear();
    if (auto ec = compact({}))
      warnings.push_back(file_.string() + ": cannot be reset: " + ec.message() + " (results are kept in memory only)");
  };
  std::error_code ec;
  durable::Version version;
  const auto checkpoint = durable::read_durable(file_, ec, &version);
  if (ec) {
    start_empty(file_, "the checkpoint cannot be read (" + ec.message() + ")");
    return out;
  }
  generation_ = version.generation;
  if (checkpoint) {
    std::string_view text(*checkpoint);
    while (!text.empty()) {
      OperationRecord r;
      if (!decode(text, r)) {
        start_empty(file_, "the checkpoint holds bytes that are not a record");
        return out;
      }
      out.push_back(std::move(r));
    }
  }
  std::vector<std::string> records;
  if (ec = journal_->read_new(generation_, records); ec) {
    start_empty(journal_file(), "the journal cannot be read (" + ec.message() + ")");
    return out;
  }
  for (const auto& record : records) {
    std::string_view text(record);
    OperationRecord r;
    if (!decode(text, r) || !text.empty()) {
      // Passed its checksum but is not ours: keep what came before, rewrite both files cleanly.
      warnings.push_back(journal_file().string() +
                         ": a record is not an operation record; it and the ones after it were dropped");
      if (ec = compact(out); ec) warnings.push_back(file_.string() + ": cannot be rewritten: " + ec.message());
      return out;
    }
    out.push_back(std::move(r));
  }
  // A tail cut short by a crash mid-append is dropped by the journal (its call's intent or
  // result is then unknown, as if the crash came just before); say so.
  if (const auto dropped = journal_->dropped_bytes(); dropped > 0)
    warnings.push_back(journal_file().string() + ": " + std::to_string(dropped) +
                       " bytes after the last whole record were dropped (a write cut short by a crash)");
  return out;
}

std::error_code OperationLog::append(const OperationRecord& record) {
  if (!journal_) {
    std::vector<std::string> warnings;
    load(warnings);
  }
  return journal_->append(encode(record));
}

std::error_code OperationLog::compact(const std::vector<OperationRecord>& live) {
  std::string content;
  for (const auto& r : live) content += encode(r);
  durable::Version version;
  if (auto ec = durable::write_durable(file_, content, &version)) return ec;
  generation_ = version.generation;
  if (!journal_) journal_ = std::make_unique<durable::Journal>(journal_file());
  if (auto ec = journal_->restart(generation_)) return ec;
  return {};
}

}  // namespace mooring::nodeagent
