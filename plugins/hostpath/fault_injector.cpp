#include "plugins/hostpath/fault_injector.hpp"

#include <sys/stat.h>

#include <nlohmann/json.hpp>
#include <set>

#include "plugins/hostpath/state_file.hpp"
#include "shared/durable/durable_file.hpp"
#include "shared/log/log.hpp"

namespace mooring::hostpath {
namespace {

using nlohmann::json;
const log::Logger kLog{"faults"};

std::int64_t to_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

std::string FaultDecision::describe() const {
  std::string out = delay.count() > 0 ? "delay" : "";
  const char* act = action == Action::fail   ? "fail"
                    : action == Action::hang ? "hang"
                    : action == Action::exit ? "exit"
                                             : "";
  if (*act) out += out.empty() ? act : std::string("+") + act;
  if (abnormal) out += out.empty() ? "abnormal" : "+abnormal";
  return out;
}

bool parse_fault_rules(std::string_view text, std::vector<FaultRule>& out, std::string& error) {
  static const std::set<std::string> kKeys = {"rpc",      "volume_id", "code", "message",   "count",   "for_seconds",
                                              "delay_ms", "hang",      "exit", "exit_code", "abnormal"};
  out.clear();
  try {
    json j = text.find_first_not_of(" \t\r\n") == std::string_view::npos ? json::array() : json::parse(text);
    if (j.is_object()) j = j.value("rules", json::array());
    if (!j.is_array()) {
      error = "expected {\"rules\":[...]} or an array of rules";
      return false;
    }
    for (std::size_t i = 0; i < j.size(); ++i) {
      const json& r = j[i];
      const std::string where = "rule " + std::to_string(i) + ": ";
      if (!r.is_object()) {
        error = where + "not an object";
        return false;
      }
      for (const auto& [k, v] : r.items()) {
        if (!kKeys.contains(k)) {
          error = where + "unknown key '" + k + "'";
          return false;
        }
      }
      FaultRule rule;
      rule.rpc = r.at("rpc").get<std::string>();
      if (rule.rpc.empty()) {
        error = where + "empty rpc";
        return false;
      }
      rule.volume_id = r.value("volume_id", "");
      if (r.contains("code")) {
        rule.code = r.at("code").get<int>();
        if (*rule.code < 1 || *rule.code > 16) {
          error = where + "code must be a gRPC status code 1..16";
          return false;
        }
      }
      rule.message = r.value("message", "");
      rule.count = r.value("count", std::int64_t{-1});
      if (r.contains("for_seconds")) rule.for_seconds = r.at("for_seconds").get<double>();
      rule.delay_ms = r.value("delay_ms", std::int64_t{0});
      rule.hang = r.value("hang", false);
      rule.exit = r.value("exit", false);
      rule.exit_code = r.value("exit_code", 137);
      if (r.contains("abnormal")) rule.abnormal = r.at("abnormal").get<std::string>();
      if (!rule.code && !rule.hang && !rule.exit && rule.delay_ms <= 0 && !rule.abnormal) {
        error = where + "needs one of code, delay_ms, hang, exit, abnormal";
        return false;
      }
      if ((rule.code ? 1 : 0) + (rule.hang ? 1 : 0) + (rule.exit ? 1 : 0) > 1) {
        error = where + "code, hang and exit are exclusive";
        return false;
      }
      out.push_back(std::move(rule));
    }
    return true;
  } catch (const json::exception& e) {
    error = e.what();
    return false;
  }
}

FaultInjector::FaultInjector(std::filesystem::path control_file, std::filesystem::path progress_file)
    : control_file_(std::move(control_file)), progress_file_(std::move(progress_file)) {}

void FaultInjector::reload_if_changed() {
  struct stat st {};
  std::string fp;
  if (::stat(control_file_.c_str(), &st) == 0) {
    fp = std::to_string(st.st_ino) + ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec);
  }
  if (fp == fingerprint_) return;
  if (fp.empty()) {
    fingerprint_.clear();
    rules_.clear();
    used_.clear();
    kLog.info("fault file removed; no faults active", {{"file", control_file_.string()}});
    return;
  }
  std::error_code ec;
  const auto text = durable::read_file(control_file_, ec);
  std::vector<FaultRule> rules;
  std::string error;
  if (!text || !parse_fault_rules(*text, rules, error)) {
    // Keep the previous rules: a half-written or broken file must not silently clear faults.
    kLog.error("fault file rejected; keeping previous rules", {{"file", control_file_.string()}, {"error", error}});
    fingerprint_ = fp;
    return;
  }
  fingerprint_ = fp;
  rules_ = std::move(rules);
  used_.assign(rules_.size(), 0);
  loaded_at_ = std::chrono::system_clock::now();
  // Same file as before a restart: resume where the previous process left off.
  if (const auto saved = durable::read_file(progress_file_, ec)) {
    try {
      const json j = json::parse(*saved);
      if (j.value("fingerprint", "") == fp) {
        loaded_at_ =
            std::chrono::system_clock::time_point(std::chrono::milliseconds(j.at("loaded_at_ms").get<std::int64_t>()));
        const auto used = j.at("used").get<std::vector<std::int64_t>>();
        for (std::size_t i = 0; i < used.size() && i < used_.size(); ++i) used_[i] = used[i];
      }
    } catch (const json::exception&) {
      // A corrupt progress file only means counts restart from zero.
    }
  }
  save_progress();
  kLog.info("fault rules loaded", {{"file", control_file_.string()}, {"rules", rules_.size()}});
}

void FaultInjector::save_progress() {
  const json j = {{"fingerprint", fingerprint_}, {"loaded_at_ms", to_ms(loaded_at_)}, {"used", used_}};
  if (const auto ec = durable::write_file_atomically(progress_file_, j.dump())) {
    kLog.warn("cannot persist fault progress", {{"file", progress_file_.string()}, {"error", ec.message()}});
  }
}

FaultDecision FaultInjector::decide(std::string_view rpc, std::string_view volume_id) {
  std::lock_guard guard(mu_);
  reload_if_changed();
  FaultDecision d;
  bool consumed_counted = false;
  const auto now = std::chrono::system_clock::now();
  for (std::size_t i = 0; i < rules_.size(); ++i) {
    const FaultRule& r = rules_[i];
    if (r.rpc != "*" && r.rpc != rpc) continue;
    if (!r.volume_id.empty() && r.volume_id != volume_id) continue;
    if (r.count >= 0 && used_[i] >= r.count) continue;
    if (r.for_seconds && std::chrono::duration<double>(now - loaded_at_).count() >= *r.for_seconds) continue;
    ++used_[i];
    consumed_counted = consumed_counted || r.count >= 0;
    d.delay += std::chrono::milliseconds(r.delay_ms);
    if (r.abnormal && !d.abnormal) d.abnormal = r.abnormal;
    if (r.code) {
      d.action = FaultDecision::Action::fail;
      d.code = *r.code;
      d.message = r.message.empty()
                      ? "injected fault: " + std::string(rpc) + " fails with code " + std::to_string(*r.code)
                      : r.message;
    } else if (r.hang) {
      d.action = FaultDecision::Action::hang;
    } else if (r.exit) {
      d.action = FaultDecision::Action::exit;
      d.exit_code = r.exit_code;
    }
    if (d.action != FaultDecision::Action::none) break;  // the first terminal rule decides
  }
  if (consumed_counted) save_progress();
  return d;
}

}  // namespace mooring::hostpath
