#include "cli/completion.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/context.hpp"
#include "cli/settings.hpp"

namespace mooring::cli {

namespace {

using Entry = std::pair<std::string, std::string>;  // a word or flag, and its description

// One path of command words: a group ("volume snapshot"), a command, or the top ("").
struct Node {
  std::string path;
  std::vector<Entry> subs;   // the words that may follow: subcommands, or a command's fixed values
  std::vector<Entry> flags;  // a command's own flags ("-plugin"); the global ones apply everywhere
};

std::string join(const std::vector<std::string>& words, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i ? " " : "") + words[i];
  return out;
}

// Every path of the table, in its order (so the top lists volume first, as the usage does).
std::vector<Node> tree(const std::vector<CommandSpec>& commands) {
  std::vector<Node> nodes;
  auto node = [&](const std::string& path) -> Node& {
    for (auto& n : nodes)
      if (n.path == path) return n;
    return nodes.emplace_back(Node{path, {}, {}});
  };
  for (const auto& c : commands) {
    for (std::size_t k = 0; k < c.words.size(); ++k) {
      auto& subs = node(join(c.words, k)).subs;
      const bool last = k + 1 == c.words.size();
      if (std::none_of(subs.begin(), subs.end(), [&](const Entry& e) { return e.first == c.words[k]; }))
        subs.emplace_back(c.words[k], last ? c.summary : join(c.words, k + 1) + " commands");
    }
    Node& leaf = node(join(c.words, c.words.size()));
    for (const auto& choice : c.choices) leaf.subs.emplace_back(choice, "");
    for (const auto& f : c.flags) leaf.flags.emplace_back("-" + f.name, f.help);
  }
  return nodes;
}

std::vector<Entry> global_flags() {
  std::vector<Entry> out;
  for (const auto& s : global_settings()) out.emplace_back("-" + std::string(s.doc.flag), std::string(s.doc.help));
  out.emplace_back("-h", "help for any command");
  return out;
}

// "-address|--address|-plugin|--plugin...": the flags whose next word is their value.
std::string value_flag_pattern(const std::vector<CommandSpec>& commands) {
  std::set<std::string> names;
  for (const auto& s : global_settings())
    if (!s.doc.value_name.empty()) names.emplace(s.doc.flag);
  for (const auto& c : commands)
    for (const auto& f : c.flags)
      if (f.takes_value) names.insert(f.name);
  std::string out;
  for (const auto& n : names) out += (out.empty() ? "-" : "|-") + n + "|--" + n;
  return out;
}

std::string path_pattern(const std::vector<Node>& nodes) {
  std::string out;
  for (const auto& n : nodes)
    if (!n.path.empty()) out += (out.empty() ? "\"" : "|\"") + n.path + "\"";
  return out;
}

std::string names(const std::vector<Entry>& entries) {
  std::string out;
  for (const auto& [name, _] : entries) out += (out.empty() ? "" : " ") + name;
  return out;
}

// The loop both shells share: walk the words before the cursor, skipping flags and their values,
// and keep the longest prefix that is a path of the table.
std::string walk(const std::vector<CommandSpec>& commands, const std::vector<Node>& nodes, std::string_view words,
                 std::string_view first, std::string_view current, std::string_view open) {
  std::ostringstream out;
  out << "  for ((i = " << first << "; i < " << current << "; i++)); do\n"
      << "    w=" << words << "\n"
      << "    case $w in\n"
      << "      " << open << value_flag_pattern(commands) << ") ((i++)); continue ;;\n"
      << "      " << open << "-*) continue ;;\n"
      << "    esac\n"
      << "    next=${cmd:+$cmd }$w\n"
      << "    case $next in\n"
      << "      " << open << path_pattern(nodes) << ") cmd=$next ;;\n"
      << "    esac\n"
      << "  done\n";
  return out.str();
}

std::string bash_script(const std::vector<CommandSpec>& commands) {
  const auto nodes = tree(commands);
  std::ostringstream out;
  out << "# bash completion for mooring, generated from its command table by `mooring completion bash`.\n"
      << "# Load it with: source <(mooring completion bash)   (or save it in /etc/bash_completion.d/mooring)\n"
      << "_mooring() {\n"
      << "  local cur=${COMP_WORDS[COMP_CWORD]} cmd=\"\" next w i subs=\"\" flags=\"" << names(global_flags()) << "\"\n"
      << walk(commands, nodes, "${COMP_WORDS[i]}", "1", "COMP_CWORD", "") << "  case $cmd in\n";
  for (const auto& n : nodes) {
    out << "    \"" << n.path << "\") subs=\"" << names(n.subs) << "\"";
    if (!n.flags.empty()) out << "; flags+=\" " << names(n.flags) << "\"";
    out << " ;;\n";
  }
  out << "  esac\n"
      << "  if [[ $cur == -* ]]; then\n"
      << "    COMPREPLY=($(compgen -W \"$flags\" -- \"$cur\"))\n"
      << "  elif [[ -n $subs ]]; then\n"
      << "    COMPREPLY=($(compgen -W \"$subs\" -- \"$cur\"))\n"
      << "  fi\n"
      << "}\n"
      << "complete -o default -F _mooring mooring\n";
  return out.str();
}

// 'name:description' for zsh's _describe, single-quoted.
std::string described(const std::vector<Entry>& entries) {
  std::string out;
  for (const auto& [name, help] : entries) {
    std::string item = name + (help.empty() ? "" : ":" + help);
    std::string quoted = "'";
    for (char c : item) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    out += (out.empty() ? "" : " ") + quoted + "'";
  }
  return out;
}

std::string zsh_script(const std::vector<CommandSpec>& commands) {
  const auto nodes = tree(commands);
  std::ostringstream out;
  out << "#compdef mooring\n"
      << "# zsh completion for mooring, generated from its command table by `mooring completion zsh`.\n"
      << "# Load it with: source <(mooring completion zsh)   (or save it as _mooring in a directory of $fpath)\n"
      << "_mooring() {\n"
      << "  local cmd=\"\" next w i\n"
      << "  local -a subs flags\n"
      << "  flags=(" << described(global_flags()) << ")\n"
      << walk(commands, nodes, "${words[i]}", "2", "CURRENT", "(") << "  case $cmd in\n";
  for (const auto& n : nodes) {
    out << "    (\"" << n.path << "\") subs=(" << described(n.subs) << ")";
    if (!n.flags.empty()) out << "; flags+=(" << described(n.flags) << ")";
    out << " ;;\n";
  }
  out << "  esac\n"
      << "  if [[ $PREFIX == -* ]]; then\n"
      << "    _describe -t flags flag flags\n"
      << "  elif (( ${#subs} )); then\n"
      << "    _describe -t commands command subs\n"
      << "  else\n"
      << "    _files\n"
      << "  fi\n"
      << "}\n"
      << "if [[ ${zsh_eval_context[-1]} == loadautofunc ]]; then _mooring \"$@\"; else compdef _mooring mooring; fi\n";
  return out.str();
}

int completion(Context& ctx, const Invocation& inv) {
  const auto script = completion_script(inv.args[0], all_commands());
  if (script.empty()) {
    ctx.fail("completion: no script for the shell \"" + inv.args[0] + "\" (bash or zsh)");
    return kExitUsage;
  }
  ctx.out() << script;
  return kExitOk;
}

}  // namespace

std::string completion_script(std::string_view shell, const std::vector<CommandSpec>& commands) {
  if (shell == "bash") return bash_script(commands);
  if (shell == "zsh") return zsh_script(commands);
  return "";
}

std::vector<CommandSpec> completion_commands() {
  return {{.words = {"completion"},
           .arguments = "bash|zsh",
           .min_args = 1,
           .max_args = 1,
           .summary = "Print a shell completion script for mooring's commands and flags",
           .help = "bash: source <(mooring completion bash), or save it in /etc/bash_completion.d/mooring.\n"
                   "zsh:  source <(mooring completion zsh), or save it as _mooring in a directory of $fpath.",
           .run = completion,
           .choices = {"bash", "zsh"}}};
}

}  // namespace mooring::cli
