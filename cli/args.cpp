#include "cli/args.hpp"

#include <algorithm>
#include <sstream>

#include "cli/settings.hpp"
#include "shared/config/settings.hpp"

namespace mooring::cli {

namespace {

bool starts_with_words(const std::vector<std::string>& words, const std::vector<std::string>& prefix) {
  return words.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), words.begin());
}

std::string join(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& w : words) out += (out.empty() ? "" : " ") + w;
  return out;
}

const CommandSpec* find_exact(const std::vector<std::string>& words, const std::vector<CommandSpec>& commands) {
  for (const auto& c : commands)
    if (c.words == words) return &c;
  return nullptr;
}

bool is_group(const std::vector<std::string>& words, const std::vector<CommandSpec>& commands) {
  return std::any_of(commands.begin(), commands.end(), [&](const CommandSpec& c) {
    return c.words.size() > words.size() && starts_with_words(c.words, words);
  });
}

const FlagSpec* find_flag(const CommandSpec* cmd, const std::string& name) {
  if (!cmd) return nullptr;
  for (const auto& f : cmd->flags)
    if (f.name == name) return &f;
  return nullptr;
}

// A flag of the global settings or of the command, its value read by `take_value` when it takes
// one (after "=" or the next argument). The error, or "" once applied.
template <class TakeValue>
std::string apply_flag(Invocation& inv, const std::string& name, std::optional<std::string>& value,
                       TakeValue& take_value) {
  auto switch_value = [&](bool& out) -> bool {
    if (!value) {
      out = true;
      return true;
    }
    auto b = config::parse_bool(*value);
    if (b) out = *b;
    return b.has_value();
  };
  if (const GlobalSetting* g = find_global(name); g && g->field) {
    if (!take_value()) return "flag -" + name + " needs a value (" + std::string(g->doc.value_name) + ")";
    inv.globals.*(g->field) = *value;
  } else if (name == "json") {
    if (!switch_value(inv.globals.json))
      return "flag -json: expected " + std::string(config::kBoolSpellings) + ", got \"" + *value + "\"";
  } else if (const FlagSpec* f = find_flag(inv.command, name)) {
    if (f->takes_value) {
      if (!take_value()) return "flag -" + name + " needs a value (" + f->value_name + ")";
      auto [it, fresh] = inv.flags.try_emplace(name, *value);
      if (!fresh) it->second = f->repeatable ? it->second + "," + *value : *value;
    } else {
      bool on = false;
      if (!switch_value(on))
        return "flag -" + name + ": expected " + std::string(config::kBoolSpellings) + ", got \"" + *value + "\"";
      inv.flags[name] = on ? "true" : "false";
    }
  } else {
    return "unknown flag -" + name;
  }
  return {};
}

}  // namespace

std::optional<std::string> Invocation::flag(const std::string& name) const {
  auto it = flags.find(name);
  if (it == flags.end()) return std::nullopt;
  return it->second;
}

ParseResult parse_command_line(const std::vector<std::string>& argv, const std::vector<CommandSpec>& commands) {
  ParseResult r;
  Invocation& inv = r.invocation;
  std::vector<std::string> words;
  bool flags_done = false;
  auto fail = [&](std::string message) {
    r.error = std::move(message);
    r.help_words = words;
    return r;
  };

  for (std::size_t i = 0; i < argv.size(); ++i) {
    const std::string& tok = argv[i];
    if (!flags_done && tok == "--") {
      flags_done = true;
      continue;
    }
    if (!flags_done && tok.size() > 1 && tok[0] == '-') {
      std::string name = tok.substr(tok.starts_with("--") ? 2 : 1);
      std::optional<std::string> value;
      if (auto eq = name.find('='); eq != std::string::npos) {
        value = name.substr(eq + 1);
        name = name.substr(0, eq);
      }
      if (name == "h" || name == "help") {
        r.help = true;
        r.help_words = words;
        return r;
      }
      auto take_value = [&]() -> bool {
        if (value) return true;
        if (i + 1 >= argv.size()) return false;
        value = argv[++i];
        return true;
      };
      if (auto error = apply_flag(inv, name, value, take_value); !error.empty()) return fail(std::move(error));
      continue;
    }
    if (inv.command) {
      inv.args.push_back(tok);
      continue;
    }
    auto candidate = words;
    candidate.push_back(tok);
    if (const CommandSpec* c = find_exact(candidate, commands)) {
      words = candidate;
      inv.command = c;
    } else if (is_group(candidate, commands)) {
      words = candidate;
    } else if (words.empty()) {
      return fail("unknown command \"" + tok + "\"");
    } else {
      return fail("unknown command \"" + join(candidate) + "\"");
    }
  }

  if (!inv.command) {
    if (words.empty()) return fail("no command given");
    return fail("\"" + join(words) + "\" needs a subcommand");
  }
  const CommandSpec& c = *inv.command;
  if (inv.args.size() < c.min_args) return fail(join(c.words) + ": missing arguments (expected " + c.arguments + ")");
  if (inv.args.size() > c.max_args) {
    if (c.max_args == 0) return fail(join(c.words) + ": takes no arguments, got \"" + inv.args[0] + "\"");
    return fail(join(c.words) + ": too many arguments (expected " + c.arguments + ")");
  }
  return r;
}

bool parse_secrets(const std::string& text, std::map<std::string, std::string>& out, std::string& error) {
  std::size_t start = 0;
  while (start <= text.size()) {
    auto comma = text.find(',', start);
    std::string piece = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!piece.empty()) {
      auto eq = piece.find('=');
      if (eq == std::string::npos || eq == 0) {
        // The piece may be a secret value: never echo it.
        error = "-secrets: expected key=value pairs separated by commas";
        return false;
      }
      out[piece.substr(0, eq)] = piece.substr(eq + 1);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return true;
}

std::string usage_for(const std::vector<std::string>& words, const std::vector<CommandSpec>& commands) {
  std::ostringstream out;
  if (const CommandSpec* c = find_exact(words, commands)) {
    out << "usage: mooring " << join(c->words);
    if (!c->flags.empty()) out << " [flags]";
    if (!c->arguments.empty()) out << " " << c->arguments;
    out << "\n\n" << c->summary << "\n";
    if (!c->help.empty()) out << "\n" << c->help << (c->help.ends_with('\n') ? "" : "\n");
    if (!c->flags.empty()) {
      out << "\nFlags:\n";
      std::size_t width = 0;
      for (const auto& f : c->flags)
        width = std::max(width, f.name.size() + 1 + (f.takes_value ? f.value_name.size() + 1 : 0));
      for (const auto& f : c->flags) {
        std::string left = "-" + f.name + (f.takes_value ? " " + f.value_name : "");
        out << "  " << left << std::string(width + 2 - left.size(), ' ') << " " << f.help << "\n";
      }
    }
    out << "\n" << global_flags_usage();
    return out.str();
  }
  out << "usage: mooring " << (words.empty() ? "<command>" : join(words) + " <command>") << " [flags] [args]\n\n";
  if (words.empty()) out << "Mooring's command-line client for the control plane's REST API.\n\n";
  out << "Commands:\n";
  std::size_t width = 0;
  std::vector<const CommandSpec*> shown;
  for (const auto& c : commands) {
    if (!starts_with_words(c.words, words)) continue;
    shown.push_back(&c);
    width = std::max(width, join(c.words).size() + 1 + c.arguments.size());
  }
  for (const auto* c : shown) {
    std::string left = join(c->words) + (c->arguments.empty() ? "" : " " + c->arguments);
    out << "  " << left << std::string(width + 2 - left.size(), ' ') << c->summary << "\n";
  }
  out << "\n" << global_flags_usage();
  return out.str();
}

}  // namespace mooring::cli
