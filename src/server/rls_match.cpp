// Matching a descriptor entry to a child of the rule tree (see RlsNode::child).
#include "server/rls_config.hpp"

namespace floodgate::server {

const RlsNode* RlsNode::child(std::string_view key, std::string_view value) const {
  if (auto it = children.find(rls_child_key(key, value)); it != children.end()) return it->second.get();
  for (const Wildcard& w : wildcards) {
    if (w.key == key && value.starts_with(w.prefix)) {
      if (auto it = children.find(w.child); it != children.end()) return it->second.get();
    }
  }
  if (auto it = children.find(rls_default_key(key)); it != children.end()) return it->second.get();
  return nullptr;
}

}  // namespace floodgate::server
