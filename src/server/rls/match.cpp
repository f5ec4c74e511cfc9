// Matching a descriptor entry to a child of the rule tree (see RlsNode::child).
#include "server/rls/rules.hpp"

namespace floodgate::server {

bool rls_wildcard_match(const std::vector<std::string>& parts, std::string_view value) noexcept {
  if (parts.size() < 2) return parts.size() == 1 && parts.front() == value;
  const std::string& first = parts.front();
  const std::string& last = parts.back();
  // The first literal opens the value and the last closes it, without overlapping.
  if (value.size() < first.size() + last.size() || !value.starts_with(first) || !value.ends_with(last)) {
    return false;
  }
  std::string_view middle = value.substr(first.size(), value.size() - first.size() - last.size());
  // Each literal between two '*' is found leftmost, after the previous one: if any placement
  // fits, the leftmost one does (it leaves the most room to the rest).
  for (std::size_t i = 1; i + 1 < parts.size(); ++i) {
    const std::size_t at = middle.find(parts[i]);
    if (at == std::string_view::npos) return false;
    middle.remove_prefix(at + parts[i].size());
  }
  return true;
}

const RlsNode* RlsNode::child(std::string_view key, std::string_view value, RlsHow* how) const {
  if (auto it = children.find(rls_child_key(key, value)); it != children.end()) {
    if (how != nullptr) *how = RlsHow::kExact;
    return it->second.get();
  }
  for (const Wildcard& w : wildcards) {
    if (w.key == key && rls_wildcard_match(w.parts, value)) {
      if (auto it = children.find(w.child); it != children.end()) {
        if (how != nullptr) *how = RlsHow::kWildcard;
        return it->second.get();
      }
    }
  }
  if (auto it = children.find(rls_default_key(key)); it != children.end()) {
    if (how != nullptr) *how = RlsHow::kDefault;
    return it->second.get();
  }
  return nullptr;
}

}  // namespace floodgate::server
